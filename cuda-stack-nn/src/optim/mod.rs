//! Optimizers (`torch.optim`): [`Sgd`] and [`Adam`]. A step updates every parameter that has a
//! gradient with fused kernels (the update rule and its state in one pass) — **multi-tensor**
//! (PyTorch's `foreach` idea): [`Adam`] updates up to 64 parameters per launch (all of GPT-2
//! 124M's 148 in three), each with its group's weight decay and its own step count, and makes
//! its moments with one fill launch per 192 tensors; [`Sgd`] updates each run of four
//! consecutive parameters with gradients in one launch (`sgd4`, `sgd_momentum4`), the rest one
//! by one — **in place** (the parameter's and the state's storages are rewritten; a parameter
//! whose value is also held elsewhere is first given a private copy, so the other holder keeps
//! the old values). Nothing a step computes on the host changes from step to step — Adam's
//! step count is a device counter — so a whole training step can be captured into a CUDA graph
//! ([`crate::CapturedStep`]).

mod adam;
mod clip;
mod grad_scaler;
mod sgd;

pub use adam::{Adam, AdamConfig, ParamGroup};
pub use clip::{clip_grad_norm, clip_grad_scale};
pub use grad_scaler::{GradScaler, GradScalerConfig};
pub use sgd::{Sgd, SgdConfig};

use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::GradElement;

/// An optimizer over a fixed list of parameters.
pub trait Optimizer<T: GradElement> {
    /// One update of every parameter that has a gradient (`optimizer.step()`); parameters
    /// without one are skipped, as in PyTorch. [`Sgd`] and [`Adam`] queue the updates last
    /// parameter first, the order in which a backward pass finishes the gradients.
    fn step(&mut self) -> Result<()>;

    /// The parameters.
    fn parameters(&self) -> &[Var<T>];

    /// How many times [`Optimizer::step`] ran (a captured step needs at least one eager step
    /// first, so that the state exists before the capture).
    fn steps_taken(&self) -> u64;

    /// The device addresses of the optimizer's state tensors (momentum buffers, moments, step
    /// counters); empty before the first step creates them. A captured step checks that they
    /// did not move.
    fn state_addresses(&self) -> Vec<u64>;

    /// Drops every parameter's gradient (`optimizer.zero_grad(set_to_none=True)`).
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.zero_grad();
        }
    }
}

/// Checks a parameter list is not empty and every entry requires grad.
fn check_params<T: GradElement>(optimizer: &'static str, params: &[Var<T>]) -> Result<()> {
    if params.is_empty() {
        return Err(NnError::NoParameters { optimizer });
    }
    for (i, p) in params.iter().enumerate() {
        if let Some(j) = params[..i].iter().position(|q| q.same_var(p)) {
            return Err(NnError::Invalid {
                what: optimizer,
                problem: format!("parameters {j} and {i} are the same variable; list each once"),
            });
        }
    }
    if let Some(i) = params.iter().position(|p| !p.requires_grad()) {
        return Err(NnError::Invalid {
            what: optimizer,
            problem: format!(
                "parameter {i} does not require grad, so it never has a gradient to step with"
            ),
        });
    }
    Ok(())
}

/// The parameters to update, grouped for the multi-tensor kernels, **last parameter first**:
/// each run of four consecutive parameters that all have a gradient is one group of four (one
/// launch), the rest go one by one.
///
/// Why backwards: a backward pass finishes the last layers' gradients first, and with
/// data-parallel training ([`crate::DataParallel`]) each gradient becomes final when its bucket's
/// all-reduce, on the communication stream, does. Each update waits on the GPU for its own
/// gradients only, but on the computing stream every update queued after a waiting one waits
/// too. Stepping in the order the gradients are finished lets the updates of the early-reduced
/// parameters run while the last bucket (the first layer's, whose gradient comes last) is still
/// being reduced, instead of all of them queueing behind it. Each parameter's update depends on
/// nothing but its own state, so the order changes no value.
pub(crate) fn groups(has_grad: &[bool]) -> Vec<Group> {
    groups_within(has_grad, &vec![0; has_grad.len()])
}

