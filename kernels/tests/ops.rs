//! Every op of `cuda_stack_kernels::ops` against its CPU twin in `cuda_stack_kernels::reference`.
//!
//! GPU tests are ignored where there is no GPU. Each test runs its op for the sizes in [`SIZES`]
//! (0, 1, warp edges, block edges, primes, and one large size), on slices that start at element
//! 0 and at element 1 of their buffer (so 16-byte vector paths must fall back), with every output
//! poisoned (0xFF bytes: NaN for floats) before the run, and checks that the poisoned element in
//! front of each output view is still untouched.
//!
//! Tolerances (stated again at each check):
//! - exact (NaN matches NaN): copies, transposes, strided copies, integer ops, `+ - * /`, scale,
//!   axpy, relu, fill (all dtypes: f16/bf16 are computed in f32 and rounded once, like the
//!   reference), bias_relu forward and backward, matmul and sgemm (FMA in increasing k), max
//!   reductions, i32 sums, Philox words and uniform floats;
//! - tanh: 4 ulp for f32/f64 (CUDA ≤ 2 ulp, CPU libm ≤ 1 ulp, plus rounding), 1 ulp for f16/bf16;
//! - sums and means: f32 (and f16/bf16 with f32 accumulation) within 1e-6 · Σ|x| of the f64
//!   reference, f64 within 1e-13 · Σ|x| (divided by n for means);
//! - softmax: 1e-6 absolute (outputs are ≤ 1);
//! - fill_normal: 4e-6 relative + 1e-6 absolute.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{Context, DeviceBuffer, DeviceRepr, DeviceSlice, LaunchConfig, Stream};
use cuda_stack_kernels::ops::{
    self, AlignedTile, BinaryOp, MatmulAlgo, ReduceAlgo, SoftmaxAlgo, Transpose, TransposeAlgo,
};
use cuda_stack_kernels::{reference, DType, Element, Error, Float, Kernels, StridedLayout};
use cuda_tests::{cpu, ensure, gpu, TestResult};
use std::sync::Arc;

/// 1-D sizes every elementwise op and reduction runs.
const SIZES: &[usize] = &[0, 1, 31, 32, 33, 1023, 1025, 4099, 65537, (1 << 20) + 3];
/// View offsets: 0 (aligned, vector paths) and 1 (misaligned, scalar fallbacks).
const OFFSETS: &[usize] = &[0, 1];

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn setup() -> Res<(Context, Stream, Arc<Kernels>)> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    Ok((ctx, s, k))
}

// ---------------------------------------------------------------------------------------------
// Test data and comparisons.

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64) - 1.0
    }
}

/// Test values per dtype.
trait Gen: Element {
    /// A random value: floats in [-4, 4), i32 over its whole range.
    fn gen(rng: &mut Rng) -> Self;
    /// A small random value: floats in [-1, 1), i32 in [-1000, 1000].
    fn small(rng: &mut Rng) -> Self;
    /// An f64 as the kernels' scalar type.
    fn scalar(v: f64) -> Self::Scalar;
    /// The accumulator value as f64.
    fn acc_f64(v: Self::SumAcc) -> f64;
}

macro_rules! gen_float {
    ($t:ty, $scalar:ty) => {
        impl Gen for $t {
            fn gen(rng: &mut Rng) -> Self {
                <$t>::from_f64(4.0 * rng.unit())
            }
            fn small(rng: &mut Rng) -> Self {
                <$t>::from_f64(rng.unit())
            }
            fn scalar(v: f64) -> $scalar {
                v as $scalar
            }
            fn acc_f64(v: Self::SumAcc) -> f64 {
                v as f64
            }
        }
    };
}
gen_float!(f32, f32);
gen_float!(f64, f64);
gen_float!(f16, f32);
gen_float!(bf16, f32);

impl Gen for i32 {
    fn gen(rng: &mut Rng) -> Self {
        rng.next_u64() as i32
    }
    fn small(rng: &mut Rng) -> Self {
        (rng.next_u64() % 2001) as i32 - 1000
    }
    fn scalar(v: f64) -> i32 {
        v as i32
    }
    fn acc_f64(v: i64) -> f64 {
        v as f64
    }
}

fn data<T: Gen>(seed: u64, n: usize) -> Vec<T> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| T::gen(&mut rng)).collect()
}

fn small_data<T: Gen>(seed: u64, n: usize) -> Vec<T> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| T::small(&mut rng)).collect()
}

/// `data` on the device behind `off` extra elements (view it with `.slice(off..)`).
fn upload<T: DeviceRepr>(s: &Stream, data: &[T], off: usize) -> Res<DeviceBuffer<T>> {
    let mut v: Vec<T> = vec![T::zeroed(); off];
    v.extend_from_slice(data);
    Ok(s.clone_htod(&v)?)
}

/// `off + n` elements of 0xFF bytes (NaN for floats).
fn poisoned<T: DeviceRepr>(s: &Stream, n: usize, off: usize) -> Res<DeviceBuffer<T>> {
    let mut b = s.alloc_zeros::<T>(n + off)?;
    s.memset_bytes(&mut b, 0xFF)?;
    Ok(b)
}

/// The view's elements, after checking that the `off` elements in front are still poison.
fn download<T: DeviceRepr>(s: &Stream, buf: &DeviceSlice<T>, off: usize) -> Res<Vec<T>> {
    let all = s.clone_dtoh(buf)?;
    let front: &[u8] = bytemuck_bytes(&all[..off]);
    ensure!(
        front.iter().all(|&b| b == 0xFF),
        "an element in front of the output view was overwritten"
    );
    Ok(all[off..].to_vec())
}

fn bytemuck_bytes<T: DeviceRepr>(v: &[T]) -> &[u8] {
    cuda_stack_driver::bytemuck::cast_slice(v)
}

fn same<T: Element>(a: T, b: T) -> bool {
    let (x, y) = (a.to_f64(), b.to_f64());
    x == y || (x.is_nan() && y.is_nan())
}

/// Exact equality (NaN matches NaN, -0 matches +0).
fn check_exact<T: Element>(what: &str, got: &[T], want: &[T]) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} results, expected {}",
        got.len(),
        want.len()
    );
    let bad: Vec<usize> = (0..got.len()).filter(|&i| !same(got[i], want[i])).collect();
    if let Some(&i) = bad.first() {
        return Err(format!(
            "{what}: {} of {} differ; first at {i}: got {:?}, expected {:?}",
            bad.len(),
            got.len(),
            got[i],
            want[i]
        )
        .into());
    }
    Ok(())
}

/// Exact equality for plain bit types (u32 and the like).
fn check_bits<T: DeviceRepr + PartialEq + std::fmt::Debug>(
    what: &str,
    got: &[T],
    want: &[T],
) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} results, expected {}",
        got.len(),
        want.len()
    );
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        return Err(format!(
            "{what}: first difference at {i}: got {:?}, expected {:?}",
            got[i], want[i]
        )
        .into());
    }
    Ok(())
}

/// One unit in the last place of `x` in `dtype`.
fn ulp(dtype: DType, x: f64) -> f64 {
    let (mant, emin) = match dtype {
        DType::F32 => (23, -126),
        DType::F64 => (52, -1022),
        DType::F16 => (10, -14),
        DType::BF16 => (7, -126),
        DType::F8E4M3 => (3, -6),
        DType::F8E5M2 => (2, -14),
        DType::I32 => return 1.0,
    };
    let e = if x == 0.0 {
        emin
    } else {
        (x.abs().log2().floor() as i32).max(emin)
    };
    2f64.powi(e - mant)
}

/// Within `ulps` units in the last place of `T` (NaN matches NaN).
fn check_ulps<T: Element>(what: &str, got: &[T], want: &[T], ulps: f64) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} results, expected {}",
        got.len(),
        want.len()
    );
    for i in 0..got.len() {
        let (g, w) = (got[i].to_f64(), want[i].to_f64());
        if g.is_nan() && w.is_nan() {
            continue;
        }
        let tol = ulps * ulp(T::DTYPE, w);
        ensure!(
            (g - w).abs() <= tol,
            "{what}: at {i}: got {g}, expected {w} (tolerance {ulps} ulp = {tol:e})"
        );
    }
    Ok(())
}

