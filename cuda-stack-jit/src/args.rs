//! What a call passes: tensors of any dtype and scalars ([`Arg`]), tensors written in place
//! ([`OutArg`]), and what comes back ([`AnyTensor`]).

use cuda_stack_driver::float8::{F8E4M3, F8E5M2};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::{DType, Tensor};

/// A scalar argument, passed to the kernel by value (converted to its parameter's type).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// `i32`.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `f16`.
    F16(f16),
    /// `bf16`.
    BF16(bf16),
}

impl Scalar {
    /// Its own dtype (what a placeholder type bound by this scalar alone becomes).
    pub fn dtype(self) -> DType {
        match self {
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::F16(_) => DType::F16,
            Scalar::BF16(_) => DType::BF16,
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Scalar::F32(v) => v as f64,
            Scalar::F64(v) => v,
            Scalar::I32(v) => v as f64,
            Scalar::I64(v) => v as f64,
            Scalar::F16(v) => v.to_f64(),
            Scalar::BF16(v) => v.to_f64(),
        }
    }

    fn as_i64(self) -> i64 {
        match self {
            Scalar::I32(v) => v as i64,
            Scalar::I64(v) => v,
            other => other.as_f64() as i64, // saturating, NaN -> 0 (Rust `as`)
        }
    }

    /// The value converted to `to` (C-like: floats to integers truncate, saturating; integers
    /// and wider floats round to nearest), as the bytes the kernel parameter takes.
    pub(crate) fn bytes_as(self, to: DType) -> ([u8; 8], usize) {
        let mut b = [0u8; 8];
        let n = to.size();
        match to {
            DType::F32 => b[..4].copy_from_slice(&(self.as_f64() as f32).to_ne_bytes()),
            DType::F64 => b.copy_from_slice(&self.as_f64().to_ne_bytes()),
            DType::I32 => {
                let v = match self {
                    Scalar::I32(v) => v,
                    Scalar::I64(v) => v.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                    other => other.as_f64() as i32, // saturating, NaN -> 0 (Rust `as`)
                };
                b[..4].copy_from_slice(&v.to_ne_bytes())
            }
            DType::I64 => b.copy_from_slice(&self.as_i64().to_ne_bytes()),
            DType::F16 => b[..2].copy_from_slice(&f16::from_f64(self.as_f64()).to_ne_bytes()),
            DType::BF16 => b[..2].copy_from_slice(&bf16::from_f64(self.as_f64()).to_ne_bytes()),
            // Saturating, round to nearest even (the FP8 cast kernels' conversion).
            DType::F8E4M3 => b[0] = F8E4M3::from_f64(self.as_f64()).to_bits(),
            DType::F8E5M2 => b[0] = F8E5M2::from_f64(self.as_f64()).to_bits(),
        }
        (b, n)
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Scalar { Scalar::$v(x) }
        }
        impl From<$t> for Arg<'_> {
            fn from(x: $t) -> Self { Arg::Scalar(Scalar::$v(x)) }
        }
    )*};
}
scalar_from!(f32 => F32, f64 => F64, i32 => I32, i64 => I64, f16 => F16, bf16 => BF16);

