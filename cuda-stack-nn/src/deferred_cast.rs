//! Gradients of cast leaves converted in one batch when the backward pass ends.
//!
//! A cast leaf ([`crate::Var::cast`]) hands its gradient back to its source converted to the
//! source's dtype. Converted one by one, that is one kernel launch per parameter (137 per step
//! for GPT-2); [`cuda_stack_runtime::to_dtype_many`] converts a whole table of them in one.
//! So while a backward pass runs on this thread ([`PassGuard`]), a cast leaf whose source has
//! **no grad-ready hook and no gradient sink** leaves its gradient here ([`defer`]) instead of
//! converting it; when the outermost pass ends, [`PassGuard::finish`] converts them together
//! and adds each to its source's gradient, in the order they arrived — the same values and the
//! same sums as converting each at once (a widening cast is exact, and the multi-tensor cast
//! rounds each element exactly as `to_dtype` does). A source with a hook or a sink (a
//! data-parallel wrapper's parameters) still gets its gradient at once: its hooks must see it
//! while the backward pass goes on.
//!
//! Only the source's gradient comes later: nothing can observe the difference except code that
//! reads such a source's `.grad` while the pass is still running (another leaf's hook), which
//! sees it without this pass's contribution, and a source that also receives a gradient
//! directly from an enclosing pass (a hook running a nested backward), whose contributions are
//! then summed in another order.
//!
//! A pass that panics leaves nothing behind: the guard's `Drop` restores the pass depth and,
//! when the outermost pass unwinds, discards what was pending (no kernels are launched while
//! unwinding).

use crate::error::{NnError, Result};
use crate::lock::lock;
use crate::record::Meta;
use cuda_stack_runtime::{GradElement, Tensor};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::Arc;

thread_local! {
    /// How many backward passes are running on this thread (a hook may run another).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The gradients waiting for the outermost pass to end, in arrival order: consecutive
    /// gradients of one dtype pair share a batch.
    static PENDING: RefCell<Vec<Box<dyn PendingBatch>>> = const { RefCell::new(Vec::new()) };
}

/// A batch of pending gradients of one dtype pair, its types erased.
trait PendingBatch {
    /// Converts the gradients, adds them to their sources' gradients (in push order) and runs
    /// the sources' grad-ready hooks. Every gradient is attempted; the first error is returned.
    fn flush(self: Box<Self>) -> Result<()>;
    /// The batch, to find its type (`Batch<U, T>`).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Gradients in `U` of cast leaves whose sources are in `T`.
struct Batch<U: GradElement, T: GradElement> {
    items: Vec<(Arc<Meta<T>>, Tensor<U>)>,
}

/// Keeps the first error of a sequence of attempts.
fn keep_first(first: &mut Option<NnError>, r: Result<()>) {
    if let Err(e) = r {
        first.get_or_insert(e);
    }
}

impl<U: GradElement, T: GradElement> PendingBatch for Batch<U, T> {
    fn flush(self: Box<Self>) -> Result<()> {
        let items = self.items;
        let mut error = None;
        // `to_dtype_many` wants one device: one conversion per device, in order of appearance.
        let mut converted: Vec<Option<Tensor<T>>> = items.iter().map(|_| None).collect();
        let mut devices: Vec<usize> = Vec::new();
        for (_, g) in &items {
            if !devices.contains(&g.device()) {
                devices.push(g.device());
            }
        }
        for d in devices {
            let on_d: Vec<usize> = (0..items.len())
                .filter(|&i| items[i].1.device() == d)
                .collect();
            let refs: Vec<&Tensor<U>> = on_d.iter().map(|&i| &items[i].1).collect();
            match cuda_stack_runtime::to_dtype_many::<U, T>(&refs) {
                Ok(out) => {
                    for (i, c) in on_d.into_iter().zip(out) {
                        converted[i] = Some(c);
                    }
                }
                Err(e) => keep_first(&mut error, Err(e.into())),
            }
        }
        // The gradients in `U` are no longer needed: free them before the sums allocate.
        let sources: Vec<Arc<Meta<T>>> = items.into_iter().map(|(s, _)| s).collect();
        for (source, c) in sources.iter().zip(converted) {
            let Some(c) = c else { continue };
            keep_first(
                &mut error,
                source
                    .accumulate_grad(c)
                    .and_then(|()| source.run_grad_hooks()),
            );
        }
        error.map_or(Ok(()), Err)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Leaves `g` (the gradient of a cast of `source`, in `U`) to be converted to `T` and added to
/// `source`'s gradient when the outermost backward pass of this thread ends, if a pass is
/// running and `source` has no grad-ready hook and no gradient sink; `false` (nothing kept)
/// otherwise: the caller converts it now.
pub(crate) fn defer<U: GradElement, T: GradElement>(source: &Arc<Meta<T>>, g: &Tensor<U>) -> bool {
    if DEPTH.with(Cell::get) == 0 || !lock(&source.hooks).is_empty() || lock(&source.sink).is_some()
    {
        return false;
    }
    let item = (Arc::clone(source), g.clone());
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        match p
            .last_mut()
            .and_then(|b| b.as_any_mut().downcast_mut::<Batch<U, T>>())
        {
            Some(batch) => batch.items.push(item),
            None => p.push(Box::new(Batch { items: vec![item] })),
        }
    });
    true
}

/// Converts and accumulates every pending gradient, batch by batch in arrival order, including
/// any that the flush itself leaves (a source's hook running another backward pass). Every
/// gradient is attempted; the first error is returned.
fn flush_all() -> Result<()> {
    let mut error = None;
    loop {
        let batches = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
        if batches.is_empty() {
            return error.map_or(Ok(()), Err);
        }
        for b in batches {
            keep_first(&mut error, b.flush());
        }
    }
}

/// One backward pass running on this thread, from [`PassGuard::enter`] to
/// [`PassGuard::finish`]. Not `Send`: the pass depth is this thread's.
pub(crate) struct PassGuard {
    _this_thread: PhantomData<*const ()>,
}

impl PassGuard {
    /// Enters a backward pass: from now until the outermost pass finishes, [`defer`] keeps the
    /// gradients of cast leaves whose sources have no hooks.
    pub(crate) fn enter() -> PassGuard {
        DEPTH.with(|d| d.set(d.get() + 1));
        PassGuard {
            _this_thread: PhantomData,
        }
    }