/// `|got - want| <= tol(i)` (NaN matches NaN).
fn check_close(what: &str, got: &[f64], want: &[f64], tol: impl Fn(usize) -> f64) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} results, expected {}",
        got.len(),
        want.len()
    );
    for i in 0..got.len() {
        let (g, w) = (got[i], want[i]);
        if g.is_nan() && w.is_nan() {
            continue;
        }
        ensure!(
            (g - w).abs() <= tol(i),
            "{what}: at {i}: got {g}, expected {w} (tolerance {:e})",
            tol(i)
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// CPU-only tests.

fn philox_known_answer() -> TestResult {
    // Random123's known-answer test for Philox4x32-10 (counter 0, key 0).
    ensure!(
        reference::philox4x32_10(0, 0) == [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
        "Philox4x32-10 KAT mismatch: {:08x?}",
        reference::philox4x32_10(0, 0)
    );
    Ok(())
}

fn manifest_and_ptx_table() -> TestResult {
    // Every entry of the manifest has a handle, and nothing else does: kernels.json lists each
    // file once under "files" and each kernel once under "kernels", both with a "source".
    let manifest = include_str!("../kernels.json");
    let entries =
        manifest.matches("\"source\": \"cuda/").count() - cuda_stack_kernels::PTX_FILES.len();
    ensure!(
        cuda_stack_kernels::KERNEL_NAMES.len() == entries,
        "{} handles for {entries} manifest entries",
        cuda_stack_kernels::KERNEL_NAMES.len()
    );
    for name in cuda_stack_kernels::KERNEL_NAMES {
        ensure!(
            manifest.contains(&format!("\"name\": \"{name}\"")),
            "{name} is not in kernels.json"
        );
    }
    ensure!(
        std::mem::size_of::<StridedLayout>() == 144,
        "StridedLayout must be 144 bytes"
    );
    let cc = |major, minor| cuda_stack_driver::ComputeCapability { major, minor };
    // Files with the portable compute_75 target; the optional ones (tensor cores) are checked
    // in tests/gemm_tc.rs.
    for f in cuda_stack_kernels::PTX_FILES
        .iter()
        .filter(|f| f.targets.iter().any(|t| t.arch == "compute_75"))
    {
        ensure!(
            f.pick(cc(9, 0))?.arch == "compute_75",
            "{}: sm_90 should use compute_75",
            f.name
        );
        ensure!(
            f.pick(cc(7, 5)).is_ok(),
            "{}: sm_75 must be supported",
            f.name
        );
        ensure!(
            matches!(f.pick(cc(7, 0)), Err(Error::NoPtxForDevice { .. })),
            "{}: sm_70 must be refused",
            f.name
        );
    }
    ensure!(
        cuda_stack_kernels::ptx::ptx_for("vector_add", cc(8, 0))?.contains(".entry vector_add"),
        "vector_add PTX"
    );
    Ok(())
}

fn layout_helpers() -> TestResult {
    let l = StridedLayout::contiguous(&[2, 3, 4]).ok_or("contiguous")?;
    ensure!(
        l.strides[..3] == [12, 4, 1] && l.numel() == Some(24),
        "contiguous layout {l:?}"
    );
    ensure!(
        l.index_range() == Some((0, 23)),
        "index range {:?}",
        l.index_range()
    );
    let t = StridedLayout::new(&[4, 3], &[1, -4], 8).ok_or("new")?;
    ensure!(
        t.index_range() == Some((0, 11)),
        "negative stride range {:?}",
        t.index_range()
    );
    ensure!(
        StridedLayout::new(&[1; 9], &[1; 9], 0).is_none(),
        "rank 9 must be refused"
    );
    let src: Vec<i32> = (0..12).collect();
    let got = reference::strided_copy(&src, &t).ok_or("reference")?;
    ensure!(
        got == [8, 4, 0, 9, 5, 1, 10, 6, 2, 11, 7, 3],
        "reference strided copy {got:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Loading.

fn kernels_cached_per_context() -> TestResult {
    let (ctx, _s, k) = setup()?;
    let again = Kernels::get(&ctx)?;
    ensure!(
        Arc::ptr_eq(&k, &again),
        "Kernels::get must return the cached handles"
    );
    Ok(())
}

fn wrong_signature_fails_at_load() -> TestResult {
    let (ctx, _s, _k) = setup()?;
    let ptx = cuda_stack_kernels::ptx::ptx_for("vector_add", ctx.limits().compute_capability)?;
    let module = ctx.load_ptx(ptx)?;
    // SAFETY: deliberately wrong; the load-time check must refuse it before any launch.
    let r = unsafe { module.kernel::<(&DeviceSlice<f32>,)>("vector_add") };
    ensure!(
        matches!(r, Err(cuda_stack_driver::Error::SignatureMismatch { .. })),
        "expected SignatureMismatch, got {r:?}"
    );
    Ok(())
}

fn launch_bench_kernels() -> TestResult {
    let (_ctx, s, k) = setup()?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe { k.empty_kernel()?.launch(&s, &LaunchConfig::new(1, 1)) }?;
    let mut a = s.clone_htod(&[7.0f32])?;
    let b = s.clone_htod(&[3.0f32])?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe {
        k.four_args()?
            .launch(&s, &LaunchConfig::new(4, 64), &mut a, &b, 2.0, 1)
    }?;
    ensure!(
        s.clone_dtoh(&a)? == [7.0],
        "four_args must not write for n != 0xffffffff"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Vector add and elementwise ops.

fn vector_add_both() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &n in SIZES {
        for &off in OFFSETS {
            let (a, b) = (data::<f32>(1, n), data::<f32>(2, n));
            let want = reference::vector_add(&a, &b); // exact
            let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
            for seed_kernel in [true, false] {
                let mut dc = poisoned::<f32>(&s, n, off)?;
                {
                    let mut c = dc.slice_mut(off..)?;
                    let (a, b) = (da.slice(off..)?, db.slice(off..)?);
                    if seed_kernel {
                        ops::vector_add_seed(&k, &s, &a, &b, &mut c)?;
                    } else {
                        ops::vector_add(&k, &s, &a, &b, &mut c)?;
                    }
                }
                let got = download(&s, &dc, off)?;
                check_exact(
                    &format!("vector_add(seed={seed_kernel}) n={n} off={off}"),
                    &got,
                    &want,
                )?;
            }
        }
    }
    Ok(())
}

fn binary_all<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &n in SIZES {
        for &off in OFFSETS {
            let (a, b) = (data::<T>(3, n), data::<T>(4, n));
            let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
            for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
                let want = reference::binary(op, &a, &b); // exact
                let mut dc = poisoned::<T>(&s, n, off)?;
                ops::binary(
                    &k,
                    &s,
                    op,
                    &da.slice(off..)?,
                    &db.slice(off..)?,
                    &mut dc.slice_mut(off..)?,
                )?;
                let got = download(&s, &dc, off)?;
                check_exact(
                    &format!("{op:?}<{}> n={n} off={off}", T::DTYPE),
                    &got,
                    &want,
                )?;
            }
        }
    }
    Ok(())
}

/// Operands at view offsets of their own (the sweep's `relu n=2^24 off=1` reads a view one
/// element in and writes an aligned buffer): the kernels' scalar path, a block's loads in one
/// chunk, over sizes around its chunk and packet edges. Exact against the reference, with the
/// elements in front of the output view untouched.
fn elementwise_mixed_offsets<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let sizes = [1usize, 2, 7, 8, 9, 33, 4099, (1 << 20) + 3];
    for &n in &sizes {
        let (x, y) = (data::<T>(11, n), data::<T>(12, n));
        for (xo, oo) in [(1, 2), (2, 1), (1, 1), (3, 3), (0, 1), (1, 0), (7, 7)] {
            let dx = upload(&s, &x, xo)?;
            let mut o = poisoned::<T>(&s, n, oo)?;
            ops::relu(&k, &s, &dx.slice(xo..)?, &mut o.slice_mut(oo..)?)?;
            check_exact(
                &format!("relu<{}> n={n} x+{xo} out+{oo}", T::DTYPE),
                &download(&s, &o, oo)?,
                &reference::relu(&x),
            )?;
        }
        for (ao, bo, oo) in [
            (1, 1, 2),
            (1, 2, 1),
            (2, 1, 1),
            (3, 3, 3),
            (1, 1, 1),
            (0, 0, 1),
        ] {
            let (da, db) = (upload(&s, &x, ao)?, upload(&s, &y, bo)?);
            let mut o = poisoned::<T>(&s, n, oo)?;
            ops::binary(
                &k,
                &s,
                BinaryOp::Add,
                &da.slice(ao..)?,
                &db.slice(bo..)?,
                &mut o.slice_mut(oo..)?,
            )?;
            check_exact(
                &format!("add<{}> n={n} a+{ao} b+{bo} out+{oo}", T::DTYPE),
                &download(&s, &o, oo)?,
                &reference::binary(BinaryOp::Add, &x, &y),
            )?;
        }
    }
    Ok(())
}

/// `binary_broadcast` for every pair of operand shapes broadcasting gives, against the
/// reference (exact), at packet-aligned and misaligned offsets; then its bounds checks.
fn binary_broadcast_all<T: Gen>() -> TestResult {
    use ops::BroadcastOperand as B;
    let (_ctx, s, k) = setup()?;
    let shapes = [
        (0, 5),
        (3, 0),
        (1, 1),
        (3, 1),
        (1, 7),
        (7, 33),
        (513, 768),
        (1024, 16),
        (5, 4099),
    ];
    for (outer, inner) in shapes {
        let kinds = [
            (B::full(inner), B::row()),
            (B::row(), B::full(inner)),
            (B::full(inner), B::column()),
            (B::column(), B::full(inner)),
            (B::full(inner), B::scalar()),
            (B::scalar(), B::full(inner)),
            (B::row(), B::column()),
            (B::column(), B::row()),
        ];
        let len = |m: B| match (m.outer_stride, m.inner_stride) {
            (0, 0) => 1,
            (0, _) => inner,
            (_, 0) => outer,
            _ => outer * inner,
        };
        for (ra, rb) in kinds {
            for &off in OFFSETS {
                let (a, b) = (data::<T>(7, len(ra)), data::<T>(8, len(rb)));
                let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
                    let want = reference::binary_broadcast(op, &a, ra, &b, rb, outer, inner);
                    let mut dc = poisoned::<T>(&s, outer * inner, off)?;
                    ops::binary_broadcast(
                        &k,
                        &s,
                        op,
                        &da.slice(off..)?,
                        ra,
                        &db.slice(off..)?,
                        rb,
                        &mut dc.slice_mut(off..)?,
                        outer,
                        inner,
                    )?;
                    let got = download(&s, &dc, off)?;
                    check_exact(
                        &format!(
                            "{op:?}_bcast<{}> [{outer}, {inner}] {ra:?} {rb:?} off={off}",
                            T::DTYPE
                        ),
                        &got,
                        &want,
                    )?;
                }
            }
        }
    }
    // Bounds: a row operand one element short, and an inner stride of 2, are refused.
    let a = upload(&s, &data::<T>(9, 12), 0)?;
    let short = upload(&s, &data::<T>(9, 3), 0)?;
    let mut out = poisoned::<T>(&s, 12, 0)?;
    let e = ops::binary_broadcast(
        &k,
        &s,
        BinaryOp::Add,
        &a,
        B::full(4),
        &short,
        B::row(),
        &mut out,
        3,
        4,
    )
    .unwrap_err();
    ensure!(
        matches!(e, Error::Shape { what: "b", .. }),
        "short row: {e}"
    );
    let two = B {
        outer_stride: 0,
        inner_stride: 2,
    };
    let e = ops::binary_broadcast(
        &k,
        &s,
        BinaryOp::Add,
        &a,
        B::full(4),
        &a,
        two,
        &mut out,
        3,
        4,
    )
    .unwrap_err();
    ensure!(matches!(e, Error::Invalid { .. }), "inner stride 2: {e}");
    Ok(())
}

fn unary_all<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let alpha = T::scalar(-3.0);
    for &n in SIZES {
        for &off in OFFSETS {
            let (x, y) = (data::<T>(5, n), data::<T>(6, n));
            let dx = upload(&s, &x, off)?;
            let tag = format!("<{}> n={n} off={off}", T::DTYPE);

            let mut o = poisoned::<T>(&s, n, off)?;
            ops::scale(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?, alpha)?;
            check_exact(
                &format!("scale{tag}"),
                &download(&s, &o, off)?,
                &reference::scale(&x, alpha),
            )?; // exact

            let mut dy = upload(&s, &y, off)?;
            ops::axpy(&k, &s, alpha, &dx.slice(off..)?, &mut dy.slice_mut(off..)?)?;
            let got = s.clone_dtoh(&dy.slice(off..)?)?;
            check_exact(&format!("axpy{tag}"), &got, &reference::axpy(alpha, &x, &y))?; // exact

            let mut o = poisoned::<T>(&s, n, off)?;
            ops::relu(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?)?;
            check_exact(
                &format!("relu{tag}"),
                &download(&s, &o, off)?,
                &reference::relu(&x),
            )?; // exact

            for v in [2.5, 0.1, -7.0] {
                let value = T::scalar(v);
                let mut o = poisoned::<T>(&s, n, off)?;
                ops::fill(&k, &s, &mut o.slice_mut(off..)?, value)?;
                check_exact(
                    &format!("fill({v}){tag}"),
                    &download(&s, &o, off)?,
                    &reference::fill::<T>(value, n),
                )?; // exact
            }
        }
    }
    Ok(())
}

fn tanh_all<T: Gen + Float>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    // f32/f64: 4 ulp (CUDA tanhf/tanh ≤ 2 ulp, CPU libm ≤ 1 ulp, and rounding); f16/bf16: 1 ulp.
    let ulps = if matches!(T::DTYPE, DType::F16 | DType::BF16) {
        1.0
    } else {
        4.0
    };
    for &n in SIZES {
        for &off in OFFSETS {
            let x = data::<T>(7, n);
            let dx = upload(&s, &x, off)?;
            let mut o = poisoned::<T>(&s, n, off)?;
            ops::tanh(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?)?;
            let got = download(&s, &o, off)?;
            check_ulps(
                &format!("tanh<{}> n={n} off={off}", T::DTYPE),
                &got,
                &reference::tanh(&x),
                ulps,
            )?;
        }
    }
    Ok(())
}

