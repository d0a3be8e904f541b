//! FP8 casts (`ops::fp8_quantize` / `fp8_dequantize`), amax and the delayed-scaling update,
//! against the CPU twins built on the `float8` crate's conversion (bit-exact: q bits, amax bits,
//! dequantized values; NaN compared as NaN). Inputs cover every binade FP8 reaches and beyond
//! (saturation), subnormals, ±0, ±inf, NaN, lengths that leave a tail after the 4-element steps,
//! and views one element into their buffer (the kernels' one-element path). On a GPU below
//! compute capability 8.9 every op must return `Error::UnsupportedDevice`.

use cuda_stack_driver::float8::{F8E4M3, F8E5M2};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceBuffer, DeviceRepr, Stream};
use cuda_stack_kernels::ops::{self, Fp8, Fp8Wide};
use cuda_stack_kernels::{Error, Kernels};
use cuda_tests::{cpu, ensure, gpu, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// Random values over 2^-24 .. 2^20 in magnitude, both signs, then the special values.
fn inputs<S: Fp8Wide>(seed: u64, n: usize) -> Vec<S> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let specials = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        448.0,
        464.0,
        465.0,
        480.0,
        -1e9,
        57344.0,
        61440.0,
        1e30,
        1.0 / 512.0,
        1.0 / 1024.0,
        3.0 / 2048.0,
        1.5e-5,
        -1e-7,
    ];
    (0..n)
        .map(|i| {
            if i % 97 == 5 {
                return S::from_f64(specials[(i / 97) % specials.len()]);
            }
            let e = (r.next() % 45) as i32 - 24;
            S::from_f64(r.unit() * 2f64.powi(e))
        })
        .collect()
}

fn upload<T: DeviceRepr>(s: &Stream, v: &[T], off: usize) -> Res<DeviceBuffer<T>> {
    let mut all = vec![T::zeroed(); off];
    all.extend_from_slice(v);
    Ok(s.clone_htod(&all)?)
}

fn same_f32(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn fp8_device(s: &Stream) -> bool {
    ops::fp8_supported(s.context().limits().compute_capability)
}

fn casts_one<S: Fp8Wide, Q: Fp8>(k: &Kernels, s: &Stream) -> TestResult {
    let mut seed = 11;
    for &n in &[1usize, 3, 4, 5, 1001, 4099, 1 << 18] {
        for &off in &[0usize, 1] {
            for &scale in &[1.0f32, 0.37, 1000.0, 1.0 / 4096.0] {
                seed += 1;
                let x: Vec<S> = inputs(seed, n);
                let what = format!(
                    "{:?}->{:?} n={n} off={off} scale={scale}",
                    S::DTYPE,
                    Q::DTYPE
                );
                let (want_q, want_amax) = ops::fp8_quantize_cpu::<S, Q>(&x, scale);
                let dx = upload(s, &x, off)?;
                let mut dq = s.alloc_zeros::<Q>(n + off)?;
                let dscale = s.clone_htod(&[scale, 1.0 / scale])?;
                let mut damax = s.alloc_zeros::<f32>(1)?;
                ops::fp8_quantize(
                    k,
                    s,
                    &dx.slice(off..)?,
                    &mut dq.slice_mut(off..)?,
                    &dscale.slice(0..1)?,
                    &mut damax,
                )?;
                let got_q = s.clone_dtoh(&dq)?;
                for (i, (g, w)) in got_q[off..].iter().zip(&want_q).enumerate() {
                    let ok =
                        g.to_bits() == w.to_bits() || (g.to_f32().is_nan() && w.to_f32().is_nan());
                    ensure!(
                        ok,
                        "{what}: q[{i}] of {:?} = {:#04x}, expected {:#04x}",
                        x[i],
                        g.to_bits(),
                        w.to_bits()
                    );
                }
                let amax = s.clone_dtoh(&damax)?[0];
                ensure!(
                    same_f32(amax, want_amax),
                    "{what}: amax {amax}, expected {want_amax}"
                );

                // Back to S with the inverse scale.
                let mut dy = s.alloc_zeros::<S>(n + off)?;
                ops::fp8_dequantize(
                    k,
                    s,
                    &dq.slice(off..)?,
                    &mut dy.slice_mut(off..)?,
                    &dscale.slice(1..2)?,
                )?;
                let want_y = ops::fp8_dequantize_cpu::<Q, S>(&want_q, 1.0 / scale);
                let got_y = s.clone_dtoh(&dy)?;
                for (i, (g, w)) in got_y[off..].iter().zip(&want_y).enumerate() {
                    ensure!(
                        same_f32(g.to_scalar(), w.to_scalar()),
                        "{what}: dequantized [{i}] = {g:?}, expected {w:?}"
                    );
                }

                // amax alone, folded into a running maximum.
                let mut run = s.clone_htod(&[0.5f32])?;
                ops::fp8_amax(k, s, &dx.slice(off..)?, &mut run)?;
                let got = s.clone_dtoh(&run)?[0];
                let want = if want_amax.is_nan() {
                    f32::NAN
                } else {
                    want_amax.max(0.5)
                };
                ensure!(
                    same_f32(got, want),
                    "{what}: running amax {got}, expected {want}"
                );
            }
        }
    }
    Ok(())
}

fn unsupported_everywhere(k: &Kernels, s: &Stream) -> TestResult {
    let x = s.alloc_zeros::<f32>(4)?;
    let mut q = s.alloc_zeros::<F8E4M3>(4)?;
    let sc = s.clone_htod(&[1.0f32])?;
    let mut am = s.alloc_zeros::<f32>(1)?;
    let r = ops::fp8_quantize(k, s, &x, &mut q, &sc, &mut am);
    ensure!(
        matches!(r, Err(Error::UnsupportedDevice { .. })),
        "quantize: {r:?}"
    );
    let mut y = s.alloc_zeros::<f32>(4)?;
    let r = ops::fp8_dequantize(k, s, &q, &mut y, &sc);
    ensure!(
        matches!(r, Err(Error::UnsupportedDevice { .. })),
        "dequantize: {r:?}"
    );
    let r = ops::fp8_amax(k, s, &x, &mut am);
    ensure!(
        matches!(r, Err(Error::UnsupportedDevice { .. })),
        "amax: {r:?}"
    );
    if let Err(e) = r {
        ensure!(e.to_string().contains("8.9"), "the message names 8.9: {e}");
    }
    Ok(())
}

fn casts() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    if !fp8_device(&s) {
        return unsupported_everywhere(&k, &s);
    }
    casts_one::<f32, F8E4M3>(&k, &s)?;
    casts_one::<f32, F8E5M2>(&k, &s)?;
    casts_one::<f16, F8E4M3>(&k, &s)?;
    casts_one::<f16, F8E5M2>(&k, &s)?;
    casts_one::<bf16, F8E4M3>(&k, &s)?;
    casts_one::<bf16, F8E5M2>(&k, &s)
}

