//! Dtype dispatch, in one place: for each kernel family, one `match` on `T::DTYPE` (written by
//! the `family!` macro from a `dtype => field` list) picks the generated handle and returns it
//! with the generic signature the ops launch with.
//!
//! The generated handles have concrete types (`Kernel<(&DeviceSlice<f32>, …)>`); an op generic
//! over `T: Element` needs `Kernel<(&DeviceSlice<T>, …)>`. When `T::DTYPE` is `F32`, `T` *is*
//! `f32`, so the two types are the same type: [`cast`] checks exactly that with `Any` (no
//! `unsafe`), and fails with an error instead of panicking if a match arm were ever wrong.

use crate::ops::BinaryOp;
use crate::{BinaryStrides, DType, Element, Error, Kernels, Result, StridedLayout};
use cuda_stack_driver::{DeviceSlice, Kernel};
use std::any::Any;

type In<T> = &'static DeviceSlice<T>;
type Out<T> = &'static mut DeviceSlice<T>;
type Scalar<T> = <T as Element>::Scalar;
type SumAcc<T> = <T as Element>::SumAcc;

/// `op(a, b, out, n)`.
pub(crate) type Map2<T> = Kernel<(In<T>, In<T>, Out<T>, u64)>;
/// `op_bcast(a, b, out, outer, inner, a_so, a_si, b_so, b_si)`.
pub(crate) type Bcast<T> = Kernel<(In<T>, In<T>, Out<T>, u64, u64, u64, u64, u64, u64)>;
/// `op_strided(a, b, out, layout)`.
pub(crate) type Strided2<T> = Kernel<(In<T>, In<T>, Out<T>, BinaryStrides)>;
/// `op(x, out, n)`.
pub(crate) type Map1<T> = Kernel<(In<T>, Out<T>, u64)>;
/// `scale(x, out, alpha, n)`.
pub(crate) type Scale<T> = Kernel<(In<T>, Out<T>, Scalar<T>, u64)>;
/// `axpy(alpha, x, y, n)`.
pub(crate) type Axpy<T> = Kernel<(Scalar<T>, In<T>, Out<T>, u64)>;
/// `fill(out, value, n)`.
pub(crate) type Fill<T> = Kernel<(Out<T>, Scalar<T>, u64)>;
/// `matmul(A, B, C, M, N, K)`.
pub(crate) type Matmul<T> = Kernel<(In<T>, In<T>, Out<T>, i32, i32, i32)>;
/// `sgemm(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)` for `T = f32`.
pub(crate) type Sgemm<T> = Kernel<(i32, i32, i32, f32, In<T>, i32, In<T>, i32, f32, Out<T>, i32)>;
/// `reduce_*(in, partial, n)`.
pub(crate) type Partial<T, A> = Kernel<(In<T>, Out<A>, u64)>;
/// `reduce_finalize_{sum,max}(partial, out, num_partials)`.
pub(crate) type Finalize<A> = Kernel<(In<A>, Out<A>, u32)>;
/// `reduce_finalize_mean(partial, out, num_partials, count)`.
pub(crate) type FinalizeMean<A> = Kernel<(In<A>, Out<A>, u32, u64)>;
/// `reduce_rows_*(in, out, rows, cols)`.
pub(crate) type Rows<T, A> = Kernel<(In<T>, Out<A>, i32, i32)>;
/// `reduce_rows_part_*` / `reduce_cols_*(in, out, rows, cols, chunk)`.
pub(crate) type Part<T, A> = Kernel<(In<T>, Out<A>, i32, i32, i32)>;
/// `strided_copy_b*(src, dst, layout, n)`.
pub(crate) type StridedCopy<T> = Kernel<(In<T>, Out<T>, StridedLayout, u64)>;