fn elementwise_special_values() -> TestResult {
    let (_ctx, s, k) = setup()?;
    // i32 division: x / 0 == 0, MIN / -1 == MIN, truncation toward zero; wrapping add/mul.
    let a = [7, -7, i32::MIN, 5, i32::MAX, i32::MIN, 0, -1];
    let b = [2, 2, -1, 0, 1, -1, 0, i32::MIN];
    let (da, db) = (s.clone_htod(&a)?, s.clone_htod(&b)?);
    for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
        let mut o = poisoned::<i32>(&s, a.len(), 0)?;
        ops::binary(&k, &s, op, &da, &db, &mut o)?;
        check_exact(
            &format!("{op:?}<i32> specials"),
            &s.clone_dtoh(&o)?,
            &reference::binary(op, &a, &b),
        )?;
    }
    ensure!(
        reference::binary(BinaryOp::Div, &a, &b)[..4] == [3, -3, i32::MIN, 0],
        "reference i32 division"
    );
    // f32: NaN, infinities, signed zeros, subnormals.
    let x = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1e-40,
        -1e-40,
        -2.0,
    ];
    let y = [1.0, f32::INFINITY, 0.0, -0.0, 0.0, 3.0, 1e-40, f32::NAN];
    let (dx, dy) = (s.clone_htod(&x)?, s.clone_htod(&y)?);
    let mut o = s.alloc_zeros::<f32>(x.len())?;
    s.memset_bytes(&mut o, 0x11)?; // not NaN, so NaN results are really written
    ops::relu(&k, &s, &dx, &mut o)?;
    let got = s.clone_dtoh(&o)?;
    check_exact("relu specials", &got, &reference::relu(&x))?;
    ensure!(
        got[3].to_bits() == (-0.0f32).to_bits(),
        "relu(-0.0) must stay -0.0"
    );
    for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
        s.memset_bytes(&mut o, 0x11)?;
        ops::binary(&k, &s, op, &dx, &dy, &mut o)?;
        check_exact(
            &format!("{op:?}<f32> specials"),
            &s.clone_dtoh(&o)?,
            &reference::binary(op, &x, &y),
        )?;
    }
    // f16 overflow and rounding to nearest even.
    let h: Vec<f16> = [60000.0f32, 1.0, 2049.0, 0.1]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    let dh = s.clone_htod(&h)?;
    let mut oh = poisoned::<f16>(&s, h.len(), 0)?;
    ops::binary(&k, &s, BinaryOp::Add, &dh, &dh, &mut oh)?;
    check_exact(
        "f16 add specials",
        &s.clone_dtoh(&oh)?,
        &reference::binary(BinaryOp::Add, &h, &h),
    )?;
    Ok(())
}

