//! **Dtype dispatch, in one place.** [`TensorElement`] is declared here and implemented once per
//! dtype in `dtype_impls.rs`, and each implementation is one row of the table below: for every op
//! it either calls the `cuda-stack-kernels` op for that dtype (choosing the algorithm, e.g. sgemm
//! for f32 and 16×16 tiles for f64/i32) or inherits the trait's default, which returns
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
use cuda_stack_kernels::ops::{self, BinaryOp, BroadcastOperand, Transpose};
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
