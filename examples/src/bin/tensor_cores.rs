//! `tensor_cores`: one matrix product `C = A · B` climbing the GPU's multiply hardware step by
//! step, each step measured in TFLOP/s, as a fraction of the device's peak for its precision, and
//! beside cuBLAS doing the same precision in the same run:
//!
//! 1. FP32 on the SIMT cores (`sgemm_nn`, FFMA);
//! 2. TF32 on the tensor cores (`gemm_wgmma_tf32_nt`, compute capability 9.0);
//! 3. bf16 with `mma.sync` (`gemm_mma_bf16_nn`, compute capability 8.0+);
//! 4. bf16 with `wgmma` fed by the TMA copy engine (`gemm_wgmma_bf16_nn`, 9.0);
//! 5. cuBLAS bf16 (`cublasGemmEx` through `cuda-stack-blas`).
//!
//! Every step is first checked against an f64 CPU reference on an odd shape (333 × 517 × 203),
//! and at each timed size its result is compared with cuBLAS's result of the same precision.
//! The peak is SMs × clock (the device's maximum) × the FLOP per clock and SM the architecture's
//! whitepaper gives for that precision (dense); it is listed for compute capability 8.0 and 9.0.
//!
//! Run: `cargo run --release -p cuda-examples --bin tensor_cores [-- --sizes 4096,8192]`
//! (`--quick`: 1024 only).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::timing::gpu_time;
use cuda_stack_blas::{Blas, Gemm, Math};
use cuda_stack_driver::half::bf16;
use cuda_stack_driver::{ComputeCapability, Context, DeviceBuffer, Stream};
use cuda_stack_kernels::ops::{self, TcAlgo, Transpose};
use cuda_stack_kernels::{reference, Kernels};
use serde_json::json;
use std::process::ExitCode;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The tensor-core ladder, FP32 SIMT → TF32 → mma.sync → wgmma → cuBLAS.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Square sizes to time (default 4096,8192; --quick: 1024).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("tensor_cores", || body(&args))
}

/// The precision a step computes in (its peak and its cuBLAS reference).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Prec {
    Fp32,
    Tf32,
    Bf16,
}

impl Prec {
    fn name(self) -> &'static str {
        match self {
            Prec::Fp32 => "FP32",
            Prec::Tf32 => "TF32",
            Prec::Bf16 => "bf16",
        }
    }
    /// Dense FLOP per clock per SM (NVIDIA's A100 / H100 whitepapers).
    fn flop_per_clock_sm(self, cc: ComputeCapability) -> Option<f64> {
        match (cc.major, cc.minor, self) {
            (9, 0, Prec::Fp32) => Some(256.0),
            (9, 0, Prec::Tf32) => Some(2048.0),
            (9, 0, Prec::Bf16) => Some(4096.0),
            (8, 0, Prec::Fp32) => Some(128.0),
            (8, 0, Prec::Tf32) => Some(1024.0),
            (8, 0, Prec::Bf16) => Some(2048.0),
            _ => None,
        }
    }
    /// Normwise tolerance against the f64 reference (output rounding / input rounding).
    fn tolerance(self) -> f64 {
        match self {
            Prec::Fp32 => 1e-5,
            Prec::Tf32 => 5e-3,
            Prec::Bf16 => 1e-2,
        }
    }
}

/// One rung of the ladder.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    SimtFp32,
    WgmmaTf32,
    MmaBf16,
    WgmmaBf16,
    CublasBf16,
}