fn length_errors() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let a = s.alloc_zeros::<f32>(10)?;
    let b = s.alloc_zeros::<f32>(9)?;
    let mut c = s.alloc_zeros::<f32>(10)?;
    let r = ops::binary(&k, &s, BinaryOp::Add, &a, &b, &mut c);
    ensure!(
        matches!(
            r,
            Err(Error::Length {
                what: "b",
                expected: 10,
                found: 9,
                ..
            })
        ),
        "binary length: {r:?}"
    );
    let r = ops::matmul(&k, &s, MatmulAlgo::Naive, &a, &a, &mut c, 2, 5, 4);
    ensure!(
        matches!(r, Err(Error::Shape { what: "a", .. })),
        "matmul shape: {r:?}"
    );
    let h = s.alloc_zeros::<f16>(4)?;
    let mut ho = s.alloc_zeros::<f16>(4)?;
    let r = ops::matmul(&k, &s, MatmulAlgo::Tiled16, &h, &h, &mut ho, 2, 2, 2);
    ensure!(
        matches!(
            r,
            Err(Error::Unsupported {
                dtype: DType::F16,
                ..
            })
        ),
        "matmul f16: {r:?}"
    );
    let i = s.alloc_zeros::<i32>(4)?;
    let mut io = s.alloc_zeros::<i32>(4)?;
    let r = ops::matmul(&k, &s, MatmulAlgo::Fast, &i, &i, &mut io, 2, 2, 2);
    ensure!(
        matches!(
            r,
            Err(Error::Unsupported {
                dtype: DType::I32,
                ..
            })
        ),
        "matmul fast i32: {r:?}"
    );
    let mut sum_out = s.alloc_zeros::<i64>(1)?;
    let r = ops::mean(&k, &s, ReduceAlgo::Fast, &i, &mut sum_out);
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "mean i32: {r:?}"
    );
    let r = ops::sum(&k, &s, ReduceAlgo::Tree, &i, &mut sum_out);
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "tree sum i32: {r:?}"
    );
    let mut out2 = s.alloc_zeros::<f32>(2)?;
    let r = ops::sum(&k, &s, ReduceAlgo::Fast, &a, &mut out2);
    ensure!(
        matches!(r, Err(Error::Length { what: "out", .. })),
        "sum out length: {r:?}"
    );
    let r = ops::copy_strided(&k, &s, &a, &mut out2, 10);
    ensure!(
        matches!(r, Err(Error::Shape { what: "src", .. })),
        "copy_strided bounds: {r:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Fused bias + ReLU.

const SHAPES_2D: &[(usize, usize)] = &[
    (0, 5),
    (5, 0),
    (1, 1),
    (1, 31),
    (33, 31),
    (17, 32),
    (4, 1023),
    (3, 1025),
    (1000, 257),
    (4099, 3),
    (65537, 1),
    (3, 4099),
    (2048, 1024),
];

fn bias_relu() -> TestResult {
    let (ctx, s, k) = setup()?;
    for &(rows, cols) in SHAPES_2D {
        for &off in OFFSETS {
            for scale in [1.5f32, -0.75] {
                let n = rows * cols;
                let (x, bias, g) = (data::<f32>(8, n), data::<f32>(9, cols), data::<f32>(10, n));
                let (dx, db, dg) = (
                    upload(&s, &x, off)?,
                    upload(&s, &bias, off)?,
                    upload(&s, &g, off)?,
                );
                let tag = format!("rows={rows} cols={cols} off={off} scale={scale}");
                let mut o = poisoned::<f32>(&s, n, off)?;
                ops::bias_relu_fwd(
                    &k,
                    &s,
                    &dx.slice(off..)?,
                    &db.slice(off..)?,
                    scale,
                    &mut o.slice_mut(off..)?,
                    rows,
                    cols,
                )?;
                check_exact(
                    &format!("bias_relu_fwd {tag}"),
                    &download(&s, &o, off)?,
                    &reference::bias_relu_fwd(&x, &bias, scale, rows, cols),
                )?; // exact

                let mut gx = poisoned::<f32>(&s, n, off)?;
                let mut gb = poisoned::<f32>(&s, cols, off)?;
                ops::bias_relu_bwd(
                    &k,
                    &s,
                    &dx.slice(off..)?,
                    &db.slice(off..)?,
                    scale,
                    &dg.slice(off..)?,
                    &mut gx.slice_mut(off..)?,
                    &mut gb.slice_mut(off..)?,
                    rows,
                    cols,
                )?;
                let parts = ops::bias_relu_bwd_parts(rows, cols, ctx.limits().sm_count);
                let (want_gx, want_gb) =
                    reference::bias_relu_bwd(&x, &bias, scale, &g, rows, cols, parts);
                // exact: the reference sums in the kernel's order for the same `parts`.
                check_exact(
                    &format!("bias_relu_bwd grad_x {tag}"),
                    &download(&s, &gx, off)?,
                    &want_gx,
                )?;
                check_exact(
                    &format!("bias_relu_bwd grad_bias {tag} parts={parts}"),
                    &download(&s, &gb, off)?,
                    &want_gb,
                )?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Matrix multiply.

const MATMUL_SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (17, 33, 9),
    (127, 129, 65),
    (256, 256, 256),
    (33, 200, 700),
    (0, 5, 3),
    (5, 0, 3),
    (4, 5, 0),
    (16, 16, 16),
    (1, 300, 7),
];

fn matmul_all<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let algos: &[MatmulAlgo] = if T::DTYPE == DType::F32 {
        &[MatmulAlgo::Naive, MatmulAlgo::Tiled16, MatmulAlgo::Fast]
    } else {
        &[MatmulAlgo::Naive, MatmulAlgo::Tiled16]
    };
    for &(m, n, kd) in MATMUL_SHAPES {
        for &off in OFFSETS {
            let (a, b) = (data::<T>(11, m * kd), data::<T>(12, kd * n));
            let want = reference::matmul(&a, &b, m, n, kd); // exact: FMA in increasing k (i32 wraps)
            let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
            for &algo in algos {
                let mut c = poisoned::<T>(&s, m * n, off)?;
                ops::matmul(
                    &k,
                    &s,
                    algo,
                    &da.slice(off..)?,
                    &db.slice(off..)?,
                    &mut c.slice_mut(off..)?,
                    m,
                    n,
                    kd,
                )?;
                check_exact(
                    &format!("matmul {algo:?}<{}> {m}x{n}x{kd} off={off}", T::DTYPE),
                    &download(&s, &c, off)?,
                    &want,
                )?;
            }
        }
    }
    Ok(())
}

fn sgemm_all_transposes() -> TestResult {
    let (ctx, s, k) = setup()?;
    let sms = ctx.device().sm_count()?;
    let ts = [Transpose::NoTrans, Transpose::Trans];
    for &(m, n, kd) in MATMUL_SHAPES {
        for ta in ts {
            for tb in ts {
                for &(alpha, beta, pad, off) in &[
                    (1.0f32, 0.0f32, 0usize, 0usize),
                    (0.5, -2.0, 3, 1),
                    (-1.25, 1.0, 4, 0),
                ] {
                    let (ar, ac) = if ta == Transpose::NoTrans {
                        (m, kd)
                    } else {
                        (kd, m)
                    };
                    let (br, bc) = if tb == Transpose::NoTrans {
                        (kd, n)
                    } else {
                        (n, kd)
                    };
                    let (lda, ldb, ldc) = (ac + pad, bc + pad, n + pad);
                    let len = |rows: usize, ld: usize| rows * ld;
                    let a = small_data::<f32>(13, len(ar, lda));
                    let b = small_data::<f32>(14, len(br, ldb));
                    let mut c: Vec<f32> = small_data::<f32>(15, len(m, ldc));
                    if beta == 0.0 {
                        c.iter_mut().for_each(|v| *v = f32::NAN); // beta == 0: C must not be read
                    }
                    let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                    let mut dc = upload(&s, &c, off)?;
                    ops::sgemm(
                        &k,
                        &s,
                        ta,
                        tb,
                        m,
                        n,
                        kd,
                        alpha,
                        &da.slice(off..)?,
                        lda,
                        &db.slice(off..)?,
                        ldb,
                        beta,
                        &mut dc.slice_mut(off..)?,
                        ldc,
                    )?;
                    let got = s.clone_dtoh(&dc.slice(off..)?)?;
                    let _ = br;
                    let plan = ops::sgemm_plan(m, n, kd, sms);
                    reference::sgemm_planned(
                        ta,
                        tb,
                        m,
                        n,
                        kd,
                        alpha,
                        &a,
                        lda,
                        &b,
                        ldb,
                        beta,
                        &mut c,
                        ldc,
                        |i, j| plan.splits_for(i, j, n),
                    );
                    // exact: FMA in increasing k (per k slice with split-K, slices summed in
                    // order), then alpha·acc, then fmaf(beta, C, ·); padding untouched.
                    check_exact(&format!("sgemm {ta:?},{tb:?} {m}x{n}x{kd} alpha={alpha} beta={beta} pad={pad} off={off}"), &got, &c)?;
                }
            }
        }
    }
    Ok(())
}

/// A product whose plan on tiles alone runs whole waves of tile rows unsplit and splits the
/// leftover rows (2047 × 2049 × 2051 on a 132-SM GPU: 15 tile rows, then one row of tiles in k
/// slices), every transpose, `beta != 0`: 3000 entries from both parts checked exactly against
/// `sgemm_dot` with the plan's slices for their row (a full CPU reference would take minutes).
/// (`ops::sgemm` itself gives this shape a column strip: tests/sgemm_plans.rs.)
fn sgemm_planned_rows() -> TestResult {
    let (ctx, s, k) = setup()?;
    let sms = ctx.device().sm_count()?;
    let (m, n, kd) = (2047, 2049, 2051);
    let plan = ops::sgemm_tile_plan(m, n, kd, sms);
    let a = small_data::<f32>(31, m * kd);
    let b = small_data::<f32>(32, kd * n);
    let c0 = small_data::<f32>(33, m * n);
    let (da, db) = (s.clone_htod(&a)?, s.clone_htod(&b)?);
    let ts = [Transpose::NoTrans, Transpose::Trans];
    for ta in ts {
        for tb in ts {
            let lda = if ta == Transpose::NoTrans { kd } else { m };
            let ldb = if tb == Transpose::NoTrans { n } else { kd };
            let mut dc = s.clone_htod(&c0)?;
            let (alpha, beta) = (0.75f32, -0.5f32);
            ops::sgemm_with_plan(
                &k, &s, plan, ta, tb, m, n, kd, alpha, &da, lda, &db, ldb, beta, &mut dc, n,
            )?;
            let got = s.clone_dtoh(&dc)?;
            let mut rng = Rng::new(34);
            let rest = m - plan.main_rows.min(m - 1);
            for t in 0..3000usize {
                // Half the samples from the rows after the plan's main part.
                let i = if t % 2 == 0 {
                    (rng.next_u64() as usize) % m
                } else {
                    m - 1 - (rng.next_u64() as usize) % rest
                };
                let j = (rng.next_u64() as usize) % n;
                let acc = reference::sgemm_dot(
                    ta,
                    tb,
                    kd,
                    &a,
                    lda,
                    &b,
                    ldb,
                    i,
                    j,
                    plan.splits_for_row(i),
                );
                let want = beta.mul_add(c0[i * n + j], alpha * acc);
                ensure!(
                    got[i * n + j].to_bits() == want.to_bits(),
                    "sgemm {ta:?},{tb:?} {m}x{n}x{kd} plan {plan:?}: C[{i}][{j}] = {} on the GPU, {want} expected",
                    got[i * n + j]
                );
            }
        }
    }
    Ok(())
}

fn sgemm_bounds_checks() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let a = s.alloc_zeros::<f32>(6)?; // [2, 3]
    let b = s.alloc_zeros::<f32>(12)?; // [3, 4]
    let mut c = s.alloc_zeros::<f32>(8)?; // [2, 4]
    let nt = Transpose::NoTrans;
    ops::sgemm(&k, &s, nt, nt, 2, 4, 3, 1.0, &a, 3, &b, 4, 0.0, &mut c, 4)?;
    let r = ops::sgemm(&k, &s, nt, nt, 2, 4, 3, 1.0, &a, 2, &b, 4, 0.0, &mut c, 4);
    ensure!(
        matches!(r, Err(Error::Invalid { .. })),
        "lda < k must fail: {r:?}"
    );
    let r = ops::sgemm(&k, &s, nt, nt, 2, 4, 3, 1.0, &a, 4, &b, 4, 0.0, &mut c, 4);
    ensure!(
        matches!(r, Err(Error::Shape { what: "a", .. })),
        "a too short for lda 4: {r:?}"
    );
    let r = ops::sgemm(
        &k,
        &s,
        nt,
        Transpose::Trans,
        2,
        4,
        3,
        1.0,
        &a,
        3,
        &b,
        3,
        0.0,
        &mut c,
        4,
    );
    ensure!(
        r.is_ok(),
        "B^T stored [4, 3] with ldb 3 fits 12 elements: {r:?}"
    );
    let r = ops::sgemm(&k, &s, nt, nt, 2, 4, 3, 1.0, &a, 3, &b, 4, 0.0, &mut c, 5);
    ensure!(
        matches!(r, Err(Error::Shape { what: "c", .. })),
        "c too short for ldc 5: {r:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reductions.

/// Sum/mean tolerance for `T` relative to `Σ|x|`.
fn sum_rel_tol<T: Element>() -> f64 {
    match T::DTYPE {
        DType::F64 => 1e-13,
        DType::I32 => 0.0,
        _ => 1e-6,
    }
}

fn reduce_full<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let algos: &[ReduceAlgo] = if matches!(T::DTYPE, DType::F32 | DType::F64) {
        &[ReduceAlgo::Tree, ReduceAlgo::Fast]
    } else {
        &[ReduceAlgo::Fast]
    };
    for &n in SIZES {
        for &off in OFFSETS {
            let x = small_data::<T>(16, n);
            let dx = upload(&s, &x, off)?;
            let abs_sum: f64 = x.iter().map(|v| v.to_f64().abs()).sum();
            let tag = format!("<{}> n={n} off={off}", T::DTYPE);
            for &algo in algos {
                let mut out = poisoned::<T::SumAcc>(&s, 1, 0)?;
                ops::sum(&k, &s, algo, &dx.slice(off..)?, &mut out)?;
                let got = T::acc_f64(s.clone_dtoh(&out)?[0]);
                // f32/f16/bf16: 1e-6·Σ|x|; f64: 1e-13·Σ|x|; i32: exact (i64 accumulator).
                check_close(
                    &format!("sum {algo:?}{tag}"),
                    &[got],
                    &[reference::sum(&x)],
                    |_| sum_rel_tol::<T>() * abs_sum,
                )?;
                if T::DTYPE != DType::I32 {
                    let mut out = poisoned::<T::SumAcc>(&s, 1, 0)?;
                    ops::mean(&k, &s, algo, &dx.slice(off..)?, &mut out)?;
                    let got = T::acc_f64(s.clone_dtoh(&out)?[0]);
                    let want = reference::mean(&x);
                    ensure!(
                        n > 0 || got.is_nan(),
                        "mean of nothing must be NaN, got {got}"
                    );
                    check_close(&format!("mean {algo:?}{tag}"), &[got], &[want], |_| {
                        sum_rel_tol::<T>() * abs_sum / n as f64 + ulp(DType::F32, want)
                    })?;
                }
            }
            let mut out = poisoned::<T::Scalar>(&s, 1, 0)?;
            ops::max(&k, &s, ReduceAlgo::Fast, &dx.slice(off..)?, &mut out)?;
            let got = s.clone_dtoh(&out)?[0];
            let want = reference::max(&x); // exact
            ensure!(got == want, "max{tag}: got {got:?}, expected {want:?}");
        }
    }
    if T::DTYPE == DType::I32 {
        // The i64 accumulator must not overflow where an i32 one would.
        let x = vec![i32::MAX; 4099];
        let dx = s.clone_htod(&x)?;
        let mut out = poisoned::<i64>(&s, 1, 0)?;
        let dxs: &DeviceSlice<i32> = &dx;
        ops::sum(&k, &s, ReduceAlgo::Fast, dxs, &mut out)?;
        ensure!(
            s.clone_dtoh(&out)?[0] == reference::sum_i32(&x),
            "i32 sum must be exact in i64"
        );
    }
    Ok(())
}

fn reduce_max_nan_and_empty() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let mut x = small_data::<f32>(17, 5000);
    x[4321] = f32::NAN;
    let dx = s.clone_htod(&x)?;
    let mut out = s.alloc_zeros::<f32>(1)?;
    ops::max(&k, &s, ReduceAlgo::Fast, &dx, &mut out)?;
    ensure!(s.clone_dtoh(&out)?[0].is_nan(), "max must propagate NaN");
    let empty = s.alloc_zeros::<f32>(0)?;
    ops::max(&k, &s, ReduceAlgo::Fast, &empty, &mut out)?;
    ensure!(
        s.clone_dtoh(&out)?[0] == f32::NEG_INFINITY,
        "max of nothing is -inf"
    );
    let ei = s.alloc_zeros::<i32>(0)?;
    let mut oi = s.alloc_zeros::<i32>(1)?;
    ops::max(&k, &s, ReduceAlgo::Fast, &ei, &mut oi)?;
    ensure!(
        s.clone_dtoh(&oi)?[0] == i32::MIN,
        "i32 max of nothing is i32::MIN"
    );
    s.memset_bytes(&mut out, 0xFF)?;
    ops::sum(&k, &s, ReduceAlgo::Fast, &empty, &mut out)?;
    ensure!(s.clone_dtoh(&out)?[0] == 0.0, "sum of nothing is 0");
    let r = ops::max(&k, &s, ReduceAlgo::Tree, &dx, &mut out);
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "tree max does not exist: {r:?}"
    );
    Ok(())
}

fn reduce_deterministic() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let x = small_data::<f32>(18, (1 << 20) + 3);
    let dx = s.clone_htod(&x)?;
    for algo in [ReduceAlgo::Fast, ReduceAlgo::Tree] {
        let mut bits = Vec::new();
        for _ in 0..3 {
            let mut out = poisoned::<f32>(&s, 1, 0)?;
            ops::sum(&k, &s, algo, &dx, &mut out)?;
            bits.push(s.clone_dtoh(&out)?[0].to_bits());
        }
        ensure!(
            bits.iter().all(|&b| b == bits[0]),
            "{algo:?} sum is not deterministic: {bits:08x?}"
        );
    }
    Ok(())
}

