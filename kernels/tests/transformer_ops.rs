//! The transformer's non-attention ops (LayerNorm, GELU, the fused classifier, embedding,
//! dropout, global-norm clipping) against their CPU twins in `cuda_stack_kernels::reference`.
//!
//! GPU tests are ignored where there is no GPU. Inputs are uploaded at element offset 0 and 1
//! of their buffers (misaligned views: the 16-byte paths must fall back), outputs are poisoned
//! (0xFF bytes: NaN) and the poisoned element in front of each output view is checked.
//! The CPU tests check the references themselves against finite differences.
//!
//! Tolerances (the reference computes in f64):
//! - LayerNorm `y`: f32 `2e-5·(1 + |y|)`, f64 `1e-12·(1 + |y|)`, f16/bf16 1 ulp + `1e-5`;
//!   `mean`/`rstd` `1e-5` relative (f64 `1e-12`); `dx`: f32 `1e-4·(1 + |dx|)`, f64 `1e-10`,
//!   f16/bf16 2 ulp + `1e-3`; `dweight`/`dbias`: `2e-5·Σ|terms|` (f64 `1e-12`) + 1 ulp of the
//!   dtype; **bit-identical** across two runs.
//! - GELU (x in [-5, 5); f32 through `sigmoid(2u)` (ex2/rcp.approx), f64 `tanh` within 2 ulp): f32 8 ulp
//!   + `2e-6`, f64 8 ulp + `1e-14`, f16/bf16 1 ulp + `2e-6`; backward (dy in [-2, 2)) f32 16 ulp
//!   + `2e-5`, f64 16 ulp + `1e-13`, f16/bf16 1 ulp + `2e-5`.
//! - Classifier: loss f32 `2e-5·(1 + |loss|)` (f64 `1e-12`); `dlogits` f32 `1e-5·|d| +
//!   1e-7·|gs|` (f64 `1e-12`), f16/bf16 1 ulp + `1e-5·|d|`; the loss-only kernel vs the fused
//!   loss (dlogits at the other 16-byte phase than the logits) and in-place vs out-of-place
//!   (the same code, separately compiled): losses `1e-6` relative (f64 `1e-14`), gradients
//!   2 ulp (in practice identical).
//! - Embedding forward and backward, dropout: **exact** (the references follow the kernels'
//!   order); embedding backward also bit-identical across two runs.
//! - Clipping: norm `1e-5` relative (f64 `1e-12`), the scaled tensors exactly `x · scale` of the
//!   device's scale; the norm bit-identical across two runs.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{Context, DeviceBuffer, DeviceRepr, DeviceSlice, LaunchConfig, Stream};
use cuda_stack_kernels::{ops, reference, Compute, DType, Element, Kernels};
use cuda_tests::{cpu, ensure, gpu, TestResult};
use std::sync::Arc;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const OFFSETS: &[usize] = &[0, 1];

fn setup() -> Res<(Context, Stream, Arc<Kernels>)> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    Ok((ctx, s, k))
}

/// xorshift64*: deterministic test data.
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

fn data<T: Element>(seed: u64, n: usize, scale: f64) -> Vec<T> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| T::from_f64(scale * rng.unit())).collect()
}

fn upload<T: DeviceRepr>(s: &Stream, data: &[T], off: usize) -> Res<DeviceBuffer<T>> {
    let mut v: Vec<T> = vec![T::zeroed(); off];
    v.extend_from_slice(data);
    Ok(s.clone_htod(&v)?)
}

fn poisoned<T: DeviceRepr>(s: &Stream, n: usize, off: usize) -> Res<DeviceBuffer<T>> {
    let mut b = s.alloc_zeros::<T>(n + off)?;
    s.memset_bytes(&mut b, 0xFF)?;
    Ok(b)
}

fn download<T: DeviceRepr>(s: &Stream, buf: &DeviceSlice<T>, off: usize) -> Res<Vec<T>> {
    let all = s.clone_dtoh(buf)?;
    let front: &[u8] = cuda_stack_driver::bytemuck::cast_slice(&all[..off]);
    ensure!(
        front.iter().all(|&b| b == 0xFF),
        "an element in front of the output view was overwritten"
    );
    Ok(all[off..].to_vec())
}

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

/// `|got − want| <= tol(i, want)` (NaN matches NaN).
fn check<T: Element>(
    what: &str,
    got: &[T],
    want: &[T],
    tol: impl Fn(usize, f64) -> f64,
) -> TestResult {
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
        let t = tol(i, w);
        ensure!(
            (g - w).abs() <= t,
            "{what}: at {i}: got {g}, expected {w} (tolerance {t:e})"
        );
    }
    Ok(())
}

/// Bit-for-bit equality of two runs (or of two kernels).
fn check_bits<T: DeviceRepr>(what: &str, a: &[T], b: &[T]) -> TestResult {
    let (x, y): (&[u8], &[u8]) = (
        cuda_stack_driver::bytemuck::cast_slice(a),
        cuda_stack_driver::bytemuck::cast_slice(b),
    );
    ensure!(x == y, "{what}: not bit-identical");
    Ok(())
}