/// `k` as a `Kernel<B>`, when `B` is its own type (always, when the match arms are right). The
/// ops with their own multi-dtype match (the FP8 casts and GEMM) use it too.
pub(crate) fn cast<A: 'static, B: 'static>(k: &Kernel<A>) -> Result<&Kernel<B>> {
    (k as &dyn Any)
        .downcast_ref::<Kernel<B>>()
        .ok_or_else(|| Error::Invalid {
            op: "dtype dispatch",
            problem: format!(
                "internal error: {k:?} is not a {}",
                std::any::type_name::<B>()
            ),
        })
}

fn unsupported(op: &'static str, dtype: DType, why: &'static str) -> Error {
    Error::Unsupported { op, dtype, why }
}

/// Defines `fn $name<T: Element>(k) -> Result<&$ty>` with one arm per listed dtype (the others
/// are `Unsupported`), and, under `cfg(test)`, a test that each listed field's type is `$ty`
/// for that dtype's `T` — so every arm is checked on the CPU, without loading anything.
macro_rules! family {
    ($name:ident -> $ty:ty; $op:expr, $why:expr; $($dt:ident => $field:ident),+ $(,)?) => {
        pub(crate) fn $name<T: Element>(k: &Kernels) -> Result<&$ty> {
            match T::DTYPE {
                $(DType::$dt => cast(k.$field()?),)+
                #[allow(unreachable_patterns)]
                other => Err(unsupported($op, other, $why)),
            }
        }

        #[cfg(test)]
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn expected<T: Element>() -> std::any::TypeId {
                std::any::TypeId::of::<$ty>()
            }

            #[test]
            fn every_arm_has_the_generic_signature() {
                $(
                    assert_eq!(
                        field_type(Kernels::$field),
                        expected::<elem!($dt)>(),
                        concat!(stringify!($name), ": `", stringify!($field), "` for ", stringify!($dt))
                    );
                )+
            }
        }
    };
}

#[cfg(test)]
macro_rules! elem {
    (F32) => {
        f32
    };
    (F64) => {
        f64
    };
    (I32) => {
        i32
    };
    (F16) => {
        cuda_stack_driver::half::f16
    };
    (BF16) => {
        cuda_stack_driver::half::bf16
    };
}

/// The `TypeId` of a field's handle type, without a `Kernels` value.
#[cfg(test)]
fn field_type<A: 'static>(_: fn(&Kernels) -> Result<&Kernel<A>>) -> std::any::TypeId {
    std::any::TypeId::of::<Kernel<A>>()
}

pub(crate) fn binary<T: Element>(k: &Kernels, op: BinaryOp) -> Result<&Map2<T>> {
    match op {
        BinaryOp::Add => add::<T>(k),
        BinaryOp::Sub => sub::<T>(k),
        BinaryOp::Mul => mul::<T>(k),
        BinaryOp::Div => div::<T>(k),
    }
}

pub(crate) fn binary_broadcast<T: Element>(k: &Kernels, op: BinaryOp) -> Result<&Bcast<T>> {
    match op {
        BinaryOp::Add => add_bcast::<T>(k),
        BinaryOp::Sub => sub_bcast::<T>(k),
        BinaryOp::Mul => mul_bcast::<T>(k),
        BinaryOp::Div => div_bcast::<T>(k),
    }
}

pub(crate) fn binary_strided<T: Element>(k: &Kernels, op: BinaryOp) -> Result<&Strided2<T>> {
    match op {
        BinaryOp::Add => add_strided::<T>(k),
        BinaryOp::Sub => sub_strided::<T>(k),
        BinaryOp::Mul => mul_strided::<T>(k),
        BinaryOp::Div => div_strided::<T>(k),
    }
}

family!(add_strided -> Strided2<T>; "add", "";
    F32 => add_strided_f32, F64 => add_strided_f64, I32 => add_strided_i32,
    F16 => add_strided_f16, BF16 => add_strided_bf16);