fn reduce_rows<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(rows, cols) in SHAPES_2D {
        for &off in OFFSETS {
            let x = small_data::<T>(19, rows * cols);
            let dx = upload(&s, &x, off)?;
            let tag = format!("<{}> rows={rows} cols={cols} off={off}", T::DTYPE);
            let mut o = poisoned::<T::SumAcc>(&s, rows, off)?;
            ops::rows_sum(
                &k,
                &s,
                &dx.slice(off..)?,
                &mut o.slice_mut(off..)?,
                rows,
                cols,
            )?;
            let got: Vec<f64> = download(&s, &o, off)?.into_iter().map(T::acc_f64).collect();
            let abs: Vec<f64> = (0..rows)
                .map(|r| {
                    x[r * cols..(r + 1) * cols]
                        .iter()
                        .map(|v| v.to_f64().abs())
                        .sum()
                })
                .collect();
            // f32 accumulators: 1e-6·Σ|row|; f64: 1e-13·Σ|row|.
            check_close(
                &format!("rows_sum{tag}"),
                &got,
                &reference::rows_sum(&x, rows, cols),
                |i| sum_rel_tol::<T>() * abs[i],
            )?;
            let mut o = poisoned::<T::Scalar>(&s, rows, off)?;
            ops::rows_max(
                &k,
                &s,
                &dx.slice(off..)?,
                &mut o.slice_mut(off..)?,
                rows,
                cols,
            )?;
            let got = download(&s, &o, off)?;
            let want = reference::rows_max(&x, rows, cols); // exact
            ensure!(
                got == want,
                "rows_max{tag}: differs (first: {:?})",
                got.iter().zip(&want).position(|(a, b)| a != b)
            );
        }
    }
    Ok(())
}