fn scalars_f64<S: Compute>(v: &[S]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

const LN_ROWS: &[usize] = &[0, 1, 7, 513];
/// Warp kernels up to 1024 columns (f64: 512 forward, 256 backward), block kernels above
/// (in registers up to 4096, f64 2048; 5000 re-reads rows).
const LN_COLS: &[usize] = &[1, 3, 32, 33, 300, 768, 1023, 2048, 4096, 5000];

fn layer_norm_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let eps = 1e-5;
    for &rows in LN_ROWS {
        for &cols in LN_COLS {
            for &off in OFFSETS {
                let what = format!("layer_norm {} [{rows}, {cols}] offset {off}", T::DTYPE);
                let n = rows * cols;
                // A mean far from 0 checks the two-pass variance.
                let x: Vec<T> = data::<f64>(1, n, 2.0)
                    .iter()
                    .map(|v| T::from_f64(v + 3.0))
                    .collect();
                let w: Vec<T> = data(2, cols, 1.5);
                let b: Vec<T> = data(3, cols, 0.5);
                let dy: Vec<T> = data(4, n, 1.0);
                let (dx_, dw_, db_, ddy) = (
                    upload(&s, &x, off)?,
                    upload(&s, &w, off)?,
                    upload(&s, &b, off)?,
                    upload(&s, &dy, off)?,
                );
                let (xv, wv, bv, dyv) = (
                    dx_.slice(off..)?,
                    dw_.slice(off..)?,
                    db_.slice(off..)?,
                    ddy.slice(off..)?,
                );
                let mut y = poisoned::<T>(&s, n, off)?;
                let mut mean = poisoned::<T::Scalar>(&s, rows, off)?;
                let mut rstd = poisoned::<T::Scalar>(&s, rows, off)?;
                ops::layer_norm_fwd::<T>(
                    &k,
                    &s,
                    &xv,
                    &wv,
                    &bv,
                    &mut y.slice_mut(off..)?,
                    &mut mean.slice_mut(off..)?,
                    &mut rstd.slice_mut(off..)?,
                    rows,
                    cols,
                    <T::Scalar as Compute>::of_f64(eps),
                )?;
                let (want_y, want_m, want_r) = reference::layer_norm(&x, &w, &b, rows, cols, eps);
                let got_y = download(&s, &y, off)?;
                let got_m = scalars_f64(&download(&s, &mean, off)?);
                let got_r = scalars_f64(&download(&s, &rstd, off)?);
                let dt = T::DTYPE;
                check(&format!("{what}: y"), &got_y, &want_y, |_, w| match dt {
                    DType::F32 => 2e-5 * (1.0 + w.abs()),
                    DType::F64 => 1e-12 * (1.0 + w.abs()),
                    _ => ulp(dt, w) + 1e-5,
                })?;
                let rel = if dt == DType::F64 { 1e-12 } else { 1e-5 };
                check(&format!("{what}: mean"), &got_m, &want_m, |_, w| {
                    rel * (1.0 + w.abs())
                })?;
                check(&format!("{what}: rstd"), &got_r, &want_r, |_, w| {
                    rel * w.abs()
                })?;

                // Backward, from the device's statistics; twice, for determinism.
                let ws = ops::layer_norm_workspace_len(rows, cols)?;
                let mut runs = Vec::new();
                for _ in 0..2 {
                    let mut dx = poisoned::<T>(&s, n, off)?;
                    let mut dw = poisoned::<T>(&s, cols, off)?;
                    let mut db = poisoned::<T>(&s, cols, off)?;
                    let mut pw = poisoned::<T::Scalar>(&s, ws, 0)?;
                    let mut pb = poisoned::<T::Scalar>(&s, ws, 0)?;
                    ops::layer_norm_bwd::<T>(
                        &k,
                        &s,
                        &xv,
                        &wv,
                        &mean.slice(off..)?,
                        &rstd.slice(off..)?,
                        &dyv,
                        &mut dx.slice_mut(off..)?,
                        &mut dw.slice_mut(off..)?,
                        &mut db.slice_mut(off..)?,
                        &mut pw,
                        &mut pb,
                        rows,
                        cols,
                    )?;
                    runs.push((
                        download(&s, &dx, off)?,
                        download(&s, &dw, off)?,
                        download(&s, &db, off)?,
                    ));
                }
                let (want_dx, want_dw, want_db) =
                    reference::layer_norm_bwd(&x, &w, &got_m, &got_r, &dy, rows, cols);
                let (got_dx, got_dw, got_db) = &runs[0];
                check(&format!("{what}: dx"), got_dx, &want_dx, |_, w| match dt {
                    DType::F32 => 1e-4 * (1.0 + w.abs()),
                    DType::F64 => 1e-10 * (1.0 + w.abs()),
                    _ => 2.0 * ulp(dt, w) + 1e-3,
                })?;
                // Σ|terms| per column bounds the summation error.
                let mut abs_w = vec![0.0f64; cols];
                let mut abs_b = vec![0.0f64; cols];
                for r in 0..rows {
                    for c in 0..cols {
                        let d = dy[r * cols + c].to_f64();
                        let xh = (x[r * cols + c].to_f64() - got_m[r]) * got_r[r];
                        abs_w[c] += (d * xh).abs();
                        abs_b[c] += d.abs();
                    }
                }
                let sum_tol = if dt == DType::F64 { 1e-12 } else { 2e-5 };
                check(&format!("{what}: dweight"), got_dw, &want_dw, |i, w| {
                    sum_tol * abs_w[i] + ulp(dt, w)
                })?;
                check(&format!("{what}: dbias"), got_db, &want_db, |i, w| {
                    sum_tol * abs_b[i] + ulp(dt, w)
                })?;
                check_bits(&format!("{what}: dx run 2"), &runs[1].0, got_dx)?;
                check_bits(&format!("{what}: dweight run 2"), &runs[1].1, got_dw)?;
                check_bits(&format!("{what}: dbias run 2"), &runs[1].2, got_db)?;
            }
        }
    }
    // Zero columns with rows is an error, named.
    let x = s.alloc_zeros::<T>(0)?;
    let mut m = s.alloc_zeros::<T::Scalar>(2)?;
    let mut r = s.alloc_zeros::<T::Scalar>(2)?;
    let mut y = s.alloc_zeros::<T>(0)?;
    let e = ops::layer_norm_fwd::<T>(
        &k,
        &s,
        &x,
        &x,
        &x,
        &mut y,
        &mut m,
        &mut r,
        2,
        0,
        <T::Scalar as Compute>::of_f64(eps),
    );
    ensure!(e.is_err(), "layer_norm of [2, 0] must fail");
    Ok(())
}

