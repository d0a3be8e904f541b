//! # tensor-lite: `Tensor<T>` = storage + layout, views, dtype dispatch, ops on `cuda-stack-kernels`
//!
//! Seed 003 describes PyTorch's split between a **Storage** (a flat, typed, device-resident
//! buffer) and a **Tensor** (a view on it: sizes, strides and an offset). [`Tensor<T>`] is that
//! split: an `Arc`-shared storage from the device's caching allocator plus a [`Layout`]
//! `{ shape, strides, offset }` (as in candle).
//!
//! | PyTorch | here |
//! |---|---|
//! | `torch.tensor(data).reshape(2, 3).cuda()` | [`Tensor::from_vec`]`(data, &[2, 3])` (current device) |
//! | `tensor.tolist()`, `.cpu()` | [`Tensor::to_vec`] (waits for the GPU), [`Tensor::item`] |
//! | `torch.zeros/ones/full/arange` | [`Tensor::zeros`], [`Tensor::ones`], [`Tensor::full`], [`Tensor::arange`] |
//! | `torch.rand/randn` (with a seed) | [`Tensor::rand`], [`Tensor::randn`] (Philox4x32-10 on the GPU) |
//! | `x[:, 1:3]`, `narrow`, `x[i]`, `select` | [`Tensor::narrow`], [`Tensor::slice`], [`Tensor::select`] — views, no copy |
//! | `transpose`, `.t()`, `permute` | [`Tensor::transpose`], [`Tensor::t`], [`Tensor::permute`] — views |
//! | `view`, `reshape`, `flatten` | [`Tensor::view`], [`Tensor::reshape`], [`Tensor::flatten`] — views of contiguous tensors; an error otherwise |
//! | `expand`, broadcasting | [`Tensor::expand`] (stride 0, no copy); `+ - * /` broadcast |
//! | `unsqueeze`, `squeeze` | [`Tensor::unsqueeze`], [`Tensor::squeeze`] |
//! | `is_contiguous()`, `contiguous()` | [`Tensor::is_contiguous`], [`Tensor::contiguous`] (copies only when needed, with the `strided_copy` kernel) |
//! | `a + b` … | `&a + &b` (→ `Result<Tensor<T>>`), [`Tensor::add`], [`Tensor::sub`], [`Tensor::mul`], [`Tensor::div`] |
//! | `a @ b`, `torch.bmm` | [`Tensor::matmul`] (2-D, and batched 3-D; f32, f64, f16, bf16, i32) |
//! | `torch.backends.cuda.preferred_blas_library`, `...matmul.allow_tf32` | [`MatmulBackend`] (cuBLAS or the kernels; [`set_matmul_backend`], [`with_matmul_backend`], `CUDA_RS_MATMUL_BACKEND`), [`set_allow_tf32`] |
//! | `sum`, `mean`, `amax` | [`Tensor::sum_all`], [`Tensor::sum`], [`Tensor::mean_all`], [`Tensor::mean`], [`Tensor::max_all`], [`Tensor::max`] (+ `_keepdim`) |
//! | `softmax(dim)`, `relu`, `tanh`, `x * alpha` | [`Tensor::softmax`], [`Tensor::relu`], [`Tensor::tanh`], [`Tensor::scale`] |
//! | seed 004's fused `relu(x * scale + bias)` | [`Tensor::bias_relu`], [`Tensor::bias_relu_backward`] |
//! | `F.linear`, and an MLP's `gelu(F.linear(x, W, b))` with GELU in cuBLASLt's epilogues (forward `GELU_AUX_BIAS`, backward `DGELU`, `DGELU_BGRAD` opt-in; bf16/f16 on cuBLAS only, exactly the unfused ops otherwise) | [`Tensor::linear`], [`Tensor::linear_gelu`], [`Tensor::matmul_dgelu`] |
//! | `log_softmax`, `F.pad` with zeros | [`Tensor::log_softmax`], [`Tensor::zero_pad`] |
//! | `F.scaled_dot_product_attention` (fused, FlashAttention-style; f32, f64, f16, bf16: [`AttentionElement`]) | [`Tensor::scaled_dot_product_attention`], [`Tensor::scaled_dot_product_attention_forward`] (+ row log-sum-exp), [`Tensor::scaled_dot_product_attention_backward`] |
//! | autograd's backward kernels, `F.cross_entropy`, `optim` update rules (f32, f64: [`GradElement`]) | [`Tensor::relu_backward`], [`Tensor::tanh_backward`], [`Tensor::softmax_backward`], [`Tensor::log_softmax_backward`], [`Tensor::cross_entropy_rows`], [`Tensor::cross_entropy_backward`], [`Tensor::sgd_`], [`Tensor::sgd_momentum_`], [`Tensor::adam_`] (in place) |
//! | `F.layer_norm`, `F.gelu(approximate='tanh')`, `F.embedding`, `F.dropout`, llm.c's fused classifier, `clip_grad_norm_` (f32, f64, f16, bf16: [`FloatElement`]; clipping f32, f64) | [`Tensor::layer_norm`], [`Tensor::layer_norm_backward`], [`Tensor::add_layer_norm`], [`Tensor::layer_norm_backward_add`], [`Tensor::gelu`], [`Tensor::gelu_backward`], [`Tensor::embedding`], [`Tensor::embedding_backward`], [`Tensor::dropout`], [`Tensor::classifier_loss`], [`Tensor::fused_classifier`], [`Tensor::fused_classifier_`], [`clip_grad_norm_`] |
//! | Transformer Engine's FP8 casts (`Float8Tensor`, amax, delayed scaling) | [`Tensor::to_fp8`], [`Tensor::to_fp8_current`], [`Tensor::from_fp8`], [`Tensor::amax`], [`Tensor::fp8_scale`] (e4m3 / e5m2, compute capability 8.9+) |
//! | `t.to(torch.float16)`, `.half()`, `.float()` | [`Tensor::to_dtype`] (f32 ↔ f64/f16/bf16/i32, f16 ↔ bf16, f64 ↔ i32; one rounding) |
//! | `t.copy_(src)`, in-place ops | [`Tensor::copy_from_`], [`Tensor::is_exclusive`] (in place only through an unshared handle; copy-on-write otherwise) |
//! | a C++/CUDA extension's `tensor.data_ptr()`, `torch.cuda.current_stream()` (your own kernels, seed 004) | [`Tensor::as_slice`], [`Tensor::as_mut_slice`] (copy-on-write), [`Tensor::context`], [`Tensor::stream`] |
//! | `t.untyped_storage()` | [`Tensor::storage`], [`Tensor::from_cached_buffer`] |
//! | `print(t)` | `Display`: `tensor([[1., 2.],\n        [3., 4.]], device='cuda:0')` |
//!
//! ## Views cost no copy
//! A view shares its base's storage ([`Tensor::shares_storage`]) and allocates nothing
//! ([`crate::memory_allocated`] does not change). Tensors behave as values — every op writes a
//! new storage, and the few in-place ops (`copy_from_`, the optimizer steps) write only through
//! a handle that no other tensor shares, copying first otherwise — so sharing is never
//! observable except through the absence of copies.
//!
//! ## Asynchronous, on the default stream
//! Every op queues its work on its device's **default stream** ([`crate::Runtime::default_stream`])
//! and returns; outputs come from the device's caching allocator, so [`crate::memory_allocated`]
//! counts live tensors. The host waits only when it reads data: [`Tensor::to_vec`],
//! [`Tensor::item`] and `Display` (like `tensor.cpu()` in PyTorch). Creation functions use the
//! calling thread's current device ([`crate::set_device`]); an op runs on its operands' device,
//! whatever the current device is.
//!
//! ## Dtypes, and where dispatch happens
//! `Tensor<T>` exists for every [`TensorElement`]: `f32`, `f64`, `i32`, `i64`, `f16`, `bf16`.
//! **Dtype dispatch is in one place: `src/tensor/dtype.rs`** declares [`TensorElement`] and
//! `src/tensor/dtype_impls.rs` implements it — one implementation per dtype, each naming the
//! `cuda-stack-kernels` op it calls for every tensor op, or inheriting a default that returns
//! [`TensorError::UnsupportedDType`] (the training kernels' dispatch is [`GradElement`], in
//! `src/tensor/grad_dtype.rs`). The support table is in `dtype.rs`'s docs; in short: f32 everything; f64 and i32 elementwise,
//! reductions and matmul; f16/bf16 elementwise, reductions (accumulated in f32, results in
//! f32) and matmul (f32 accumulation, on cuBLAS or through f32 on the kernels); i64 (the dtype
//! of an i32 sum) storage, views and `full`. `matmul` picks cuBLAS or the kernels in one place
//! too ([`MatmulBackend`]).
//!
//! ## Errors
//! [`TensorError`]: shape mismatches show both shapes; unsupported dtypes name the op and the
//! dtype; a non-contiguous `view`/`reshape` shows the shape and strides; operands on different
//! devices give [`TensorError::DeviceMismatch`] with both devices and shapes. Nothing panics on
//! bad input: every index is checked first.
//!
//! ```no_run
//! use cuda_stack_runtime::tensor::Tensor;
//! # fn main() -> Result<(), cuda_stack_runtime::tensor::TensorError> {
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let b = Tensor::from_vec(vec![10.0f32, 20.0], &[2])?;   // broadcast along rows
//! let c = (&a + &b)?;                                      // queued, not yet finished
//! let d = c.t()?.matmul(&a)?;                              // transposed view: no copy
//! println!("{d}");
//! assert_eq!(c.to_vec()?, [11.0, 22.0, 13.0, 24.0]);       // waits for the GPU
//! # Ok(()) }
//! ```

