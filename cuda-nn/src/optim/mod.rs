//! Optimizers (`torch.optim`): [`Sgd`] and [`Adam`]. A step updates every parameter that has a
//! gradient with one fused kernel per parameter (the update rule and its state in one pass),
//! **in place** (the parameter's and the state's storages are rewritten; a parameter whose value
//! is also held elsewhere is first given a private copy, so the other holder keeps the old
//! values). Nothing a step computes on the host changes from step to step — Adam's step count is
//! a device counter — so a whole training step can be captured into a CUDA graph
//! ([`crate::CapturedStep`]).

mod adam;
mod sgd;

pub use adam::{Adam, AdamConfig};
pub use sgd::{Sgd, SgdConfig};

use crate::error::{NnError, Result};
use crate::Var;
use cuda_runtime_lite::GradElement;

/// An optimizer over a fixed list of parameters.
pub trait Optimizer<T: GradElement> {
    /// One update of every parameter that has a gradient (`optimizer.step()`); parameters
    /// without one are skipped, as in PyTorch.
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
