//! `ops::binary_strided` (the `<op>_strided_<dt>` kernels) against
//! `reference::binary_strided`, exactly (f16/bf16 computed in f32 and rounded once, i32
//! wrapping: the reference does the same), for every dtype and op, over broadcasts (bias rows,
//! columns, scalars, outer products, `[B, 1, C]` against `[B, T, C]`, attention shapes),
//! transposed, sliced, stepped and flipped views, size-1, odd, prime and empty extents; each at
//! a 16-byte aligned buffer start (packet paths) and one element in (scalar paths), with the
//! output poisoned first and the element in front of it checked untouched. Then the argument
//! checks: views outside their buffers, different shapes, too many dimensions, a short output.
//!
//! GPU tests report as ignored where there is no GPU.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceBuffer, DeviceRepr, Stream};
use cuda_stack_kernels::ops::{self, BinaryOp};
use cuda_stack_kernels::{reference, BinaryStrides, Element, Error, Kernels, StridedLayout};
use cuda_tests::{cpu, ensure, gpu, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const OPS: [BinaryOp; 4] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];

/// Test values: floats in [-4, 4) (no zero divisors in practice, and exact either way: the
/// reference divides the same way), i32 over [-1000, 1000] with a few zeros.
trait Gen: Element {
    fn gen(i: u64) -> Self;
}

fn hash(i: u64) -> u64 {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D;
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 32)
}

