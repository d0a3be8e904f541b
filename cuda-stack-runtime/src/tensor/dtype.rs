//! **Dtype dispatch, in one place.** [`TensorElement`] is implemented once per dtype in this file,
//! and each implementation is one row of the table below: for every op it either calls the
//! `cuda-stack-kernels` op for that dtype (choosing the algorithm, e.g. sgemm for f32 and 16×16 tiles
//! for f64/i32) or inherits the trait's default, which returns
//! [`TensorError::UnsupportedDType`] naming the op, the dtype and what is supported. The tensor
//! code (`ops/*.rs`) is generic over `T: TensorElement` and never matches on a dtype itself —
//! this is PyTorch's `AT_DISPATCH_ALL_TYPES` switch (seed 003), written as a trait.
//!
//! | op | f32 | f64 | i32 | f16 / bf16 | i64 |
//! |---|---|---|---|---|---|
//! | views, `contiguous`, `to_vec`, `Display`, `zeros` | ✓ | ✓ | ✓ | ✓ | ✓ |
//! | `+ - * /`, `scale`, `relu`, `ones`/`full` | ✓ | ✓ | ✓ (wrapping) | ✓ (in f32, rounded once) | `full` only |
//! | `tanh` | ✓ | ✓ | — | ✓ | — |
//! | `matmul`, [`MatmulBackend::Cublas`](super::MatmulBackend) (`Auto` where cuBLAS loads) | ✓ cuBLAS (TF32 if allowed) | ✓ cuBLAS | — | ✓ cuBLAS, f32 accumulation | — |
//! | `matmul`, [`MatmulBackend::Kernels`](super::MatmulBackend) (`Auto` without cuBLAS) | ✓ sgemm (strided/transposed operands without copies) | ✓ tiled16 | ✓ tiled16 (wrapping) | ✓ tensor cores, f32 accumulation (wgmma on 9.0, mma.sync on 8.0+; below 8.0 via f32: cast, sgemm, cast back) | — |
//! | `sum_all` → | f32 | f64 | **i64** (exact) | f16 / bf16 (f32 accumulation, one rounding) | — |
//! | `max_all` → | f32 | f64 | i32 | f16 / bf16 | — |
//! | `mean_all` → | f32 | f64 | — | f16 / bf16 (f32 accumulation, one rounding) | — |
//! | `sum`/`mean`/`max` over a dim → | f32 | f64 | — | f16 / bf16 (as above) | — |
//! | `softmax`, `bias_relu` (+ backward) | ✓ | ✓ (one warp per row / one thread per element: for gradient checks) | — | — | — |
//! | `scaled_dot_product_attention` (+ `_forward`, `_backward`; [`AttentionElement`](super::AttentionElement)) | ✓ | ✓ | — | ✓ (f32 math; tensor cores on sm_80+: forward and backward at D = 64, 128) | — |
//! | `rand`, `randn` | ✓ | — | — | — | — |
//!
//! FP8 (`F8E4M3`, `F8E5M2`; `fp8_dtype.rs`): views, `contiguous`, `to_vec`, `Display`, `zeros`,
//! `full`, and the scaled casts and matmuls of `ops/fp8.rs` (compute capability 8.9+); nothing
//! else.
//! | backward passes, `log_softmax`, `cross_entropy`, optimizer steps, `clip_grad_norm_` ([`super::GradElement`], `grad_dtype.rs`) | ✓ | ✓ | — | — | — |
//! | `layer_norm`, `gelu`, `classifier_loss`/`fused_classifier`, `embedding`, `dropout` (+ backward; [`super::FloatElement`], `float_dtype.rs`) | ✓ | ✓ | — | ✓ (f32 math; stats and losses f32) | — |
//!
//! Reductions of f16/bf16 accumulate in f32 and are rounded once to their own dtype, as PyTorch
//! does (the cast kernels of `ops::cast`). Summing i32 gives i64, as in PyTorch.

use super::error::{Result, TensorError};
use cuda_stack_blas::{Blas, Gemm};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, Stream};
use cuda_stack_kernels::ops::{
    self, BinaryOp, BroadcastOperand, MatmulAlgo, ReduceAlgo, Transpose,
};
use cuda_stack_kernels::{Kernels, StridedLayout};
use std::fmt::Debug;

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `f32` (`torch.float32`, the default dtype).
    F32,
    /// `f64` (`torch.float64`).
    F64,
    /// `i32` (`torch.int32`), wrapping arithmetic.
    I32,
    /// `i64` (`torch.int64`): what summing an i32 tensor gives; storage and views only.
    I64,
    /// IEEE binary16, [`half::f16`](cuda_stack_driver::half::f16) (`torch.float16`).
    F16,
    /// bfloat16, [`half::bf16`](cuda_stack_driver::half::bf16) (`torch.bfloat16`).
    BF16,
    /// OCP FP8 e4m3, [`float8::F8E4M3`](cuda_stack_driver::float8::F8E4M3)
    /// (`torch.float8_e4m3fn`): storage, scaled casts and FP8 matmuls (`ops/fp8.rs`).
    F8E4M3,
    /// OCP FP8 e5m2, [`float8::F8E5M2`](cuda_stack_driver::float8::F8E5M2)
    /// (`torch.float8_e5m2`): storage, scaled casts and FP8 matmuls (`ops/fp8.rs`).
    F8E5M2,
}

