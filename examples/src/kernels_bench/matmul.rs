//! Matrix multiply, FP32: naive, seed 003's 16×16 tiles and the register-blocked sgemm, against
//! cuBLAS SGEMM (PyTorch with TF32 off, `sgemm_N`). 2·N³ FLOP per N×N×N product.

use super::check;
use super::context::{torch_size, Bench};
use super::rows::{Figure, Kind, Target, Unit};
use super::timing::{BenchResult, Rotating};
use cuda_stack_kernels::ops::{self, MatmulAlgo};
use cuda_stack_kernels::reference;

const ALGOS: [(MatmulAlgo, &str, Kind); 3] = [
    (MatmulAlgo::Naive, "matmul_naive", Kind::Educational),
    (
        MatmulAlgo::Tiled16,
        "matmul_tiled16 (seed 003)",
        Kind::Educational,
    ),
    (MatmulAlgo::Fast, "sgemm_nn", Kind::Fast),
];

/// Checks each algorithm (edge tiles, and sgemm's aligned fast path), then times them.
/// Target: sgemm at 4096 >= 0.90x cuBLAS (issue 34 item 4; it was 0.80x before that issue).
pub fn matmul(b: &mut Bench) -> BenchResult<()> {
    b.section("matmul: naive / tiled16 / sgemm vs cuBLAS");
    let (k, s) = (b.k.clone(), b.s.clone());
    for (m, n, kd) in [(67, 45, 33), (260, 132, 68)] {
        let (a, ha) = check::signed(&k, &s, m * kd, 41)?;
        let (bm, hb) = check::signed(&k, &s, kd * n, 42)?;
        let want = reference::matmul(&ha, &hb, m, n, kd);
        for (algo, name, _) in ALGOS {
            let mut c = check::zeros(&s, m * n)?;
            ops::matmul(&k, &s, algo, &a, &bm, &mut c, m, n, kd)?;
            // FMA in increasing k on both sides: exact; the tolerance only guards the check.
            check::close(
                &format!("{name} {m}x{n}x{kd}"),
                &s.clone_dtoh(&c)?,
                &want,
                1e-5,
                1e-5,
            )?;
        }
    }

    let mut sizes: Vec<(usize, bool)> = b.sizes.matmul.iter().map(|&n| (n, true)).collect();
    sizes.extend(b.sizes.sgemm_only.iter().map(|&n| (n, false)));
    for (n, all) in sizes {
        let a = Rotating::uniform(&k, &s, n * n, 1, 43)?;
        let bm = Rotating::uniform(&k, &s, n * n, 1, 44)?;
        let mut c = Rotating::zeros(&s, n * n, 1)?;
        let flops = 2.0 * (n as f64).powi(3);
        let size = format!("{n}x{n}x{n}");
        let cublas = b.torch_fig(
            &format!("sgemm_{n}"),
            "cuBLAS",
            torch_size::SGEMM.contains(&n),
        );
        for (algo, name, kind) in ALGOS {
            if !all && algo != MatmulAlgo::Fast {
                continue;
            }
            let m = b.time(&format!("{name} {size}"), |s, i| {
                Ok(ops::matmul(
                    &k,
                    s,
                    algo,
                    &a.get(i)?,
                    &bm.get(i)?,
                    &mut c.get_mut(i)?,
                    n,
                    n,
                    n,
                )?)
            })?;
            let row = b.flop_row(
                "matmul",
                name,
                kind,
                size.clone(),
                m,
                flops,
                cublas.clone(),
                "2*N^3 FLOP, FP32 FMA (no TF32)",
            );
            if algo == MatmulAlgo::Fast && n == 4096 {
                b.target(Target {
                    what: format!("sgemm {size} FP32"),
                    ours: row.rate,
                    theirs: cublas.as_ref().map(|f: &Figure| f.value),
                    unit: Unit::TFlops,
                    need: 0.90,
                    against: "cuBLAS via PyTorch, TF32 off (key `sgemm_4096`)".into(),
                    remark: String::new(),
                });
            }
        }
    }
    if !b.sizes.matmul.contains(&4096) {
        b.log("(sgemm 4096 target not evaluated: --quick runs smaller matrices)");
    }
    Ok(())
}