family!(sub_strided -> Strided2<T>; "sub", "";
    F32 => sub_strided_f32, F64 => sub_strided_f64, I32 => sub_strided_i32,
    F16 => sub_strided_f16, BF16 => sub_strided_bf16);
family!(mul_strided -> Strided2<T>; "mul", "";
    F32 => mul_strided_f32, F64 => mul_strided_f64, I32 => mul_strided_i32,
    F16 => mul_strided_f16, BF16 => mul_strided_bf16);
family!(div_strided -> Strided2<T>; "div", "";
    F32 => div_strided_f32, F64 => div_strided_f64, I32 => div_strided_i32,
    F16 => div_strided_f16, BF16 => div_strided_bf16);
family!(add_bcast -> Bcast<T>; "add", "";
    F32 => add_bcast_f32, F64 => add_bcast_f64, I32 => add_bcast_i32, F16 => add_bcast_f16,
    BF16 => add_bcast_bf16);
family!(sub_bcast -> Bcast<T>; "sub", "";
    F32 => sub_bcast_f32, F64 => sub_bcast_f64, I32 => sub_bcast_i32, F16 => sub_bcast_f16,
    BF16 => sub_bcast_bf16);
family!(mul_bcast -> Bcast<T>; "mul", "";
    F32 => mul_bcast_f32, F64 => mul_bcast_f64, I32 => mul_bcast_i32, F16 => mul_bcast_f16,
    BF16 => mul_bcast_bf16);
family!(div_bcast -> Bcast<T>; "div", "";
    F32 => div_bcast_f32, F64 => div_bcast_f64, I32 => div_bcast_i32, F16 => div_bcast_f16,
    BF16 => div_bcast_bf16);
family!(add -> Map2<T>; "add", "";
    F32 => add_f32, F64 => add_f64, I32 => add_i32, F16 => add_f16, BF16 => add_bf16);
family!(sub -> Map2<T>; "sub", "";
    F32 => sub_f32, F64 => sub_f64, I32 => sub_i32, F16 => sub_f16, BF16 => sub_bf16);
family!(mul -> Map2<T>; "mul", "";
    F32 => mul_f32, F64 => mul_f64, I32 => mul_i32, F16 => mul_f16, BF16 => mul_bf16);
family!(div -> Map2<T>; "div", "";
    F32 => div_f32, F64 => div_f64, I32 => div_i32, F16 => div_f16, BF16 => div_bf16);
family!(scale -> Scale<T>; "scale", "";
    F32 => scale_f32, F64 => scale_f64, I32 => scale_i32, F16 => scale_f16, BF16 => scale_bf16);
family!(axpy -> Axpy<T>; "axpy", "";
    F32 => axpy_f32, F64 => axpy_f64, I32 => axpy_i32, F16 => axpy_f16, BF16 => axpy_bf16);
family!(relu -> Map1<T>; "relu", "";
    F32 => relu_f32, F64 => relu_f64, I32 => relu_i32, F16 => relu_f16, BF16 => relu_bf16);
family!(tanh -> Map1<T>; "tanh", "tanh exists for f32, f64, f16 and bf16";
    F32 => tanh_f32, F64 => tanh_f64, F16 => tanh_f16, BF16 => tanh_bf16);
family!(fill -> Fill<T>; "fill", "";
    F32 => fill_f32, F64 => fill_f64, I32 => fill_i32, F16 => fill_f16, BF16 => fill_bf16);
family!(matmul_naive -> Matmul<T>; "matmul (naive)", "matmul kernels exist for f32, f64 and i32";
    F32 => matmul_naive_f32, F64 => matmul_naive_f64, I32 => matmul_naive_i32);
family!(matmul_tiled16 -> Matmul<T>; "matmul (tiled16)", "matmul kernels exist for f32, f64 and i32";
    F32 => matmul_tiled16_f32, F64 => matmul_tiled16_f64, I32 => matmul_tiled16_i32);
