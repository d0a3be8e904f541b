//! Grad mode: whether ops on this thread record the graph ([`is_grad_enabled`], [`no_grad`]).

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread record the graph (`torch.is_grad_enabled()`).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Runs `f` with graph recording off on this thread (`with torch.no_grad():`): results of ops
/// are constants, nothing is saved for a backward. Restored afterwards, also on unwinding.
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            GRAD_ENABLED.with(|g| g.set(self.0));
        }
    }
    let _restore = Restore(GRAD_ENABLED.with(|g| g.replace(false)));
    f()
}
