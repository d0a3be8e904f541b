//! Pushing a context onto this thread's context stack for a scope.

use crate::{driver, Context, Result};
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

thread_local! {
    /// The pushes this thread's live (or leaked) guards made, bottom first: each guard's id,
    /// whether it is still alive, and the context pushed (kept retained until its slot is
    /// popped, so the driver's stack never holds a released context). The driver's stack holds
    /// one slot per entry, above whatever the thread had before.
    static PUSHED: RefCell<Vec<(u64, bool, Context)>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// While alive, `ctx` is pushed on the calling thread's context stack (`cuCtxPushCurrent`); it is
/// popped when the guard drops. Useful when mixing with raw driver calls that use the current
/// context.
///
/// Guards may be dropped in any order: a guard dropped while a later one is alive pops nothing
/// yet (the later guard's context stays current); its entry is popped as soon as every guard
/// above it is gone, so the stack always holds exactly the live guards' contexts, in push
/// order, above what the thread had before. A guard leaked with `mem::forget` keeps its context
/// pushed for good (and retained: it can never dangle); guards pushed after it still pop their own.
///
/// It is deliberately not `Send`: the context stack belongs to one thread, and popping it on
/// another thread would pop that thread's context instead.
pub struct CurrentContextGuard {
    id: u64,
    _not_send: PhantomData<*const ()>,
}

impl Context {
    /// Pushes this context as current for the calling thread until the guard is dropped.
    pub fn push_current(&self) -> Result<CurrentContextGuard> {
        // SAFETY: a retained, live context (its entry below keeps a handle to it until the slot
        // is popped).
        unsafe { driver()?.cuCtxPushCurrent_v2(self.as_raw())? };
        // The bind cache must know: launches check it before skipping `cuCtxSetCurrent`.
        crate::context::note_bound(self.as_raw());
        let id = NEXT_ID.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        });
        PUSHED.with(|p| p.borrow_mut().push((id, true, self.clone())));
        Ok(CurrentContextGuard {
            id,
            _not_send: PhantomData,
        })
    }
}

impl Drop for CurrentContextGuard {
    fn drop(&mut self) {
        let _ = PUSHED.try_with(|p| {
            let mut p = p.borrow_mut();
            if let Some(e) = p.iter_mut().find(|e| e.0 == self.id) {
                e.1 = false;
            }
            // Pop every dead entry on top: ours, and those of guards dropped out of order
            // beneath the guard that was on top until now.
            while p.last().is_some_and(|e| !e.1) {
                let Some((_, _, ctx)) = p.pop() else { break };
                let mut popped = std::ptr::null_mut();
                let r = driver().and_then(|drv| {
                    // SAFETY: pops the top slot of this thread's stack, which the entry's push
                    // made (the guard is !Send; entries above it were popped first). A bind
                    // (`cuCtxSetCurrent`) may have replaced the context in that slot: popping
                    // it is still what restores the stack below. Out-pointer to a local.
                    unsafe { drv.cuCtxPopCurrent_v2(&mut popped) }.map_err(Into::into)
                });
                if let Err(e) = r {
                    // Never repeated (rule 8): the entry is gone either way.
                    ctx.report_drop_error("cuCtxPopCurrent", e);
                }
                // `ctx` (the retain that kept the pushed context alive) drops only now.
            }
        });
        // The thread's current context is now whatever is on top: ask the driver next time.
        crate::context::invalidate_bind_cache();
    }
}
