//! The tensor layer's error type: every failure names the op, and the shapes (and strides,
//! dtypes, devices) involved.

use super::DType;

/// Every failure of a [`Tensor`](super::Tensor) operation. Nothing is queued on the GPU when an
/// argument check fails: the checks run before any allocation or launch.
#[derive(Clone, thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum TensorError {
    /// Two shapes that the op needs to agree (equal, broadcastable, or matrix-compatible) do not.
    #[error("{op}: shape mismatch between {lhs:?} and {rhs:?}: {why}")]
    ShapeMismatch {
        /// The operation.
        op: &'static str,
        /// The first shape (the tensor the op was called on).
        lhs: Vec<usize>,
        /// The second shape (the other operand, or the shape asked for).
        rhs: Vec<usize>,
        /// Which dimensions disagree and what the op needs.
        why: String,
    },

    /// There is no kernel for this op and dtype.
    #[error("{op} is not supported for dtype {dtype} (tensor of shape {shape:?}): {why}")]
    UnsupportedDType {
        /// The operation.
        op: &'static str,
        /// The element type asked for.
        dtype: DType,
        /// The shape of the tensor the op was called on (empty when not known).
        shape: Vec<usize>,
        /// Which dtypes the op supports, or what to do instead.
        why: String,
    },

    /// A view (`view`, `reshape`, `flatten`) of a tensor whose elements are not contiguous in
    /// memory: it would need a copy.
    #[error(
        "{op}: cannot view a tensor of shape {shape:?} with strides {strides:?} as shape \
         {requested:?} without copying, because it is not contiguous; call .contiguous() first \
         (which copies) and view that"
    )]
    NonContiguousView {
        /// The operation.
        op: &'static str,
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides (in elements).
        strides: Vec<isize>,
        /// The shape asked for.
        requested: Vec<usize>,
    },

    /// Two operands live on different GPUs.
    #[error(
        "{op}: expected all tensors on the same device, but found cuda:{lhs_device} (shape \
         {lhs_shape:?}) and cuda:{rhs_device} (shape {rhs_shape:?}); move one with \
         .to_device(..)"
    )]
    DeviceMismatch {
        /// The operation.
        op: &'static str,
        /// Device ordinal of the first operand.
        lhs_device: usize,
        /// Device ordinal of the second operand.
        rhs_device: usize,
        /// Shape of the first operand.
        lhs_shape: Vec<usize>,
        /// Shape of the second operand.
        rhs_shape: Vec<usize>,
    },

    /// A dimension index outside `[-rank, rank - 1]`.
    #[error(
        "{op}: dimension {dim} is out of range for a tensor of shape {shape:?} (valid \
         dimensions: {range})",
        range = super::dim_range::dim_range(*rank)
    )]
    DimOutOfRange {
        /// The operation.
        op: &'static str,
        /// The dimension asked for.
        dim: isize,
        /// The tensor's rank.
        rank: usize,
        /// The tensor's shape.
        shape: Vec<usize>,
    },

    /// An index or range outside a dimension.
    #[error(
        "{op}: {what} is out of range for dimension {dim} of size {size} (tensor of shape \
         {shape:?})"
    )]
    IndexOutOfRange {
        /// The operation.
        op: &'static str,
        /// The dimension.
        dim: usize,
        /// The index or range asked for, e.g. `"start 3 + length 4 = 7"`.
        what: String,
        /// The size of the dimension.
        size: usize,
        /// The tensor's shape.
        shape: Vec<usize>,
    },

    /// A reduction with no identity (max) over zero elements.
    #[error(
        "{op}: cannot reduce over {what} of a tensor of shape {shape:?}: it has zero elements \
         and the operation has no identity; reduce over a non-empty dimension"
    )]
    EmptyReduction {
        /// The operation.
        op: &'static str,
        /// `"all elements"` or `"dimension N"`.
        what: String,
        /// The tensor's shape.
        shape: Vec<usize>,
    },

    /// An argument that is invalid on its own (a permutation that is not one, a zero step …).
    #[error("{op}: {problem}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// What is wrong, and what is allowed.
        problem: String,
    },

    /// A tensor with more dimensions than a kernel's layout descriptor holds.
    #[error(
        "{op}: the strided view of shape {shape:?} with strides {strides:?} has {rank} \
         dimensions after merging, more than the {max} the strided-copy kernel takes; reshape to \
         fewer dimensions first"
    )]
    TooManyDims {
        /// The operation.
        op: &'static str,
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides.
        strides: Vec<isize>,
        /// The rank after merging contiguous dimensions.
        rank: usize,
        /// The largest rank the kernel takes.
        max: usize,
    },

    /// The tensor was produced by work queued during a CUDA graph capture and holds no value
    /// until that graph is launched (PyTorch hands out garbage here; this refuses).
    #[error(
        "this tensor was produced inside a CUDA graph capture{}",
        if *discarded {
            ", which was discarded (it failed or was dropped, or its graph was dropped unlaunched): \
             it will never hold a value; compute it again outside the capture"
        } else {
            ", and holds no value until the graph is launched: replay it first \
             (CapturedStep::replay / GraphExec::launch), then read"
        }
    )]
    NotYetComputed {
        /// Whether the capture's work will never run.
        discarded: bool,
    },

    /// An element count or index that does not fit in `usize`/`isize`.
    #[error("{op}: the size of shape {shape:?} overflows the address space")]
    SizeOverflow {
        /// The operation.
        op: &'static str,
        /// The shape asked for.
        shape: Vec<usize>,
    },

    /// A runtime failure (device initialisation, the caching allocator, staged copies).
    #[error(transparent)]
    Runtime(#[from] crate::Error),

    /// A kernel-layer failure (launch validation, a size beyond a kernel's `int` parameter …).
    #[error(transparent)]
    Kernel(cuda_stack_kernels::Error),

    /// A driver failure.
    #[error(transparent)]
    Driver(#[from] cuda_stack_driver::Error),

    /// A cuBLAS failure, or cuBLAS missing where [`super::MatmulBackend::Cublas`] asks for it
    /// (boxed: it is large, and rare).
    #[error(transparent)]
    Blas(Box<cuda_stack_blas::BlasError>),

    /// A collective (NCCL) failed: a communicator of another device, an aborted communicator,
    /// an NCCL error (see [`cuda_stack_nccl::Error`]). Boxed: NCCL's errors carry messages, and the
    /// tensor error stays small.
    #[error(transparent)]
    Collective(Box<cuda_stack_nccl::Error>),
}

impl From<cuda_stack_blas::BlasError> for TensorError {
    fn from(e: cuda_stack_blas::BlasError) -> Self {
        TensorError::Blas(Box::new(e))
    }
}

impl From<cuda_stack_nccl::Error> for TensorError {
    fn from(e: cuda_stack_nccl::Error) -> Self {
        TensorError::Collective(Box::new(e))
    }
}

impl From<cuda_stack_kernels::Error> for TensorError {
    /// Kernel-layer "no kernel for this dtype" errors become [`TensorError::UnsupportedDType`],
    /// so every unsupported-dtype failure has the same shape; the others are wrapped.
    fn from(e: cuda_stack_kernels::Error) -> Self {
        match e {
            cuda_stack_kernels::Error::Unsupported { op, dtype, why } => {
                TensorError::UnsupportedDType {
                    op,
                    dtype: DType::from(dtype),
                    shape: Vec::new(),
                    why: why.to_string(),
                }
            }
            other => TensorError::Kernel(other),
        }
    }
}

impl TensorError {
    /// Fills in the shape of an [`TensorError::UnsupportedDType`] that does not have one yet.
    pub(crate) fn with_shape(self, shape: &[usize]) -> Self {
        match self {
            TensorError::UnsupportedDType {
                op,
                dtype,
                shape: s,
                why,
            } if s.is_empty() => TensorError::UnsupportedDType {
                op,
                dtype,
                shape: shape.to_vec(),
                why,
            },
            other => other,
        }
    }
}

/// `Result` with [`TensorError`].
pub type Result<T, E = TensorError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_show_shapes() {
        let e = TensorError::ShapeMismatch {
            op: "add",
            lhs: vec![2, 3],
            rhs: vec![4],
            why: "dimension 1 is 3 vs 4".into(),
        };
        let m = e.to_string();
        assert!(
            m.contains("[2, 3]") && m.contains("[4]") && m.starts_with("add"),
            "{m}"
        );

        let e = TensorError::NonContiguousView {
            op: "view",
            shape: vec![3, 2],
            strides: vec![1, 3],
            requested: vec![6],
        };
        let m = e.to_string();
        assert!(
            m.contains("[3, 2]") && m.contains("[1, 3]") && m.contains("[6]"),
            "{m}"
        );

        let e = TensorError::DeviceMismatch {
            op: "matmul",
            lhs_device: 0,
            rhs_device: 1,
            lhs_shape: vec![2, 2],
            rhs_shape: vec![2, 5],
        };
        let m = e.to_string();
        assert!(
            m.contains("cuda:0") && m.contains("cuda:1") && m.contains("[2, 5]"),
            "{m}"
        );

        let e = TensorError::DimOutOfRange {
            op: "sum",
            dim: 2,
            rank: 2,
            shape: vec![4, 5],
        };
        assert!(e.to_string().contains("[-2, 1]"), "{e}");
    }

    #[test]
    fn kernel_unsupported_becomes_unsupported_dtype() {
        let k = cuda_stack_kernels::Error::Unsupported {
            op: "matmul (tiled16)",
            dtype: cuda_stack_kernels::DType::F16,
            why: "matmul kernels exist for f32, f64 and i32",
        };
        let e = TensorError::from(k).with_shape(&[3, 4]);
        let m = e.to_string();
        assert!(matches!(
            e,
            TensorError::UnsupportedDType {
                dtype: DType::F16,
                ..
            }
        ));
        assert!(
            m.contains("f16") && m.contains("[3, 4]") && m.contains("matmul"),
            "{m}"
        );
    }
}

cuda_stack_driver::cuda_stack_sys::debug_as_display!(enum TensorError);