/// `[outer, size, inner]` shapes for reductions over the middle dimension: warp rows, split
/// rows (long and few), thin columns, columns with and without a split, several outer slices.
const SHAPES_3D: &[(usize, usize, usize)] = &[
    (1, 0, 7),
    (3, 5, 1),
    (1, 3000, 1),
    (2, 100_003, 1),
    (5, 7, 1000),
    (1, 4096, 1),
    (1, 33, 1),
    (1, 4096, 33),
    (3, 700, 65),
    (1, 31, 70_001),
    (2, 64, 4099),
    // Rows of whole 16-byte packs (reduce_cols16 when aligned): a bias gradient's shape, and
    // a split one.
    (1, 16_384, 768),
    (2, 300, 2304),
];

fn reduce_dims<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(outer, size, inner) in SHAPES_3D {
        let x = small_data::<T>(29, outer * size * inner);
        let dx = upload(&s, &x, 0)?;
        let tag = format!("<{}> [{outer}, {size}, {inner}]", T::DTYPE);
        let mut want_sum = Vec::new();
        let mut abs_sum = Vec::new();
        let mut want_max = Vec::new();
        for o in 0..outer {
            for i in 0..inner {
                let col: Vec<T> = (0..size).map(|r| x[(o * size + r) * inner + i]).collect();
                want_sum.push(reference::sum(&col));
                abs_sum.push(col.iter().map(|v| v.to_f64().abs()).sum::<f64>());
                want_max.push(reference::max(&col));
            }
        }
        let mut o = poisoned::<T::SumAcc>(&s, outer * inner, 0)?;
        ops::sum_dim(&k, &s, &dx, &mut o, (outer, size, inner))?;
        let got: Vec<f64> = download(&s, &o, 0)?.into_iter().map(T::acc_f64).collect();
        // f32 accumulators: 1e-6·Σ|column|; f64: 1e-13·Σ|column|.
        check_close(&format!("sum_dim{tag}"), &got, &want_sum, |i| {
            sum_rel_tol::<T>() * abs_sum[i]
        })?;
        // Where the column kernels run (inner > 1, a reduced dimension past the thin launch's 32),
        // the same input one element off 16-byte alignment takes the scalar column kernel where
        // the aligned one took reduce_cols16: the sums must agree bit for bit. (The row kernels'
        // 16-byte loads group a row's elements by its alignment, so theirs may differ.)
        if inner > 1 && size > 32 {
            let dx1 = upload(&s, &x, 1)?;
            let mut o1 = poisoned::<T::SumAcc>(&s, outer * inner, 0)?;
            ops::sum_dim(&k, &s, &dx1.slice(1..)?, &mut o1, (outer, size, inner))?;
            let (a, b) = (download(&s, &o, 0)?, download(&s, &o1, 0)?);
            ensure!(
                a.iter()
                    .zip(&b)
                    .all(|(p, q)| T::acc_f64(*p).to_bits() == T::acc_f64(*q).to_bits()),
                "sum_dim{tag}: aligned and unaligned inputs differ (first: {:?})",
                a.iter()
                    .zip(&b)
                    .position(|(p, q)| T::acc_f64(*p).to_bits() != T::acc_f64(*q).to_bits())
            );
        }
        let mut o = poisoned::<T::Scalar>(&s, outer * inner, 0)?;
        ops::max_dim(&k, &s, &dx, &mut o, (outer, size, inner))?;
        let got = download(&s, &o, 0)?;
        ensure!(
            got == want_max,
            "max_dim{tag}: differs (first: {:?})",
            got.iter().zip(&want_max).position(|(a, b)| a != b)
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Copies and transposes.

fn copies() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &n in SIZES {
        for &off in OFFSETS {
            let x = data::<f32>(20, n);
            let dx = upload(&s, &x, off)?;
            let mut o = poisoned::<f32>(&s, n, off)?;
            ops::copy_coalesced(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?)?;
            check_exact(
                &format!("copy_coalesced n={n} off={off}"),
                &download(&s, &o, off)?,
                &x,
            )?; // exact
            for stride in [1usize, 2, 7, 32] {
                let m = if n == 0 { 0 } else { (n - 1) / stride + 1 };
                let mut o = poisoned::<f32>(&s, m, off)?;
                ops::copy_strided(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?, stride)?;
                check_exact(
                    &format!("copy_strided n={n} stride={stride} off={off}"),
                    &download(&s, &o, off)?,
                    &reference::copy_strided(&x, stride, m),
                )?;
            }
        }
    }
    Ok(())
}

/// Transpose shapes beyond [`SHAPES_2D`]: both sides at least 64 and odd (the line-following
/// kernel), a side just under 64 (the skinny kernel in both directions), tall and wide strips,
/// and the vectorized skinny kernel's shapes (short side 1..8).
const TRANSPOSE_SHAPES: &[(usize, usize)] = &[
    (65, 97),
    // The aligned tiles (128 x 64, 128 x 128): several tiles both ways, partial last ones.
    (259, 131),
    (1031, 517),
    (127, 4099),
    (63, 1000),
    (5000, 63),
    (2, 70_001),
    (3001, 1),
    (4097, 32),
    (32, 4097),
    (1, 5000),
    (9000, 7),
    // transpose_skinny_vec (short side <= 8, long side a multiple of 4, aligned): every short
    // side in both directions, and the fallbacks next to them.
    (1, 4),
    (2, 4096),
    (3, 4096),
    (4, 1000),
    (5, 12),
    (6, 2048),
    (7, 400),
    (8, 1000),
    (4, 1),
    (4096, 2),
    (4096, 3),
    (1000, 4),
    (12, 5),
    (2048, 6),
    (400, 7),
    (1000, 8),
    (8, 8),
    (6, 6),
    (9, 4096),
    (4096, 9),
    // More 128 x 128 tiles than SMs: the op's blocks walk two tiles or more each (264 and 153).
    (1000, 4097),
    (2049, 1100),
];

fn transposes() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(rows, cols) in SHAPES_2D.iter().chain(TRANSPOSE_SHAPES) {
        for &off in OFFSETS {
            let x = data::<f32>(21, rows * cols);
            let dx = upload(&s, &x, off)?;
            let want = reference::transpose(&x, rows, cols); // exact
            for algo in [
                TransposeAlgo::Naive,
                TransposeAlgo::Tiled,
                TransposeAlgo::TiledPadded,
                TransposeAlgo::Aligned,
                TransposeAlgo::AlignedWith(AlignedTile::T128x64),
                TransposeAlgo::AlignedWith(AlignedTile::T128x128),
                TransposeAlgo::Skinny,
                TransposeAlgo::SkinnyV4,
                TransposeAlgo::Auto,
            ] {
                let mut o = poisoned::<f32>(&s, rows * cols, off)?;
                let r = ops::transpose(
                    &k,
                    &s,
                    algo,
                    &dx.slice(off..)?,
                    &mut o.slice_mut(off..)?,
                    rows,
                    cols,
                );
                if algo == TransposeAlgo::Skinny && rows >= 64 && cols >= 64 {
                    ensure!(
                        matches!(r, Err(cuda_stack_kernels::Error::Invalid { .. })),
                        "Skinny must refuse {rows}x{cols}"
                    );
                    continue;
                }
                // The float4 form: a short side, aligned views (off = 0), a long side % 4 == 0.
                let (xa, oa) = (dx.slice(off..)?.as_raw_ptr(), o.slice(off..)?.as_raw_ptr());
                let empty = rows == 0 || cols == 0; // nothing to move: every algo succeeds
                if algo == TransposeAlgo::SkinnyV4
                    && !empty
                    && !ops::skinny_v4_fits(rows, cols, xa, oa)
                {
                    ensure!(
                        matches!(r, Err(cuda_stack_kernels::Error::Invalid { .. })),
                        "SkinnyV4 must refuse {rows}x{cols} off={off}"
                    );
                    continue;
                }
                r?;
                check_exact(
                    &format!("transpose {algo:?} {rows}x{cols} off={off}"),
                    &download(&s, &o, off)?,
                    &want,
                )?;
            }
        }
    }
    Ok(())
}

