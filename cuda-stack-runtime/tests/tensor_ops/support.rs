//! What the op tests share: the element types of the kernels, the binary ops, tolerances.

use super::*;

/// Element type of the kernels (`f32`, `f64`, `i32`, `f16`, `bf16`): both traits.
pub(crate) trait K: TensorElement + cuda_stack_kernels::Element {}
impl<T: TensorElement + cuda_stack_kernels::Element> K for T {}

pub(crate) const OPS: [BinaryOp; 4] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];

pub(crate) fn apply<T: TensorElement>(
    op: BinaryOp,
    a: &Tensor<T>,
    b: &Tensor<T>,
) -> Result<Tensor<T>, TensorError> {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a.mul(b),
        BinaryOp::Div => a / b,
    }
}

/// `T`'s dtype tag (through `TensorElement`; `cuda_stack_kernels::Element` has one too).
pub(crate) fn dt<T: TensorElement>() -> DType {
    T::DTYPE
}

/// The unit in the last place of 1.0 for a float dtype.
pub(crate) fn eps(d: DType) -> f64 {
    match d {
        DType::F64 => 2f64.powi(-52),
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => 2f64.powi(-23),
    }
}

/// Tolerance factor of sums for a dtype (f32 accumulation except for f64).
pub(crate) fn sum_tol(d: DType) -> f64 {
    if d == DType::F64 {
        1e-13
    } else {
        1e-5
    }
}
