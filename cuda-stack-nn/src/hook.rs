//! Grad-ready hooks: code that runs when a backward pass has finished a leaf's gradient
//! (PyTorch's `Tensor.register_post_accumulate_grad_hook`). Data-parallel training uses them to
//! start reducing a bucket of gradients across GPUs while the backward pass goes on computing
//! the others.

use crate::error::{NnError, Result};
use crate::lock::lock;
use crate::record::{GradHookFn, Meta};
use crate::var::Var;
use cuda_stack_runtime::{GradElement, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

static NEXT_HOOK: AtomicU64 = AtomicU64::new(1);

/// A registered hook; dropping it (or [`GradHookHandle::remove`]) unregisters it.
#[must_use = "the hook is removed when the handle is dropped"]
pub struct GradHookHandle<T: GradElement> {
    meta: Weak<Meta<T>>,
    id: u64,
}

impl<T: GradElement> std::fmt::Debug for GradHookHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GradHookHandle")
            .field("id", &self.id)
            .finish()
    }
}

impl<T: GradElement> GradHookHandle<T> {
    /// Unregisters the hook (as dropping the handle does).
    pub fn remove(self) {}
}

impl<T: GradElement> Drop for GradHookHandle<T> {
    fn drop(&mut self) {
        if let Some(meta) = self.meta.upgrade() {
            lock(&meta.hooks).retain(|(id, _)| *id != self.id);
        }
    }
}

impl<T: GradElement> Var<T> {
    /// Registers `hook`, called on the thread running a backward pass right after that pass has
    /// accumulated this leaf's gradient into [`Var::grad`], with the accumulated gradient
    /// (`register_post_accumulate_grad_hook`). An error from the hook ends the backward pass
    /// with that error. Hooks run in registration order; the hook stays until its handle is
    /// dropped.
    ///
    /// Only leaves that require grad have gradients to accumulate: for anything else this is
    /// [`NnError::NotRequiringGrad`] or [`NnError::Invalid`].
    pub fn register_grad_ready_hook(
        &self,
        hook: impl Fn(&Tensor<T>) -> Result<()> + Send + Sync + 'static,
    ) -> Result<GradHookHandle<T>> {
        if !self.requires_grad() {
            return Err(NnError::NotRequiringGrad {
                shape: self.shape(),
            });
        }
        if !self.is_leaf() {
            return Err(NnError::Invalid {
                what: "Var::register_grad_ready_hook",
                problem: format!(
                    "this value was computed by `{}`; only leaves (parameters) accumulate \
                     gradients",
                    self.op().unwrap_or("an op")
                ),
            });
        }
        let id = NEXT_HOOK.fetch_add(1, Ordering::Relaxed);
        let meta = &self.inner.meta;
        lock(&meta.hooks).push((id, Arc::new(hook)));
        Ok(GradHookHandle {
            meta: Arc::downgrade(meta),
            id,
        })
    }
}

impl<T: GradElement> Meta<T> {
    /// Runs the gradient sink, if one is set, then calls the grad-ready hooks with the
    /// accumulated gradient (none registered: nothing).
    pub(crate) fn run_grad_hooks(&self) -> Result<()> {
        let sink = lock(&self.sink).as_ref().map(|(_, s)| s.clone());
        if let Some(sink) = sink {
            let taken = lock(&self.grad).take();
            if let Some(mut grad) = taken {
                let result = sink(&mut grad);
                *lock(&self.grad) = Some(grad);
                result?;
            }
        }
        let hooks: Vec<GradHookFn<T>> = lock(&self.hooks).iter().map(|(_, h)| h.clone()).collect();
        if hooks.is_empty() {
            return Ok(());
        }
        let Some(grad) = lock(&self.grad).clone() else {
            return Ok(());
        };
        for h in hooks {
            h(&grad)?;
        }
        Ok(())
    }
}

/// Removes a gradient sink ([`Var::set_grad_sink`]) when dropped.
pub(crate) struct GradSinkHandle<T: GradElement> {
    meta: Weak<Meta<T>>,
    id: u64,
}

impl<T: GradElement> Drop for GradSinkHandle<T> {
    fn drop(&mut self) {
        if let Some(meta) = self.meta.upgrade() {
            let mut sink = lock(&meta.sink);
            if sink.as_ref().is_some_and(|(id, _)| *id == self.id) {
                *sink = None;
            }
        }
    }
}

impl<T: GradElement> Var<T> {
    /// Sets this leaf's gradient sink (see `Meta::sink`): `sink` gets the accumulated gradient
    /// by `&mut` after each backward pass, before the grad-ready hooks, and may rewrite it in
    /// place. One sink per leaf: a second is refused while the first's handle lives.
    pub(crate) fn set_grad_sink(
        &self,
        sink: impl Fn(&mut Tensor<T>) -> Result<()> + Send + Sync + 'static,
    ) -> Result<GradSinkHandle<T>> {
        if !self.requires_grad() || !self.is_leaf() {
            return Err(NnError::Invalid {
                what: "Var::set_grad_sink",
                problem: "only leaves that require grad accumulate gradients".into(),
            });
        }
        let meta = &self.inner.meta;
        let mut slot = lock(&meta.sink);
        if slot.is_some() {
            return Err(NnError::Invalid {
                what: "Var::set_grad_sink",
                problem: "this parameter already has a gradient sink (is it wrapped by two \
                          data-parallel wrappers?)"
                    .into(),
            });
        }
        let id = NEXT_HOOK.fetch_add(1, Ordering::Relaxed);
        *slot = Some((id, Arc::new(sink)));
        Ok(GradSinkHandle {
            meta: Arc::downgrade(meta),
            id,
        })
    }
}
