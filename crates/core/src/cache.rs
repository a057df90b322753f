//! A small bounded in-memory cache for values that are either immutable
//! (published versions, a Session's principal) or guarded by a
//! compare-and-set (session snapshots). When full it starts over: simpler
//! than LRU, and a miss only costs one read of the truth.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

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
}