impl DType {
    /// The Rust name: `f32`, `f64`, `i32`, `i64`, `f16`, `bf16`, `f8e4m3`, `f8e5m2`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
        }
    }

    /// PyTorch's name, as its `repr` prints it: `torch.float32`, `torch.int32`, …
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::F32 => "torch.float32",
            DType::F64 => "torch.float64",
            DType::I32 => "torch.int32",
            DType::I64 => "torch.int64",
            DType::F16 => "torch.float16",
            DType::BF16 => "torch.bfloat16",
            DType::F8E4M3 => "torch.float8_e4m3fn",
            DType::F8E5M2 => "torch.float8_e5m2",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F8E4M3 | DType::F8E5M2 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// Whether it is a floating-point type.
    pub fn is_float(self) -> bool {
        !matches!(self, DType::I32 | DType::I64)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<cuda_stack_kernels::DType> for DType {
    fn from(d: cuda_stack_kernels::DType) -> DType {
        match d {
            cuda_stack_kernels::DType::F32 => DType::F32,
            cuda_stack_kernels::DType::F64 => DType::F64,
            cuda_stack_kernels::DType::I32 => DType::I32,
            cuda_stack_kernels::DType::F16 => DType::F16,
            cuda_stack_kernels::DType::BF16 => DType::BF16,
            cuda_stack_kernels::DType::F8E4M3 => DType::F8E4M3,
            cuda_stack_kernels::DType::F8E5M2 => DType::F8E5M2,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for super::f16 {}
    impl Sealed for super::bf16 {}
    impl Sealed for cuda_stack_driver::float8::F8E4M3 {}
    impl Sealed for cuda_stack_driver::float8::F8E5M2 {}
}

pub(super) fn unsupported<T: TensorElement>(op: &'static str, why: &str) -> TensorError {
    TensorError::UnsupportedDType {
        op,
        dtype: T::DTYPE,
        shape: Vec::new(),
        why: why.to_string(),
    }
}

const WHY_TANH: &str = "tanh has kernels for f32, f64, f16 and bf16";
const WHY_MATMUL: &str = "matmul has kernels for f32 (sgemm), f64 and i32 (16x16 tiles), and \
                          f16/bf16 through f32";
const WHY_CUBLAS: &str = "cuBLAS multiplies f32, f64, f16 and bf16; use MatmulBackend::Kernels \
                          (or Auto) for i32";
const WHY_F32: &str = "this op has an f32 kernel only";
const WHY_MEAN: &str =
    "mean is defined for floating-point dtypes (f32, f64, f16, bf16); for i32, use sum_all";
const WHY_ROWS: &str = "reductions over a dimension have kernels for f32, f64, f16 and bf16; \
                        for i32, reduce all elements (sum_all, max_all)";
const WHY_I64: &str = "i64 tensors (what summing i32 gives) support views, copies, full and \
                       reading back; there are no i64 arithmetic kernels";

/// An element type of [`Tensor`](super::Tensor): `f32`, `f64`, `i32`, `i64`,
/// [`half::f16`](cuda_stack_driver::half::f16) and [`half::bf16`](cuda_stack_driver::half::bf16). Sealed.
///
/// Its implementations are the tensor layer's dtype dispatch (see the table in this module's
/// source, `src/tensor/dtype.rs`). The `#[doc(hidden)]` methods are that dispatch: each queues
/// one `cuda-stack-kernels` op on a stream, or returns [`TensorError::UnsupportedDType`]; they are
/// called by [`Tensor`](super::Tensor)'s methods, which check shapes and allocate outputs first.
pub trait TensorElement:
    DeviceRepr + Copy + Debug + PartialEq + Send + Sync + 'static + sealed::Sealed
{
    /// The runtime tag.
    const DTYPE: DType;
    /// The type scalar arguments (`scale`'s `alpha`, `bias_relu`'s `scale`) are taken as: the
    /// kernels' compute type (`f32` for f32/f16/bf16, `f64`, `i32`, `i64`).
    type Scalar: Copy + Debug + Send + Sync + 'static;
    /// The dtype of `sum`/`mean` results: i64 for i32 (exact), the type itself otherwise
    /// (f16/bf16 accumulate in f32 and round once, as PyTorch does).
    type Sum: TensorElement;
    /// The dtype of `max` results: the type itself.
    type Max: TensorElement;
    /// What the reduction kernels write: f32 for f16/bf16 (rounded to [`TensorElement::Sum`]
    /// by [`TensorElement::round_sum`]), [`TensorElement::Sum`] otherwise.
    #[doc(hidden)]
    type SumAcc: TensorElement;
    /// What the max kernels write: f32 for f16/bf16, [`TensorElement::Max`] otherwise.
    #[doc(hidden)]
    type MaxAcc: TensorElement;

    /// A reduction's accumulator-typed result as the public result type (a cast for f16/bf16,
    /// nothing otherwise).
    #[doc(hidden)]
    fn round_sum(t: super::Tensor<Self::SumAcc>) -> Result<super::Tensor<Self::Sum>>;
    /// As [`TensorElement::round_sum`], for maxima (exact: a maximum is one of the elements).
    #[doc(hidden)]
    fn round_max(t: super::Tensor<Self::MaxAcc>) -> Result<super::Tensor<Self::Max>>;

    /// The value as f64 (exact, except i64 beyond ±2^53).
    fn to_f64(self) -> f64;
    /// An f64 rounded to this type (round to nearest even; saturating for integers).
    fn from_f64(v: f64) -> Self;
    /// The value as an integer, for integer dtypes (`None` for floating-point ones).
    fn to_i64(self) -> Option<i64>;
    /// An f64 as [`TensorElement::Scalar`].
    fn scalar_from_f64(v: f64) -> Self::Scalar;

    /// Whether [`TensorElement::gemm_strided`] exists (operands may be strided or transposed
    /// views); otherwise `matmul` makes operands contiguous and calls
    /// [`TensorElement::matmul_dense`].
    #[doc(hidden)]
    const STRIDED_GEMM: bool = false;

    /// Whether cuBLAS multiplies this dtype ([`TensorElement::gemm_cublas`]).
    #[doc(hidden)]
    const CUBLAS_GEMM: bool = false;

    /// Whether the kernels' matmul of this dtype, on a GPU without tensor-core kernels (compute
    /// capability below 8.0), converts to f32, multiplies with sgemm and rounds the result back
    /// (f16/bf16).
    #[doc(hidden)]
    const MATMUL_VIA_F32: bool = false;

    /// `c = op(a) · op(b)` as `g` describes it, on cuBLAS (where `CUBLAS_GEMM`).
    #[doc(hidden)]
    fn gemm_cublas(
        _blas: &Blas,
        _s: &Stream,
        _g: &Gemm,
        _a: &DeviceSlice<Self>,
        _b: &DeviceSlice<Self>,
        _c: &mut DeviceSlice<Self>,
    ) -> Result<()> {
        Err(unsupported::<Self>("matmul on cuBLAS", WHY_CUBLAS))
    }

    /// `c = op(a) · op(b) + bias` (bias per output column) on cuBLASLt's bias epilogue (where
    /// `CUBLAS_GEMM`).
    #[doc(hidden)]
    fn gemm_bias_cublas(
        _blas: &Blas,
        _s: &Stream,
        _g: &Gemm,
        _a: &DeviceSlice<Self>,
        _b: &DeviceSlice<Self>,
        _bias: &DeviceSlice<Self>,
        _c: &mut DeviceSlice<Self>,
    ) -> Result<()> {
        Err(unsupported::<Self>("linear on cuBLAS", WHY_CUBLAS))
    }

    /// `c = gelu(op(a) · op(b) [+ bias])` and `aux` = its input (row-major `[m, n]`, row stride
    /// `aux_ld`) on cuBLASLt's `GELU_AUX[_BIAS]` epilogue (where `CUBLAS_GEMM`).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn gemm_gelu_aux_cublas(
        _blas: &Blas,
        _s: &Stream,
        _g: &Gemm,
        _a: &DeviceSlice<Self>,
        _b: &DeviceSlice<Self>,
        _bias: Option<&DeviceSlice<Self>>,
        _c: &mut DeviceSlice<Self>,
        _aux: &mut DeviceSlice<Self>,
        _aux_ld: usize,
    ) -> Result<()> {
        Err(unsupported::<Self>("linear_gelu on cuBLAS", WHY_CUBLAS))
    }

    /// `c = (op(a) · op(b)) ⊙ gelu'(aux)` and, given, `bias_grad` = its column sums, on
    /// cuBLASLt's `DGELU[_BGRAD]` epilogue (where `CUBLAS_GEMM`).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn gemm_dgelu_cublas(
        _blas: &Blas,
        _s: &Stream,
        _g: &Gemm,
        _a: &DeviceSlice<Self>,
        _b: &DeviceSlice<Self>,
        _aux: &DeviceSlice<Self>,
        _aux_ld: usize,
        _bias_grad: Option<&mut DeviceSlice<Self>>,
        _c: &mut DeviceSlice<Self>,
    ) -> Result<()> {
        Err(unsupported::<Self>("matmul_dgelu on cuBLAS", WHY_CUBLAS))
    }

    /// `c = op(a) · op(b)` and `bias_grad` = the sums over `k` of `op(a)` (one per row of `c`),
    /// on cuBLASLt's bias-gradient epilogue (`Epilogue::BGradA`; where `CUBLAS_GEMM`).
    #[doc(hidden)]
    fn gemm_bgrad_a_cublas(
        _blas: &Blas,
        _s: &Stream,
        _g: &Gemm,
        _a: &DeviceSlice<Self>,
        _b: &DeviceSlice<Self>,
        _bias_grad: &mut DeviceSlice<Self>,
        _c: &mut DeviceSlice<Self>,
    ) -> Result<()> {
        Err(unsupported::<Self>(
            "linear's weight gradient on cuBLAS",
            WHY_CUBLAS,
        ))
    }

    /// `out = a op b` (same lengths).
    #[doc(hidden)]
    fn binary(
        _k: &Kernels,
        _s: &Stream,
        _op: BinaryOp,
        _a: &DeviceSlice<Self>,
        _b: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self>,
    ) -> Result<()> {
        Err(unsupported::<Self>("binary op", WHY_I64))
    }

    /// `out[r][c] = a(r, c) op b(r, c)` over `[outer, inner]`, each operand read as its
    /// [`BroadcastOperand`] says.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn binary_broadcast(
        _k: &Kernels,
        _s: &Stream,
        _op: BinaryOp,
        _a: (&DeviceSlice<Self>, BroadcastOperand),
        _b: (&DeviceSlice<Self>, BroadcastOperand),
        _out: &mut DeviceSlice<Self>,
        _outer: usize,
        _inner: usize,
    ) -> Result<()> {
        Err(unsupported::<Self>("binary op", WHY_I64))
    }

    /// `out[i] = a[a_view(i)] op b[b_view(i)]`: strided/broadcast views of the result's shape
    /// read in place (`ops::binary_strided`).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn binary_strided(
        _k: &Kernels,
        _s: &Stream,
        _op: BinaryOp,
        _a: (&DeviceSlice<Self>, &StridedLayout),
        _b: (&DeviceSlice<Self>, &StridedLayout),
        _out: &mut DeviceSlice<Self>,
    ) -> Result<()> {
        Err(unsupported::<Self>("binary op", WHY_I64))
    }

    /// `out = x * alpha`.
    #[doc(hidden)]
    fn scale(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self>,
        _alpha: Self::Scalar,
    ) -> Result<()> {
        Err(unsupported::<Self>("scale", WHY_I64))
    }

    /// `out = max(x, 0)`.
    #[doc(hidden)]
    fn relu(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self>,
    ) -> Result<()> {
        Err(unsupported::<Self>("relu", WHY_I64))
    }

    /// `out = tanh(x)`.
    #[doc(hidden)]
    fn tanh(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self>,
    ) -> Result<()> {
        Err(unsupported::<Self>("tanh", WHY_TANH))
    }

    /// Every element of `out` = `value`.
    #[doc(hidden)]
    fn fill(k: &Kernels, s: &Stream, out: &mut DeviceSlice<Self>, value: Self) -> Result<()> {
        fill_by_broadcast(k, s, out, value)
    }

    /// `c[m, n] = a[m, k] · b[k, n]`, dense row-major operands.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn matmul_dense(
        _k: &Kernels,
        _s: &Stream,
        _a: &DeviceSlice<Self>,
        _b: &DeviceSlice<Self>,
        _c: &mut DeviceSlice<Self>,
        _m: usize,
        _n: usize,
        _kdim: usize,
    ) -> Result<()> {
        Err(unsupported::<Self>("matmul", WHY_MATMUL))
    }

    /// `c[m, n] = op(a) · op(b)` with leading dimensions (only where `STRIDED_GEMM`).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn gemm_strided(
        _k: &Kernels,
        _s: &Stream,
        _ta: Transpose,
        _tb: Transpose,
        _m: usize,
        _n: usize,
        _kdim: usize,
        _a: &DeviceSlice<Self>,
        _lda: usize,
        _b: &DeviceSlice<Self>,
        _ldb: usize,
        _c: &mut DeviceSlice<Self>,
    ) -> Result<()> {
        Err(unsupported::<Self>("matmul", WHY_MATMUL))
    }

    /// `out[0] = Σ x`.
    #[doc(hidden)]
    fn sum_all(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self::SumAcc>,
    ) -> Result<()> {
        Err(unsupported::<Self>("sum", WHY_I64))
    }

    /// `out[0] = Σ x / n`.
    #[doc(hidden)]
    fn mean_all(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self::SumAcc>,
    ) -> Result<()> {
        Err(unsupported::<Self>("mean", WHY_MEAN))
    }

    /// `out[0] = max x`.
    #[doc(hidden)]
    fn max_all(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self::MaxAcc>,
    ) -> Result<()> {
        Err(unsupported::<Self>("max", WHY_I64))
    }

    /// `out[o][i] = Σ_s x[o][s][i]` of a contiguous `[outer, size, inner]` array.
    #[doc(hidden)]
    fn sum_dim(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self::SumAcc>,
        _shape: (usize, usize, usize),
    ) -> Result<()> {
        Err(unsupported::<Self>("sum over a dimension", WHY_ROWS))
    }

    /// `out[o][i] = max_s x[o][s][i]` of a contiguous `[outer, size, inner]` array.
    #[doc(hidden)]
    fn max_dim(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self::MaxAcc>,
        _shape: (usize, usize, usize),
    ) -> Result<()> {
        Err(unsupported::<Self>("max over a dimension", WHY_ROWS))
    }

    /// Row-wise softmax of a `[rows, cols]` array.
    #[doc(hidden)]
    fn softmax_rows(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _out: &mut DeviceSlice<Self>,
        _rows: usize,
        _cols: usize,
    ) -> Result<()> {
        Err(unsupported::<Self>("softmax", WHY_F32))
    }

    /// `out = relu(x * scale + bias)`.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn bias_relu_fwd(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _bias: &DeviceSlice<Self>,
        _scale: Self::Scalar,
        _out: &mut DeviceSlice<Self>,
        _rows: usize,
        _cols: usize,
    ) -> Result<()> {
        Err(unsupported::<Self>("bias_relu", WHY_F32))
    }

    /// Backward of `bias_relu_fwd`.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn bias_relu_bwd(
        _k: &Kernels,
        _s: &Stream,
        _x: &DeviceSlice<Self>,
        _bias: &DeviceSlice<Self>,
        _scale: Self::Scalar,
        _grad_out: &DeviceSlice<Self>,
        _grad_x: &mut DeviceSlice<Self>,
        _grad_bias: &mut DeviceSlice<Self>,
        _rows: usize,
        _cols: usize,
    ) -> Result<()> {
        Err(unsupported::<Self>("bias_relu_backward", WHY_F32))
    }

    /// Uniform `[0, 1)` from the Philox stream keyed by `seed`.
    #[doc(hidden)]
    fn rand_uniform(
        _k: &Kernels,
        _s: &Stream,
        _out: &mut DeviceSlice<Self>,
        _seed: u64,
    ) -> Result<()> {
        Err(unsupported::<Self>("rand", WHY_F32))
    }

    /// Standard normal from the Philox stream keyed by `seed`.
    #[doc(hidden)]
    fn rand_normal(
        _k: &Kernels,
        _s: &Stream,
        _out: &mut DeviceSlice<Self>,
        _seed: u64,
    ) -> Result<()> {
        Err(unsupported::<Self>("randn", WHY_F32))
    }
}