mod create;
mod dim_range;
mod display;
mod dtype;
mod dtype_impls;
mod error;
mod float_dtype;
mod fp8_dtype;
mod grad_dtype;
mod layout;
mod matmul_backend;
mod ops;
mod raw_access;
mod storage;
mod view;

/// The FP8 element types ([`F8E4M3`](cuda_stack_driver::float8::F8E4M3),
/// [`F8E5M2`](cuda_stack_driver::float8::F8E5M2)) and the wide types the FP8 casts take
/// (f32, f16, bf16), from `cuda-stack-kernels`.
pub use cuda_stack_kernels::ops::{Fp8, Fp8Wide};
pub use dtype::{DType, TensorElement};
pub use error::{Result, TensorError};
pub use float_dtype::FloatElement;
pub use grad_dtype::GradElement;
pub use layout::{broadcast_shapes, Layout};
pub use matmul_backend::{
    allow_tf32, matmul_backend, set_allow_tf32, set_matmul_backend, with_allow_tf32,
    with_matmul_backend, MatmulBackend, ALLOW_TF32_VAR, MATMUL_BACKEND_VAR,
};
pub use ops::{
    adam4_, adam_many_, adam_many_lr_param, clip_grad_norm_, clip_grad_scale, linear_bias_grad,
    sgd4_, sgd_momentum4_, to_dtype_many, zeros_like_many, AdamParams, AdamSlot, AddLayerNorm,
    AttentionElement, Fp8Cast, LinearBiasGrad, SgdParams, LINEAR_BGRAD_VAR,
};

