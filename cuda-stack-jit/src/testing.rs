//! Hooks for this crate's integration tests (not part of the API).

use crate::elementwise::ElementwiseKernel;
use crate::error::Result;
use cuda_stack_runtime::DType;

/// The source of `k`'s specialization for these input dtypes, with the inputs flagged in
/// `strided` indexed as strided views over `ndim` merged dimensions.
pub fn elementwise_source(
    k: &ElementwiseKernel,
    dtypes: &[DType],
    strided: &[bool],
    ndim: usize,
) -> Result<String> {
    k.source_for_layout(dtypes, strided, ndim, false)
}

/// The source of `k`'s specialization for contiguous inputs of `dtypes` as `call_into`
/// compiles it (outputs loaded before the operation may read them).
pub fn elementwise_source_into(k: &ElementwiseKernel, dtypes: &[DType]) -> Result<String> {
    k.source_for_layout(dtypes, &[], 0, true)
}

/// The source of `k`'s specialization for inputs of `dtypes` (`scalar[j]`: input `j` is a
/// scalar) with `nk` kept and `nr` reduced merged dimensions.
pub fn reduction_source(
    k: &crate::ReductionKernel,
    dtypes: &[DType],
    scalar: &[bool],
    nk: usize,
    nr: usize,
) -> Result<String> {
    k.source_for_layout(dtypes, scalar, nk, nr)
}