/// `fill` for dtypes without a fill kernel: one element copied to the device, then broadcast
/// into `out` by the `strided_copy` kernel with stride 0.
fn fill_by_broadcast<T: DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    out: &mut DeviceSlice<T>,
    value: T,
) -> Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let one = s.clone_htod(&[value])?;
    let layout =
        StridedLayout::new(&[out.len()], &[0], 0).ok_or_else(|| TensorError::SizeOverflow {
            op: "fill",
            shape: vec![out.len()],
        })?;
    ops::strided_copy(k, s, &one, &layout, out)?;
    Ok(())
}

/// The methods every kernel dtype (f32, f64, i32, f16, bf16) forwards to `cuda-stack-kernels` the
/// same way; `$scalar`, `$sum`, `$max` are the kernels' `Element::Scalar`, `SumAcc` and the
/// max result type for `$t`.
macro_rules! forward_common {
    ($t:ty, $scalar:ty, $sum:ty, $max:ty) => {
        fn binary(
            k: &Kernels,
            s: &Stream,
            op: BinaryOp,
            a: &DeviceSlice<$t>,
            b: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            Ok(ops::binary::<$t>(k, s, op, a, b, out)?)
        }

        fn binary_broadcast(
            k: &Kernels,
            s: &Stream,
            op: BinaryOp,
            a: (&DeviceSlice<$t>, BroadcastOperand),
            b: (&DeviceSlice<$t>, BroadcastOperand),
            out: &mut DeviceSlice<$t>,
            outer: usize,
            inner: usize,
        ) -> Result<()> {
            Ok(ops::binary_broadcast::<$t>(
                k, s, op, a.0, a.1, b.0, b.1, out, outer, inner,
            )?)
        }

        fn binary_strided(
            k: &Kernels,
            s: &Stream,
            op: BinaryOp,
            a: (&DeviceSlice<$t>, &StridedLayout),
            b: (&DeviceSlice<$t>, &StridedLayout),
            out: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            Ok(ops::binary_strided::<$t>(
                k, s, op, a.0, a.1, b.0, b.1, out,
            )?)
        }

        fn scale(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$t>,
            alpha: $scalar,
        ) -> Result<()> {
            Ok(ops::scale::<$t>(k, s, x, out, alpha)?)
        }

        fn relu(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            Ok(ops::relu::<$t>(k, s, x, out)?)
        }

        fn fill(k: &Kernels, s: &Stream, out: &mut DeviceSlice<$t>, value: $t) -> Result<()> {
            let v = <$t as cuda_stack_kernels::Element>::to_scalar(value);
            Ok(ops::fill::<$t>(k, s, out, v)?)
        }

        fn sum_all(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$sum>,
        ) -> Result<()> {
            Ok(ops::sum::<$t>(k, s, ReduceAlgo::Fast, x, out)?)
        }

        fn max_all(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$max>,
        ) -> Result<()> {
            Ok(ops::max::<$t>(k, s, ReduceAlgo::Fast, x, out)?)
        }
    };
}