fn strided_copy_all<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let src = data::<T>(22, 5000);
    let dsrc = s.clone_htod(&src)?;
    let layouts = [
        StridedLayout::contiguous(&[]).ok_or("rank 0")?,
        StridedLayout::contiguous(&[4099]).ok_or("1-d")?,
        StridedLayout::new(&[33, 31], &[1, 33], 0).ok_or("transpose")?,
        StridedLayout::new(&[7, 9, 11], &[1, 77, 7], 3).ok_or("permute")?,
        StridedLayout::new(&[5, 40], &[0, 2], 17).ok_or("broadcast")?,
        StridedLayout::new(&[20, 10], &[-50, -1], 999).ok_or("negative strides")?,
        StridedLayout::new(&[2, 2, 2, 2, 2, 2, 2, 3], &[1, 2, 4, 8, 16, 32, 64, 128], 5)
            .ok_or("rank 8")?,
        StridedLayout::new(&[3, 0, 4], &[4, 4, 1], 0).ok_or("empty")?,
        StridedLayout::new(&[1000], &[5], 2).ok_or("strided 1-d")?,
        // Views whose rows are whole 16-byte vectors (strided_copy_b16 when the output is
        // 16-byte aligned too): a [B, H, N, D] -> [B, N, H, D] head permute, at offset 0 and
        // 16, a slice of rows, a contiguous run; and one whose offset breaks the alignment.
        StridedLayout::new(&[2, 5, 3, 16], &[240, 16, 80, 1], 0).ok_or("head permute")?,
        StridedLayout::new(&[2, 5, 3, 16], &[240, 16, 80, 1], 16).ok_or("permute + 16")?,
        StridedLayout::new(&[4, 24], &[40, 1], 8).ok_or("row slice")?,
        StridedLayout::contiguous(&[4096]).ok_or("contiguous 4096")?,
        StridedLayout::new(&[2, 5, 3, 16], &[240, 16, 80, 1], 3).ok_or("permute + 3")?,
    ];
    for l in &layouts {
        for &off in OFFSETS {
            let want = reference::strided_copy(&src, l).ok_or("reference rejected the layout")?; // exact
            let mut o = poisoned::<T>(&s, want.len(), off)?;
            ops::strided_copy(&k, &s, &dsrc, l, &mut o.slice_mut(off..)?)?;
            check_exact(
                &format!("strided_copy<{}> {:?} off={off}", T::DTYPE, l.dims()),
                &download(&s, &o, off)?,
                &want,
            )?;
        }
    }
    let bad = StridedLayout::new(&[10], &[600], 0).ok_or("bad")?;
    let mut o = s.alloc_zeros::<T>(10)?;
    let r = ops::strided_copy(&k, &s, &dsrc, &bad, &mut o);
    ensure!(
        matches!(r, Err(Error::Shape { what: "src", .. })),
        "out-of-bounds view must fail: {r:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Softmax.

fn softmax() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let shared_cols =
        ops::shared_max_cols(s.context().limits().max_shared_per_block_optin as usize);
    let shapes: &[(usize, usize)] = &[
        (0, 5),
        (5, 0),
        (1, 1),
        (3, 31),
        (5, 32),
        (7, 33),
        (4, 1023),
        (4, 1024),
        (3, 1025),
        (2, 4099),
        (1, 65537),
        (1000, 128),
        (33, 8193),
        (3, 4096),
        (2, 16384),
        (2, 16388),
        (67, 1),
        (65, 2),
        (40, 7),
        (9, 17),
        (5, 100),
        (3, 50257),
        (140, 20_001),
        (2, 100_003),
    ];
    for &(rows, cols) in shapes {
        for &off in OFFSETS {
            let x: Vec<f32> = data::<f32>(23, rows * cols)
                .iter()
                .map(|v| v * 4.0)
                .collect();
            let dx = upload(&s, &x, off)?;
            let want = reference::softmax_rows(&x, rows, cols);
            let want64: Vec<f64> = want.iter().map(|&v| f64::from(v)).collect();
            for algo in [
                SoftmaxAlgo::Auto,
                SoftmaxAlgo::Warp,
                SoftmaxAlgo::Block,
                SoftmaxAlgo::Registers,
                SoftmaxAlgo::Narrow,
                SoftmaxAlgo::Split,
                SoftmaxAlgo::Shared,
            ] {
                let mut o = poisoned::<f32>(&s, rows * cols, off)?;
                let r = ops::softmax_rows_with(
                    &k,
                    &s,
                    algo,
                    &dx.slice(off..)?,
                    &mut o.slice_mut(off..)?,
                    rows,
                    cols,
                );
                // Registers takes rows of up to 16384 columns, Narrow up to 1024 (any width,
                // any alignment); the others take every shape.
                let refused = rows > 0
                    && cols > 0
                    && ((algo == SoftmaxAlgo::Registers && cols > ops::REGISTERS_MAX_COLS)
                        || (algo == SoftmaxAlgo::Narrow && cols > ops::NARROW_MAX_COLS)
                        || (algo == SoftmaxAlgo::Shared && cols > shared_cols));
                if refused {
                    ensure!(
                        matches!(r, Err(cuda_stack_kernels::Error::Invalid { .. })),
                        "{algo:?} must refuse {rows}x{cols} off={off}"
                    );
                    continue;
                }
                r?;
                let got: Vec<f64> = download(&s, &o, off)?
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect();
                // 1e-6 absolute: every output is in [0, 1].
                check_close(
                    &format!("softmax {algo:?} {rows}x{cols} off={off}"),
                    &got,
                    &want64,
                    |_| 1e-6,
                )?;
            }
        }
    }
    // A row of -inf gives NaN; a NaN poisons its row only; -inf elements give 0. 40 columns
    // (every kernel takes them) and 5000 (the split kernel cuts each row into chunks, the NaN
    // in a later chunk than the first).
    for (cols, algos) in [
        (
            40,
            &[
                SoftmaxAlgo::Warp,
                SoftmaxAlgo::Block,
                SoftmaxAlgo::Registers,
                SoftmaxAlgo::Narrow,
                SoftmaxAlgo::Split,
                SoftmaxAlgo::Shared,
            ][..],
        ),
        (
            5000,
            &[
                SoftmaxAlgo::Registers,
                SoftmaxAlgo::Split,
                SoftmaxAlgo::Shared,
            ][..],
        ),
    ] {
        special_rows(&s, &k, cols, algos)?;
    }
    Ok(())
}

