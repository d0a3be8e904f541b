//! Element types: the [`DType`] tag, the [`Element`] trait the ops are generic over, and the
//! CPU arithmetic ([`Compute`]) the references use.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::DeviceRepr;
use std::fmt::Debug;

/// The element types the kernels are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `f32` (`float`).
    F32,
    /// `f64` (`double`).
    F64,
    /// `i32` (`int`), with wrapping arithmetic.
    I32,
    /// IEEE binary16 ([`half::f16`]), computed in f32 and rounded once.
    F16,
    /// bfloat16 ([`half::bf16`]), computed in f32 and rounded once.
    BF16,
    /// OCP FP8 e4m3 ([`float8::F8E4M3`](cuda_stack_driver::float8::F8E4M3): ±448, no
    /// infinities): storage, scaled casts and the FP8 GEMMs only ([`crate::ops::Fp8`]).
    F8E4M3,
    /// OCP FP8 e5m2 ([`float8::F8E5M2`](cuda_stack_driver::float8::F8E5M2): ±57344, with
    /// infinities): storage, scaled casts and the FP8 GEMMs only ([`crate::ops::Fp8`]).
    F8E5M2,
}

impl DType {
    /// The suffix kernel names use: `f32`, `f64`, `i32`, `f16`, `bf16`, `e4m3`, `e5m2`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F8E4M3 => "e4m3",
            DType::F8E5M2 => "e5m2",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 => 8,
            DType::F16 | DType::BF16 => 2,
            DType::F8E4M3 | DType::F8E5M2 => 1,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for super::f16 {}
    impl Sealed for super::bf16 {}
}

/// A kernel compute type (`f32`, `f64`, `i32`) with the kernels' exact arithmetic on the CPU:
/// IEEE operations for floats; wrapping for `i32`, whose division gives 0 for `x / 0` and
/// `i32::MIN` for `i32::MIN / -1`.
pub trait Compute: DeviceRepr + Debug + PartialEq + PartialOrd + sealed::Sealed + 'static {
    /// `a + b`.
    fn add(a: Self, b: Self) -> Self;
    /// `a - b`.
    fn sub(a: Self, b: Self) -> Self;
    /// `a * b`.
    fn mul(a: Self, b: Self) -> Self;
    /// `a / b`.
    fn div(a: Self, b: Self) -> Self;
    /// `alpha * x + y` with one rounding (`mul_add`; wrapping for `i32`).
    fn fma(alpha: Self, x: Self, y: Self) -> Self;
    /// `x < 0 ? 0 : x` (NaN and -0.0 stay).
    fn relu(x: Self) -> Self;
    /// `(a > b || a != a) ? a : b`: the kernels' max, which propagates NaN.
    fn max_nan(a: Self, b: Self) -> Self;
    /// The identity of [`Compute::max_nan`]: -inf, or `i32::MIN`.
    fn max_identity() -> Self;
    /// Zero.
    fn zero() -> Self;
    /// The value as f64 (exact).
    fn to_f64(self) -> f64;
    /// An f64 rounded to this type (saturating for i32): how the ops turn an f64 argument
    /// (a dropout scale, a clipping norm) into a kernel scalar.
    fn of_f64(v: f64) -> Self;
}