/// `gemm_strided` on the tensor cores (`ops::gemm_half`: wgmma on compute capability 9.0,
/// mma.sync on 8.0 and newer; `matmul` takes the f32 route on older GPUs).
macro_rules! tensor_core_gemm {
    ($t:ty) => {
        fn gemm_strided(
            k: &Kernels,
            s: &Stream,
            ta: Transpose,
            tb: Transpose,
            m: usize,
            n: usize,
            kdim: usize,
            a: &DeviceSlice<$t>,
            lda: usize,
            b: &DeviceSlice<$t>,
            ldb: usize,
            c: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            ops::gemm_half(
                k,
                s,
                ops::TcAlgo::Auto,
                ta,
                tb,
                m,
                n,
                kdim,
                a,
                lda,
                b,
                ldb,
                c,
                n.max(1),
            )?;
            Ok(())
        }
    };
}

/// The floating-point methods (tanh, mean, row reductions) of f32, f64, f16 and bf16.
macro_rules! forward_float {
    ($t:ty, $sum:ty, $max:ty) => {
        fn tanh(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$t>,
        ) -> Result<()> {
            Ok(ops::tanh::<$t>(k, s, x, out)?)
        }

        fn mean_all(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$sum>,
        ) -> Result<()> {
            Ok(ops::mean::<$t>(k, s, ReduceAlgo::Fast, x, out)?)
        }

        fn sum_dim(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$sum>,
            shape: (usize, usize, usize),
        ) -> Result<()> {
            Ok(ops::sum_dim::<$t>(k, s, x, out, shape)?)
        }

        fn max_dim(
            k: &Kernels,
            s: &Stream,
            x: &DeviceSlice<$t>,
            out: &mut DeviceSlice<$max>,
            shape: (usize, usize, usize),
        ) -> Result<()> {
            Ok(ops::max_dim::<$t>(k, s, x, out, shape)?)
        }
    };
}