/// Saturation and NaN on the device, value by value.
fn saturation_and_nan() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    if !fp8_device(&s) {
        return Ok(());
    }
    let x = [
        1000.0f32,
        -1e9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        448.0,
        1e5,
        2.0,
    ];
    let dx = s.clone_htod(&x)?;
    let one = s.clone_htod(&[1.0f32])?;
    let mut am = s.alloc_zeros::<f32>(1)?;
    let mut q4 = s.alloc_zeros::<F8E4M3>(x.len())?;
    ops::fp8_quantize(&k, &s, &dx, &mut q4, &one, &mut am)?;
    let g: Vec<f32> = s.clone_dtoh(&q4)?.iter().map(|v| v.to_f32()).collect();
    ensure!(
        g[0] == 448.0 && g[1] == -448.0 && g[2] == 448.0 && g[3] == -448.0 && g[4].is_nan(),
        "e4m3: {g:?}"
    );
    ensure!(g[5] == 448.0 && g[6] == 448.0 && g[7] == 2.0, "e4m3: {g:?}");
    ensure!(
        s.clone_dtoh(&am)?[0].is_nan(),
        "amax with a NaN input is NaN"
    );
    let mut q5 = s.alloc_zeros::<F8E5M2>(x.len())?;
    ops::fp8_quantize(&k, &s, &dx, &mut q5, &one, &mut am)?;
    let g: Vec<f32> = s.clone_dtoh(&q5)?.iter().map(|v| v.to_f32()).collect();
    ensure!(
        g[0] == 1024.0 && g[1] == -57344.0 && g[2] == 57344.0 && g[3] == -57344.0 && g[4].is_nan(),
        "e5m2: {g:?}"
    );
    ensure!(g[6] == 57344.0, "e5m2: 1e5 saturates: {g:?}");
    Ok(())
}

