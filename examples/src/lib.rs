//! Shared helpers for the example programs: timing statistics, tables, and reading PyTorch's
//! reference figures from `torch_baseline.py` output taken in the same run.

pub mod bench;
