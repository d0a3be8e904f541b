//! The multi-tensor kernels by dtype (`cuda/multi_tensor.cu`). Their tables travel as
//! by-value parameters whose addresses the launch must track, so the ops launch them through
//! [`cuda_stack_driver::launch::ArgList`] and need only the untyped function of each handle;
//! the typed handles still carry the generator's check of every parameter against the PTX.

use super::unsupported;
use crate::{DType, Element, Error, Kernels, Result};
use cuda_stack_driver::{DeviceRepr, Function};

const WHY: &str = "the multi-tensor fill, scale, sum of squares and Adam exist for f32 and f64";

/// `mt_fill_<dt>(MtTable1, value)`.
pub(crate) fn mt_fill<T: Element>(k: &Kernels) -> Result<&Function> {
    match T::DTYPE {
        DType::F32 => Ok(k.mt_fill_f32()?.function()),
        DType::F64 => Ok(k.mt_fill_f64()?.function()),
        other => Err(unsupported("fill (multi-tensor)", other, WHY)),
    }
}

/// `mt_scale_<dt>(MtTable1, const T* scale)`.
pub(crate) fn mt_scale<T: Element>(k: &Kernels) -> Result<&Function> {
    match T::DTYPE {
        DType::F32 => Ok(k.mt_scale_f32()?.function()),
        DType::F64 => Ok(k.mt_scale_f64()?.function()),
        other => Err(unsupported("scale (multi-tensor)", other, WHY)),
    }
}

/// `mt_sumsq_<dt>(MtTable1, T* partial)`.
pub(crate) fn mt_sumsq<T: Element>(k: &Kernels) -> Result<&Function> {
    match T::DTYPE {
        DType::F32 => Ok(k.mt_sumsq_f32()?.function()),
        DType::F64 => Ok(k.mt_sumsq_f64()?.function()),
        other => Err(unsupported("sum of squares (multi-tensor)", other, WHY)),
    }
}

/// `mt_adam_<dt>(MtAdamTable, const int* steps, T lr, T b1, T b2, T eps, int adamw)`.
pub(crate) fn mt_adam<T: Element>(k: &Kernels) -> Result<&Function> {
    match T::DTYPE {
        DType::F32 => Ok(k.mt_adam_f32()?.function()),
        DType::F64 => Ok(k.mt_adam_f64()?.function()),
        other => Err(unsupported("adam (multi-tensor)", other, WHY)),
    }
}

/// `mt_cast_<a>_<b>(MtTable2)`: f32 ↔ bf16 and f32 ↔ f16 (the mixed-precision pairs),
/// matched on the element types themselves (as [`super::dtype_cast`]), so that
/// `cuda-stack-runtime` can ask for any pair of its dtypes.
pub(crate) fn mt_cast<A: DeviceRepr, B: DeviceRepr>(k: &Kernels) -> Result<&Function> {
    use cuda_stack_driver::half::{bf16, f16};
    use std::any::TypeId;
    let (a, b) = (TypeId::of::<A>(), TypeId::of::<B>());
    let (f32_, f16_, bf16_) = (
        TypeId::of::<f32>(),
        TypeId::of::<f16>(),
        TypeId::of::<bf16>(),
    );
    if (a, b) == (f32_, bf16_) {
        Ok(k.mt_cast_f32_bf16()?.function())
    } else if (a, b) == (bf16_, f32_) {
        Ok(k.mt_cast_bf16_f32()?.function())
    } else if (a, b) == (f32_, f16_) {
        Ok(k.mt_cast_f32_f16()?.function())
    } else if (a, b) == (f16_, f32_) {
        Ok(k.mt_cast_f16_f32()?.function())
    } else {
        Err(Error::Invalid {
            op: "cast (multi-tensor)",
            problem: format!(
                "no multi-tensor conversion from {} to {}: it converts f32 <-> bf16 and \
                 f32 <-> f16; convert other pairs tensor by tensor (ops::cast)",
                std::any::type_name::<A>(),
                std::any::type_name::<B>()
            ),
        })
    }
}