macro_rules! gen_float {
    ($($t:ty),*) => {$(
        impl Gen for $t {
            fn gen(i: u64) -> Self {
                <$t as Element>::from_f64(((hash(i) >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0)
            }
        }
    )*};
}
gen_float!(f32, f64, f16, bf16);

impl Gen for i32 {
    fn gen(i: u64) -> Self {
        (hash(i) % 2001) as i32 - 1000
    }
}

/// One operand: a contiguous buffer of `stored` elements (after `off` padding elements) read
/// through `view` (its offset counts from the padded buffer's start).
struct Operand<T> {
    data: Vec<T>,
    view: StridedLayout,
}

/// An operand whose own shape is `dims` (right-aligned against `out`; 1 where broadcast),
/// stored contiguously in the axis order `perm` (a permutation of its dims: `[1, 0]` stores
/// it transposed), its last dimension stepped by `step` (a strided slice), its first dimension
/// flipped when `flip`, behind `off` padding elements.
fn operand<T: Gen>(
    out: &[usize],
    dims: &[usize],
    perm: &[usize],
    step: usize,
    flip: bool,
    off: usize,
    seed: u64,
) -> Operand<T> {
    let r = dims.len();
    // The stored tensor: the view's dims in `perm` order, the last view dim `step` times longer.
    let mut own = dims.to_vec();
    if let Some(l) = own.last_mut() {
        *l = (*l * step).max(*l);
    }
    let stored: Vec<usize> = perm.iter().map(|&p| own[p]).collect();
    let mut st = vec![1isize; r];
    for d in (0..r.saturating_sub(1)).rev() {
        st[d] = st[d + 1] * stored[d + 1] as isize;
    }
    // Strides of the view's own dims.
    let mut vs = vec![0isize; r];
    for (i, &p) in perm.iter().enumerate() {
        vs[p] = st[i];
    }
    if let Some(l) = vs.last_mut() {
        *l *= step as isize;
    }
    let mut offset = off as isize;
    if flip && r > 0 && dims[0] > 1 {
        offset += (dims[0] as isize - 1) * vs[0];
        vs[0] = -vs[0];
    }
    // Broadcast against `out`: missing leading dims and size-1 dims read with stride 0.
    let ro = out.len();
    let strides: Vec<isize> = (0..ro)
        .map(|i| match (i + r).checked_sub(ro) {
            Some(j) if dims[j] != 1 => vs[j],
            _ => 0,
        })
        .collect();
    let n: usize = stored.iter().product::<usize>() + off;
    let data = (0..n as u64)
        .map(|i| T::gen(seed * 1_000_003 + i))
        .collect();
    let view = StridedLayout::new(out, &strides, offset as usize).expect("a valid test view");
    Operand { data, view }
}

fn setup() -> Res<(cuda_stack_driver::Context, Stream, std::sync::Arc<Kernels>)> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    Ok((ctx, s, k))
}

/// `off + n` elements of 0xFF bytes (NaN for floats).
fn poisoned<T: DeviceRepr>(s: &Stream, n: usize, off: usize) -> Res<DeviceBuffer<T>> {
    let mut b = s.alloc_zeros::<T>(n + off)?;
    s.memset_bytes(&mut b, 0xFF)?;
    Ok(b)
}

fn same<T: Element>(a: T, b: T) -> bool {
    let (x, y) = (a.to_f64(), b.to_f64());
    x == y || (x.is_nan() && y.is_nan())
}

/// An operand spec: (own dims, storage order, step of the last dim, flip the first dim).
type Spec = (&'static [usize], &'static [usize], usize, bool);

/// (output shape, a, b).
const CASES: &[(&[usize], Spec, Spec)] = &[
    // Attention shapes: [B, H, N, N] + [B, 1, 1, N], [B, H, N, D] * [1, H, 1, 1].
    (
        &[2, 3, 5, 7],
        (&[2, 3, 5, 7], &[0, 1, 2, 3], 1, false),
        (&[2, 1, 1, 7], &[0, 1, 2, 3], 1, false),
    ),
    (
        &[2, 3, 4, 64],
        (&[2, 3, 4, 64], &[0, 1, 2, 3], 1, false),
        (&[1, 3, 1, 1], &[0, 1, 2, 3], 1, false),
    ),
    (
        &[3, 4, 129, 128],
        (&[3, 4, 129, 128], &[0, 1, 2, 3], 1, false),
        (&[3, 1, 1, 128], &[0, 1, 2, 3], 1, false),
    ),
    // Bias row, column, scalar, outer product (both ways round).
    (
        &[1025, 24],
        (&[1025, 24], &[0, 1], 1, false),
        (&[24], &[0], 1, false),
    ),
    (
        &[33, 1025],
        (&[33, 1], &[0, 1], 1, false),
        (&[33, 1025], &[0, 1], 1, false),
    ),
    (&[7, 9], (&[], &[], 1, false), (&[7, 9], &[0, 1], 1, false)),
    (
        &[31, 40],
        (&[31, 1], &[0, 1], 1, false),
        (&[1, 40], &[0, 1], 1, false),
    ),
    // [B, 1, C] against [B, T, C], and [B, T, 1] against [1, T, C].
    (
        &[5, 4, 48],
        (&[5, 1, 48], &[0, 1, 2], 1, false),
        (&[5, 4, 48], &[0, 1, 2], 1, false),
    ),
    (
        &[3, 6, 16],
        (&[3, 6, 1], &[0, 1, 2], 1, false),
        (&[6, 16], &[0, 1], 1, false),
    ),
    // Transposed operands, with and without a broadcast.
    (
        &[33, 31],
        (&[33, 31], &[1, 0], 1, false),
        (&[33, 31], &[0, 1], 1, false),
    ),
    (
        &[64, 64],
        (&[64, 64], &[1, 0], 1, false),
        (&[64, 64], &[1, 0], 1, false),
    ),
    (
        &[4, 6, 8],
        (&[4, 6, 8], &[2, 0, 1], 1, false),
        (&[6, 1], &[1, 0], 1, false),
    ),
    // Stepped (sliced) and flipped views.
    (
        &[17, 40],
        (&[17, 40], &[0, 1], 2, false),
        (&[40], &[0], 1, false),
    ),
    (
        &[16, 32],
        (&[16, 32], &[0, 1], 1, true),
        (&[16, 32], &[0, 1], 3, true),
    ),
    // Size-1 and prime extents, a 6-dimensional walk that does not collapse.
    (
        &[1, 5, 1, 3, 1],
        (&[1, 5, 1, 3, 1], &[0, 1, 2, 3, 4], 1, false),
        (&[3, 1], &[0, 1], 1, false),
    ),
    (
        &[2, 3, 2, 3, 2, 3],
        (&[2, 1, 2, 1, 2, 1], &[0, 1, 2, 3, 4, 5], 1, false),
        (&[3, 1, 3, 1, 3], &[0, 1, 2, 3, 4], 1, false),
    ),
    // One large case past 2^20 elements (packet loop over many blocks).
    (
        &[4, 8, 512, 72],
        (&[4, 8, 512, 72], &[0, 1, 2, 3], 1, false),
        (&[1, 8, 1, 1], &[0, 1, 2, 3], 1, false),
    ),
    // Empty results.
    (
        &[0, 5],
        (&[0, 5], &[0, 1], 1, false),
        (&[5], &[0], 1, false),
    ),
    (
        &[4, 0, 3],
        (&[4, 1, 3], &[0, 1, 2], 1, false),
        (&[0, 1], &[0, 1], 1, false),
    ),
];

fn strided_all<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for (ci, &(out, (da, pa, sa, fa), (db, pb, sb, fb))) in CASES.iter().enumerate() {
        let n: usize = out.iter().product();
        for off in [0usize, 1] {
            let a = operand::<T>(out, da, pa, sa, fa, off, 2 * ci as u64);
            let b = operand::<T>(out, db, pb, sb, fb, off, 2 * ci as u64 + 1);
            let (ga, gb) = (s.clone_htod(&a.data)?, s.clone_htod(&b.data)?);
            let want_views =
                reference::binary_strided(BinaryOp::Add, &a.data, &a.view, &b.data, &b.view);
            ensure!(
                want_views.is_some(),
                "case {ci}: the test views are invalid"
            );
            for op in OPS {
                let want = reference::binary_strided(op, &a.data, &a.view, &b.data, &b.view)
                    .ok_or("reference")?;
                let mut o = poisoned::<T>(&s, n, off)?;
                ops::binary_strided(
                    &k,
                    &s,
                    op,
                    &ga,
                    &a.view,
                    &gb,
                    &b.view,
                    &mut o.slice_mut(off..)?,
                )?;
                let all = s.clone_dtoh(&o)?;
                let what = format!("{op:?}<{}> {out:?} case {ci} off={off}", T::DTYPE);
                let front: &[u8] = cuda_stack_driver::bytemuck::cast_slice(&all[..off]);
                ensure!(
                    front.iter().all(|&b| b == 0xFF),
                    "{what}: the element in front of the output was overwritten"
                );
                let got = &all[off..];
                ensure!(got.len() == want.len(), "{what}: length");
                if let Some(i) = (0..got.len()).find(|&i| !same(got[i], want[i])) {
                    return Err(format!(
                        "{what}: first difference at {i}: got {:?}, expected {:?}",
                        got[i], want[i]
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

fn argument_checks() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let buf = s.clone_htod(&[1.0f32; 12])?;
    let mut out = s.alloc_zeros::<f32>(12)?;
    let full = StridedLayout::new(&[3, 4], &[4, 1], 0).ok_or("layout")?;
    // A view one element past its buffer.
    let past = StridedLayout::new(&[3, 4], &[4, 1], 1).ok_or("layout")?;
    let e =
        ops::binary_strided(&k, &s, BinaryOp::Add, &buf, &full, &buf, &past, &mut out).unwrap_err();
    ensure!(matches!(e, Error::Shape { what: "b", .. }), "past: {e}");
    // Different shapes.
    let other = StridedLayout::new(&[4, 3], &[3, 1], 0).ok_or("layout")?;
    let e = ops::binary_strided(&k, &s, BinaryOp::Add, &buf, &full, &buf, &other, &mut out)
        .unwrap_err();
    ensure!(matches!(e, Error::Invalid { .. }), "shapes: {e}");
    // A short output.
    let mut short = s.alloc_zeros::<f32>(11)?;
    let e = ops::binary_strided(&k, &s, BinaryOp::Add, &buf, &full, &buf, &full, &mut short)
        .unwrap_err();
    ensure!(matches!(e, Error::Length { .. }), "short output: {e}");
    // Seven dimensions that do not collapse.
    let shape = [2, 2, 2, 2, 2, 2, 2];
    let a7 = StridedLayout::new(&shape, &[0, 4, 0, 2, 0, 1, 0], 0).ok_or("layout")?;
    let b7 = StridedLayout::new(&shape, &[8, 0, 4, 0, 2, 0, 1], 0).ok_or("layout")?;
    let big = s.clone_htod(&[1.0f32; 16])?;
    let mut o7 = s.alloc_zeros::<f32>(128)?;
    ensure!(!ops::binary_strided_fits(&a7, &b7), "7 dims must not fit");
    let e = ops::binary_strided(&k, &s, BinaryOp::Add, &big, &a7, &big, &b7, &mut o7).unwrap_err();
    ensure!(matches!(e, Error::Invalid { .. }), "7 dims: {e}");
    Ok(())
}

/// The plan's struct has the C layout the kernel reads (also checked by `gen-ptx`'s manifest).
fn struct_layout() -> TestResult {
    ensure!(std::mem::size_of::<BinaryStrides>() == 232, "size");
    let p = BinaryStrides {
        units: 7,
        ..cuda_stack_driver::bytemuck::Zeroable::zeroed()
    };
    let bytes: &[u8] = cuda_stack_driver::bytemuck::bytes_of(&p);
    ensure!(bytes[216] == 7, "units at offset 216");
    Ok(())
}

/// Every test view lies inside its buffer, and every case fits the kernels (on the CPU, so a
/// broken case shows up without a GPU).
fn cases_are_valid() -> TestResult {
    for (ci, &(out, (da, pa, sa, fa), (db, pb, sb, fb))) in CASES.iter().enumerate() {
        for off in [0usize, 1] {
            let a = operand::<f32>(out, da, pa, sa, fa, off, 1);
            let b = operand::<f32>(out, db, pb, sb, fb, off, 2);
            let r = reference::binary_strided(BinaryOp::Add, &a.data, &a.view, &b.data, &b.view);
            ensure!(
                r.is_some(),
                "case {ci} off={off}: a view reaches outside its buffer"
            );
            ensure!(
                ops::binary_strided_fits(&a.view, &b.view),
                "case {ci}: more than 6 dimensions after collapsing"
            );
        }
    }
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        cpu("binary_strides_struct_layout", struct_layout),
        cpu("binary_strided_test_cases_are_valid", cases_are_valid),
        gpu("binary_strided_f32", strided_all::<f32>),
        gpu("binary_strided_f64", strided_all::<f64>),
        gpu("binary_strided_i32", strided_all::<i32>),
        gpu("binary_strided_f16", strided_all::<f16>),
        gpu("binary_strided_bf16", strided_all::<bf16>),
        gpu("binary_strided_argument_checks", argument_checks),
    ]);
}
