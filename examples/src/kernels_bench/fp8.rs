//! FP8 GEMM (issue 34, item 3): the project's wgmma FP8 kernel (`gemm_wgmma_fp8_e4m3_e4m3_bf16`)
//! against cuBLASLt's FP8 matmul through `cuda-stack-blas`, same process, same timing, e4m3 x e4m3
//! -> bf16, `C = A · Bᵀ` with `A [m, k]`, `B [n, k]` (the one layout both take). 2·m·n·k FLOP.
//!
//! The operands are f32 uniform in [-1, 1), quantized on the GPU with current per-tensor scaling
//! (amax, `scale = 448 / amax`: `ops::fp8_amax`, `fp8_scale_update`, `fp8_quantize`); the GEMM
//! reads the inverse scales from device memory. cuBLASLt runs twice: with fast accumulation (the
//! same accumulation as ours: the tensor cores' FP8 accumulator over all of k; the target's
//! yardstick) and with its default (partial sums promoted to f32 at intervals).
//!
//! Accuracy, "what FP8 costs": 512 entries of C (fixed pseudo-random positions) against the f64
//! dot products of the **unquantized** f32 inputs, as `max |C - ref| / max |ref|` over those
//! entries and the median of `|C - ref| / |ref|`. Target: ours >= 0.90x cuBLASLt (fast
//! accumulation) at 4096³ and 8192³ (compute capability 9.0 only; the section is skipped
//! elsewhere, saying why).

use super::context::Bench;
use super::rows::{Figure, Kind, Target, Unit};
use super::timing::BenchResult;
use cuda_stack_blas::{Blas, Fp8Gemm};
use cuda_stack_driver::float8::F8E4M3;
use cuda_stack_driver::half::bf16;
use cuda_stack_driver::{DeviceBuffer, Stream};
use cuda_stack_kernels::ops::{self};
use cuda_stack_kernels::Kernels;

/// Uniform [-1, 1) f32 values (xorshift; the same sequence on every run).
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

/// `x` quantized to e4m3 with current scaling; returns the FP8 buffer and
/// `[scale, 0, 0, 0, inv_scale]` (the inverse 16-byte aligned: cuBLASLt needs that).
fn quantize(
    k: &Kernels,
    s: &Stream,
    x: &DeviceBuffer<f32>,
) -> BenchResult<(DeviceBuffer<F8E4M3>, DeviceBuffer<f32>)> {
    let mut amax = s.alloc_zeros::<f32>(1)?;
    ops::fp8_amax(k, s, x, &mut amax)?;
    let mut scales = s.clone_htod(&[1.0f32, 0.0, 0.0, 0.0, 1.0])?;
    {
        let (mut sc, mut inv) = scales.split_at_mut(4)?;
        let mut sc = sc.slice_mut(0..1)?;
        ops::fp8_scale_update::<F8E4M3>(k, s, &amax, &mut sc, &mut inv, 0)?;
    }
    // SAFETY: fp8_quantize writes every element.
    let mut q = unsafe { s.alloc::<F8E4M3>(x.len())? };
    let mut seen = s.alloc_zeros::<f32>(1)?;
    ops::fp8_quantize(k, s, x, &mut q, &scales.slice(0..1)?, &mut seen)?;
    Ok((q, scales))
}

/// (max |got - ref| / max |ref|, median |got - ref| / |ref|) over `picks` entries of C.
fn accuracy(
    c: &[bf16],
    a: &[f32],
    b: &[f32],
    n: usize,
    kd: usize,
    picks: &[(usize, usize)],
) -> (f64, f64) {
    let (mut max_err, mut max_ref) = (0.0f64, 0.0f64);
    let mut rel = Vec::with_capacity(picks.len());
    for &(i, j) in picks {
        let r: f64 = (0..kd)
            .map(|p| f64::from(a[i * kd + p]) * f64::from(b[j * kd + p]))
            .sum();
        let e = (c[i * n + j].to_f64() - r).abs();
        max_err = max_err.max(e);
        max_ref = max_ref.max(r.abs());
        if r != 0.0 {
            rel.push(e / r.abs());
        }
    }
    rel.sort_by(|x, y| x.total_cmp(y));
    let median = rel.get(rel.len() / 2).copied().unwrap_or(0.0);
    (max_err / max_ref.max(f64::MIN_POSITIVE), median)
}