fn special_rows(s: &Stream, k: &Kernels, cols: usize, algos: &[SoftmaxAlgo]) -> TestResult {
    let mut x = vec![0.5f32; 3 * cols];
    x[..cols].iter_mut().for_each(|v| *v = f32::NEG_INFINITY);
    x[cols + cols - 7] = f32::NAN;
    x[2 * cols + 3] = f32::NEG_INFINITY;
    let dx = s.clone_htod(&x)?;
    for &algo in algos {
        let mut o = s.alloc_zeros::<f32>(3 * cols)?;
        ops::softmax_rows_with(k, s, algo, &dx, &mut o, 3, cols)?;
        let got = s.clone_dtoh(&o)?;
        ensure!(
            got[..2 * cols].iter().all(|v| v.is_nan()),
            "{algo:?}: -inf row and NaN row must be NaN"
        );
        ensure!(
            got[2 * cols + 3] == 0.0 && got[2 * cols..].iter().all(|v| !v.is_nan()),
            "{algo:?}: -inf element must give 0"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Random numbers.

fn random() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let seed = 0x0123_4567_89ab_cdef;
    for &n in SIZES {
        for &offset in &[0u64, 1, 2, 3, 5, (1u64 << 34) + 7] {
            let off = (offset % 2) as usize; // view offset follows the stream offset's parity
            let tag = format!("n={n} offset={offset} view_off={off}");
            let mut o = poisoned::<u32>(&s, n, off)?;
            ops::philox_u32(&k, &s, &mut o.slice_mut(off..)?, seed, offset)?;
            check_bits(
                &format!("philox_u32 {tag}"),
                &download(&s, &o, off)?,
                &reference::philox_u32(n, seed, offset),
            )?; // exact
            let mut o = poisoned::<f32>(&s, n, off)?;
            ops::fill_uniform(&k, &s, &mut o.slice_mut(off..)?, seed, offset)?;
            check_exact(
                &format!("fill_uniform {tag}"),
                &download(&s, &o, off)?,
                &reference::fill_uniform(n, seed, offset),
            )?; // exact
            let mut o = poisoned::<f32>(&s, n, off)?;
            ops::fill_normal(&k, &s, &mut o.slice_mut(off..)?, seed, offset)?;
            let got: Vec<f64> = download(&s, &o, off)?
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            let want: Vec<f64> = reference::fill_normal(n, seed, offset)
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            // logf/sincospif: 4e-6 relative + 1e-6 absolute.
            check_close(&format!("fill_normal {tag}"), &got, &want, |i| {
                4e-6 * want[i].abs() + 1e-6
            })?;
        }
    }
    // Counter-based: a window of the stream equals the same positions of a longer run.
    let mut long = s.alloc_zeros::<u32>(100)?;
    ops::philox_u32(&k, &s, &mut long, 7, 0)?;
    let mut window = s.alloc_zeros::<u32>(50)?;
    ops::philox_u32(&k, &s, &mut window, 7, 37)?;
    ensure!(
        s.clone_dtoh(&long)?[37..87] == s.clone_dtoh(&window)?[..],
        "philox windows must agree"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Introspection.

fn thread_hierarchy() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(grid, block) in &[
        ((1u32, 1u32), (1u32, 1u32)),
        ((3, 2), (32, 4)),
        ((2, 3), (7, 5)),
        ((5, 1), (256, 1)),
        ((1, 1), (32, 32)),
    ] {
        let want = reference::thread_hierarchy(grid, block);
        let mut o = poisoned::<u32>(&s, want.len(), 1)?;
        ops::thread_hierarchy(&k, &s, &mut o.slice_mut(1..)?, grid, block)?;
        let got = download(&s, &o, 1)?;
        ensure!(got.len() == want.len(), "record count");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if i % 8 != reference::SMID_WORD {
                ensure!(
                    g == w,
                    "thread_hierarchy {grid:?} {block:?}: word {i} is {g}, expected {w}"
                );
            }
        }
    }
    let mut small = s.alloc_zeros::<u32>(7)?;
    let r = ops::thread_hierarchy(&k, &s, &mut small, (1, 1), (1, 1));
    ensure!(
        matches!(r, Err(Error::Length { .. })),
        "short output must fail: {r:?}"
    );
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        cpu("philox_known_answer", philox_known_answer),
        cpu("manifest_and_ptx_table", manifest_and_ptx_table),
        cpu("layout_helpers", layout_helpers),
        gpu("kernels_cached_per_context", kernels_cached_per_context),
        gpu(
            "wrong_signature_fails_at_load",
            wrong_signature_fails_at_load,
        ),
        gpu("launch_bench_kernels", launch_bench_kernels),
        gpu("vector_add_seed_and_fast", vector_add_both),
        gpu("binary_f32", binary_all::<f32>),
        gpu("binary_f64", binary_all::<f64>),
        gpu("binary_i32", binary_all::<i32>),
        gpu("binary_f16", binary_all::<f16>),
        gpu("binary_bf16", binary_all::<bf16>),
        gpu("mixed_offsets_f32", elementwise_mixed_offsets::<f32>),
        gpu("mixed_offsets_f64", elementwise_mixed_offsets::<f64>),
        gpu("mixed_offsets_f16", elementwise_mixed_offsets::<f16>),
        gpu("mixed_offsets_bf16", elementwise_mixed_offsets::<bf16>),
        gpu("binary_broadcast_f32", binary_broadcast_all::<f32>),
        gpu("binary_broadcast_f64", binary_broadcast_all::<f64>),
        gpu("binary_broadcast_i32", binary_broadcast_all::<i32>),
        gpu("binary_broadcast_f16", binary_broadcast_all::<f16>),
        gpu("binary_broadcast_bf16", binary_broadcast_all::<bf16>),
        gpu("scale_axpy_relu_fill_f32", unary_all::<f32>),
        gpu("scale_axpy_relu_fill_f64", unary_all::<f64>),
        gpu("scale_axpy_relu_fill_i32", unary_all::<i32>),
        gpu("scale_axpy_relu_fill_f16", unary_all::<f16>),
        gpu("scale_axpy_relu_fill_bf16", unary_all::<bf16>),
        gpu("tanh_f32", tanh_all::<f32>),
        gpu("tanh_f64", tanh_all::<f64>),
        gpu("tanh_f16", tanh_all::<f16>),
        gpu("tanh_bf16", tanh_all::<bf16>),
        gpu("elementwise_special_values", elementwise_special_values),
        gpu("argument_errors", length_errors),
        gpu("bias_relu_fwd_bwd", bias_relu),
        gpu("matmul_f32", matmul_all::<f32>),
        gpu("matmul_f64", matmul_all::<f64>),
        gpu("matmul_i32", matmul_all::<i32>),
        gpu("sgemm_all_transposes", sgemm_all_transposes),
        gpu("sgemm_planned_rows", sgemm_planned_rows),
        gpu("sgemm_bounds_checks", sgemm_bounds_checks),
        gpu("reduce_f32", reduce_full::<f32>),
        gpu("reduce_f64", reduce_full::<f64>),
        gpu("reduce_i32", reduce_full::<i32>),
        gpu("reduce_f16", reduce_full::<f16>),
        gpu("reduce_bf16", reduce_full::<bf16>),
        gpu("reduce_max_nan_and_empty", reduce_max_nan_and_empty),
        gpu("reduce_deterministic", reduce_deterministic),
        gpu("reduce_rows_f32", reduce_rows::<f32>),
        gpu("reduce_rows_f64", reduce_rows::<f64>),
        gpu("reduce_rows_f16", reduce_rows::<f16>),
        gpu("reduce_rows_bf16", reduce_rows::<bf16>),
        gpu("reduce_dims_f32", reduce_dims::<f32>),
        gpu("reduce_dims_f64", reduce_dims::<f64>),
        gpu("reduce_dims_f16", reduce_dims::<f16>),
        gpu("reduce_dims_bf16", reduce_dims::<bf16>),
        gpu("copy_coalesced_and_strided", copies),
        gpu("transpose_all", transposes),
        gpu("strided_copy_f32", strided_copy_all::<f32>),
        gpu("strided_copy_f64", strided_copy_all::<f64>),
        gpu("strided_copy_i32", strided_copy_all::<i32>),
        gpu("strided_copy_f16", strided_copy_all::<f16>),
        gpu("strided_copy_bf16", strided_copy_all::<bf16>),
        gpu("softmax_rows", softmax),
        gpu("random_philox_uniform_normal", random),
        gpu("thread_hierarchy", thread_hierarchy),
    ]);
}
