//! A process-wide map from a key (a device ordinal) to the one live shared object for it, held
//! weakly: the object is dropped when its last user lets go, and made anew on the next request.
//! This is what makes `Context::new(0)` return the same handle to every caller.

use std::sync::{Arc, Mutex, Weak};

/// Weak slots keyed by `usize`.
pub(crate) struct WeakRegistry<T> {
    slots: Mutex<Vec<(usize, Weak<T>)>>,
}

impl<T> WeakRegistry<T> {
    /// An empty registry (usable in a `static`).
    pub(crate) const fn new() -> Self {
        WeakRegistry {
            slots: Mutex::new(Vec::new()),
        }
    }

    /// The live object for `key`, or the one `make` creates (registered before anyone else can
    /// look): concurrent callers for one key get the same `Arc`. `make` runs under the
    /// registry's lock, so it must not call back into this registry.
    pub(crate) fn get_or_try_insert<E>(
        &self,
        key: usize,
        make: impl FnOnce() -> Result<Arc<T>, E>,
    ) -> Result<Arc<T>, E> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(live) = slots
            .iter()
            .filter(|(k, _)| *k == key)
            .find_map(|(_, w)| w.upgrade())
        {
            return Ok(live);
        }
        let made = make()?;
        slots.retain(|(_, w)| w.strong_count() > 0);
        slots.push((key, Arc::downgrade(&made)));
        Ok(made)
    }

    /// How many keys have a live object.
    #[cfg(test)]
    fn live(&self) -> usize {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.iter().filter(|(_, w)| w.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::WeakRegistry;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn same_key_same_object_while_alive() {
        let r = WeakRegistry::<usize>::new();
        let a = r.get_or_try_insert::<()>(0, || Ok(Arc::new(10))).unwrap();
        let b = r.get_or_try_insert::<()>(0, || Ok(Arc::new(20))).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = r.get_or_try_insert::<()>(1, || Ok(Arc::new(30))).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(r.live(), 2);
    }

    #[test]
    fn released_then_made_again() {
        let r = WeakRegistry::<usize>::new();
        let made = AtomicUsize::new(0);
        let mk = || -> Result<Arc<usize>, ()> {
            made.fetch_add(1, Ordering::SeqCst);
            Ok(Arc::new(1))
        };
        let a = r.get_or_try_insert(0, mk).unwrap();
        drop(a);
        assert_eq!(r.live(), 0);
        let b = r.get_or_try_insert(0, mk).unwrap();
        assert_eq!(*b, 1);
        assert_eq!(made.load(Ordering::SeqCst), 2);
        // Dead slots are pruned: one entry for key 0.
        assert_eq!(r.slots.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_failed_make_registers_nothing() {
        let r = WeakRegistry::<usize>::new();
        assert_eq!(
            r.get_or_try_insert(0, || Err("no driver")),
            Err("no driver")
        );
        assert_eq!(r.live(), 0);
        assert!(r.get_or_try_insert::<()>(0, || Ok(Arc::new(3))).is_ok());
    }

    #[test]
    fn sixteen_threads_get_one_object() {
        let r = Arc::new(WeakRegistry::<usize>::new());
        let made = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..16)
            .map(|_| {
                let (r, made) = (r.clone(), made.clone());
                std::thread::spawn(move || {
                    r.get_or_try_insert::<()>(0, || {
                        made.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        Ok(Arc::new(7))
                    })
                    .unwrap()
                })
            })
            .collect();
        let got: Vec<Arc<usize>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(got.iter().all(|g| Arc::ptr_eq(g, &got[0])));
        assert_eq!(made.load(Ordering::SeqCst), 1);
    }
}
