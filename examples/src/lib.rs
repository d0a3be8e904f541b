//! Shared pieces of the example programs (one per seed section, plus `tour`): command-line
//! flags, the `main` wrapper that explains a missing driver, text-or-JSON output, GPU timing
//! with events, checks against CPU references, PyTorch's reference figures from the same run,
//! run-time compiled kernels, the driver-call trace, timing statistics and tables, and the child
//! processes of one-process-per-GPU runs.

pub mod bench;
pub mod children;
pub mod cli;
pub mod cpu_baseline;
pub mod cpu_mlp;
pub mod cpu_pin;
pub mod exit;
pub mod gpt;
pub mod jit;
pub mod loss_curves;
pub mod output;
pub mod timing;
pub mod torch;
pub mod trace_log;
pub mod verify;

/// The repository README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