const STEPS: [Step; 5] = [
    Step::SimtFp32,
    Step::WgmmaTf32,
    Step::MmaBf16,
    Step::WgmmaBf16,
    Step::CublasBf16,
];

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::SimtFp32 => "FP32 SIMT (sgemm_nn)",
            Step::WgmmaTf32 => "TF32 wgmma (gemm_wgmma_tf32_nt)",
            Step::MmaBf16 => "bf16 mma.sync (gemm_mma_bf16_nn)",
            Step::WgmmaBf16 => "bf16 wgmma + TMA (gemm_wgmma_bf16_nn)",
            Step::CublasBf16 => "cuBLAS bf16 (cublasGemmEx)",
        }
    }
    fn prec(self) -> Prec {
        match self {
            Step::SimtFp32 => Prec::Fp32,
            Step::WgmmaTf32 => Prec::Tf32,
            _ => Prec::Bf16,
        }
    }
    /// What the step changes in how the hardware is used.
    fn what(self) -> &'static str {
        match self {
            Step::SimtFp32 => {
                "every product is an FFMA on a CUDA core: each thread keeps 8x8 outputs in \
                 registers and reads A and B from shared-memory tiles; 128 FMA lanes per SM cap it"
            }
            Step::WgmmaTf32 => {
                "the same f32 storage, but the tensor cores multiply: operands are read as TF32 \
                 (10-bit mantissa) and one warpgroup instruction does 64x256x8, 8x the SIMT rate per SM"
            }
            Step::MmaBf16 => {
                "16-bit operands (half the bytes) on the tensor cores through warp-level \
                 mma.sync 16x8x16: every operand passes through registers (ldmatrix), which caps it \
                 on Hopper at about 60% of the tensor cores' rate"
            }
            Step::WgmmaBf16 => {
                "wgmma reads both operands straight from shared memory, which the TMA engine fills \
                 (no thread loads, no address math), asynchronously, 64x256x16 per instruction; a \
                 producer warpgroup copies while two consumer warpgroups multiply"
            }
            Step::CublasBf16 => {
                "NVIDIA's own Hopper kernels (also wgmma + TMA, with thread-block clusters and \
                 persistent scheduling), the figure to beat"
            }
        }
    }
    /// Whether this device runs the step (and if not, why).
    fn available(self, cc: ComputeCapability, blas: bool) -> Result<(), &'static str> {
        let hopper = cc == ComputeCapability { major: 9, minor: 0 };
        let ampere = cc >= ComputeCapability { major: 8, minor: 0 };
        match self {
            Step::SimtFp32 => Ok(()),
            Step::WgmmaTf32 | Step::WgmmaBf16 if !hopper => {
                Err("needs compute capability 9.0 (sm_90a)")
            }
            Step::MmaBf16 if !ampere => Err("needs compute capability 8.0 or newer"),
            Step::CublasBf16 if !blas => Err("cuBLAS was not found"),
            _ => Ok(()),
        }
    }
}

/// Operands of one size: f32 and bf16 copies of the same A and B, a transposed f32 B (the TF32
/// kernel reads B K-major), and outputs.
struct Operands {
    n: usize,
    a32: DeviceBuffer<f32>,
    b32: DeviceBuffer<f32>,
    bt32: DeviceBuffer<f32>,
    a16: DeviceBuffer<bf16>,
    b16: DeviceBuffer<bf16>,
    c32: DeviceBuffer<f32>,
    c16: DeviceBuffer<bf16>,
}

/// Uniform values in [-1, 1) (xorshift64*), deterministic.
fn random(seed: u64, len: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32) / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

impl Operands {
    fn new(k: &Kernels, s: &Stream, m: usize, n: usize, kd: usize, seed: u64) -> BoxResult<Self> {
        let a32 = s.clone_htod(&random(seed, m * kd))?;
        let b32 = s.clone_htod(&random(seed + 1, kd * n))?;
        let mut bt32 = s.alloc_zeros::<f32>(kd * n)?;
        ops::transpose(k, s, ops::TransposeAlgo::Auto, &b32, &mut bt32, kd, n)?;
        let mut a16 = s.alloc_zeros::<bf16>(m * kd)?;
        let mut b16 = s.alloc_zeros::<bf16>(kd * n)?;
        ops::cast(k, s, &a32, &mut a16)?;
        ops::cast(k, s, &b32, &mut b16)?;
        Ok(Operands {
            n,
            a32,
            b32,
            bt32,
            a16,
            b16,
            c32: s.alloc_zeros::<f32>(m * n)?,
            c16: s.alloc_zeros::<bf16>(m * n)?,
        })
    }
}

/// Runs `step` once on `o` (`m × n × kd`), into `o.c32` (FP32, TF32) or `o.c16` (bf16).
fn launch(
    step: Step,
    k: &Kernels,
    blas: Option<&Blas>,
    s: &Stream,
    o: &mut Operands,
    (m, kd): (usize, usize),
) -> BoxResult<()> {
    let (nn, n) = (Transpose::NoTrans, o.n);
    match step {
        Step::SimtFp32 => ops::sgemm(
            k, s, nn, nn, m, n, kd, 1.0, &o.a32, kd, &o.b32, n, 0.0, &mut o.c32, n,
        )?,
        Step::WgmmaTf32 => ops::gemm_tf32(
            k,
            s,
            nn,
            Transpose::Trans,
            m,
            n,
            kd,
            &o.a32,
            kd,
            &o.bt32,
            kd,
            &mut o.c32,
            n,
        )?,
        Step::MmaBf16 | Step::WgmmaBf16 => {
            let algo = if step == Step::MmaBf16 {
                TcAlgo::MmaSync
            } else {
                TcAlgo::Wgmma
            };
            ops::gemm_half(
                k, s, algo, nn, nn, m, n, kd, &o.a16, kd, &o.b16, n, &mut o.c16, n,
            )?;
        }
        Step::CublasBf16 => {
            let blas = blas.ok_or("cuBLAS was not found")?;
            blas.gemm(s, &Gemm::new(m, n, kd), &o.a16, &o.b16, &mut o.c16)?;
        }
    }
    Ok(())
}

