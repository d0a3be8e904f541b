//! tensor-lite on the GPU: `+ - * /` over broadcasts and strided views, read in place.
//!
//! For every dtype the binary ops claim (f32, f64, i32, f16, bf16) and every op, each case
//! builds its operands as views (transposed, sliced, permuted, expanded, scalars; attention
//! shapes such as `[B, H, N, N] + [B, 1, 1, N]` and `[B, H, N, D] * [1, H, 1, 1]`; empty and
//! odd extents; one walk of 7 dimensions that falls back to copies) and compares the result,
//! exactly, with the reference: each operand's elements in logical order (its `.contiguous()`
//! copy, the strided-copy kernel that `tensor_views` checks against the CPU), broadcast on the
//! CPU and combined with `reference::binary_one` (f16/bf16 computed in f32 and rounded once, i32
//! wrapping, as the kernels do). A second test checks that a broadcast allocates nothing but its
//! output (the peak of the caching allocator), i.e. no operand is materialised.

mod tensor_common;

use cuda_stack_kernels::ops::BinaryOp;
use cuda_stack_kernels::reference;
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::tensor::{broadcast_shapes, Tensor, TensorElement, TensorError};
use cuda_tests::{ensure, gpu};
use tensor_common::*;

fn main() {
    cuda_tests::run(vec![
        gpu("broadcast_and_strided_views_f32", cases::<f32>),
        gpu("broadcast_and_strided_views_f64", cases::<f64>),
        gpu("broadcast_and_strided_views_i32", cases::<i32>),
        gpu("broadcast_and_strided_views_f16", cases::<f16>),
        gpu("broadcast_and_strided_views_bf16", cases::<bf16>),
        gpu(
            "broadcasts_allocate_only_their_output",
            no_materialised_operands,
        ),
    ]);
}

/// Element type of the kernels (`f32`, `f64`, `i32`, `f16`, `bf16`): both traits.
trait K: TensorElement + cuda_stack_kernels::Element {}
impl<T: TensorElement + cuda_stack_kernels::Element> K for T {}

const OPS: [BinaryOp; 4] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];

fn apply<T: TensorElement>(
    op: BinaryOp,
    a: &Tensor<T>,
    b: &Tensor<T>,
) -> Result<Tensor<T>, TensorError> {
    match op {
        BinaryOp::Add => a.add(b),
        BinaryOp::Sub => a.sub(b),
        BinaryOp::Mul => a.mul(b),
        BinaryOp::Div => a.div(b),
    }
}

/// A tensor of `shape` with test values (seeded), as stored (contiguous).
fn stored<T: TensorElement>(shape: &[usize], seed: u64) -> Result<Tensor<T>, TensorError> {
    Tensor::from_slice(&values::<T>(shape.iter().product(), seed), shape)
}