family!(sgemm_nn -> Sgemm<T>; "matmul (fast)",
    "the fast matmul (sgemm) is f32 only; use Tiled16 for f64 and i32";
    F32 => sgemm_nn);
family!(sum_fast -> Partial<T, SumAcc<T>>; "sum", "";
    F32 => reduce_sum_fast_f32, F64 => reduce_sum_fast_f64, I32 => reduce_sum_fast_i32,
    F16 => reduce_sum_fast_f16, BF16 => reduce_sum_fast_bf16);
family!(sum_tree -> Partial<T, SumAcc<T>>; "sum (tree)",
    "the tree reduction exists for f32 and f64; use ReduceAlgo::Fast";
    F32 => reduce_sum_tree_f32, F64 => reduce_sum_tree_f64);
family!(max_fast -> Partial<T, Scalar<T>>; "max", "";
    F32 => reduce_max_fast_f32, F64 => reduce_max_fast_f64, I32 => reduce_max_fast_i32,
    F16 => reduce_max_fast_f16, BF16 => reduce_max_fast_bf16);
family!(sum_finalize -> Finalize<SumAcc<T>>; "sum", "";
    F32 => reduce_finalize_sum_f32, F64 => reduce_finalize_sum_f64,
    I32 => reduce_finalize_sum_i64, F16 => reduce_finalize_sum_f32,
    BF16 => reduce_finalize_sum_f32);
family!(max_finalize -> Finalize<Scalar<T>>; "max", "";
    F32 => reduce_finalize_max_f32, F64 => reduce_finalize_max_f64,
    I32 => reduce_finalize_max_i32, F16 => reduce_finalize_max_f32,
    BF16 => reduce_finalize_max_f32);
family!(mean_finalize -> FinalizeMean<SumAcc<T>>; "mean",
    "mean exists for f32, f64, f16 and bf16 (for i32, use sum and divide)";
    F32 => reduce_finalize_mean_f32, F64 => reduce_finalize_mean_f64,
    F16 => reduce_finalize_mean_f32, BF16 => reduce_finalize_mean_f32);
family!(rows_sum -> Rows<T, SumAcc<T>>; "rows_sum", "row reductions exist for f32, f64, f16 and bf16";
    F32 => reduce_rows_sum_f32, F64 => reduce_rows_sum_f64,
    F16 => reduce_rows_sum_f16, BF16 => reduce_rows_sum_bf16);
family!(rows_max -> Rows<T, Scalar<T>>; "rows_max", "row reductions exist for f32, f64, f16 and bf16";
    F32 => reduce_rows_max_f32, F64 => reduce_rows_max_f64,
    F16 => reduce_rows_max_f16, BF16 => reduce_rows_max_bf16);

family!(rows_part_sum -> Part<T, SumAcc<T>>; "sum over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_rows_part_sum_f32, F64 => reduce_rows_part_sum_f64,
    F16 => reduce_rows_part_sum_f16, BF16 => reduce_rows_part_sum_bf16);
family!(rows_part_max -> Part<T, Scalar<T>>; "max over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_rows_part_max_f32, F64 => reduce_rows_part_max_f64,
    F16 => reduce_rows_part_max_f16, BF16 => reduce_rows_part_max_bf16);
family!(cols_sum -> Part<T, SumAcc<T>>; "sum over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_cols_sum_f32, F64 => reduce_cols_sum_f64,
    F16 => reduce_cols_sum_f16, BF16 => reduce_cols_sum_bf16);
family!(cols_max -> Part<T, Scalar<T>>; "max over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_cols_max_f32, F64 => reduce_cols_max_f64,
    F16 => reduce_cols_max_f16, BF16 => reduce_cols_max_bf16);
family!(cols16_sum -> Part<T, SumAcc<T>>; "sum over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_cols16_sum_f32, F64 => reduce_cols16_sum_f64,
    F16 => reduce_cols16_sum_f16, BF16 => reduce_cols16_sum_bf16);
