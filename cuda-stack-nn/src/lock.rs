//! Locking the crate's mutexes without turning poison into a panic.

use std::sync::{Mutex, MutexGuard};

/// A poisoned lock still holds a consistent value here (every critical section is a plain
/// read or replace), so it is used rather than turned into a panic.
pub(crate) fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