/// The one-pass backward (`layer_norm_bwd_fused_*`: dx and the parameter partials together,
/// what `ops::layer_norm_bwd` runs for rows up to 1024 columns) against the two-kernel path it
/// replaced (`layer_norm_bwd_dx_*`, `layer_norm_bwd_params_*`, then the same
/// `layer_norm_bwd_params_reduce_*`), launched here through the raw handles: dx, dweight and
/// dbias **bit for bit**, with and without a pending gradient, at offsets 0 and 1 (the packet
/// and the scalar paths), at chunkings of 1 to 256 parts.
macro_rules! one_pass_equals_two_pass {
    ($name:ident, $t:ty, $dx:ident, $params:ident, $reduce:ident) => {
        fn $name() -> TestResult {
            type T = $t;
            type S = <T as Element>::Scalar;
            let (_ctx, s, k) = setup()?;
            for &rows in &[1usize, 7, 64, 513, 4099, 16384] {
                for &cols in &[1usize, 3, 32, 33, 256, 300, 768, 1000, 1023, 1024] {
                    if cols > 256 && T::DTYPE == DType::F64 {
                        continue; // f64 rows a warp holds: up to 256 columns
                    }
                    for &off in OFFSETS {
                        for add in [false, true] {
                            let what = format!(
                                "one-pass layer_norm_bwd {} [{rows}, {cols}] offset {off} \
                                 pending {add}",
                                T::DTYPE
                            );
                            let n = rows * cols;
                            let x: Vec<T> = data(11, n, 2.0);
                            let w: Vec<T> = data(12, cols, 1.5);
                            let dy: Vec<T> = data(13, n, 1.0);
                            let pend: Vec<T> = data(14, n, 1.0);
                            let (bx, bw, bdy, bp) = (
                                upload(&s, &x, off)?,
                                upload(&s, &w, off)?,
                                upload(&s, &dy, off)?,
                                upload(&s, &pend, off)?,
                            );
                            let (xv, wv, dyv, pv) = (
                                bx.slice(off..)?,
                                bw.slice(off..)?,
                                bdy.slice(off..)?,
                                bp.slice(off..)?,
                            );
                            let mut y = s.alloc_zeros::<T>(n)?;
                            let mut mean = s.alloc_zeros::<S>(rows)?;
                            let mut rstd = s.alloc_zeros::<S>(rows)?;
                            ops::layer_norm_fwd::<T>(
                                &k,
                                &s,
                                &xv,
                                &wv,
                                &wv,
                                &mut y,
                                &mut mean,
                                &mut rstd,
                                rows,
                                cols,
                                <S as Compute>::of_f64(1e-5),
                            )?;
                            let ws = ops::layer_norm_workspace_len(rows, cols)?;
                            let (parts, chunk) = ops::layer_norm_parts(rows);
                            // The op (one pass).
                            let mut dx1 = poisoned::<T>(&s, n, off)?;
                            let mut dw1 = s.alloc_zeros::<T>(cols)?;
                            let mut db1 = s.alloc_zeros::<T>(cols)?;
                            let mut pw = s.alloc_zeros::<S>(ws)?;
                            let mut pb = s.alloc_zeros::<S>(ws)?;
                            if add {
                                ops::layer_norm_bwd_add::<T>(
                                    &k,
                                    &s,
                                    &xv,
                                    &wv,
                                    &mean,
                                    &rstd,
                                    &dyv,
                                    &pv,
                                    &mut dx1.slice_mut(off..)?,
                                    &mut dw1,
                                    &mut db1,
                                    &mut pw,
                                    &mut pb,
                                    rows,
                                    cols,
                                )?;
                            } else {
                                ops::layer_norm_bwd::<T>(
                                    &k,
                                    &s,
                                    &xv,
                                    &wv,
                                    &mean,
                                    &rstd,
                                    &dyv,
                                    &mut dx1.slice_mut(off..)?,
                                    &mut dw1,
                                    &mut db1,
                                    &mut pw,
                                    &mut pb,
                                    rows,
                                    cols,
                                )?;
                            }
                            // The two-kernel path, as ops::layer_norm_bwd launched it before.
                            let mut dx2 = poisoned::<T>(&s, n, off)?;
                            let mut dw2 = s.alloc_zeros::<T>(cols)?;
                            let mut db2 = s.alloc_zeros::<T>(cols)?;
                            let mut pw2 = s.alloc_zeros::<S>(ws)?;
                            let mut pb2 = s.alloc_zeros::<S>(ws)?;
                            let (r, c) = (rows as i32, cols as i32);
                            let packet = 16 / std::mem::size_of::<T>();
                            let vec = cols % packet == 0 && off == 0;
                            let tile = if vec { 32 * packet } else { 32 };
                            // SAFETY: the kernels' launch contracts (layer_norm.cu): dx block
                            // 256 (8 rows a block), params block (32, 8) with a column-tile grid
                            // and `parts` chunks of `chunk` rows (parts · cols = ws partials),
                            // reduce block (32, 16); every buffer holds what the shapes name.
                            unsafe {
                                k.$dx()?.launch(
                                    &s,
                                    &LaunchConfig::new(rows.div_ceil(8) as u32, 256),
                                    &xv,
                                    &wv,
                                    &mean,
                                    &rstd,
                                    &dyv,
                                    if add { &pv } else { &dyv },
                                    add as i32,
                                    &mut dx2.slice_mut(off..)?,
                                    r,
                                    c,
                                )?;
                                k.$params()?.launch(
                                    &s,
                                    &LaunchConfig::new(
                                        (cols.div_ceil(tile) as u32, parts as u32, 1),
                                        (32, 8, 1),
                                    ),
                                    &xv,
                                    &mean,
                                    &rstd,
                                    &dyv,
                                    &mut pw2,
                                    &mut pb2,
                                    r,
                                    c,
                                    chunk as i32,
                                )?;
                                k.$reduce()?.launch(
                                    &s,
                                    &LaunchConfig::new(cols.div_ceil(32) as u32, (32, 16, 1)),
                                    &pw2,
                                    &pb2,
                                    &mut dw2,
                                    &mut db2,
                                    parts as i32,
                                    c,
                                )?;
                            }
                            check_bits(
                                &format!("{what}: dx"),
                                &download(&s, &dx1, off)?,
                                &download(&s, &dx2, off)?,
                            )?;
                            for (name, a, b) in [("partial_w", &pw, &pw2), ("partial_b", &pb, &pb2)]
                            {
                                let (a, b) = (s.clone_dtoh(a)?, s.clone_dtoh(b)?);
                                check_bits(&format!("{what}: {name}"), &a, &b)?;
                            }
                            for (name, a, b) in [("dweight", &dw1, &dw2), ("dbias", &db1, &db2)] {
                                let (a, b) = (s.clone_dtoh(a)?, s.clone_dtoh(b)?);
                                check_bits(&format!("{what}: {name}"), &a, &b)?;
                            }
                        }
                    }
                }
            }
            Ok(())
        }
    };
}
one_pass_equals_two_pass!(
    ln_one_pass_f32,
    f32,
    layer_norm_bwd_dx_f32,
    layer_norm_bwd_params_f32,
    layer_norm_bwd_params_reduce_f32
);
one_pass_equals_two_pass!(
    ln_one_pass_f64,
    f64,
    layer_norm_bwd_dx_f64,
    layer_norm_bwd_params_f64,
    layer_norm_bwd_params_reduce_f64
);
one_pass_equals_two_pass!(
    ln_one_pass_f16,
    f16,
    layer_norm_bwd_dx_f16,
    layer_norm_bwd_params_f16,
    layer_norm_bwd_params_reduce_f16
);
one_pass_equals_two_pass!(
    ln_one_pass_bf16,
    bf16,
    layer_norm_bwd_dx_bf16,
    layer_norm_bwd_params_bf16,
    layer_norm_bwd_params_reduce_bf16
);