use std::sync::Arc;
use storage::{Exec, Storage};

/// An n-dimensional array of `T` on one GPU: a shared [storage](self) plus a [`Layout`]
/// (shape, strides, offset). See the [module docs](self).
///
/// `Clone` makes another handle to the same storage (cheap, no GPU work); since no op writes
/// into a storage another handle shares (in-place ops copy first), handles behave like
/// independent values.
pub struct Tensor<T: TensorElement> {
    storage: Arc<Storage<T>>,
    layout: Layout,
}

impl<T: TensorElement> Clone for Tensor<T> {
    fn clone(&self) -> Self {
        Tensor {
            storage: Arc::clone(&self.storage),
            layout: self.layout.clone(),
        }
    }
}

impl<T: TensorElement> std::fmt::Debug for Tensor<T> {
    /// The metadata, without reading the data (use `Display` for the values).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &T::DTYPE)
            .field("device", &format_args!("cuda:{}", self.device()))
            .field("shape", &self.layout.shape())
            .field("strides", &self.layout.strides())
            .field("offset", &self.layout.offset())
            .field("storage_len", &self.storage.len())
            .finish()
    }
}

impl<T: TensorElement> Tensor<T> {
    /// A contiguous tensor over a whole new storage.
    fn from_storage(storage: Arc<Storage<T>>, shape: &[usize]) -> Result<Self> {
        Ok(Tensor {
            storage,
            layout: Layout::contiguous(shape)?,
        })
    }