/// The section.
pub fn fp8(b: &mut Bench) -> BenchResult<()> {
    b.section("FP8: wgmma e4m3 x e4m3 -> bf16 vs cuBLASLt FP8 (same run)");
    let (k, s) = (b.k.clone(), b.s.clone());
    let cc = s.context().limits().compute_capability;
    if cc != ops::FP8_WGMMA_CC {
        b.log(&format!(
            "(skipped: the FP8 wgmma kernel runs on compute capability 9.0; this GPU is {cc})"
        ));
        return Ok(());
    }
    let blas = match Blas::get(s.context()) {
        Ok(blas) => Some(blas),
        Err(e) => {
            b.log(&format!("(cuBLAS not available, no reference column: {e})"));
            None
        }
    };
    let shapes: &[usize] = if b.quick { &[1024] } else { &[4096, 8192] };
    for &size in shapes {
        let (m, n, kd) = (size, size, size);
        let label = format!("{m}x{n}x{kd}");
        let flops = 2.0 * (m * n * kd) as f64;
        let (ha, hb) = (values(m * kd, 21), values(n * kd, 22));
        let (da, db) = (s.clone_htod(&ha)?, s.clone_htod(&hb)?);
        let (qa, sa) = quantize(&k, &s, &da)?;
        let (qb, sb) = quantize(&k, &s, &db)?;
        drop((da, db));
        let (a_inv, b_inv) = (sa.slice(4..5)?, sb.slice(4..5)?);
        let mut c_ours = s.alloc_zeros::<bf16>(m * n)?;
        let mut c_lt = s.alloc_zeros::<bf16>(m * n)?;

        let mut reference = None;
        let mut lt_ran = false;
        if let Some(blas) = &blas {
            for fast in [true, false] {
                let g = Fp8Gemm::new(m, n, kd).fast_accum(fast);
                let what = if fast {
                    "cuBLASLt FP8 (fast accumulation)"
                } else {
                    "cuBLASLt FP8 (default accumulation)"
                };
                // One checked call first: a refusal is reported and the section goes on.
                if let Err(e) = blas
                    .matmul_fp8(&s, &g, &qa, &qb, &a_inv, &b_inv, &mut c_lt)
                    .map_err(|e| e.to_string())
                    .and_then(|()| s.synchronize().map_err(|e| e.to_string()))
                {
                    b.log(&format!("  ({what} {label} not run: {e})"));
                    continue;
                }
                let t = b.time_settled(&format!("{what} {label}"), |s, _| {
                    Ok(blas.matmul_fp8(s, &g, &qa, &qb, &a_inv, &b_inv, &mut c_lt)?)
                })?;
                lt_ran = true;
                let row = b.flop_row(
                    "fp8",
                    what,
                    Kind::Reference,
                    label.clone(),
                    t,
                    flops,
                    None,
                    "e4m3 x e4m3 -> bf16, A [m, k] x B [n, k]^T, device-side per-tensor scales",
                );
                if fast {
                    reference = Some(Figure {
                        value: row.rate,
                        label: "cuBLASLt FP8".into(),
                    });
                }
            }
        }
        let t = b.time_settled(&format!("gemm_wgmma_fp8_e4m3_e4m3_bf16 {label}"), |s, _| {
            ops::gemm_fp8(
                &k,
                s,
                m,
                n,
                kd,
                &qa,
                kd,
                &qb,
                kd,
                &a_inv,
                &b_inv,
                &mut c_ours,
                n,
            )?;
            Ok(())
        })?;
        let row = b.flop_row(
            "fp8",
            "gemm_wgmma_fp8_e4m3_e4m3_bf16",
            Kind::Fast,
            label.clone(),
            t,
            flops,
            reference.clone(),
            "e4m3 x e4m3 -> bf16, f32 accumulation in the tensor cores",
        );
        b.target(Target {
            what: format!("gemm_wgmma_fp8_e4m3_e4m3_bf16 {label}"),
            ours: row.rate,
            theirs: reference.as_ref().map(|f| f.value),
            unit: Unit::TFlops,
            need: 0.90,
            against: "cuBLASLt FP8 (fast accumulation) through cuda-stack-blas, same run".into(),
            remark: String::new(),
        });

        // What FP8 costs: both results against the unquantized f32 inputs.
        let mut x = 0x0005_DEEC_E66D_u64;
        let picks: Vec<(usize, usize)> = (0..512)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x % m as u64) as usize, ((x >> 32) % n as u64) as usize)
            })
            .collect();
        let ours = s.clone_dtoh(&c_ours)?;
        let (e_max, e_med) = accuracy(&ours, &ha, &hb, n, kd, &picks);
        b.log(&format!(
            "  accuracy {label} (512 entries vs f64 of the unquantized f32 inputs): ours \
             max|err|/max|ref| {e_max:.3e}, median relative {e_med:.3e}"
        ));
        if lt_ran {
            let lt = s.clone_dtoh(&c_lt)?;
            let (l_max, l_med) = accuracy(&lt, &ha, &hb, n, kd, &picks);
            b.log(&format!(
                "  accuracy {label}: cuBLASLt (the last accumulation mode run) \
                 max|err|/max|ref| {l_max:.3e}, median relative {l_med:.3e}"
            ));
        }
    }
    Ok(())
}