/// A borrowed tensor of any dtype.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub enum TensorRef<'a> {
    F32(&'a Tensor<f32>),
    F64(&'a Tensor<f64>),
    I32(&'a Tensor<i32>),
    I64(&'a Tensor<i64>),
    F16(&'a Tensor<f16>),
    BF16(&'a Tensor<bf16>),
}

/// Runs `$body` with `$t` bound to the typed tensor inside a [`TensorRef`] / [`AnyTensor`] /
/// [`OutArg`]-like enum value.
macro_rules! with_tensor {
    ($e:expr, |$t:ident| $body:expr) => {
        match $e {
            $crate::args::TensorRef::F32($t) => $body,
            $crate::args::TensorRef::F64($t) => $body,
            $crate::args::TensorRef::I32($t) => $body,
            $crate::args::TensorRef::I64($t) => $body,
            $crate::args::TensorRef::F16($t) => $body,
            $crate::args::TensorRef::BF16($t) => $body,
        }
    };
}
pub(crate) use with_tensor;

impl TensorRef<'_> {
    /// Its dtype.
    pub fn dtype(&self) -> DType {
        with_tensor!(self, |t| t.dtype())
    }
    /// Its shape.
    pub fn shape(&self) -> &[usize] {
        with_tensor!(self, |t| t.shape())
    }
    /// Its device ordinal.
    pub fn device(&self) -> usize {
        with_tensor!(self, |t| t.device())
    }
}

/// One argument of a call: a tensor (any dtype) or a scalar. Made with `.into()`:
/// `&[(&x).into(), 2.0f32.into()]`.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// A tensor, read by the kernel.
    Tensor(TensorRef<'a>),
    /// A scalar, passed by value.
    Scalar(Scalar),
}

/// A tensor an output parameter writes in place (`call_into`): the handle is made exclusive
/// first (copy-on-write if it shares its storage), then written. Made with `(&mut y).into()`.
#[derive(Debug)]
#[allow(missing_docs)]
pub enum OutArg<'a> {
    F32(&'a mut Tensor<f32>),
    F64(&'a mut Tensor<f64>),
    I32(&'a mut Tensor<i32>),
    I64(&'a mut Tensor<i64>),
    F16(&'a mut Tensor<f16>),
    BF16(&'a mut Tensor<bf16>),
}

macro_rules! with_out {
    ($e:expr, |$t:ident| $body:expr) => {
        match $e {
            $crate::args::OutArg::F32($t) => $body,
            $crate::args::OutArg::F64($t) => $body,
            $crate::args::OutArg::I32($t) => $body,
            $crate::args::OutArg::I64($t) => $body,
            $crate::args::OutArg::F16($t) => $body,
            $crate::args::OutArg::BF16($t) => $body,
        }
    };
}
pub(crate) use with_out;

impl OutArg<'_> {
    /// Its dtype.
    pub fn dtype(&self) -> DType {
        with_out!(self, |t| t.dtype())
    }
    /// Its shape.
    pub fn shape(&self) -> &[usize] {
        with_out!(self, |t| t.shape())
    }
    /// Its device ordinal.
    pub fn device(&self) -> usize {
        with_out!(self, |t| t.device())
    }
}

/// A tensor of any dtype: what a call returns for each output parameter.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum AnyTensor {
    F32(Tensor<f32>),
    F64(Tensor<f64>),
    I32(Tensor<i32>),
    I64(Tensor<i64>),
    F16(Tensor<f16>),
    BF16(Tensor<bf16>),
}

macro_rules! any_from {
    ($($t:ty => $v:ident),*) => {$(
        impl<'a> From<&'a Tensor<$t>> for Arg<'a> {
            fn from(t: &'a Tensor<$t>) -> Self { Arg::Tensor(TensorRef::$v(t)) }
        }
        impl<'a> From<&'a Tensor<$t>> for TensorRef<'a> {
            fn from(t: &'a Tensor<$t>) -> Self { TensorRef::$v(t) }
        }
        impl<'a> From<&'a mut Tensor<$t>> for OutArg<'a> {
            fn from(t: &'a mut Tensor<$t>) -> Self { OutArg::$v(t) }
        }
        impl From<Tensor<$t>> for AnyTensor {
            fn from(t: Tensor<$t>) -> Self { AnyTensor::$v(t) }
        }
        impl TryFrom<AnyTensor> for Tensor<$t> {
            type Error = crate::JitError;
            fn try_from(a: AnyTensor) -> crate::Result<Self> {
                match a {
                    AnyTensor::$v(t) => Ok(t),
                    other => Err(crate::JitError::DTypeMismatch {
                        kernel: String::new(),
                        param: "(result)".into(),
                        expected: crate::types::numpy_name(<$t as cuda_stack_runtime::TensorElement>::DTYPE).into(),
                        found: other.dtype(),
                        why: ": the output has another dtype than the one asked for".into(),
                    }),
                }
            }
        }
    )*};
}
any_from!(f32 => F32, f64 => F64, i32 => I32, i64 => I64, f16 => F16, bf16 => BF16);

impl AnyTensor {
    /// Its dtype.
    pub fn dtype(&self) -> DType {
        with_tensor!(self.as_ref(), |t| t.dtype())
    }
    /// Its shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            AnyTensor::F32(t) => t.shape(),
            AnyTensor::F64(t) => t.shape(),
            AnyTensor::I32(t) => t.shape(),
            AnyTensor::I64(t) => t.shape(),
            AnyTensor::F16(t) => t.shape(),
            AnyTensor::BF16(t) => t.shape(),
        }
    }
    /// Borrowed, as a [`TensorRef`].
    pub fn as_ref(&self) -> TensorRef<'_> {
        match self {
            AnyTensor::F32(t) => TensorRef::F32(t),
            AnyTensor::F64(t) => TensorRef::F64(t),
            AnyTensor::I32(t) => TensorRef::I32(t),
            AnyTensor::I64(t) => TensorRef::I64(t),
            AnyTensor::F16(t) => TensorRef::F16(t),
            AnyTensor::BF16(t) => TensorRef::BF16(t),
        }
    }
    /// The typed tensor; [`crate::JitError::DTypeMismatch`] if it has another dtype.
    pub fn into_typed<T>(self) -> crate::Result<Tensor<T>>
    where
        T: cuda_stack_runtime::TensorElement,
        Tensor<T>: TryFrom<AnyTensor, Error = crate::JitError>,
    {
        Tensor::<T>::try_from(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_conversions() {
        let b = |s: Scalar, d| {
            let (b, n) = s.bytes_as(d);
            b[..n].to_vec()
        };
        assert_eq!(b(Scalar::F64(2.5), DType::F32), 2.5f32.to_ne_bytes());
        assert_eq!(b(Scalar::F32(-3.9), DType::I32), (-3i32).to_ne_bytes());
        assert_eq!(b(Scalar::F64(1e300), DType::I32), i32::MAX.to_ne_bytes());
        assert_eq!(
            b(Scalar::I64(1 << 40), DType::I64),
            (1i64 << 40).to_ne_bytes()
        );
        assert_eq!(
            b(Scalar::I32(3), DType::F16),
            f16::from_f32(3.0).to_ne_bytes()
        );
        assert_eq!(
            b(Scalar::F32(1.5), DType::BF16),
            bf16::from_f32(1.5).to_ne_bytes()
        );
        assert_eq!(Scalar::from(1i64).dtype(), DType::I64);
    }
}
