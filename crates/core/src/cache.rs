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
