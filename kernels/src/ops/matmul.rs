//! Matrix multiply `C = A · B` (row-major): naive, 16×16 shared-memory tiles, or sgemm.

use crate::launch::{blocks, check_matrix, to_i32, BLOCK};
use crate::{dispatch, Element, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Which matmul kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatmulAlgo {
    /// `matmul_naive_<dt>`: one thread per output, operands straight from global memory.
    Naive,
    /// `matmul_tiled16_<dt>`: seed 003's 16×16 shared-memory tile.
    Tiled16,
    /// `sgemm_nn`: 128×128 register-blocked tiles (f32 only).
    Fast,
}

/// `C[m, n] = A[m, k] · B[k, n]`, row-major and dense, accumulating with FMA in increasing `k`
/// (i32 wraps). f32, f64, i32 for `Naive`/`Tiled16`; f32 only for `Fast` (others return
/// [`crate::Error::Unsupported`]). `k == 0` writes zeros. Launch: block (16, 16), grid
/// `(ceil(n / 16), ceil(m / 16))`; `Fast`: block 256, grid `(ceil(n / 128), ceil(m / 128))`.
#[allow(clippy::too_many_arguments)]
pub fn matmul<T: Element>(
    k: &Kernels,
    s: &Stream,
    algo: MatmulAlgo,
    a: &DeviceSlice<T>,
    b: &DeviceSlice<T>,
    c: &mut DeviceSlice<T>,
    m: usize,
    n: usize,
    kdim: usize,
) -> Result<()> {
    const OP: &str = "matmul";
    check_matrix(OP, "a", a.len(), m, kdim)?;
    check_matrix(OP, "b", b.len(), kdim, n)?;
    check_matrix(OP, "c", c.len(), m, n)?;
    let (mi, ni, ki) = (
        to_i32(OP, "m", m)?,
        to_i32(OP, "n", n)?,
        to_i32(OP, "k", kdim)?,
    );
    match algo {
        MatmulAlgo::Naive | MatmulAlgo::Tiled16 => {
            let kernel = if algo == MatmulAlgo::Naive {
                dispatch::matmul_naive::<T>(k)?
            } else {
                dispatch::matmul_tiled16::<T>(k)?
            };
            if m == 0 || n == 0 {
                return Ok(());
            }
            let cfg = LaunchConfig::new((blocks(n, 16), blocks(m, 16)), (16, 16));
            // SAFETY: the kernels guard rows < m, cols < n and read A[m, k], B[k, n], write C[m, n];
            // all three buffers were checked to have exactly those shapes above.
            unsafe { kernel.launch(s, &cfg, a, b, c, mi, ni, ki) }?;
        }
        MatmulAlgo::Fast => {
            let kernel = dispatch::sgemm_nn::<T>(k)?;
            if m == 0 || n == 0 {
                return Ok(());
            }
            let cfg = LaunchConfig::new((blocks(n, 128), blocks(m, 128)), BLOCK);
            // SAFETY: the kernels guard rows < m, cols < n and read A[m, k], B[k, n], write C[m, n];
            // all three buffers were checked to have exactly those shapes above.
            unsafe { kernel.launch(s, &cfg, mi, ni, ki, 1.0, a, ki, b, ni, 0.0, c, ni) }?;
        }
    }
    Ok(())
}