/// cuBLAS in FP32 or TF32 (the reference of steps 1 and 2) into `o.c32`.
fn cublas_f32(
    blas: &Blas,
    s: &Stream,
    o: &mut Operands,
    m: usize,
    kd: usize,
    tf32: bool,
) -> BoxResult<()> {
    let math = if tf32 { Math::Tf32 } else { Math::Default };
    blas.gemm(
        s,
        &Gemm::new(m, o.n, kd).math(math),
        &o.a32,
        &o.b32,
        &mut o.c32,
    )?;
    Ok(())
}

/// The step's output as f64.
fn result(step: Step, s: &Stream, o: &Operands) -> BoxResult<Vec<f64>> {
    Ok(match step.prec() {
        Prec::Bf16 => s.clone_dtoh(&o.c16)?.iter().map(|v| v.to_f64()).collect(),
        _ => s
            .clone_dtoh(&o.c32)?
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
    })
}

/// ‖got − want‖ / ‖want‖ (Frobenius); infinite if anything is not finite.
fn rel_error(got: &[f64], want: &[f64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (g, w) in got.iter().zip(want) {
        if !g.is_finite() {
            return f64::INFINITY;
        }
        num += (g - w) * (g - w);
        den += w * w;
    }
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

fn body(args: &Args) -> ProgramResult {
    let mut out = Out::new(args.common.json);
    let ctx = Context::new(args.common.device)?;
    let dev = ctx.device();
    let cc = dev.compute_capability()?;
    let (sms, clock_khz) = (dev.sm_count()?, dev.clock_rate_khz()?);
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let blas = match Blas::get(&ctx) {
        Ok(b) => Some(b),
        Err(e) => {
            out.say(format!(
                "cuBLAS is not available ({e}); its columns stay empty"
            ));
            None
        }
    };
    out.say(format!(
        "{} (compute capability {cc}, {sms} SMs, {:.0} MHz max clock)",
        dev.name()?,
        clock_khz as f64 / 1e3
    ));
    let peak = |p: Prec| {
        p.flop_per_clock_sm(cc)
            .map(|f| f * sms as f64 * clock_khz as f64 * 1e3 / 1e12)
    };
    for p in [Prec::Fp32, Prec::Tf32, Prec::Bf16] {
        out.say(format!(
            "  {} peak: {}",
            p.name(),
            peak(p).map_or("not listed for this architecture".into(), |v| format!(
                "{v:.0} TFLOP/s"
            ))
        ));
    }

    // 1. Every step against the f64 CPU reference on an odd shape.
    out.say("\nCheck against the CPU (f64 reference, 333 x 517 x 203, normwise relative error):");
    let (m, n, kd) = (333, 517, 203);
    let mut small = Operands::new(&k, &s, m, n, kd, 7)?;
    let ha = s.clone_dtoh(&small.a16)?;
    let hb = s.clone_dtoh(&small.b16)?;
    let (want16, _) = reference::gemm_f64(
        Transpose::NoTrans,
        Transpose::NoTrans,
        m,
        n,
        kd,
        &ha,
        kd,
        &hb,
        n,
    );
    let ha32 = s.clone_dtoh(&small.a32)?;
    let hb32 = s.clone_dtoh(&small.b32)?;
    let (want32, _) = reference::gemm_f64(
        Transpose::NoTrans,
        Transpose::NoTrans,
        m,
        n,
        kd,
        &ha32,
        kd,
        &hb32,
        n,
    );
    let mut checks = Vec::new();
    for step in STEPS {
        if let Err(why) = step.available(cc, blas.is_some()) {
            out.say(format!("  {:<40} skipped: {why}", step.name()));
            continue;
        }
        launch(step, &k, blas.as_ref(), &s, &mut small, (m, kd))?;
        let got = result(step, &s, &small)?;
        let want = if step.prec() == Prec::Bf16 {
            &want16
        } else {
            &want32
        };
        let err = rel_error(&got, want);
        let ok = err <= step.prec().tolerance();
        out.say(format!(
            "  {:<40} {err:.2e} (tolerance {:.0e}) {}",
            step.name(),
            step.prec().tolerance(),
            if ok { "ok" } else { "FAIL" }
        ));
        checks.push(json!({"step": step.name(), "rel_error": err, "ok": ok}));
        if !ok {
            return Err(format!("{} disagrees with the CPU reference", step.name()).into());
        }
    }
    out.put("checks", json!(checks));

    // 2. The ladder at each size.
    let sizes = args
        .sizes
        .clone()
        .unwrap_or_else(|| args.common.pick(vec![1024], vec![4096, 8192]));
    let mut results = Vec::new();
    for &size in &sizes {
        let mut o = Operands::new(&k, &s, size, size, size, 11)?;
        let flop = 2.0 * (size as f64).powi(3);
        let inner = if size >= 8192 { 2 } else { 5 };
        let reps = args.common.pick(3, 5);
        let time = |f: &mut dyn FnMut(&Stream) -> BoxResult<()>| -> BoxResult<f64> {
            gpu_time(&ctx, &s, reps, inner, |s| f(s))
        };
        // cuBLAS's figure for each precision, and its result to compare with ours.
        let mut cublas_rate = [None; 3];
        let mut cublas_out: [Option<Vec<f64>>; 3] = [None, None, None];
        if let Some(b) = blas.as_ref() {
            for (i, p) in [Prec::Fp32, Prec::Tf32, Prec::Bf16].into_iter().enumerate() {
                let t = match p {
                    Prec::Bf16 => time(&mut |s| {
                        launch(Step::CublasBf16, &k, Some(b), s, &mut o, (size, size))
                    })?,
                    _ => time(&mut |s| cublas_f32(b, s, &mut o, size, size, p == Prec::Tf32))?,
                };
                cublas_rate[i] = Some(flop / t / 1e12);
                let step = if p == Prec::Bf16 {
                    Step::CublasBf16
                } else {
                    Step::SimtFp32
                };
                cublas_out[i] = Some(result(step, &s, &o)?);
            }
        }
        let mut table = Table::new(&[
            "step",
            "TFLOP/s",
            "% of peak",
            "x cuBLAS (same precision)",
            "vs cuBLAS result",
        ]);
        out.say(format!("\n{size} x {size} x {size}:"));
        for step in STEPS {
            if step.available(cc, blas.is_some()).is_err() {
                continue;
            }
            let p = step.prec();
            let idx = match p {
                Prec::Fp32 => 0,
                Prec::Tf32 => 1,
                Prec::Bf16 => 2,
            };
            let t = time(&mut |s| launch(step, &k, blas.as_ref(), s, &mut o, (size, size)))?;
            let rate = flop / t / 1e12;
            let diff = match &cublas_out[idx] {
                Some(want) if step != Step::CublasBf16 => {
                    Some(rel_error(&result(step, &s, &o)?, want))
                }
                _ => None,
            };
            let vs = cublas_rate[idx].map(|c| rate / c);
            table.row(&[
                step.name().into(),
                format!("{rate:.1}"),
                peak(p).map_or("-".into(), |pk| format!("{:.1}%", 100.0 * rate / pk)),
                vs.map_or("-".into(), |v| format!("{v:.3}")),
                diff.map_or("-".into(), |d| format!("{d:.1e}")),
            ]);
            results.push(json!({
                "size": size, "step": step.name(), "precision": p.name(), "tflops": rate,
                "peak_tflops": peak(p), "x_cublas": vs, "rel_diff_vs_cublas": diff,
            }));
        }
        out.say(table.render());
        for (i, p) in [Prec::Fp32, Prec::Tf32, Prec::Bf16].into_iter().enumerate() {
            if let Some(r) = cublas_rate[i] {
                out.say(format!("  cuBLAS {}: {r:.1} TFLOP/s", p.name()));
                results.push(json!({"size": size, "step": format!("cuBLAS {}", p.name()), "precision": p.name(), "tflops": r}));
            }
        }
    }
    out.say("\nWhat each step changes:");
    for step in STEPS {
        out.say(format!("  {}: {}.", step.name(), step.what()));
    }
    out.put("device", json!({"name": dev.name()?, "cc": cc.to_string(), "sms": sms, "clock_mhz": clock_khz as f64 / 1e3}));
    out.put("results", json!(results));
    out.finish();
    Ok(())
}