    /// Ends the pass whose outcome is `result`. The outermost pass first converts and adds the
    /// pending gradients — after an error too, so the gradients computed before it are where
    /// converting each at once would have put them. Returns `result`'s error if any, else the
    /// flush's.
    pub(crate) fn finish(self, result: Result<()>) -> Result<()> {
        // The flush runs still inside the pass, so a backward run by a hook during it is a
        // nested pass, whose casts are flushed by the loop in `flush_all`.
        let flushed = if DEPTH.with(Cell::get) == 1 {
            flush_all()
        } else {
            Ok(())
        };
        drop(self);
        result.and(flushed)
    }
}

impl Drop for PassGuard {
    /// Leaves the pass. Pending gradients remain only when a pass unwinds (`finish` flushes
    /// them otherwise): the outermost discards them, launching nothing. Never panics.
    fn drop(&mut self) {
        let outermost = DEPTH
            .try_with(|d| {
                let n = d.get().saturating_sub(1);
                d.set(n);
                n == 0
            })
            .unwrap_or(false);
        if outermost {
            let left = PENDING
                .try_with(|p| {
                    p.try_borrow_mut()
                        .map(|mut p| std::mem::take(&mut *p))
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            drop(left);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth() -> usize {
        DEPTH.with(Cell::get)
    }

    fn failure(what: &'static str) -> NnError {
        NnError::Invalid {
            what,
            problem: String::new(),
        }
    }

    #[test]
    fn nested_passes_restore_the_depth() {
        let outer = PassGuard::enter();
        let inner = PassGuard::enter();
        assert_eq!(depth(), 2);
        assert!(inner.finish(Ok(())).is_ok());
        assert_eq!(depth(), 1);
        assert!(outer.finish(Ok(())).is_ok());
        assert_eq!(depth(), 0);
    }

    #[test]
    fn finish_returns_the_pass_error() {
        let pass = PassGuard::enter();
        match pass.finish(Err(failure("the pass"))) {
            Err(NnError::Invalid { what, .. }) => assert_eq!(what, "the pass"),
            other => panic!("{other:?}"),
        }
        assert_eq!(depth(), 0);
    }

    #[test]
    fn a_panicking_pass_restores_the_depth() {
        let r = std::panic::catch_unwind(|| {
            let _outer = PassGuard::enter();
            let _inner = PassGuard::enter();
            panic!("in the pass");
        });
        assert!(r.is_err());
        assert_eq!(depth(), 0);
        assert!(PENDING.with(|p| p.borrow().is_empty()));
    }
}