family!(cols16_max -> Part<T, Scalar<T>>; "max over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_cols16_max_f32, F64 => reduce_cols16_max_f64,
    F16 => reduce_cols16_max_f16, BF16 => reduce_cols16_max_bf16);
family!(cols_thin_sum -> Rows<T, SumAcc<T>>; "sum over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_cols_thin_sum_f32, F64 => reduce_cols_thin_sum_f64,
    F16 => reduce_cols_thin_sum_f16, BF16 => reduce_cols_thin_sum_bf16);
family!(cols_thin_max -> Rows<T, Scalar<T>>; "max over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_cols_thin_max_f32, F64 => reduce_cols_thin_max_f64,
    F16 => reduce_cols_thin_max_f16, BF16 => reduce_cols_thin_max_bf16);
// The finishing passes run over the accumulator type (f32 partials for f16/bf16).
family!(acc_rows_sum -> Rows<SumAcc<T>, SumAcc<T>>; "sum over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_rows_sum_f32, F64 => reduce_rows_sum_f64,
    F16 => reduce_rows_sum_f32, BF16 => reduce_rows_sum_f32);
family!(acc_rows_max -> Rows<Scalar<T>, Scalar<T>>; "max over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_rows_max_f32, F64 => reduce_rows_max_f64,
    F16 => reduce_rows_max_f32, BF16 => reduce_rows_max_f32);
family!(acc_cols_sum -> Part<SumAcc<T>, SumAcc<T>>; "sum over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_cols_sum_f32, F64 => reduce_cols_sum_f64,
    F16 => reduce_cols_sum_f32, BF16 => reduce_cols_sum_f32);
family!(acc_cols_max -> Part<Scalar<T>, Scalar<T>>; "max over a dimension", "reductions along a dimension exist for f32, f64, f16 and bf16";
    F32 => reduce_cols_max_f32, F64 => reduce_cols_max_f64,
    F16 => reduce_cols_max_f32, BF16 => reduce_cols_max_f32);

/// The byte-moving `strided_copy_b{1,2,4,8}` for any `T` of 1, 2, 4 or 8 bytes (1: FP8).
pub(crate) fn strided_copy<T: cuda_stack_driver::DeviceRepr>(
    k: &Kernels,
) -> Result<StridedCopy<T>> {
    let f = match std::mem::size_of::<T>() {
        1 => k.strided_copy_b1()?.function(),
        2 => k.strided_copy_b2()?.function(),
        4 => k.strided_copy_b4()?.function(),
        8 => k.strided_copy_b8()?.function(),
        size => {
            return Err(Error::Invalid {
                op: "strided_copy",
                problem: format!(
                    "elements of {size} bytes ({}) have no kernel; sizes 1, 2, 4 and 8 do",
                    std::any::type_name::<T>()
                ),
            })
        }
    };
    // SAFETY: strided_copy_bN(const uN* src, uN* dst, StridedLayout layout, unsigned long long n)
    // only moves N-byte elements, and `T` has exactly N bytes (checked above) and is Pod, so
    // `&DeviceSlice<T>` / `&mut DeviceSlice<T>` describe the same memory as the `uN` pointers;
    // `from_function` re-checks the parameter sizes. Device addresses of `T` slices are
    // N-aligned (allocations are 256-byte aligned, views start at whole elements). The op checks
    // that every index the layout reaches lies in `src` and that `dst` holds `n` elements.
    Ok(unsafe { Kernel::from_function(f.clone())? })
}