macro_rules! compute_float {
    ($t:ty) => {
        impl Compute for $t {
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            fn sub(a: Self, b: Self) -> Self {
                a - b
            }
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            fn div(a: Self, b: Self) -> Self {
                a / b
            }
            fn fma(alpha: Self, x: Self, y: Self) -> Self {
                alpha.mul_add(x, y)
            }
            fn relu(x: Self) -> Self {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            #[allow(clippy::eq_op)]
            fn max_nan(a: Self, b: Self) -> Self {
                if a > b || a != a {
                    a
                } else {
                    b
                }
            }
            fn max_identity() -> Self {
                <$t>::NEG_INFINITY
            }
            fn zero() -> Self {
                0.0
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn of_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}
compute_float!(f32);
compute_float!(f64);

impl Compute for i32 {
    fn add(a: Self, b: Self) -> Self {
        a.wrapping_add(b)
    }
    fn sub(a: Self, b: Self) -> Self {
        a.wrapping_sub(b)
    }
    fn mul(a: Self, b: Self) -> Self {
        a.wrapping_mul(b)
    }
    fn div(a: Self, b: Self) -> Self {
        if b == 0 {
            0
        } else {
            a.wrapping_div(b)
        }
    }
    fn fma(alpha: Self, x: Self, y: Self) -> Self {
        alpha.wrapping_mul(x).wrapping_add(y)
    }
    fn relu(x: Self) -> Self {
        x.max(0)
    }
    fn max_nan(a: Self, b: Self) -> Self {
        a.max(b)
    }
    fn max_identity() -> Self {
        i32::MIN
    }
    fn zero() -> Self {
        0
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn of_f64(v: f64) -> Self {
        v as i32
    }
}

/// An element type the kernels support: `f32`, `f64`, `i32`, [`half::f16`], [`half::bf16`].
///
/// Sealed: the ops dispatch on [`Element::DTYPE`] with an exhaustive match.
pub trait Element: DeviceRepr + Debug + PartialEq + sealed::Sealed + 'static {
    /// The runtime tag.
    const DTYPE: DType;
    /// The type the kernels compute in and take scalars (`alpha`, fill `value`) as: `f32` for
    /// f32/f16/bf16, `f64` for f64, `i32` for i32. The ops take scalars as this type, so no
    /// precision the kernel offers is lost on the way in. Also the result type of `max`
    /// reductions (f16/bf16 maxima are f32).
    type Scalar: Compute;
    /// The accumulator and result type of `sum`/`mean` reductions: `i64` for i32 (exact), `f32`
    /// for f16/bf16, the type itself for f32/f64.
    type SumAcc: DeviceRepr + Debug + PartialEq + 'static;
    /// Widen to the compute type (exact).
    fn to_scalar(self) -> Self::Scalar;
    /// Round a compute-type value to this type (round to nearest even; identity for f32, f64,
    /// i32), as the kernels store results.
    fn from_scalar(v: Self::Scalar) -> Self;
    /// The value as f64 (exact).
    fn to_f64(self) -> f64 {
        self.to_scalar().to_f64()
    }
    /// An f64 rounded to this type (saturating for i32); handy for test data.
    fn from_f64(v: f64) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    type Scalar = f32;
    type SumAcc = f32;
    fn to_scalar(self) -> f32 {
        self
    }
    fn from_scalar(v: f32) -> f32 {
        v
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    type Scalar = f64;
    type SumAcc = f64;
    fn to_scalar(self) -> f64 {
        self
    }
    fn from_scalar(v: f64) -> f64 {
        v
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
}

impl Element for i32 {
    const DTYPE: DType = DType::I32;
    type Scalar = i32;
    type SumAcc = i64;
    fn to_scalar(self) -> i32 {
        self
    }
    fn from_scalar(v: i32) -> i32 {
        v
    }
    fn from_f64(v: f64) -> i32 {
        v as i32
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    type Scalar = f32;
    type SumAcc = f32;
    fn to_scalar(self) -> f32 {
        self.to_f32()
    }
    fn from_scalar(v: f32) -> f16 {
        f16::from_f32(v)
    }
    fn from_f64(v: f64) -> f16 {
        f16::from_f64(v)
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    type Scalar = f32;
    type SumAcc = f32;
    fn to_scalar(self) -> f32 {
        self.to_f32()
    }
    fn from_scalar(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
    fn from_f64(v: f64) -> bf16 {
        bf16::from_f64(v)
    }
}

/// The floating-point elements (`f32`, `f64`, `f16`, `bf16`): those with a `tanh` kernel.
pub trait Float: Element {
    /// `tanh` computed in the compute type and rounded to this type (the CPU twin of the
    /// kernels' `tanhf`/`tanh`, which agree to within 2 ulp, not bit for bit).
    fn tanh_cpu(self) -> Self;
}

impl Float for f32 {
    fn tanh_cpu(self) -> f32 {
        self.tanh()
    }
}
impl Float for f64 {
    fn tanh_cpu(self) -> f64 {
        self.tanh()
    }
}
impl Float for f16 {
    fn tanh_cpu(self) -> f16 {
        f16::from_f32(self.to_f32().tanh())
    }
}
impl Float for bf16 {
    fn tanh_cpu(self) -> bf16 {
        bf16::from_f32(self.to_f32().tanh())
    }
}
