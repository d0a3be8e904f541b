//! Element types NCCL reduces and moves, and its reduction operators.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::DeviceRepr;
use cuda_stack_sys::nccl_types::{ncclDataType_t as D, ncclRedOp_t};

mod sealed {
    pub trait Sealed {}
}

/// An element type NCCL knows (`ncclDataType_t`): `i8`, `u8`, `i32`, `u32`, `i64`, `u64`,
/// `f16`, `bf16`, `f32`, `f64`. Sealed: NCCL's list is fixed.
pub trait NcclType: DeviceRepr + sealed::Sealed {
    /// NCCL's name for it.
    const DTYPE: D;
    /// The Rust name, for messages.
    const NAME: &'static str;
}

macro_rules! nccl_type {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl NcclType for $t {
            const DTYPE: D = D::$d;
            const NAME: &'static str = stringify!($t);
        }
    )*};
}

nccl_type!(
    i8 => ncclInt8,
    u8 => ncclUint8,
    i32 => ncclInt32,
    u32 => ncclUint32,
    i64 => ncclInt64,
    u64 => ncclUint64,
    f16 => ncclFloat16,
    bf16 => ncclBfloat16,
    f32 => ncclFloat32,
    f64 => ncclFloat64,
);

/// A reduction (`ncclRedOp_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Average: the sum divided by the number of ranks (NCCL ≥ 2.10; for integers NCCL divides
    /// the integer sum).
    Avg,
}

impl ReduceOp {
    /// NCCL's value.
    pub fn raw(self) -> ncclRedOp_t {
        match self {
            ReduceOp::Sum => ncclRedOp_t::ncclSum,
            ReduceOp::Prod => ncclRedOp_t::ncclProd,
            ReduceOp::Max => ncclRedOp_t::ncclMax,
            ReduceOp::Min => ncclRedOp_t::ncclMin,
            ReduceOp::Avg => ncclRedOp_t::ncclAvg,
        }
    }

    /// Every operator.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Avg,
    ];
}