/// `strided_copy_b16` for any `T` of 2, 4 or 8 bytes, moving 16-byte units: the caller launches
/// it with a layout and a count in 16-byte units ([`crate::ops::strided_copy`] widens a view
/// whose rows are whole, 16-byte aligned vectors) and 16-byte aligned `src` and `dst`.
pub(crate) fn strided_copy_units16<T: cuda_stack_driver::DeviceRepr>(
    k: &Kernels,
) -> Result<StridedCopy<T>> {
    let f = k.strided_copy_b16()?.function();
    // SAFETY: strided_copy_b16(const u64* src, u64* dst, StridedLayout layout, unsigned long
    // long n) only moves 16-byte units through pointers to device memory; `&DeviceSlice<T>` /
    // `&mut DeviceSlice<T>` pass the same device addresses (`T` is Pod), and `from_function`
    // re-checks the parameter sizes. What the launch needs beyond the element kernels (16-byte
    // aligned pointers, a layout and count in 16-byte units inside both buffers) is checked by
    // the op that launches it.
    Ok(unsafe { Kernel::from_function(f.clone())? })
}

/// `transpose_*(in, out, rows, cols)` over any 4-byte element.
pub(crate) type TransposeBits<T> = Kernel<(In<T>, Out<T>, i32, i32)>;

/// The transpose kernel `algo` names, for any `T` of 4 bytes (a transpose only moves values).
pub(crate) fn transpose_bits<T: cuda_stack_driver::DeviceRepr>(
    k: &Kernels,
    algo: crate::ops::TransposeAlgo,
) -> Result<TransposeBits<T>> {
    use crate::ops::TransposeAlgo as A;
    if std::mem::size_of::<T>() != 4 {
        return Err(Error::Invalid {
            op: "transpose",
            problem: format!(
                "the transpose kernels move 4-byte elements; {} has {}",
                std::any::type_name::<T>(),
                std::mem::size_of::<T>()
            ),
        });
    }
    let f = match algo {
        A::Naive => k.transpose_naive()?.function(),
        A::Tiled => k.transpose_tiled()?.function(),
        A::Skinny => k.transpose_skinny()?.function(),
        A::SkinnyV4 => k.transpose_skinny_v4()?.function(),
        // `Aligned` is resolved to a tile by the op (`ops::transpose_aligned_tile`) before this.
        A::Aligned | A::AlignedWith(crate::ops::AlignedTile::T128x64) => {
            k.transpose_tiled_aligned_128x64()?.function()
        }
        A::AlignedWith(crate::ops::AlignedTile::T128x128) => {
            k.transpose_tiled_aligned_128x128()?.function()
        }
        A::TiledPadded | A::Auto => k.transpose_tiled_padded()?.function(),
    };
    // SAFETY: transpose_*(const float* in, float* out, int rows, int cols) only loads and stores
    // whole 4-byte values (no arithmetic on them, so any bit pattern moves unchanged), and `T`
    // has exactly 4 bytes (checked above) and is Pod, so `&DeviceSlice<T>` / `&mut
    // DeviceSlice<T>` describe the same memory as the float pointers; `from_function` re-checks
    // the parameter sizes. The caller checks `in` and `out` against rows · cols.
    Ok(unsafe { Kernel::from_function(f.clone())? })
}

/// `relu_bwd(x, dy, dx, n)` / `tanh_bwd(y, dy, dx, n)`.
pub(crate) type Grad1<T> = Kernel<(In<T>, In<T>, Out<T>, u64)>;
/// `row_softmax(x, y, rows, cols, log)`.
pub(crate) type RowSoftmax<T> = Kernel<(In<T>, Out<T>, i32, i32, i32)>;
/// `row_softmax_bwd(y, dy, dx, rows, cols, log)`.
pub(crate) type RowSoftmaxBwd<T> = Kernel<(In<T>, In<T>, Out<T>, i32, i32, i32)>;
/// `cross_entropy_fwd(x, targets, loss, rows, cols)`.
pub(crate) type CrossEntropyFwd<T> = Kernel<(In<T>, In<i32>, Out<T>, i32, i32)>;
/// `cross_entropy_bwd(x, targets, g, dx, rows, cols, scale)`.
pub(crate) type CrossEntropyBwd<T> = Kernel<(In<T>, In<i32>, In<T>, Out<T>, i32, i32, Scalar<T>)>;
/// `sgd(p, g, n, lr, wd)` (in place).
pub(crate) type Sgd<T> = Kernel<(Out<T>, In<T>, u64, Scalar<T>, Scalar<T>)>;
/// `sgd_momentum(p, g, b, n, lr, momentum, dampening, wd, nesterov, first)` (in place).
pub(crate) type SgdMomentum<T> = Kernel<(
    Out<T>,
    In<T>,
    Out<T>,
    u64,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    i32,
    i32,
)>;
/// `adam(p, g, m, v, steps, index, n, lr, b1, b2, eps, wd, adamw)` (in place).
pub(crate) type Adam<T> = Kernel<(
    Out<T>,
    In<T>,
    Out<T>,
    Out<T>,
    In<i32>,
    i32,
    u64,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    i32,
)>;

