//! Putting tensors and scalars into a launch's argument list, and the output buffers a call
//! allocates.

use crate::args::{with_out, with_tensor, AnyTensor, OutArg, Scalar, TensorRef};
use crate::error::Result;
use cuda_stack_driver::launch::ArgList;
use cuda_stack_driver::Stream;
use cuda_stack_runtime::{CachedBuffer, DType, Runtime, Tensor};

/// A read-only pointer to `t`'s first element (its storage is tracked as a whole).
pub(crate) fn push_read<'a>(list: &mut ArgList<'a>, t: TensorRef<'a>) -> Result<()> {
    with_tensor!(t, |t| list.read_at(t.storage()?, t.offset())?);
    Ok(())
}

/// A written pointer to the storage of `o`, made exclusive first (then it is contiguous at
/// offset 0 and covers the storage exactly).
pub(crate) fn push_out<'a>(list: &mut ArgList<'a>, o: &'a mut OutArg<'_>) -> Result<()> {
    with_out!(o, |t| {
        list.write(t.as_mut_slice()?);
    });
    Ok(())
}

/// `s` converted to `dtype`, by value.
pub(crate) fn push_scalar(list: &mut ArgList<'_>, s: Scalar, dtype: DType) {
    let (bytes, n) = s.bytes_as(dtype);
    list.bytes(&bytes[..n]);
}

/// A new output buffer of any dtype.
pub(crate) enum OutBuf {
    F32(CachedBuffer<f32>),
    F64(CachedBuffer<f64>),
    I32(CachedBuffer<i32>),
    I64(CachedBuffer<i64>),
    F16(CachedBuffer<cuda_stack_driver::half::f16>),
    BF16(CachedBuffer<cuda_stack_driver::half::bf16>),
}

macro_rules! with_buf {
    ($e:expr, |$b:ident| $body:expr) => {
        match $e {
            OutBuf::F32($b) => $body,
            OutBuf::F64($b) => $body,
            OutBuf::I32($b) => $body,
            OutBuf::I64($b) => $body,
            OutBuf::F16($b) => $body,
            OutBuf::BF16($b) => $body,
        }
    };
}

impl OutBuf {
    /// `n` elements of `dtype` from `device`'s caching allocator, for `stream`.
    ///
    /// # Safety
    /// The contents are whatever the block's previous user left (valid values of the type):
    /// the caller's kernel writes them, or documents that unwritten elements are unspecified.
    pub(crate) unsafe fn alloc(
        dtype: DType,
        rt: &Runtime,
        stream: &Stream,
        n: usize,
    ) -> Result<OutBuf> {
        macro_rules! a {
            ($v:ident, $t:ty) => {
                // SAFETY: forwarded to the caller.
                OutBuf::$v(unsafe { rt.allocator().alloc::<$t>(stream, n)? })
            };
        }
        use cuda_stack_driver::half::{bf16, f16};
        Ok(match dtype {
            DType::F32 => a!(F32, f32),
            DType::F64 => a!(F64, f64),
            DType::I32 => a!(I32, i32),
            DType::I64 => a!(I64, i64),
            DType::F16 => a!(F16, f16),
            DType::BF16 => a!(BF16, bf16),
            DType::F8E4M3 | DType::F8E5M2 => {
                return Err(cuda_stack_runtime::TensorError::UnsupportedDType {
                    op: "cuda-jit output",
                    dtype,
                    shape: vec![n],
                    why: "generated kernels compute in f32, f64, i32, i64, f16 and bf16; make \
                          FP8 tensors with Tensor::to_fp8"
                        .into(),
                }
                .into())
            }
        })
    }

    /// A written pointer to the buffer.
    pub(crate) fn push<'a>(&'a mut self, list: &mut ArgList<'a>) {
        with_buf!(self, |b| {
            list.write(b);
        })
    }

    /// A read-only pointer to the buffer.
    pub(crate) fn push_read<'a>(&'a self, list: &mut ArgList<'a>) {
        with_buf!(self, |b| {
            list.read(b);
        })
    }

    /// The buffer as a contiguous tensor of `shape`.
    pub(crate) fn into_tensor(self, shape: &[usize]) -> Result<AnyTensor> {
        Ok(with_buf!(self, |b| AnyTensor::from(
            Tensor::from_cached_buffer(b, shape)?
        )))
    }
}

/// A contiguous copy of `t` broadcast to `shape` (or of `t` itself when `shape` is `None`).
pub(crate) fn contiguous_copy(t: TensorRef<'_>, shape: Option<&[usize]>) -> Result<AnyTensor> {
    Ok(with_tensor!(t, |t| {
        let v = match shape {
            Some(s) => t.broadcast_to(s)?,
            None => t.clone(),
        };
        AnyTensor::from(v.contiguous()?)
    }))
}
