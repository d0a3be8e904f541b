//! Pushing a context onto this thread's context stack for a scope.

use crate::{driver, Context, Result};
use std::marker::PhantomData;

/// While alive, `ctx` is pushed on the calling thread's context stack (`cuCtxPushCurrent`); it is
/// popped on drop. Useful when mixing with raw driver calls that use the current context.
///
/// It is deliberately not `Send`: the context stack belongs to one thread, and popping it on
/// another thread would pop that thread's context instead.
pub struct CurrentContextGuard {
    ctx: Context,
    _not_send: PhantomData<*const ()>,
}

impl Context {
    /// Pushes this context as current for the calling thread until the guard is dropped.
    pub fn push_current(&self) -> Result<CurrentContextGuard> {
        // SAFETY: a retained, live context.
        unsafe { driver()?.cuCtxPushCurrent_v2(self.as_raw())? };
        // The bind cache must know: launches check it before skipping `cuCtxSetCurrent`.
        crate::context::note_bound(self.as_raw());
        Ok(CurrentContextGuard {
            ctx: self.clone(),
            _not_send: PhantomData,
        })
    }
}

impl Drop for CurrentContextGuard {
    fn drop(&mut self) {
        let mut popped = std::ptr::null_mut();
        if let Ok(drv) = driver() {
            // SAFETY: pops what `push_current` pushed on this same thread (the guard is !Send).
            if let Err(e) = unsafe { drv.cuCtxPopCurrent_v2(&mut popped) } {
                self.ctx.report_drop_error("cuCtxPopCurrent", e.into());
            }
            // The thread's current context is now whatever was below: ask the driver next time.
            crate::context::invalidate_bind_cache();
        }
    }
}