/// The cuBLAS GEMM of a dtype `cuda-stack-blas` multiplies (`c` of the same dtype, f32 accumulation
/// for 16-bit types).
macro_rules! cublas_gemm {
    () => {
        const CUBLAS_GEMM: bool = true;

        fn gemm_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            c: &mut DeviceSlice<Self>,
        ) -> Result<()> {
            Ok(blas.gemm(s, g, a, b, c)?)
        }

        fn gemm_bias_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            bias: &DeviceSlice<Self>,
            c: &mut DeviceSlice<Self>,
        ) -> Result<()> {
            Ok(blas.matmul::<Self, Self>(
                s,
                g,
                cuda_stack_blas::Epilogue::Bias,
                a,
                b,
                Some(bias),
                c,
            )?)
        }

        fn gemm_gelu_aux_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            bias: Option<&DeviceSlice<Self>>,
            c: &mut DeviceSlice<Self>,
            aux: &mut DeviceSlice<Self>,
            aux_ld: usize,
        ) -> Result<()> {
            Ok(blas.matmul_gelu_aux::<Self, Self>(s, g, a, b, bias, c, aux, aux_ld)?)
        }

        fn gemm_dgelu_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            aux: &DeviceSlice<Self>,
            aux_ld: usize,
            bias_grad: Option<&mut DeviceSlice<Self>>,
            c: &mut DeviceSlice<Self>,
        ) -> Result<()> {
            Ok(blas.matmul_dgelu::<Self, Self>(s, g, a, b, aux, aux_ld, bias_grad, c)?)
        }

        fn gemm_bgrad_a_cublas(
            blas: &Blas,
            s: &Stream,
            g: &Gemm,
            a: &DeviceSlice<Self>,
            b: &DeviceSlice<Self>,
            bias_grad: &mut DeviceSlice<Self>,
            c: &mut DeviceSlice<Self>,
        ) -> Result<()> {
            Ok(blas.matmul_bgrad::<Self, Self>(
                s,
                g,
                cuda_stack_blas::Epilogue::BGradA,
                a,
                b,
                bias_grad,
                c,
            )?)
        }
    };
}

