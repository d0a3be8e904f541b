//! [`TensorElement`] for the FP8 types ([`F8E4M3`], [`F8E5M2`] of the `float8` crate): storage
//! only. Views, `contiguous`, `to_vec`, `Display`, `zeros` and `full` work as for every dtype;
//! arithmetic does not exist in FP8 (every other dispatch entry is the trait's default,
//! [`TensorError::UnsupportedDType`](super::TensorError::UnsupportedDType)). What FP8 tensors
//! are for — scaled casts from and to f32/f16/bf16, amax, and the FP8 GEMMs — is in
//! `ops/fp8.rs` ([`Tensor::to_fp8`](super::Tensor::to_fp8) and friends).

use super::dtype::{DType, TensorElement};
use super::error::Result;
use cuda_stack_driver::float8::{F8E4M3, F8E5M2};

macro_rules! fp8_element {
    ($t:ty, $tag:ident) => {
        impl TensorElement for $t {
            const DTYPE: DType = DType::$tag;
            type Scalar = f32;
            type Sum = $t;
            type Max = $t;
            type SumAcc = $t;
            type MaxAcc = $t;
            fn round_sum(t: super::Tensor<$t>) -> Result<super::Tensor<$t>> {
                Ok(t)
            }
            fn round_max(t: super::Tensor<$t>) -> Result<super::Tensor<$t>> {
                Ok(t)
            }
            fn to_f64(self) -> f64 {
                <$t>::to_f64(&self)
            }
            /// Rounded to nearest even and saturated to the largest finite value (NaN kept):
            /// the FP8 cast kernels' conversion.
            fn from_f64(v: f64) -> $t {
                <$t>::from_f64(v)
            }
            fn to_i64(self) -> Option<i64> {
                None
            }
            fn scalar_from_f64(v: f64) -> f32 {
                v as f32
            }
        }
    };
}

fp8_element!(F8E4M3, F8E4M3);
fp8_element!(F8E5M2, F8E5M2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_sizes_and_saturating_conversion() {
        assert_eq!(<F8E4M3 as TensorElement>::DTYPE, DType::F8E4M3);
        assert_eq!(DType::F8E5M2.size(), 1);
        assert_eq!(DType::F8E4M3.torch_name(), "torch.float8_e4m3fn");
        assert!(DType::F8E4M3.is_float());
        assert_eq!(<F8E4M3 as TensorElement>::from_f64(1000.0).to_f64(), 448.0);
        assert_eq!(<F8E5M2 as TensorElement>::from_f64(1e6).to_f64(), 57344.0);
        assert!(<F8E4M3 as TensorElement>::from_f64(f64::NAN)
            .to_f64()
            .is_nan());
        assert_eq!(TensorElement::to_i64(F8E4M3::from_f64(2.0)), None);
    }
}
