//! Tensor-core GEMMs (bf16 / f16 with f32 accumulation, TF32) against cuBLAS measured in this
//! run through `cuda-stack-blas` (same process, same timing): `gemm_wgmma_*` (TMA + wgmma, compute
//! capability 9.0), `gemm_mma_*` (mma.sync, 8.0+). 2·m·n·k FLOP per product.
//! Targets (issue 11): wgmma bf16 >= 0.80x cuBLAS, mma.sync >= 0.60x, TF32 >= 0.70x, at 4096³,
//! 8192³ and an odd shape (4095 x 4097 x 4093, rows not 16-byte aligned: the operands are
//! padded first, inside the timed call); issue 34 item 2: the Hopper bf16 GEMM (what
//! `ops::gemm_half` runs: the persistent `gemm_wgx_128x256_*` at the square sizes) >= 1.0x cuBLAS
//! at 4096³ and 8192³. The one-block-per-tile `gemm_wgmma_*` is timed beside it (information). Every GEMM is timed after 2 s of its own untimed calls
//! (`Bench::time_settled`), at the clock the GPU's power limit sets for it, not for the GEMM
//! before it.

use super::check;
use super::context::Bench;
use super::rows::{Figure, Kind, Target, Unit};
use super::timing::BenchResult;
use cuda_stack_blas::{Blas, Gemm, Math};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{ComputeCapability, DeviceBuffer, Stream};
use cuda_stack_kernels::ops::{self, HalfPlan, TcAlgo, TensorCoreElement, Transpose};
use cuda_stack_kernels::{reference, Element, Kernels};

const NN: Transpose = Transpose::NoTrans;

/// Random values in [-1, 1) as `T`, on the device.
fn operand<T: Element>(s: &Stream, len: usize, seed: u64) -> BenchResult<DeviceBuffer<T>> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let v: Vec<T> = (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            T::from_f64(
                ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64) / (1u64 << 52) as f64 - 1.0,
            )
        })
        .collect();
    Ok(s.clone_htod(&v)?)
}

/// Checks one tensor-core kernel on an odd shape against the f64 CPU reference.
fn check_half<T: TensorCoreElement>(k: &Kernels, s: &Stream, algo: TcAlgo) -> BenchResult<()> {
    let (m, n, kd) = (133, 301, 75);
    let (a, b) = (operand::<T>(s, m * kd, 3)?, operand::<T>(s, kd * n, 4)?);
    let mut c = s.alloc_zeros::<T>(m * n)?;
    ops::gemm_half(k, s, algo, NN, NN, m, n, kd, &a, kd, &b, n, &mut c, n)?;
    let (want, bound) = reference::gemm_f64(
        NN,
        NN,
        m,
        n,
        kd,
        &s.clone_dtoh(&a)?,
        kd,
        &s.clone_dtoh(&b)?,
        n,
    );
    let got: Vec<f32> = s
        .clone_dtoh(&c)?
        .iter()
        .map(|v| v.to_f64() as f32)
        .collect();
    let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    // One rounding to bf16 / f16 (at most 2^-8 relative) plus f32 accumulation.
    let max_bound = bound.iter().cloned().fold(0.0, f64::max);
    check::close(
        &format!("{:?} {algo:?} {m}x{n}x{kd}", T::DTYPE),
        &got,
        &want32,
        1e-5 * max_bound,
        1.0 / 256.0,
    )
}

/// The section: checks, then each size.
/// The kernel `ops::gemm_half` runs for an `m × n × k` nn product on `algo`'s family: on Hopper
/// the plan's (`gemm_wgx_<bm>x<bn>_*`, with its k slices), else `<name>_<dtype>_nn`.
fn plan_label(
    algo: TcAlgo,
    name: &str,
    dtype: &str,
    (m, n, k): (usize, usize, usize),
    sms: u32,
) -> String {
    match (algo, ops::gemm_half_plan(algo, m, n, k, sms)) {
        (TcAlgo::Wgmma, HalfPlan::Tiles { tile, splits }) => {
            let slices = if splits > 1 {
                format!(" ({splits} k slices)")
            } else {
                String::new()
            };
            format!("gemm_wgx_{}x{}_{dtype}_nn{slices}", tile.bm(), tile.bn())
        }
        _ => format!("{name}_{dtype}_nn"),
    }
}