/// `layer_norm_fwd_add` against `layer_norm_fwd` of its own `sum` (bit for bit: the sum is
/// rounded once and normalized from the rounded values) and `sum` against the host's rounded
/// sum; `layer_norm_bwd_add` against `layer_norm_bwd` (dweight, dbias bit for bit) and against
/// the host's `pending + dx`. Residual and pending buffers at every offset pairing with `x`
/// (packet path, scalar path, mixed alignment).
fn layer_norm_add_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let eps = 1e-5;
    let dt = T::DTYPE;
    let sc = |v: f64| <T::Scalar as Compute>::of_f64(v);
    for &rows in LN_ROWS {
        for &cols in LN_COLS {
            for &off in OFFSETS {
                for &roff in OFFSETS {
                    let what = format!(
                        "add_layer_norm {dt} [{rows}, {cols}] offsets x {off}, residual {roff}"
                    );
                    let n = rows * cols;
                    let x: Vec<T> = data::<f64>(11, n, 2.0)
                        .iter()
                        .map(|v| T::from_f64(v + 3.0))
                        .collect();
                    let res: Vec<T> = data(12, n, 1.0);
                    let w: Vec<T> = data(13, cols, 1.5);
                    let b: Vec<T> = data(14, cols, 0.5);
                    let dy: Vec<T> = data(15, n, 1.0);
                    let pend: Vec<T> = data(16, n, 0.5);
                    let (bx, br, bw, bb, bdy, bp) = (
                        upload(&s, &x, off)?,
                        upload(&s, &res, roff)?,
                        upload(&s, &w, off)?,
                        upload(&s, &b, off)?,
                        upload(&s, &dy, off)?,
                        upload(&s, &pend, roff)?,
                    );
                    let (xv, rv, wv, bv) = (
                        bx.slice(off..)?,
                        br.slice(roff..)?,
                        bw.slice(off..)?,
                        bb.slice(off..)?,
                    );
                    let mut sum = poisoned::<T>(&s, n, roff)?;
                    let mut y = poisoned::<T>(&s, n, off)?;
                    let mut mean = poisoned::<T::Scalar>(&s, rows, off)?;
                    let mut rstd = poisoned::<T::Scalar>(&s, rows, off)?;
                    ops::layer_norm_fwd_add::<T>(
                        &k,
                        &s,
                        &xv,
                        &rv,
                        &mut sum.slice_mut(roff..)?,
                        &wv,
                        &bv,
                        &mut y.slice_mut(off..)?,
                        &mut mean.slice_mut(off..)?,
                        &mut rstd.slice_mut(off..)?,
                        rows,
                        cols,
                        sc(eps),
                    )?;
                    let got_sum = download(&s, &sum, roff)?;
                    let want_sum: Vec<T> = x
                        .iter()
                        .zip(&res)
                        .map(|(a, r)| T::from_f64(a.to_f64() + r.to_f64()))
                        .collect();
                    check(&format!("{what}: sum"), &got_sum, &want_sum, |_, w| {
                        ulp(dt, w)
                    })?;
                    // The plain kernel on the device's sum: the same bits. The sum sits where
                    // `sum` did (offset roff), so both kernels take the same path (packets or
                    // scalars: they sum a row in different orders).
                    let bs = upload(&s, &got_sum, roff)?;
                    let mut y2 = poisoned::<T>(&s, n, off)?;
                    let mut m2 = poisoned::<T::Scalar>(&s, rows, off)?;
                    let mut r2 = poisoned::<T::Scalar>(&s, rows, off)?;
                    ops::layer_norm_fwd::<T>(
                        &k,
                        &s,
                        &bs.slice(roff..)?,
                        &wv,
                        &bv,
                        &mut y2.slice_mut(off..)?,
                        &mut m2.slice_mut(off..)?,
                        &mut r2.slice_mut(off..)?,
                        rows,
                        cols,
                        sc(eps),
                    )?;
                    check_bits(
                        &format!("{what}: y"),
                        &download(&s, &y, off)?,
                        &download(&s, &y2, off)?,
                    )?;
                    check_bits(
                        &format!("{what}: mean"),
                        &download(&s, &mean, off)?,
                        &download(&s, &m2, off)?,
                    )?;
                    check_bits(
                        &format!("{what}: rstd"),
                        &download(&s, &rstd, off)?,
                        &download(&s, &r2, off)?,
                    )?;

                    // Backward with and without the pending gradient.
                    let ws = ops::layer_norm_workspace_len(rows, cols)?;
                    let mut outs = Vec::new();
                    for fold in [false, true] {
                        let mut dx = poisoned::<T>(&s, n, roff)?;
                        let mut dw = poisoned::<T>(&s, cols, off)?;
                        let mut db = poisoned::<T>(&s, cols, off)?;
                        let mut pw = poisoned::<T::Scalar>(&s, ws, 0)?;
                        let mut pb = poisoned::<T::Scalar>(&s, ws, 0)?;
                        let (mv, rsv, dyv) =
                            (mean.slice(off..)?, rstd.slice(off..)?, bdy.slice(off..)?);
                        let (xs, dxs) = (bs.slice(roff..)?, &mut dx.slice_mut(roff..)?);
                        let (dws, dbs) = (&mut dw.slice_mut(off..)?, &mut db.slice_mut(off..)?);
                        if fold {
                            ops::layer_norm_bwd_add::<T>(
                                &k,
                                &s,
                                &xs,
                                &wv,
                                &mv,
                                &rsv,
                                &dyv,
                                &bp.slice(roff..)?,
                                dxs,
                                dws,
                                dbs,
                                &mut pw,
                                &mut pb,
                                rows,
                                cols,
                            )?;
                        } else {
                            ops::layer_norm_bwd::<T>(
                                &k, &s, &xs, &wv, &mv, &rsv, &dyv, dxs, dws, dbs, &mut pw, &mut pb,
                                rows, cols,
                            )?;
                        }
                        outs.push((
                            download(&s, &dx, roff)?,
                            download(&s, &dw, off)?,
                            download(&s, &db, off)?,
                        ));
                    }
                    let (plain, folded) = (&outs[0], &outs[1]);
                    check_bits(&format!("{what}: dweight"), &folded.1, &plain.1)?;
                    check_bits(&format!("{what}: dbias"), &folded.2, &plain.2)?;
                    // pending + dx: the plain dx is itself rounded, so allow its rounding and
                    // the fused result's (one each), plus the plain kernel's own tolerance.
                    let m = scalars_f64(&download(&s, &mean, off)?);
                    let r = scalars_f64(&download(&s, &rstd, off)?);
                    let (ref_dx, _, _) =
                        reference::layer_norm_bwd(&got_sum, &w, &m, &r, &dy, rows, cols);
                    let want: Vec<T> = ref_dx
                        .iter()
                        .zip(&pend)
                        .map(|(d, p)| T::from_f64(d.to_f64() + p.to_f64()))
                        .collect();
                    check(
                        &format!("{what}: dx + pending"),
                        &folded.0,
                        &want,
                        |i, w| {
                            let d = ref_dx[i].to_f64().abs();
                            match dt {
                                DType::F32 => 1e-4 * (1.0 + d) + ulp(dt, w),
                                DType::F64 => 1e-10 * (1.0 + d),
                                _ => 2.0 * ulp(dt, d) + ulp(dt, w) + 1e-3,
                            }
                        },
                    )?;
                }
            }
        }
    }
    // A residual of the wrong length is refused before any launch.
    let x = s.alloc_zeros::<T>(6)?;
    let short = s.alloc_zeros::<T>(5)?;
    let mut sum = s.alloc_zeros::<T>(6)?;
    let mut y = s.alloc_zeros::<T>(6)?;
    let mut m = s.alloc_zeros::<T::Scalar>(2)?;
    let mut r = s.alloc_zeros::<T::Scalar>(2)?;
    let w = s.alloc_zeros::<T>(3)?;
    let e = ops::layer_norm_fwd_add::<T>(
        &k,
        &s,
        &x,
        &short,
        &mut sum,
        &w,
        &w,
        &mut y,
        &mut m,
        &mut r,
        2,
        3,
        sc(eps),
    );
    ensure!(
        e.is_err(),
        "add_layer_norm with a 5-element residual for [2, 3] must fail"
    );
    // So is a pending gradient of the wrong length in the backward.
    let ws = ops::layer_norm_workspace_len(2, 3)?;
    let (mut dx, mut dw, mut db) = (
        s.alloc_zeros::<T>(6)?,
        s.alloc_zeros::<T>(3)?,
        s.alloc_zeros::<T>(3)?,
    );
    let (mut pw, mut pb) = (
        s.alloc_zeros::<T::Scalar>(ws)?,
        s.alloc_zeros::<T::Scalar>(ws)?,
    );
    let e = ops::layer_norm_bwd_add::<T>(
        &k, &s, &x, &w, &m, &r, &x, &short, &mut dx, &mut dw, &mut db, &mut pw, &mut pb, 2, 3,
    );
    ensure!(
        e.is_err(),
        "layer_norm_bwd_add with a 5-element pending gradient for [2, 3] must fail"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// GELU

const SIZES: &[usize] = &[0, 1, 7, 31, 33, 1025, 4099, 65537, (1 << 20) + 3];

fn gelu_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let dt = T::DTYPE;
    for &n in SIZES {
        for &off in OFFSETS {
            let what = format!("gelu {dt} n = {n} offset {off}");
            let x: Vec<T> = data(11, n, 5.0);
            let dy: Vec<T> = data(12, n, 2.0);
            let (bx, bdy) = (upload(&s, &x, off)?, upload(&s, &dy, off)?);
            let mut y = poisoned::<T>(&s, n, off)?;
            ops::gelu_fwd::<T>(&k, &s, &bx.slice(off..)?, &mut y.slice_mut(off..)?)?;
            check(
                &format!("{what}: y"),
                &download(&s, &y, off)?,
                &reference::gelu(&x),
                |_, w| match dt {
                    DType::F32 => 8.0 * ulp(dt, w) + 2e-6,
                    DType::F64 => 8.0 * ulp(dt, w) + 1e-14,
                    _ => ulp(dt, w) + 2e-6,
                },
            )?;
            let mut dx = poisoned::<T>(&s, n, off)?;
            ops::gelu_bwd::<T>(
                &k,
                &s,
                &bx.slice(off..)?,
                &bdy.slice(off..)?,
                &mut dx.slice_mut(off..)?,
            )?;
            check(
                &format!("{what}: dx"),
                &download(&s, &dx, off)?,
                &reference::gelu_bwd(&x, &dy),
                |_, w| match dt {
                    DType::F32 => 16.0 * ulp(dt, w) + 2e-5,
                    DType::F64 => 16.0 * ulp(dt, w) + 1e-13,
                    _ => ulp(dt, w) + 2e-5,
                },
            )?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Fused classifier

fn classifier_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let dt = T::DTYPE;
    for &rows in &[0usize, 1, 7, 513] {
        for &classes in &[1usize, 8, 65, 50257] {
            for &off in OFFSETS {
                let what = format!("classifier {dt} [{rows}, {classes}] offset {off}");
                let n = rows * classes;
                let logits: Vec<T> = data(21, n, 4.0);
                let mut rng = Rng::new(22);
                let mut targets: Vec<i32> = (0..rows)
                    .map(|_| (rng.next_u64() % classes as u64) as i32)
                    .collect();
                if rows == 7 {
                    targets[3] = -1; // out of range: NaN loss and row
                    targets[5] = classes as i32;
                }
                let (g, scale) = (1.5f64, 1.0 / rows.max(1) as f64);
                let gs = g * scale;
                let bl = upload(&s, &logits, off)?;
                let bt = upload(&s, &targets, off)?;
                let bg = s.clone_htod(&[<T::Scalar as Compute>::of_f64(g)])?;
                let mut loss = poisoned::<T::Scalar>(&s, rows, off)?;
                // dlogits at the other 16-byte phase than the logits: the gradient pass cannot
                // use the logits' packet split, and the losses must not depend on it.
                let doff = 1 - off;
                let mut dl = poisoned::<T>(&s, n, doff)?;
                ops::fused_classifier::<T>(
                    &k,
                    &s,
                    &bl.slice(off..)?,
                    &bt.slice(off..)?,
                    &bg,
                    &mut loss.slice_mut(off..)?,
                    &mut dl.slice_mut(doff..)?,
                    rows,
                    classes,
                    <T::Scalar as Compute>::of_f64(scale),
                )?;
                let got_loss = download(&s, &loss, off)?;
                let got_dl = download(&s, &dl, doff)?;
                let (want_loss, want_dl) =
                    reference::fused_classifier(&logits, &targets, rows, classes, gs);
                check(
                    &format!("{what}: loss"),
                    &scalars_f64(&got_loss),
                    &want_loss,
                    |_, w| {
                        if dt == DType::F64 {
                            1e-12 * (1.0 + w.abs())
                        } else {
                            2e-5 * (1.0 + w.abs())
                        }
                    },
                )?;
                check(
                    &format!("{what}: dlogits"),
                    &got_dl,
                    &want_dl,
                    |_, w| match dt {
                        DType::F32 => 1e-5 * w.abs() + 1e-7 * gs,
                        DType::F64 => 1e-12 * (w.abs() + gs),
                        _ => ulp(dt, w) + 1e-5 * w.abs(),
                    },
                )?;
                // The loss-only kernel gives the same losses (its pass splits the row by the
                // logits' address alone, as the fused kernel's loss pass does, even with dlogits
                // at another 16-byte phase; the two are separately compiled, so within 1e-6).
                let mut loss2 = poisoned::<T::Scalar>(&s, rows, off)?;
                ops::classifier_loss::<T>(
                    &k,
                    &s,
                    &bl.slice(off..)?,
                    &bt.slice(off..)?,
                    &mut loss2.slice_mut(off..)?,
                    rows,
                    classes,
                )?;
                let same_loss = |_: usize, w: f64| {
                    if dt == DType::F64 {
                        1e-14 * (1.0 + w.abs())
                    } else {
                        1e-6 * (1.0 + w.abs())
                    }
                };
                check(
                    &format!("{what}: classifier_loss vs fused (dlogits at offset {doff})"),
                    &scalars_f64(&download(&s, &loss2, off)?),
                    &scalars_f64(&got_loss),
                    same_loss,
                )?;
                // In place: the same losses and gradient, bit for bit.
                let mut inplace = upload(&s, &logits, off)?;
                let mut loss3 = poisoned::<T::Scalar>(&s, rows, off)?;
                ops::fused_classifier_inplace::<T>(
                    &k,
                    &s,
                    &mut inplace.slice_mut(off..)?,
                    &bt.slice(off..)?,
                    &bg,
                    &mut loss3.slice_mut(off..)?,
                    rows,
                    classes,
                    <T::Scalar as Compute>::of_f64(scale),
                )?;
                check(
                    &format!("{what}: in-place loss"),
                    &scalars_f64(&download(&s, &loss3, off)?),
                    &scalars_f64(&got_loss),
                    same_loss,
                )?;
                let all = s.clone_dtoh(&inplace)?;
                check(
                    &format!("{what}: in-place dlogits"),
                    &all[off..],
                    &got_dl,
                    |_, w| 2.0 * ulp(dt, w),
                )?;
                // The loss pass that saves log-sum-exps: the same losses, lse = loss + x[t];
                // then the gradient from lse alone, over a fresh copy of the logits.
                let mut loss4 = poisoned::<T::Scalar>(&s, rows, off)?;
                let mut lse = poisoned::<T::Scalar>(&s, rows, off)?;
                ops::classifier_loss_lse::<T>(
                    &k,
                    &s,
                    &bl.slice(off..)?,
                    &bt.slice(off..)?,
                    &mut loss4.slice_mut(off..)?,
                    &mut lse.slice_mut(off..)?,
                    rows,
                    classes,
                )?;
                let got_lse = scalars_f64(&download(&s, &lse, off)?);
                check(
                    &format!("{what}: classifier_loss_lse loss"),
                    &scalars_f64(&download(&s, &loss4, off)?),
                    &scalars_f64(&got_loss),
                    same_loss,
                )?;
                let want_lse: Vec<f64> = (0..rows)
                    .map(|r| {
                        let row = &logits[r * classes..(r + 1) * classes];
                        let m = row
                            .iter()
                            .map(|v| v.to_f64())
                            .fold(f64::NEG_INFINITY, f64::max);
                        m + row.iter().map(|v| (v.to_f64() - m).exp()).sum::<f64>().ln()
                    })
                    .collect();
                check(&format!("{what}: lse"), &got_lse, &want_lse, |_, w| {
                    if dt == DType::F64 {
                        1e-12 * (1.0 + w.abs())
                    } else {
                        2e-6 * (1.0 + w.abs())
                    }
                })?;
                let mut fresh = upload(&s, &logits, off)?;
                ops::classifier_grad_lse_inplace::<T>(
                    &k,
                    &s,
                    &mut fresh.slice_mut(off..)?,
                    &bt.slice(off..)?,
                    &lse.slice(off..)?,
                    &bg,
                    rows,
                    classes,
                    <T::Scalar as Compute>::of_f64(scale),
                )?;
                let from_lse = s.clone_dtoh(&fresh)?;
                if rows > 0 {
                    // One log-sum-exp short: refused, the logits untouched.
                    let mut kept = upload(&s, &logits, off)?;
                    let e = ops::classifier_grad_lse_inplace::<T>(
                        &k,
                        &s,
                        &mut kept.slice_mut(off..)?,
                        &bt.slice(off..)?,
                        &lse.slice(off..off + rows - 1)?,
                        &bg,
                        rows,
                        classes,
                        <T::Scalar as Compute>::of_f64(scale),
                    );
                    ensure!(e.is_err(), "{what}: a short lse must be refused");
                    check_bits(
                        &format!("{what}: logits after a refused gradient"),
                        &s.clone_dtoh(&kept)?[off..],
                        &logits,
                    )?;
                }
                // exp(x − lse) carries the rounding of x − lse (|lse| up to ~15 here): a few
                // 1e-6 relative in f32, beside the reference's own tolerance.
                check(
                    &format!("{what}: dlogits from lse"),
                    &from_lse[off..],
                    &want_dl,
                    |_, w| match dt {
                        DType::F32 => 2e-5 * w.abs() + 1e-7 * gs,
                        DType::F64 => 1e-12 * (w.abs() + gs),
                        _ => ulp(dt, w) + 2e-5 * w.abs(),
                    },
                )?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Embedding

/// `(vocab, cols, tokens)`: tiny, odd widths, a character vocabulary with long buckets
/// (the 32-column tiles), GPT-2's vocabulary (mostly empty buckets), none.
const EMB: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (1, 3, 7),
    (65, 33, 513),
    (65, 384, 16384),
    (50257, 64, 8192),
    (1000, 768, 300),
    (7, 1023, 0),
];

fn embedding_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let dt = T::DTYPE;
    for &(vocab, cols, n) in EMB {
        for &off in OFFSETS {
            let what = format!("embedding {dt} V = {vocab}, C = {cols}, N = {n}, offset {off}");
            let w: Vec<T> = data(31, vocab * cols, 1.0);
            let mut rng = Rng::new(32);
            // Skewed ids (the minimum of two uniforms: small ids are frequent), and a few bad.
            let mut ids: Vec<i32> = (0..n)
                .map(|_| {
                    let a = rng.next_u64() % vocab as u64;
                    let b = rng.next_u64() % vocab as u64;
                    a.min(b) as i32
                })
                .collect();
            if n >= 7 {
                ids[2] = -1;
                ids[6] = vocab as i32;
            }
            let (bw, bi) = (upload(&s, &w, off)?, upload(&s, &ids, off)?);
            let mut out = poisoned::<T>(&s, n * cols, off)?;
            ops::embedding_fwd::<T>(
                &k,
                &s,
                &bw.slice(off..)?,
                &bi.slice(off..)?,
                &mut out.slice_mut(off..)?,
                n,
                vocab,
                cols,
            )?;
            check(
                &format!("{what}: forward"),
                &download(&s, &out, off)?,
                &reference::embedding(&w, &ids, vocab, cols),
                |_, _| 0.0,
            )?;
            let dy: Vec<T> = data(33, n * cols, 1.0);
            let bdy = upload(&s, &dy, off)?;
            let want = reference::embedding_bwd(&ids, &dy, vocab, cols);
            let mut runs = Vec::new();
            for _ in 0..2 {
                let mut dw = poisoned::<T>(&s, vocab * cols, off)?;
                let mut ws = poisoned::<i32>(&s, ops::embedding_workspace_len(n, vocab)?, 0)?;
                ops::embedding_bwd::<T>(
                    &k,
                    &s,
                    &bi.slice(off..)?,
                    &bdy.slice(off..)?,
                    &mut dw.slice_mut(off..)?,
                    &mut ws,
                    n,
                    vocab,
                    cols,
                )?;
                runs.push(download(&s, &dw, off)?);
            }
            check_bits(&format!("{what}: backward vs reference"), &runs[0], &want)?;
            check_bits(&format!("{what}: backward run 2"), &runs[1], &runs[0])?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Dropout

fn dropout_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &n in SIZES {
        for &(p, seed, offset) in &[
            (0.0, 1u64, 0u64),
            (0.1, 2, 0),
            (0.5, 3, 5),
            (0.2, 4, 1 << 33),
            (1.0, 5, 0),
        ] {
            for &off in OFFSETS {
                let what = format!("dropout {} n = {n} p = {p} offset {off}", T::DTYPE);
                let x: Vec<T> = data(41, n, 3.0);
                let bx = upload(&s, &x, off)?;
                let mut out = poisoned::<T>(&s, n, off)?;
                ops::dropout::<T>(
                    &k,
                    &s,
                    &bx.slice(off..)?,
                    &mut out.slice_mut(off..)?,
                    p,
                    seed,
                    offset,
                )?;
                let got = download(&s, &out, off)?;
                check_bits(&what, &got, &reference::dropout(&x, p, seed, offset))?;
                if p == 0.0 {
                    check_bits(&format!("{what}: identity"), &got, &x)?;
                }
                if p == 1.0 {
                    ensure!(
                        got.iter().all(|v| v.to_f64() == 0.0),
                        "{what}: p = 1 must give zeros"
                    );
                }
            }
        }
    }
    let x = s.alloc_zeros::<T>(4)?;
    let mut out = s.alloc_zeros::<T>(4)?;
    ensure!(
        ops::dropout::<T>(&k, &s, &x, &mut out, 1.5, 0, 0).is_err(),
        "dropout with p = 1.5 must fail"
    );
    // Positions past the end of the Philox stream (offset + n > u64::MAX) are refused ...
    for offset in [u64::MAX, u64::MAX - 2] {
        ensure!(
            matches!(
                ops::dropout::<T>(&k, &s, &x, &mut out, 0.5, 0, offset),
                Err(cuda_stack_kernels::Error::Invalid { .. })
            ),
            "dropout at offset {offset} of 4 elements must fail with Error::Invalid"
        );
    }
    let mut u = s.alloc_zeros::<f32>(4)?;
    ensure!(
        matches!(
            ops::fill_uniform(&k, &s, &mut u, 0, u64::MAX - 2),
            Err(cuda_stack_kernels::Error::Invalid { .. })
        ),
        "fill_uniform at offset 2^64 - 3 of 4 elements must fail with Error::Invalid"
    );
    // ... and the last positions before it work (p = 0: the identity, every element written).
    for (offset, n) in [(u64::MAX - 7, 4usize), (u64::MAX - 3, 3)] {
        let xs: Vec<T> = data(42, n, 3.0);
        let bx = upload(&s, &xs, 0)?;
        let mut o = poisoned::<T>(&s, n, 0)?;
        ops::dropout::<T>(&k, &s, &bx, &mut o, 0.0, 7, offset)?;
        check_bits(
            &format!("dropout {} at offset {offset}", T::DTYPE),
            &s.clone_dtoh(&o)?,
            &xs,
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Global-norm clipping

fn clip_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let sizes = [0usize, 1, 3, 1000, 65537, (1 << 20) + 5];
    let host: Vec<Vec<T>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| data(50 + i as u64, n, 0.01))
        .collect();
    let slices: Vec<&[T]> = host.iter().map(|v| v.as_slice()).collect();
    for &max_norm in &[1e-3, 1.0, 1e6] {
        let (want_norm, want_scale) = reference::clip_grad_norm(&slices, max_norm);
        let mut norms = Vec::new();
        for _ in 0..2 {
            let mut bufs: Vec<DeviceBuffer<T>> =
                host.iter().map(|v| upload(&s, v, 0)).collect::<Res<_>>()?;
            let parts: Vec<usize> = sizes.iter().map(|&n| ops::sumsq_parts(n)).collect();
            let mut partial = poisoned::<T>(&s, parts.iter().sum(), 0)?;
            let mut at = 0;
            for (b, &p) in bufs.iter().zip(&parts) {
                ops::sumsq_partials::<T>(&k, &s, b, &mut partial.slice_mut(at..at + p)?)?;
                at += p;
            }
            let mut norm = poisoned::<T>(&s, 1, 0)?;
            let mut scale = poisoned::<T>(&s, 1, 0)?;
            ops::clip_coef::<T>(&k, &s, &partial, max_norm, &mut norm, &mut scale)?;
            for b in bufs.iter_mut() {
                ops::scale_by_device::<T>(&k, &s, b, &scale)?;
            }
            let got_norm = s.clone_dtoh(&norm)?[0];
            let got_scale = s.clone_dtoh(&scale)?[0];
            let rel = if T::DTYPE == DType::F64 { 1e-12 } else { 1e-5 };
            let what = format!("clip {} max_norm {max_norm}", T::DTYPE);
            ensure!(
                (got_norm.to_f64() - want_norm).abs() <= rel * want_norm,
                "{what}: norm {} vs {want_norm}",
                got_norm.to_f64()
            );
            ensure!(
                (got_scale.to_f64() - want_scale).abs() <= rel * want_scale,
                "{what}: scale {} vs {want_scale}",
                got_scale.to_f64()
            );
            for (b, v) in bufs.iter().zip(&host) {
                let sc = got_scale.to_scalar();
                let want: Vec<T> = v
                    .iter()
                    .map(|x| T::from_scalar(Compute::mul(x.to_scalar(), sc)))
                    .collect();
                check_bits(&format!("{what}: scaled"), &s.clone_dtoh(b)?, &want)?;
            }
            norms.push(got_norm);
        }
        check_bits("clip norm run 2", &norms[1..], &norms[..1])?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// CPU checks of the references (finite differences in f64).

fn fd(f: impl Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-6;
    (f(x + h) - f(x - h)) / (2.0 * h)
}

fn reference_gelu_grad() -> TestResult {
    for i in -40..=40 {
        let x = i as f64 * 0.1;
        let (a, b) = (reference::gelu_grad_one(x), fd(reference::gelu_one, x));
        ensure!(
            (a - b).abs() < 1e-8,
            "gelu'({x}) = {a}, finite difference {b}"
        );
    }
    Ok(())
}

fn reference_layer_norm_grad() -> TestResult {
    let (rows, cols) = (3, 5);
    let x: Vec<f64> = data(61, rows * cols, 2.0);
    let w: Vec<f64> = data(62, cols, 1.5);
    let b: Vec<f64> = data(63, cols, 1.0);
    let dy: Vec<f64> = data(64, rows * cols, 1.0);
    let eps = 1e-5;
    let loss = |x: &[f64], w: &[f64], b: &[f64]| -> f64 {
        let (y, _, _) = reference::layer_norm(x, w, b, rows, cols, eps);
        y.iter().zip(&dy).map(|(a, b)| a * b).sum()
    };
    let (_, m, r) = reference::layer_norm(&x, &w, &b, rows, cols, eps);
    let (dx, dw, db) = reference::layer_norm_bwd(&x, &w, &m, &r, &dy, rows, cols);
    for i in 0..rows * cols {
        let f = |v: f64| {
            let mut x2 = x.clone();
            x2[i] = v;
            loss(&x2, &w, &b)
        };
        let g = fd(f, x[i]);
        ensure!((dx[i] - g).abs() < 1e-6, "dx[{i}] = {}, fd {g}", dx[i]);
    }
    for c in 0..cols {
        let fw = |v: f64| {
            let mut w2 = w.clone();
            w2[c] = v;
            loss(&x, &w2, &b)
        };
        let fb = |v: f64| {
            let mut b2 = b.clone();
            b2[c] = v;
            loss(&x, &w, &b2)
        };
        let (gw, gb) = (fd(fw, w[c]), fd(fb, b[c]));
        ensure!((dw[c] - gw).abs() < 1e-6, "dw[{c}] = {}, fd {gw}", dw[c]);
        ensure!((db[c] - gb).abs() < 1e-6, "db[{c}] = {}, fd {gb}", db[c]);
    }
    Ok(())
}

fn reference_classifier_grad() -> TestResult {
    let (rows, classes) = (3, 7);
    let x: Vec<f64> = data(71, rows * classes, 3.0);
    let t = [0, 6, 3];
    let (_, dl) = reference::fused_classifier(&x, &t, rows, classes, 1.0);
    for i in 0..rows * classes {
        let f = |v: f64| {
            let mut x2 = x.clone();
            x2[i] = v;
            reference::fused_classifier(&x2, &t, rows, classes, 1.0)
                .0
                .iter()
                .sum::<f64>()
        };
        let g = fd(f, x[i]);
        ensure!((dl[i] - g).abs() < 1e-6, "dlogits[{i}] = {}, fd {g}", dl[i]);
    }
    Ok(())
}

fn reference_embedding_sums() -> TestResult {
    // The reference's backward is the plain scatter-add (up to f64 rounding).
    let (vocab, cols) = (5, 3);
    let ids = [4, 0, 4, -1, 2, 4, 4, 4, 4, 4, 4, 4, 4, 5];
    let dy: Vec<f64> = data(81, ids.len() * cols, 1.0);
    let dw = reference::embedding_bwd(&ids, &dy, vocab, cols);
    for v in 0..vocab {
        for c in 0..cols {
            let want: f64 = ids
                .iter()
                .enumerate()
                .filter(|&(_, &id)| id == v as i32)
                .map(|(t, _)| dy[t * cols + c])
                .sum();
            ensure!(
                (dw[v * cols + c] - want).abs() < 1e-12,
                "dweight[{v}][{c}] = {}, expected {want}",
                dw[v * cols + c]
            );
        }
    }
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        cpu("reference_gelu_grad", reference_gelu_grad),
        cpu("reference_layer_norm_grad", reference_layer_norm_grad),
        cpu("reference_classifier_grad", reference_classifier_grad),
        cpu("reference_embedding_sums", reference_embedding_sums),
        gpu("layer_norm_f32", layer_norm_all::<f32>),
        gpu("layer_norm_f64", layer_norm_all::<f64>),
        gpu("layer_norm_f16", layer_norm_all::<f16>),
        gpu("layer_norm_bf16", layer_norm_all::<bf16>),
        gpu("layer_norm_one_pass_equals_two_pass_f32", ln_one_pass_f32),
        gpu("layer_norm_one_pass_equals_two_pass_f64", ln_one_pass_f64),
        gpu("layer_norm_one_pass_equals_two_pass_f16", ln_one_pass_f16),
        gpu("layer_norm_one_pass_equals_two_pass_bf16", ln_one_pass_bf16),
        gpu("add_layer_norm_f32", layer_norm_add_all::<f32>),
        gpu("add_layer_norm_f64", layer_norm_add_all::<f64>),
        gpu("add_layer_norm_f16", layer_norm_add_all::<f16>),
        gpu("add_layer_norm_bf16", layer_norm_add_all::<bf16>),
        gpu("gelu_f32", gelu_all::<f32>),
        gpu("gelu_f64", gelu_all::<f64>),
        gpu("gelu_f16", gelu_all::<f16>),
        gpu("gelu_bf16", gelu_all::<bf16>),
        gpu("fused_classifier_f32", classifier_all::<f32>),
        gpu("fused_classifier_f64", classifier_all::<f64>),
        gpu("fused_classifier_f16", classifier_all::<f16>),
        gpu("fused_classifier_bf16", classifier_all::<bf16>),
        gpu("embedding_f32", embedding_all::<f32>),
        gpu("embedding_f64", embedding_all::<f64>),
        gpu("embedding_f16", embedding_all::<f16>),
        gpu("embedding_bf16", embedding_all::<bf16>),
        gpu("dropout_f32", dropout_all::<f32>),
        gpu("dropout_f64", dropout_all::<f64>),
        gpu("dropout_f16", dropout_all::<f16>),
        gpu("dropout_bf16", dropout_all::<bf16>),
        gpu("clip_grad_norm_f32", clip_all::<f32>),
        gpu("clip_grad_norm_f64", clip_all::<f64>),
    ])
}