/// Delayed scaling's update: max of the history (NaN ignored), margin, and "keep the previous
/// scale" when the history has no positive finite amax.
fn scale_update() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    if !fp8_device(&s) {
        return Ok(());
    }
    let hist = s.clone_htod(&[0.5f32, f32::NAN, 2.0, 0.0])?;
    let mut scale = s.clone_htod(&[3.0f32])?;
    let mut inv = s.alloc_zeros::<f32>(1)?;
    ops::fp8_scale_update::<F8E4M3>(&k, &s, &hist, &mut scale, &mut inv, 0)?;
    let (sc, iv) = (s.clone_dtoh(&scale)?[0], s.clone_dtoh(&inv)?[0]);
    ensure!(sc == 224.0 && iv == 1.0 / 224.0, "scale {sc}, inv {iv}");
    ops::fp8_scale_update::<F8E5M2>(&k, &s, &hist, &mut scale, &mut inv, 1)?;
    let sc = s.clone_dtoh(&scale)?[0];
    ensure!(sc == 57344.0 / 2.0 / 2.0, "e5m2, margin 1: scale {sc}");
    let zeros = s.clone_htod(&[0.0f32, f32::NAN])?;
    ops::fp8_scale_update::<F8E4M3>(&k, &s, &zeros, &mut scale, &mut inv, 0)?;
    let (sc, iv) = (s.clone_dtoh(&scale)?[0], s.clone_dtoh(&inv)?[0]);
    ensure!(
        sc == 14336.0 && iv == 1.0 / 14336.0,
        "kept: scale {sc}, inv {iv}"
    );
    let empty = s.alloc_zeros::<f32>(0)?;
    let r = ops::fp8_scale_update::<F8E4M3>(&k, &s, &empty, &mut scale, &mut inv, 0);
    ensure!(
        matches!(r, Err(Error::Length { .. })),
        "empty history: {r:?}"
    );
    Ok(())
}

/// Wrong lengths are refused before anything is launched.
fn bad_arguments() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    if !fp8_device(&s) {
        return Ok(());
    }
    let x = s.alloc_zeros::<f32>(8)?;
    let mut q = s.alloc_zeros::<F8E4M3>(7)?;
    let sc = s.clone_htod(&[1.0f32])?;
    let mut am = s.alloc_zeros::<f32>(1)?;
    let r = ops::fp8_quantize(&k, &s, &x, &mut q, &sc, &mut am);
    ensure!(matches!(r, Err(Error::Length { .. })), "short q: {r:?}");
    let mut q = s.alloc_zeros::<F8E4M3>(8)?;
    let none = s.alloc_zeros::<f32>(0)?;
    let r = ops::fp8_quantize(&k, &s, &x, &mut q, &none, &mut am);
    ensure!(matches!(r, Err(Error::Length { .. })), "no scale: {r:?}");
    Ok(())
}

/// The CPU twins' conversion facts the GPU tests rely on (the `float8` crate's rounding).
fn reference_facts() -> TestResult {
    ensure!(F8E4M3::from_f32(448.0).to_bits() == 0x7E, "e4m3 max bits");
    ensure!(F8E4M3::from_f32(1e9).to_f32() == 448.0, "e4m3 saturates");
    ensure!(
        F8E4M3::from_f32(f32::INFINITY).to_f32() == 448.0,
        "e4m3 inf saturates"
    );
    ensure!(F8E4M3::from_f32(f32::NAN).to_f32().is_nan(), "e4m3 NaN");
    ensure!(F8E5M2::from_f32(1e9).to_f32() == 57344.0, "e5m2 saturates");
    ensure!(F8E5M2::from_f32(f32::NAN).to_f32().is_nan(), "e5m2 NaN");
    // Round to nearest even: 1.0625 lies halfway between 1.0 and 1.125 (e4m3 steps of 1/8).
    ensure!(F8E4M3::from_f32(1.0625).to_f32() == 1.0, "ties to even");
    ensure!(
        F8E4M3::from_f32(1.1875).to_f32() == 1.25,
        "ties to even, up"
    );
    // Smallest subnormals: 2^-9 (e4m3), 2^-16 (e5m2).
    ensure!(
        F8E4M3::from_f32(2f32.powi(-9)).to_bits() == 1,
        "e4m3 subnormal"
    );
    ensure!(
        F8E5M2::from_f32(2f32.powi(-16)).to_bits() == 1,
        "e5m2 subnormal"
    );
    let (q, amax) = ops::fp8_quantize_cpu::<f32, F8E4M3>(&[1.0, -3.0, 0.5], 2.0);
    ensure!(amax == 3.0, "amax {amax}");
    ensure!(q.iter().map(|v| v.to_f32()).eq([2.0, -6.0, 1.0]), "{q:?}");
    let (_, amax) = ops::fp8_quantize_cpu::<f32, F8E4M3>(&[1.0, f32::NAN, 0.5], 1.0);
    ensure!(amax.is_nan(), "NaN amax");
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        cpu("reference_facts", reference_facts),
        gpu("casts_bit_exact", casts),
        gpu("saturation_and_nan", saturation_and_nan),
        gpu("scale_update", scale_update),
        gpu("bad_arguments", bad_arguments),
    ]);
}