impl TensorElement for f32 {
    const DTYPE: DType = DType::F32;
    type Scalar = f32;
    type Sum = f32;
    type Max = f32;
    type SumAcc = f32;
    type MaxAcc = f32;
    fn round_sum(t: super::Tensor<Self::SumAcc>) -> Result<super::Tensor<Self::Sum>> {
        Ok(t)
    }
    fn round_max(t: super::Tensor<Self::MaxAcc>) -> Result<super::Tensor<Self::Max>> {
        Ok(t)
    }
    const STRIDED_GEMM: bool = true;
    cublas_gemm!();

    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn scalar_from_f64(v: f64) -> f32 {
        v as f32
    }

    forward_common!(f32, f32, f32, f32);
    forward_float!(f32, f32, f32);

    fn matmul_dense(
        k: &Kernels,
        s: &Stream,
        a: &DeviceSlice<f32>,
        b: &DeviceSlice<f32>,
        c: &mut DeviceSlice<f32>,
        m: usize,
        n: usize,
        kdim: usize,
    ) -> Result<()> {
        Ok(ops::matmul::<f32>(
            k,
            s,
            MatmulAlgo::Fast,
            a,
            b,
            c,
            m,
            n,
            kdim,
        )?)
    }

    fn gemm_strided(
        k: &Kernels,
        s: &Stream,
        ta: Transpose,
        tb: Transpose,
        m: usize,
        n: usize,
        kdim: usize,
        a: &DeviceSlice<f32>,
        lda: usize,
        b: &DeviceSlice<f32>,
        ldb: usize,
        c: &mut DeviceSlice<f32>,
    ) -> Result<()> {
        // alpha = 1, beta = 0: C is written, never read.
        ops::sgemm(
            k,
            s,
            ta,
            tb,
            m,
            n,
            kdim,
            1.0,
            a,
            lda,
            b,
            ldb,
            0.0,
            c,
            n.max(1),
        )?;
        Ok(())
    }