const WHY_TRAIN: &str = "training kernels exist for f32 and f64";
const WHY_HALF: &str = "this training kernel exists for f32, f64, f16 and bf16";
family!(relu_bwd -> Grad1<T>; "relu_backward", WHY_HALF;
    F32 => relu_bwd_f32, F64 => relu_bwd_f64, F16 => relu_bwd_f16, BF16 => relu_bwd_bf16);
family!(tanh_bwd -> Grad1<T>; "tanh_backward", WHY_HALF;
    F32 => tanh_bwd_f32, F64 => tanh_bwd_f64, F16 => tanh_bwd_f16, BF16 => tanh_bwd_bf16);
family!(row_softmax -> RowSoftmax<T>; "log_softmax", WHY_HALF;
    F32 => row_softmax_f32, F64 => row_softmax_f64, F16 => row_softmax_f16,
    BF16 => row_softmax_bf16);
family!(row_softmax_bwd -> RowSoftmaxBwd<T>; "softmax_backward", WHY_HALF;
    F32 => row_softmax_bwd_f32, F64 => row_softmax_bwd_f64, F16 => row_softmax_bwd_f16,
    BF16 => row_softmax_bwd_bf16);
family!(cross_entropy_fwd -> CrossEntropyFwd<T>; "cross_entropy", WHY_HALF;
    F32 => cross_entropy_fwd_f32, F64 => cross_entropy_fwd_f64, F16 => cross_entropy_fwd_f16,
    BF16 => cross_entropy_fwd_bf16);
family!(cross_entropy_bwd -> CrossEntropyBwd<T>; "cross_entropy_backward", WHY_HALF;
    F32 => cross_entropy_bwd_f32, F64 => cross_entropy_bwd_f64, F16 => cross_entropy_bwd_f16,
    BF16 => cross_entropy_bwd_bf16);
family!(sgd -> Sgd<T>; "sgd", WHY_TRAIN; F32 => sgd_f32, F64 => sgd_f64);
family!(sgd_momentum -> SgdMomentum<T>; "sgd (momentum)", WHY_TRAIN;
    F32 => sgd_momentum_f32, F64 => sgd_momentum_f64);
family!(adam -> Adam<T>; "adam", WHY_TRAIN; F32 => adam_f32, F64 => adam_f64);

