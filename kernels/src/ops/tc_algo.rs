//! Which tensor-core kernel family a GEMM runs on, and the one place that choice is made.

use crate::{DType, Error, Result};
use cuda_stack_driver::ComputeCapability;

/// Which tensor-core kernel family a GEMM runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcAlgo {
    /// `wgmma` on compute capability 9.0 exactly, else `mma.sync` on 8.0 and newer.
    Auto,
    /// Hopper: warpgroup MMA reading operands from shared memory, filled by the TMA engine
    /// (`gemm_wgmma_*`, PTX `compute_90a`: compute capability 9.0 only).
    Wgmma,
    /// Ampere and newer: warp-level `mma.sync` on `ldmatrix`-loaded fragments (`gemm_mma_*`).
    MmaSync,
}

/// The kernel family `algo` resolves to on a device of compute capability `cc`, or why none can
/// run there. The one place the choice is made (`Auto`: wgmma on exactly 9.0 — its PTX is
/// architecture-specific — else mma.sync on 8.0 and newer; kernels/TUNING.md, tensor cores).
pub fn tc_choice(algo: TcAlgo, cc: ComputeCapability, dtype: DType) -> Result<TcAlgo> {
    let hopper = cc == ComputeCapability { major: 9, minor: 0 };
    let ampere_plus = cc >= ComputeCapability { major: 8, minor: 0 };
    match algo {
        TcAlgo::Auto if hopper => Ok(TcAlgo::Wgmma),
        TcAlgo::Auto | TcAlgo::MmaSync if ampere_plus => Ok(TcAlgo::MmaSync),
        TcAlgo::Wgmma if hopper => Ok(TcAlgo::Wgmma),
        TcAlgo::Wgmma => Err(Error::Unsupported {
            op: "gemm (wgmma)",
            dtype,
            why: "wgmma kernels are built for sm_90a and run on compute capability 9.0 only; \
                  use TcAlgo::Auto or MmaSync",
        }),
        _ => Err(Error::Unsupported {
            op: "gemm (tensor cores)",
            dtype,
            why: "the f16/bf16 tensor-core GEMMs need compute capability 8.0 or newer; convert to \
                  f32 and use sgemm",
        }),
    }
}
