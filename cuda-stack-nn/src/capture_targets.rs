//! What a [`crate::CapturedStep`] replay writes that a user can hold: the parameters' values and
//! gradients and the `Var`s the step returned. The tensor layer's rule (an in-place write goes
//! only through a handle nobody else shares; copy-on-write otherwise) must hold for replays too,
//! so before each replay every one of them is checked, under its lock, to be still the storage
//! the graph writes and not shared with any other `Tensor` handle; the replay is queued while the
//! locks are held, so no other thread can take a handle in between.

use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::{GradElement, Tensor};

/// One thing a replay writes in place, as recorded at the end of the capture.
struct Target<T: GradElement> {
    var: Var<T>,
    /// How the error names it, e.g. `"parameter 3"` or `"output 0"`.
    name: String,
    /// The value's address and its storage's handle count when the capture ended.
    value: Recorded,
    /// The same of the gradient (`None`: the step made no gradient for it).
    grad: Option<Recorded>,
}

/// A storage as the capture left it: its address and how many `Tensor` handles shared it (1
/// for a parameter updated in place; an output may share its storage with a view of it).
#[derive(Clone, Copy)]
struct Recorded {
    ptr: u64,
    handles: usize,
}

impl Recorded {
    fn of<T: GradElement>(t: &Tensor<T>) -> Recorded {
        Recorded {
            ptr: t.data_ptr(),
            handles: t.storage_handles(),
        }
    }
}

/// The values (and gradients) a replay rewrites, with a check that none is shared.
pub(crate) struct ReplayTargets<T: GradElement> {
    targets: Vec<Target<T>>,
}

/// Type-erased, so that [`crate::CapturedStep`] need not name the element type.
pub(crate) trait GuardedReplay: Send + Sync {
    /// Locks every target, checks it, runs `enqueue` (the graph launch) while the locks are
    /// held, and releases them.
    fn with_targets_exclusive(&self, enqueue: &mut dyn FnMut() -> Result<()>) -> Result<()>;
}

impl<T: GradElement> ReplayTargets<T> {
    /// Records `params` and `outputs` (a `Var` listed twice, or both as a parameter and an
    /// output, is recorded once).
    pub(crate) fn record(params: &[Var<T>], outputs: &[Var<T>]) -> ReplayTargets<T> {
        let mut targets: Vec<Target<T>> = Vec::new();
        let named = params
            .iter()
            .enumerate()
            .map(|(i, p)| (p, format!("parameter {i}")))
            .chain(
                outputs
                    .iter()
                    .enumerate()
                    .map(|(i, o)| (o, format!("output {i} of the step"))),
            );
        for (var, name) in named {
            if targets.iter().any(|t| t.var.same_var(var)) {
                continue;
            }
            let grad = if var.requires_grad() && var.is_leaf() {
                var.grad_slot().as_ref().map(Recorded::of)
            } else {
                None
            };
            targets.push(Target {
                var: var.clone(),
                name,
                value: Recorded::of(&var.value_mut()),
                grad,
            });
        }
        ReplayTargets { targets }
    }
}

/// Why a replay would write through a handle it does not own, or `None` if it would not.
fn refusal<T: GradElement>(
    t: Option<&Tensor<T>>,
    recorded: Recorded,
    what: &str,
) -> Option<String> {
    let Some(t) = t else {
        return Some(format!(
            "its {what} was dropped since the capture (zero_grad / set_grad(None)), but the graph \
             still writes the {what} it captured; capture a step that starts with zero_grad and \
             leave the {what} alone between replays"
        ));
    };
    if t.data_ptr() != recorded.ptr {
        return Some(format!(
            "its {what} was replaced since the capture (an eager op wrote it out of place, or \
             set_grad), so a replay would update a storage nobody sees; capture the step again"
        ));
    }
    if t.storage_handles() > recorded.handles {
        return Some(format!(
            "another Tensor handle shares its {what} (a clone or view taken since the capture, \
             e.g. from value() or grad()), and a replay rewrites it in place, which would change \
             that handle's values; drop the handle first, or keep a copy made with deep_copy()"
        ));
    }
    None
}

impl<T: GradElement> GuardedReplay for ReplayTargets<T> {
    fn with_targets_exclusive(&self, enqueue: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        // Always in the same order (the recorded one), as optimizers lock parameters: no
        // deadlock with another thread's multi-parameter update.
        let values: Vec<_> = self.targets.iter().map(|t| t.var.value_mut()).collect();
        let grads: Vec<_> = self.targets.iter().map(|t| t.var.grad_slot()).collect();
        for ((t, value), grad) in self.targets.iter().zip(&values).zip(&grads) {
            let problem = refusal(Some(&**value), t.value, "value").or_else(|| {
                t.grad
                    .and_then(|recorded| refusal(grad.as_ref(), recorded, "gradient"))
            });
            if let Some(problem) = problem {
                return Err(NnError::ReplayRefused {
                    target: t.name.clone(),
                    shape: value.shape().to_vec(),
                    problem,
                });
            }
        }
        enqueue()
    }
}