/// `sgd4(p0, g0, …, p3, g3, n0, n1, n2, n3, lr, wd)` (four tensors, in place).
pub(crate) type Sgd4<T> = Kernel<(
    Out<T>,
    In<T>,
    Out<T>,
    In<T>,
    Out<T>,
    In<T>,
    Out<T>,
    In<T>,
    u64,
    u64,
    u64,
    u64,
    Scalar<T>,
    Scalar<T>,
)>;
/// `sgd_momentum4(p0, g0, b0, …, n0..n3, lr, momentum, dampening, wd, nesterov, first)`.
pub(crate) type SgdMomentum4<T> = Kernel<(
    Out<T>,
    In<T>,
    Out<T>,
    Out<T>,
    In<T>,
    Out<T>,
    Out<T>,
    In<T>,
    Out<T>,
    Out<T>,
    In<T>,
    Out<T>,
    u64,
    u64,
    u64,
    u64,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    i32,
    i32,
)>;
/// `adam4(p0, g0, m0, v0, …, n0..n3, steps, lr, b1, b2, eps, wd, adamw)`.
pub(crate) type Adam4<T> = Kernel<(
    Out<T>,
    In<T>,
    Out<T>,
    Out<T>,
    Out<T>,
    In<T>,
    Out<T>,
    Out<T>,
    Out<T>,
    In<T>,
    Out<T>,
    Out<T>,
    Out<T>,
    In<T>,
    Out<T>,
    Out<T>,
    u64,
    u64,
    u64,
    u64,
    In<i32>,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    Scalar<T>,
    i32,
)>;
family!(sgd4 -> Sgd4<T>; "sgd (4 tensors)", WHY_TRAIN; F32 => sgd4_f32, F64 => sgd4_f64);
family!(sgd_momentum4 -> SgdMomentum4<T>; "sgd (momentum, 4 tensors)", WHY_TRAIN;
    F32 => sgd_momentum4_f32, F64 => sgd_momentum4_f64);
family!(adam4 -> Adam4<T>; "adam (4 tensors)", WHY_TRAIN; F32 => adam4_f32, F64 => adam4_f64);

/// `cast_{a}_{b}(x, out, n)`.
pub(crate) type Cast<A, B> = Kernel<(In<A>, Out<B>, u64)>;

/// The conversion kernel from `A` to `B` (matched on the element types themselves, so that
/// `cuda-stack-runtime` can ask for any pair of its dtypes).
pub(crate) fn dtype_cast<A: cuda_stack_driver::DeviceRepr, B: cuda_stack_driver::DeviceRepr>(
    k: &Kernels,
) -> Result<&Cast<A, B>> {
    use cuda_stack_driver::half::{bf16, f16};
    use std::any::TypeId;
    let (a, b) = (TypeId::of::<A>(), TypeId::of::<B>());
    let (f32_, f64_, f16_, bf16_, i32_) = (
        TypeId::of::<f32>(),
        TypeId::of::<f64>(),
        TypeId::of::<f16>(),
        TypeId::of::<bf16>(),
        TypeId::of::<i32>(),
    );
    let pairs: [(TypeId, TypeId, &dyn Any); 12] = [
        (f32_, f64_, k.cast_f32_f64()?),
        (f64_, f32_, k.cast_f64_f32()?),
        (f32_, f16_, k.cast_f32_f16()?),
        (f16_, f32_, k.cast_f16_f32()?),
        (f32_, bf16_, k.cast_f32_bf16()?),
        (bf16_, f32_, k.cast_bf16_f32()?),
        (f16_, bf16_, k.cast_f16_bf16()?),
        (bf16_, f16_, k.cast_bf16_f16()?),
        (f32_, i32_, k.cast_f32_i32()?),
        (i32_, f32_, k.cast_i32_f32()?),
        (f64_, i32_, k.cast_f64_i32()?),
        (i32_, f64_, k.cast_i32_f64()?),
    ];
    let found = pairs
        .iter()
        .find(|(x, y, _)| *x == a && *y == b)
        .and_then(|(_, _, kernel)| kernel.downcast_ref::<Cast<A, B>>());
    found.ok_or_else(|| Error::Invalid {
        op: "cast",
        problem: format!(
            "no conversion kernel from {} to {}: the kernels convert f32 <-> f64/f16/bf16/i32, \
             f16 <-> bf16 and f64 <-> i32 (each rounding once); cast through f32 for the others",
            std::any::type_name::<A>(),
            std::any::type_name::<B>()
        ),
    })
}

mod attention;
pub(crate) use attention::*;

mod transformer;
pub(crate) use transformer::*;

mod multi_tensor;
pub(crate) use multi_tensor::*;
