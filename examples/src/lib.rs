//! Shared pieces of the example programs (one per seed section, plus `tour`): command-line
//! flags, the `main` wrapper that explains a missing driver, the driver-call trace, timing
//! statistics, tables, and PyTorch's reference figures from the same run.

pub mod bench;
pub mod cli;
pub mod exit;
pub mod trace_log;