pub fn tensor_cores(b: &mut Bench) -> BenchResult<()> {
    b.section("tensor cores: wgmma / mma.sync vs cuBLAS (same run)");
    let (k, s) = (b.k.clone(), b.s.clone());
    let cc = s.context().limits().compute_capability;
    let hopper = cc == ComputeCapability { major: 9, minor: 0 };
    if cc < (ComputeCapability { major: 8, minor: 0 }) {
        b.log("(no tensor-core kernels below compute capability 8.0)");
        return Ok(());
    }
    let blas = match Blas::get(s.context()) {
        Ok(blas) => Some(blas),
        Err(e) => {
            b.log(&format!("(cuBLAS not available, no reference column: {e})"));
            None
        }
    };
    let mut algos = vec![(TcAlgo::MmaSync, "gemm_mma")];
    if hopper {
        algos.insert(0, (TcAlgo::Wgmma, "gemm_wgmma"));
    }
    for &(algo, _) in &algos {
        check_half::<bf16>(&k, &s, algo)?;
        check_half::<f16>(&k, &s, algo)?;
    }

    let shapes: Vec<(usize, usize, usize)> = if b.quick {
        vec![(1024, 1024, 1024)]
    } else {
        vec![(4096, 4096, 4096), (8192, 8192, 8192), (4095, 4097, 4093)]
    };
    for (m, n, kd) in shapes {
        let size = format!("{m}x{n}x{kd}");
        let flops = 2.0 * m as f64 * n as f64 * kd as f64;
        let a = operand::<bf16>(&s, m * kd, 5)?;
        let bm = operand::<bf16>(&s, kd * n, 6)?;
        let mut c = s.alloc_zeros::<bf16>(m * n)?;
        let cublas = match &blas {
            Some(blas) => {
                let t = b.time_settled(&format!("cuBLAS bf16 {size}"), |s, _| {
                    Ok(blas.gemm(s, &Gemm::new(m, n, kd), &a, &bm, &mut c)?)
                })?;
                let row = b.flop_row(
                    "tensor cores",
                    "cuBLAS bf16 (cublasGemmEx)",
                    Kind::Reference,
                    size.clone(),
                    t,
                    flops,
                    None,
                    "2*m*n*k FLOP, bf16 in/out, f32 accumulation",
                );
                Some(Figure {
                    value: row.rate,
                    label: "cuBLAS bf16".into(),
                })
            }
            None => None,
        };
        for &(algo, name) in &algos {
            // The Hopper family runs what the plan picks (the persistent 128 x 256 tile at the
            // square sizes, kernels/src/ops/gemm_half_plan.rs): name the row after it.
            let kernel = plan_label(algo, name, "bf16", (m, n, kd), b.sm_count);
            let square = m == n && n == kd;
            let t = b.time_settled(&format!("{kernel} {size}"), |s, _| {
                ops::gemm_half(&k, s, algo, NN, NN, m, n, kd, &a, kd, &bm, n, &mut c, n)?;
                Ok(())
            })?;
            let row = b.flop_row(
                "tensor cores",
                &kernel,
                Kind::Fast,
                size.clone(),
                t,
                flops,
                cublas.clone(),
                "bf16 in/out, f32 accumulation",
            );
            let (need, against) = match algo {
                TcAlgo::Wgmma if square => (
                    1.0,
                    "cuBLAS bf16 through cuda-stack-blas, same run (issue 34 item 2)",
                ),
                TcAlgo::Wgmma => (0.80, "cuBLAS bf16 through cuda-stack-blas, same run"),
                _ => (0.60, "cuBLAS bf16 through cuda-stack-blas, same run"),
            };
            b.target(Target {
                what: format!("{kernel} {size}"),
                ours: row.rate,
                theirs: cublas.as_ref().map(|f| f.value),
                unit: Unit::TFlops,
                need,
                against: against.into(),
                remark: if algo == TcAlgo::MmaSync {
                    "mma.sync's own ceiling on Hopper is measured by kernels/tuning/tc_lab".into()
                } else {
                    String::new()
                },
            });
        }
        if hopper {
            // The one-block-per-tile `gemm_wgmma` (128 × 256 tiles, no persistence, fragment
            // stores), which the plan ran at these sizes until issue 34's second round: what the
            // persistent kernel's running ahead and staged epilogue buy here.
            let t = b.time_settled(&format!("gemm_wgmma_bf16_nn {size}"), |s, _| {
                ops::gemm_half_with_plan(
                    &k,
                    s,
                    HalfPlan::Wide,
                    NN,
                    NN,
                    m,
                    n,
                    kd,
                    &a,
                    kd,
                    &bm,
                    n,
                    &mut c,
                    n,
                )?;
                Ok(())
            })?;
            b.flop_row(
                "tensor cores",
                "gemm_wgmma_bf16_nn (one block per tile)",
                Kind::Fast,
                size.clone(),
                t,
                flops,
                cublas.clone(),
                "bf16 in/out, f32 accumulation; not the plan's choice (information)",
            );
            // f16 and TF32 at the square sizes.
            if m == n && n == kd {
                let a16 = operand::<f16>(&s, m * kd, 7)?;
                let b16 = operand::<f16>(&s, kd * n, 8)?;
                let mut c16 = s.alloc_zeros::<f16>(m * n)?;
                let cub16 = match &blas {
                    Some(blas) => {
                        let t = b.time_settled(&format!("cuBLAS f16 {size}"), |s, _| {
                            Ok(blas.gemm(s, &Gemm::new(m, n, kd), &a16, &b16, &mut c16)?)
                        })?;
                        let r = b.flop_row(
                            "tensor cores",
                            "cuBLAS f16",
                            Kind::Reference,
                            size.clone(),
                            t,
                            flops,
                            None,
                            "f16 in/out, f32 accumulation",
                        );
                        Some(Figure {
                            value: r.rate,
                            label: "cuBLAS f16".into(),
                        })
                    }
                    None => None,
                };
                let t = b.time_settled(&format!("gemm_half f16 {size}"), |s, _| {
                    ops::gemm_half(
                        &k,
                        s,
                        TcAlgo::Wgmma,
                        NN,
                        NN,
                        m,
                        n,
                        kd,
                        &a16,
                        kd,
                        &b16,
                        n,
                        &mut c16,
                        n,
                    )?;
                    Ok(())
                })?;
                b.flop_row(
                    "tensor cores",
                    &plan_label(TcAlgo::Wgmma, "gemm_wgmma", "f16", (m, n, kd), b.sm_count),
                    Kind::Fast,
                    size.clone(),
                    t,
                    flops,
                    cub16,
                    "f16 in/out, f32 accumulation",
                );

                let a32 = operand::<f32>(&s, m * kd, 9)?;
                let bt32 = operand::<f32>(&s, n * kd, 10)?;
                let mut c32 = s.alloc_zeros::<f32>(m * n)?;
                let cub32 = match &blas {
                    Some(blas) => {
                        let g = Gemm::new(m, n, kd)
                            .trans_b(cuda_stack_blas::Transpose::Yes)
                            .math(Math::Tf32);
                        let t = b.time_settled(&format!("cuBLAS TF32 {size}"), |s, _| {
                            Ok(blas.gemm(s, &g, &a32, &bt32, &mut c32)?)
                        })?;
                        let r = b.flop_row(
                            "tensor cores",
                            "cuBLAS TF32",
                            Kind::Reference,
                            size.clone(),
                            t,
                            flops,
                            None,
                            "f32 in/out, TF32 multiplies, f32 accumulation",
                        );
                        Some(Figure {
                            value: r.rate,
                            label: "cuBLAS TF32".into(),
                        })
                    }
                    None => None,
                };
                let t = b.time_settled(&format!("gemm_wgmma_tf32_nt {size}"), |s, _| {
                    ops::gemm_tf32(
                        &k,
                        s,
                        NN,
                        Transpose::Trans,
                        m,
                        n,
                        kd,
                        &a32,
                        kd,
                        &bt32,
                        kd,
                        &mut c32,
                        n,
                    )?;
                    Ok(())
                })?;
                let row = b.flop_row(
                    "tensor cores",
                    "gemm_wgmma_tf32_nt",
                    Kind::Fast,
                    size.clone(),
                    t,
                    flops,
                    cub32.clone(),
                    "TF32, B stored [n, k]",
                );
                b.target(Target {
                    what: format!("gemm_wgmma_tf32_nt {size}"),
                    ours: row.rate,
                    theirs: cub32.map(|f| f.value),
                    unit: Unit::TFlops,
                    need: 0.70,
                    against: "cuBLAS TF32 (same layout) through cuda-stack-blas, same run".into(),
                    remark: String::new(),
                });
            }
        }
    }
    Ok(())
}