    /// The same storage with another layout (a view).
    fn with_layout(&self, layout: Layout) -> Self {
        Tensor {
            storage: Arc::clone(&self.storage),
            layout,
        }
    }

    /// Where this tensor's ops run.
    fn exec(&self) -> Result<Exec> {
        Exec::on(self.device())
    }

    /// The elements of a contiguous tensor as one device slice (no copy); an internal error if
    /// the tensor is not contiguous (callers call [`Tensor::contiguous`] first).
    fn dense(&self) -> Result<cuda_stack_driver::DeviceView<'_, T>> {
        if self.numel() == 0 {
            return self.storage.range(0..0);
        }
        let range =
            self.layout
                .contiguous_range()
                .ok_or_else(|| TensorError::NonContiguousView {
                    op: "internal: dense access",
                    shape: self.shape().to_vec(),
                    strides: self.strides().to_vec(),
                    requested: self.shape().to_vec(),
                })?;
        self.storage.range(range)
    }

    /// [`TensorError::DeviceMismatch`] unless `other` is on this tensor's device.
    fn same_device<U: TensorElement>(&self, op: &'static str, other: &Tensor<U>) -> Result<()> {
        if self.device() == other.device() {
            Ok(())
        } else {
            Err(TensorError::DeviceMismatch {
                op,
                lhs_device: self.device(),
                rhs_device: other.device(),
                lhs_shape: self.shape().to_vec(),
                rhs_shape: other.shape().to_vec(),
            })
        }
    }

    /// The sizes of the dimensions (`tensor.shape`).
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// The strides in elements (`tensor.stride()`).
    pub fn strides(&self) -> &[isize] {
        self.layout.strides()
    }

    /// The offset of the first element in the storage, in elements (`storage_offset()`).
    pub fn offset(&self) -> usize {
        self.layout.offset()
    }

    /// The layout (shape, strides, offset).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of dimensions (`tensor.dim()`).
    pub fn rank(&self) -> usize {
        self.layout.rank()
    }

    /// Number of elements (`tensor.numel()`).
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// The ordinal of the device the storage lives on (`tensor.device.index`).
    pub fn device(&self) -> usize {
        self.storage.device()
    }

    /// Number of elements in the underlying storage (which views share).
    pub fn storage_len(&self) -> usize {
        self.storage.len()
    }

    /// Whether two tensors view the same storage (e.g. a tensor and its transpose).
    pub fn shares_storage<U: TensorElement>(&self, other: &Tensor<U>) -> bool {
        std::ptr::eq(
            Arc::as_ptr(&self.storage) as *const (),
            Arc::as_ptr(&other.storage) as *const (),
        )
    }

    /// The device address of the first element (an escape hatch for raw kernels and for
    /// showing that views share memory).
    pub fn data_ptr(&self) -> u64 {
        let base = self.storage.slice().as_raw_ptr();
        base.wrapping_add((self.offset() * std::mem::size_of::<T>()) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_stack_driver::half::{bf16, f16};

    fn send_sync<X: Send + Sync + Clone>() {}

    #[test]
    fn tensors_are_send_sync_and_clone() {
        send_sync::<Tensor<f32>>();
        send_sync::<Tensor<f64>>();
        send_sync::<Tensor<i32>>();
        send_sync::<Tensor<i64>>();
        send_sync::<Tensor<f16>>();
        send_sync::<Tensor<bf16>>();
    }

    #[test]
    fn shape_errors_come_before_any_device_work() {
        // These fail on a machine without a GPU with the argument error, not a driver error.
        assert!(matches!(
            Tensor::<f32>::from_vec(vec![1.0; 3], &[2, 2]),
            Err(TensorError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            Tensor::<f32>::zeros(&[usize::MAX, 2]),
            Err(TensorError::SizeOverflow { .. })
        ));
        assert!(matches!(
            Tensor::<i32>::arange(0.0, 1.0, 0.0),
            Err(TensorError::InvalidArgument { .. })
        ));
    }
}
