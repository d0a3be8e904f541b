//! Mixed precision: a variable cast to another dtype for computing (`Var::cast`), whose
//! gradient comes back to the source in the source's dtype — f32 master weights, bf16 or f16
//! compute.
//!
//! A graph holds one dtype, so a cast starts a new graph: the cast value is a **leaf** of the
//! `U` graph. When a backward pass of that graph has its gradient, the gradient is converted
//! to `T`, added to the source's gradient, and the source's grad-ready hooks run. A source
//! with grad-ready hooks or a gradient sink (a data-parallel wrapper's f32 parameters) gets its
//! gradient at once, so its hooks still see every gradient as it is ready; the gradients of
//! the other sources (no hooks, no sink) are converted together, in one launch per table of
//! 136, when the backward pass ends — instead of one launch per parameter — and added in the
//! order they came: the same values, present when `backward` returns (see
//! `deferred_cast.rs`). The cast leaf keeps no gradient of its own.
//!
//! Because the source must receive the gradient directly, it must itself be a leaf (a
//! parameter or an input) — casting a computed value is an error: cast the parameters and
//! compute in `U` from there, as autocast does for a layer's weights.

use crate::error::{NnError, Result};
use crate::lock::lock;
use crate::Var;
use cuda_stack_runtime::GradElement;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Ids of the hooks casts register (apart from user hooks' ids, which are never compared with
/// them: each leaf's hooks are its own).
static NEXT_CAST_HOOK: AtomicU64 = AtomicU64::new(1 << 62);

impl<T: GradElement> Var<T> {
    /// This variable's value in `U` (`to_dtype`, rounded once), as a leaf of a `U` graph whose
    /// gradient flows back into `self`'s gradient in `T` (converted once, then accumulated).
    /// Typical use: `f32` parameters cast to `bf16` for a layer's forward (mixed precision).
    ///
    /// `self` must be a leaf or not require grad; a computed value that requires grad is
    /// [`NnError::Invalid`]. A cast of a variable that does not require grad, or made under
    /// [`crate::no_grad`], is a constant. Casting to the same dtype is a cast all the same.
    ///
    /// Cast each parameter **once per forward** and reuse the result: every cast leaf passes
    /// its gradient on separately, so two casts of one parameter in one graph run the
    /// parameter's grad-ready hooks twice per backward (a data-parallel wrapper would then see
    /// a second, late gradient). The sum reaching `self.grad` is right either way.
    pub fn cast<U: GradElement>(&self) -> Result<Var<U>> {
        self.check_castable()?;
        self.cast_leaf(self.value().to_dtype::<U>()?)
    }

    /// [`Var::cast`] of every variable of `vars`, their values converted together: f32 → bf16
    /// or f16 in one launch per 136 variables (a whole model's weights for a mixed-precision
    /// forward) instead of one per variable; other pairs one by one. Each result is exactly
    /// what `cast` gives (same rounding, same gradient path). All on one device.
    pub fn cast_many<U: GradElement>(vars: &[Var<T>]) -> Result<Vec<Var<U>>> {
        for v in vars {
            v.check_castable()?;
        }
        let values: Vec<_> = vars.iter().map(Var::value).collect();
        let refs: Vec<_> = values.iter().collect();
        let cast = cuda_stack_runtime::to_dtype_many::<T, U>(&refs)?;
        vars.iter()
            .zip(cast)
            .map(|(v, value)| v.cast_leaf(value))
            .collect()
    }

    /// Refuses a computed value that requires grad (gradients cross dtypes only at leaves).
    fn check_castable(&self) -> Result<()> {
        if self.requires_grad() && crate::is_grad_enabled() && !self.is_leaf() {
            return Err(NnError::Invalid {
                what: "Var::cast",
                problem: format!(
                    "this value was computed by `{}`: gradients cross dtypes only at leaves \
                     (a graph holds one dtype); cast the parameters and compute in the new \
                     dtype from there",
                    self.op().unwrap_or("an op")
                ),
            });
        }
        Ok(())
    }

    /// `value` (this variable's value in `U`) as a constant, or as a leaf whose gradient
    /// flows back into this variable's.
    fn cast_leaf<U: GradElement>(&self, value: cuda_stack_runtime::Tensor<U>) -> Result<Var<U>> {
        if !self.requires_grad() || !crate::is_grad_enabled() {
            return Ok(Var::constant(value));
        }
        let leaf = Var::parameter(value);
        let source = Arc::clone(&self.inner.meta);
        let me = Arc::downgrade(&leaf.inner.meta);
        let hook = move |g: &cuda_stack_runtime::Tensor<U>| -> Result<()> {
            // The leaf keeps nothing, even when what follows fails (a stale gradient would
            // otherwise be added again by the next backward).
            if let Some(m) = me.upgrade() {
                *lock(&m.grad) = None;
            }
            // A source without hooks or sink gets it, converted in a batch, when the pass ends.
            if crate::deferred_cast::defer(&source, g) {
                return Ok(());
            }
            source.accumulate_grad(g.to_dtype::<T>()?)?;
            source.run_grad_hooks()
        };
        let id = NEXT_CAST_HOOK.fetch_add(1, Ordering::Relaxed);
        lock(&leaf.inner.meta.hooks).push((id, Arc::new(hook)));
        Ok(leaf)
    }
}