    fn softmax_rows(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f32>,
        out: &mut DeviceSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::softmax_rows(k, s, x, out, rows, cols)?)
    }

    fn bias_relu_fwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f32>,
        bias: &DeviceSlice<f32>,
        scale: f32,
        out: &mut DeviceSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::bias_relu_fwd(k, s, x, bias, scale, out, rows, cols)?)
    }

    fn bias_relu_bwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f32>,
        bias: &DeviceSlice<f32>,
        scale: f32,
        grad_out: &DeviceSlice<f32>,
        grad_x: &mut DeviceSlice<f32>,
        grad_bias: &mut DeviceSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::bias_relu_bwd(
            k, s, x, bias, scale, grad_out, grad_x, grad_bias, rows, cols,
        )?)
    }

    fn rand_uniform(k: &Kernels, s: &Stream, out: &mut DeviceSlice<f32>, seed: u64) -> Result<()> {
        Ok(ops::fill_uniform(k, s, out, seed, 0)?)
    }

    fn rand_normal(k: &Kernels, s: &Stream, out: &mut DeviceSlice<f32>, seed: u64) -> Result<()> {
        Ok(ops::fill_normal(k, s, out, seed, 0)?)
    }
}

impl TensorElement for f64 {
    const DTYPE: DType = DType::F64;
    cublas_gemm!();
    type Scalar = f64;
    type Sum = f64;
    type Max = f64;
    type SumAcc = f64;
    type MaxAcc = f64;
    fn round_sum(t: super::Tensor<Self::SumAcc>) -> Result<super::Tensor<Self::Sum>> {
        Ok(t)
    }
    fn round_max(t: super::Tensor<Self::MaxAcc>) -> Result<super::Tensor<Self::Max>> {
        Ok(t)
    }

    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn scalar_from_f64(v: f64) -> f64 {
        v
    }

    forward_common!(f64, f64, f64, f64);
    forward_float!(f64, f64, f64);

    fn matmul_dense(
        k: &Kernels,
        s: &Stream,
        a: &DeviceSlice<f64>,
        b: &DeviceSlice<f64>,
        c: &mut DeviceSlice<f64>,
        m: usize,
        n: usize,
        kdim: usize,
    ) -> Result<()> {
        Ok(ops::matmul::<f64>(
            k,
            s,
            MatmulAlgo::Tiled16,
            a,
            b,
            c,
            m,
            n,
            kdim,
        )?)
    }

    fn softmax_rows(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f64>,
        out: &mut DeviceSlice<f64>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::row_softmax(k, s, x, out, rows, cols, false)?)
    }

    fn bias_relu_fwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f64>,
        bias: &DeviceSlice<f64>,
        scale: f64,
        out: &mut DeviceSlice<f64>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::bias_relu_fwd_f64(
            k, s, x, bias, scale, out, rows, cols,
        )?)
    }

    fn bias_relu_bwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f64>,
        bias: &DeviceSlice<f64>,
        scale: f64,
        grad_out: &DeviceSlice<f64>,
        grad_x: &mut DeviceSlice<f64>,
        grad_bias: &mut DeviceSlice<f64>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::bias_relu_bwd_f64(
            k, s, x, bias, scale, grad_out, grad_x, grad_bias, rows, cols,
        )?)
    }
}

impl TensorElement for i32 {
    const DTYPE: DType = DType::I32;
    type Scalar = i32;
    type Sum = i64;
    type Max = i32;
    type SumAcc = i64;
    type MaxAcc = i32;
    fn round_sum(t: super::Tensor<Self::SumAcc>) -> Result<super::Tensor<Self::Sum>> {
        Ok(t)
    }
    fn round_max(t: super::Tensor<Self::MaxAcc>) -> Result<super::Tensor<Self::Max>> {
        Ok(t)
    }

    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> i32 {
        v as i32
    }
    fn to_i64(self) -> Option<i64> {
        Some(i64::from(self))
    }
    fn scalar_from_f64(v: f64) -> i32 {
        v as i32
    }