/// [`groups`] where a group of four never spans two parameter groups: `group_of[i]` is
/// parameter `i`'s group (its weight decay, one kernel argument per launch).
pub(crate) fn groups_within(has_grad: &[bool], group_of: &[usize]) -> Vec<Group> {
    let mut out = Vec::new();
    let mut end = has_grad.len().min(group_of.len());
    while end > 0 {
        let start = end.saturating_sub(4);
        let four = end - start == 4
            && has_grad[start..end].iter().all(|&g| g)
            && group_of[start..end].iter().all(|&g| g == group_of[start]);
        if four {
            out.push(Group::Four(start));
            end = start;
        } else {
            if has_grad[end - 1] {
                out.push(Group::One(end - 1));
            }
            end -= 1;
        }
    }
    out
}

/// One launch's worth of parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Group {
    /// Parameters `i .. i + 4`.
    Four(usize),
    /// Parameter `i` alone.
    One(usize),
}

/// Elements `i .. i + 4` of `v`, mutably (an internal error if they are not there).
pub(crate) fn four_mut<X>(v: &mut [X], i: usize) -> Result<[&mut X; 4]> {
    match v.get_mut(i..i + 4) {
        Some([a, b, c, d]) => Ok([a, b, c, d]),
        _ => Err(internal(
            "a group of four past the end of the parameter list",
        )),
    }
}

/// The four gradients of group `i` (each present, by construction of [`groups`]).
pub(crate) fn four_grads<T: GradElement>(
    grads: &[Option<cuda_stack_runtime::Tensor<T>>],
    i: usize,
) -> Result<[&cuda_stack_runtime::Tensor<T>; 4]> {
    match grads.get(i..i + 4) {
        Some([Some(a), Some(b), Some(c), Some(d)]) => Ok([a, b, c, d]),
        _ => Err(internal("a group of four without four gradients")),
    }
}

fn internal(what: &str) -> NnError {
    NnError::Invalid {
        what: "optimizer",
        problem: format!("internal error: {what}"),
    }
}

/// `value` is finite and at least `min`.
fn check_hyper(optimizer: &'static str, name: &str, value: f64, min: f64) -> Result<()> {
    if value.is_finite() && value >= min {
        Ok(())
    } else {
        Err(NnError::Invalid {
            what: optimizer,
            problem: format!("{name} = {value}: must be finite and at least {min}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fours_form_inside_runs_with_gradients_and_inside_parameter_groups() {
        use Group::{Four, One};
        let all = [true; 9];
        // Last parameter first: 5..9, 1..5, then 0.
        assert_eq!(groups(&all), [Four(5), Four(1), One(0)]);
        assert_eq!(
            groups(&[true, false, true, true, true, true, true]),
            [Four(3), One(2), One(0)]
        );
        // Groups 0 0 0 | 1 1 1 1 1: a four of the last group, its first one alone, then the
        // first group's three one by one.
        let g = [0, 0, 0, 1, 1, 1, 1, 1];
        assert_eq!(
            groups_within(&all[..8], &g),
            [Four(4), One(3), One(2), One(1), One(0)]
        );
        // A parameter without a gradient is skipped within a group too.
        let has = [true, true, true, true, false, true, true, true, true];
        let g = [0, 0, 0, 0, 0, 1, 1, 1, 1];
        assert_eq!(groups_within(&has, &g), [Four(5), Four(0)]);
        // Every parameter is stepped exactly once, whatever the pattern.
        for mask in 0u32..1 << 10 {
            let has: Vec<bool> = (0..10).map(|i| mask >> i & 1 == 1).collect();
            let g: Vec<usize> = (0..10).map(|i| i / 3).collect();
            let mut seen = vec![0; 10];
            for group in groups_within(&has, &g) {
                let range = match group {
                    Four(i) => i..i + 4,
                    One(i) => i..i + 1,
                };
                assert!(range.end <= 10 && g[range.start] == g[range.end - 1]);
                range.for_each(|i| seen[i] += 1);
            }
            let want: Vec<i32> = has.iter().map(|&h| i32::from(h)).collect();
            assert_eq!(seen, want, "{has:?}");
        }
    }
}
