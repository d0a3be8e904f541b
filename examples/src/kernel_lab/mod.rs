//! `kernel_lab`'s experiments (see `src/bin/kernel_lab.rs`): shared plumbing, rounds 1–2 of
//! kernels/TUNING.md, and issue 9's remaining SGEMM and transpose misses.

pub mod common;
pub mod rounds;
pub mod sgemm_odd;
pub mod transposes;
