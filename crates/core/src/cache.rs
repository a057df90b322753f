//! A small bounded in-memory cache for values that are either immutable
//! (published versions, a Session's principal) or guarded by a
//! compare-and-set (session snapshots). When full it starts over: simpler
//! than LRU, and a miss only costs one read of the truth.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Bounded<K, V> {
    capacity: usize,
    map: Mutex<HashMap<K, V>>,
}

impl<K: Eq + Hash, V: Clone> Bounded<K, V> {
    pub fn new(capacity: usize) -> Self {
        Bounded { capacity: capacity.max(1), map: Mutex::new(HashMap::new()) }
    }

    /// Looks up by any borrowed form of the key (`&str` for a typed id), so
    /// a lookup allocates nothing.
    pub fn get<Q: Eq + Hash + ?Sized>(&self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.lock().get(k).cloned()
    }

    pub fn insert(&self, k: K, v: V) {
        let mut map = self.lock();
        if map.len() >= self.capacity && !map.contains_key(&k) {
            map.clear();
        }
        map.insert(k, v);
    }

    /// The value kept for `k`, else what `read` finds, kept (for values
    /// that never change once they exist: nothing found is not kept).
    pub async fn get_or_read<E>(&self, k: K, read: impl std::future::Future<Output = Result<Option<V>, E>>) -> Result<Option<V>, E> {
        if let Some(v) = self.get(&k) {
            return Ok(Some(v));
        }
        let found = read.await?;
        if let Some(v) = &found {
            self.insert(k, v.clone());
        }
        Ok(found)
    }

    pub fn remove<Q: Eq + Hash + ?Sized>(&self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.lock().remove(k)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A value kept with the stamp it was read under (an epoch's token, a
/// generation) and when: used only while that stamp is still the current
/// one and it is younger than a bound, the bound holding when a change
/// could not be announced.
#[derive(Clone)]
pub struct Kept<S, T> {
    stamp: S,
    at: Instant,
    value: T,
}

impl<S, T: Clone> Kept<S, T> {
    /// `value`, read after `stamp` was.
    pub fn new(stamp: S, value: T) -> Self {
        Kept { stamp, at: Instant::now(), value }
    }

    /// The value, when it was kept under `stamp` less than `max_age` ago.
    pub fn valid_under<Q: PartialEq + ?Sized>(&self, stamp: &Q, max_age: Duration) -> Option<T>
    where
        S: Borrow<Q>,
    {
        (self.stamp.borrow() == stamp && self.at.elapsed() < max_age).then(|| self.value.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_once_what_it_finds_and_never_keeps_a_miss() {
        let c: Bounded<&str, i32> = Bounded::new(4);
        let found = c.get_or_read("a", async { Ok::<_, ()>(Some(1)) }).await;
        assert_eq!(found, Ok(Some(1)));
        assert_eq!(c.get_or_read("a", async { Ok::<_, ()>(Some(2)) }).await, Ok(Some(1)), "kept: not read again");
        assert_eq!(c.get_or_read("b", async { Ok::<_, ()>(None) }).await, Ok(None));
        assert_eq!(c.get_or_read("b", async { Ok::<_, ()>(Some(3)) }).await, Ok(Some(3)), "a miss is read again");
        assert_eq!(c.get_or_read("c", async { Err(()) }).await, Err(()));
    }

    #[test]
    fn starts_over_when_full() {
        let c = Bounded::new(2);
        c.insert("a", 1);
        c.insert("b", 2);
        c.insert("b", 3);
        assert_eq!(c.get(&"a"), Some(1), "replacing a key does not evict");
        c.insert("c", 4);
        assert_eq!((c.get(&"a"), c.get(&"c")), (None, Some(4)));
        assert_eq!(c.remove(&"c"), Some(4));
        assert_eq!(c.get(&"c"), None);
    }

    #[test]
    fn a_kept_value_holds_under_its_stamp_and_not_past_its_age() {
        let k = Kept::new(std::sync::Arc::<str>::from("t1"), 7);
        assert_eq!(k.valid_under("t1", Duration::from_secs(5)), Some(7));
        assert_eq!(k.valid_under("t2", Duration::from_secs(5)), None, "another stamp");
        assert_eq!(k.valid_under("t1", Duration::ZERO), None, "too old");
    }
}