    forward_common!(i32, i32, i64, i32);

    fn matmul_dense(
        k: &Kernels,
        s: &Stream,
        a: &DeviceSlice<i32>,
        b: &DeviceSlice<i32>,
        c: &mut DeviceSlice<i32>,
        m: usize,
        n: usize,
        kdim: usize,
    ) -> Result<()> {
        Ok(ops::matmul::<i32>(
            k,
            s,
            MatmulAlgo::Tiled16,
            a,
            b,
            c,
            m,
            n,
            kdim,
        )?)
    }
}

impl TensorElement for i64 {
    const DTYPE: DType = DType::I64;
    type Scalar = i64;
    type Sum = i64;
    type Max = i64;
    type SumAcc = i64;
    type MaxAcc = i64;
    fn round_sum(t: super::Tensor<Self::SumAcc>) -> Result<super::Tensor<Self::Sum>> {
        Ok(t)
    }
    fn round_max(t: super::Tensor<Self::MaxAcc>) -> Result<super::Tensor<Self::Max>> {
        Ok(t)
    }

    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> i64 {
        v as i64
    }
    fn to_i64(self) -> Option<i64> {
        Some(self)
    }
    fn scalar_from_f64(v: f64) -> i64 {
        v as i64
    }
    // Everything else: the defaults (fill by broadcast; the rest unsupported).
}

impl TensorElement for f16 {
    const DTYPE: DType = DType::F16;
    const STRIDED_GEMM: bool = true;
    const MATMUL_VIA_F32: bool = true;
    cublas_gemm!();
    type Scalar = f32;
    type Sum = f16;
    type Max = f16;
    type SumAcc = f32;
    type MaxAcc = f32;
    fn round_sum(t: super::Tensor<f32>) -> Result<super::Tensor<f16>> {
        t.to_dtype::<f16>()
    }
    fn round_max(t: super::Tensor<f32>) -> Result<super::Tensor<f16>> {
        t.to_dtype::<f16>()
    }

    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> f16 {
        f16::from_f64(v)
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn scalar_from_f64(v: f64) -> f32 {
        v as f32
    }

    forward_common!(f16, f32, f32, f32);
    forward_float!(f16, f32, f32);
    tensor_core_gemm!(f16);

    /// The row kernel of `log_softmax.cu` (computed in f32, rounded once).
    fn softmax_rows(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f16>,
        out: &mut DeviceSlice<f16>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::row_softmax(k, s, x, out, rows, cols, false)?)
    }
}

impl TensorElement for bf16 {
    const DTYPE: DType = DType::BF16;
    const STRIDED_GEMM: bool = true;
    const MATMUL_VIA_F32: bool = true;
    cublas_gemm!();
    type Scalar = f32;
    type Sum = bf16;
    type Max = bf16;
    type SumAcc = f32;
    type MaxAcc = f32;
    fn round_sum(t: super::Tensor<f32>) -> Result<super::Tensor<bf16>> {
        t.to_dtype::<bf16>()
    }
    fn round_max(t: super::Tensor<f32>) -> Result<super::Tensor<bf16>> {
        t.to_dtype::<bf16>()
    }

    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> bf16 {
        bf16::from_f64(v)
    }
    fn to_i64(self) -> Option<i64> {
        None
    }
    fn scalar_from_f64(v: f64) -> f32 {
        v as f32
    }

    forward_common!(bf16, f32, f32, f32);
    forward_float!(bf16, f32, f32);
    tensor_core_gemm!(bf16);

    /// The row kernel of `log_softmax.cu` (computed in f32, rounded once).
    fn softmax_rows(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<bf16>,
        out: &mut DeviceSlice<bf16>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        Ok(ops::row_softmax(k, s, x, out, rows, cols, false)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_tags_and_names() {
        assert_eq!(<f32 as TensorElement>::DTYPE, DType::F32);
        assert_eq!(
            <bf16 as TensorElement>::DTYPE.torch_name(),
            "torch.bfloat16"
        );
        for d in [
            DType::F32,
            DType::F64,
            DType::I32,
            DType::I64,
            DType::F16,
            DType::BF16,
        ] {
            assert!(d.size() == 2 || d.size() == 4 || d.size() == 8);
        }
        assert_eq!(DType::from(cuda_stack_kernels::DType::F16), DType::F16);
        assert!(!DType::I32.is_float() && DType::BF16.is_float());
    }

    #[test]
    fn conversions_round_once() {
        assert_eq!(
            <f16 as TensorElement>::from_f64(1.0 / 3.0),
            f16::from_f64(1.0 / 3.0)
        );
        assert_eq!(<i32 as TensorElement>::from_f64(3.9), 3);
        assert_eq!(<i32 as TensorElement>::from_f64(1e20), i32::MAX);
        assert_eq!(TensorElement::to_i64(7i32), Some(7));
        assert_eq!(TensorElement::to_i64(7.0f32), None);
    }
}