/// The operand pairs: (what, a, b).
type Pair<T> = (&'static str, Tensor<T>, Tensor<T>);

fn pairs<T: TensorElement>() -> Result<Vec<Pair<T>>, TensorError> {
    let s = |shape: &[usize], seed| stored::<T>(shape, seed);
    Ok(vec![
        // Attention shapes.
        (
            "[B,H,N,N] + [B,1,1,N]",
            s(&[2, 3, 5, 7], 1)?,
            s(&[2, 1, 1, 7], 2)?,
        ),
        (
            "[B,H,N,D] * [1,H,1,1]",
            s(&[2, 3, 4, 64], 3)?,
            s(&[1, 3, 1, 1], 4)?,
        ),
        (
            "[B,H,N,N] + [B,1,1,N], odd N",
            s(&[2, 4, 33, 129], 5)?,
            s(&[2, 1, 1, 129], 6)?,
        ),
        // [B, 1, C] against [B, T, C]; [B, T, 1] against [T, C].
        ("[B,1,C] op [B,T,C]", s(&[5, 1, 48], 7)?, s(&[5, 4, 48], 8)?),
        ("[B,T,1] op [T,C]", s(&[3, 6, 1], 9)?, s(&[6, 16], 10)?),
        // A transposed matrix against a bias row, a sliced one against a column.
        ("a^T + row", s(&[31, 33], 11)?.t()?, s(&[31], 12)?),
        (
            "a[:, 3:43] * column",
            s(&[17, 80], 13)?.narrow(1, 3, 40)?,
            s(&[17, 1], 14)?,
        ),
        // A permuted 3-D tensor against a broadcast [4, 1].
        (
            "permute(2, 0, 1) * [4, 1]",
            s(&[4, 6, 8], 15)?.permute(&[2, 0, 1])?,
            s(&[4, 1], 16)?,
        ),
        // An expanded view against a transposed one; both transposed.
        (
            "expand([31, 33]) op a^T",
            s(&[31, 1], 17)?.expand(&[31, 33])?,
            s(&[33, 31], 18)?.t()?,
        ),
        ("a^T op b^T", s(&[64, 48], 19)?.t()?, s(&[64, 48], 20)?.t()?),
        // A scalar (rank 0) against a transposed matrix; the other way round.
        (
            "scalar op a^T",
            Tensor::scalar(values::<T>(1, 21)[0])?,
            s(&[5, 7], 22)?.t()?,
        ),
        (
            "a^T op scalar",
            s(&[7, 5], 23)?.t()?,
            Tensor::scalar(values::<T>(1, 24)[0])?,
        ),
        // Empty results.
        ("[0, 5] + [5]", s(&[0, 5], 25)?, s(&[5], 26)?),
        ("[4, 1, 3] + [0, 1]", s(&[4, 1, 3], 27)?, s(&[0, 1], 28)?),
        // Seven dimensions that do not collapse: the fallback through copies.
        (
            "7 alternating broadcast dims",
            s(&[2, 1, 2, 1, 2, 1, 2], 29)?,
            s(&[1, 3, 1, 3, 1, 3, 1], 30)?,
        ),
        // Past 2^20 elements: the packet loop over many blocks.
        (
            "[4,8,512,72] * [1,8,1,1]",
            s(&[4, 8, 512, 72], 31)?,
            s(&[1, 8, 1, 1], 32)?,
        ),
    ])
}

fn cases<T: K>() -> TestResult {
    for (what, a, b) in pairs::<T>()? {
        let shape = broadcast_shapes("test", a.shape(), b.shape())?;
        // The operands' elements in logical order, broadcast on the CPU.
        let (av, bv) = (a.contiguous()?.to_vec()?, b.contiguous()?.to_vec()?);
        let (ea, eb) = (
            broadcast(&av, a.shape(), &shape),
            broadcast(&bv, b.shape(), &shape),
        );
        for op in OPS {
            let got = apply(op, &a, &b)?;
            let tag = format!("{} {what} {op:?}", <T as TensorElement>::DTYPE);
            ensure!(
                got.shape() == shape.as_slice(),
                "{tag}: shape {:?}",
                got.shape()
            );
            ensure!(got.is_contiguous(), "{tag}: the result is not contiguous");
            let want: Vec<T> = ea
                .iter()
                .zip(&eb)
                .map(|(x, y)| reference::binary_one(op, *x, *y))
                .collect();
            check_exact(&tag, &got.to_vec()?, &want)?; // exact
        }
    }
    Ok(())
}

/// A broadcast whose operands would be materialised at the result's size by the old path
/// (expand + contiguous copies) raises the allocator's peak by its output alone now.
fn no_materialised_operands() -> TestResult {
    let cases: Vec<Pair<f32>> = vec![
        (
            "[B,H,N,N] + [B,1,1,N]",
            stored(&[4, 8, 64, 64], 1)?,
            stored(&[4, 1, 1, 64], 2)?,
        ),
        (
            "a^T + b",
            stored(&[256, 512], 3)?.t()?,
            stored(&[512, 256], 4)?,
        ),
        (
            "[B,1,C] + [B,T,C]",
            stored(&[8, 1, 256], 5)?,
            stored(&[8, 128, 256], 6)?,
        ),
    ];
    for (what, a, b) in cases {
        a.synchronize()?;
        b.synchronize()?;
        let before = cuda_stack_runtime::memory_allocated()?;
        cuda_stack_runtime::reset_peak_stats()?;
        let out = a.add(&b)?;
        out.synchronize()?;
        let peak = cuda_stack_runtime::max_memory_allocated()?;
        let out_bytes = out.numel() * 4;
        // The caching allocator rounds a block up (to 512 bytes, or 2 MiB segments' blocks);
        // one operand at the result's size would add at least out_bytes more.
        ensure!(
            peak - before < out_bytes + out_bytes / 2,
            "{what}: the peak grew by {} bytes for an output of {out_bytes}",
            peak - before
        );
    }
    Ok(())
}
