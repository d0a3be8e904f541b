//! Memory-access patterns: the coalesced copy, strided gathers (useful bandwidth falls with the
//! stride) and the three transposes (strided writes, bank conflicts, padded tiles).

use super::check;
use super::context::{fmt_n, torch_size, Bench};
use super::rows::{Kind, Target, Unit};
use super::timing::{BenchResult, Rotating};
use cuda_stack_kernels::ops::{self, TransposeAlgo};
use cuda_stack_kernels::reference;

/// The strides of the strided-copy rows (PyTorch measures 1, 2, 4, 8, 32).
const STRIDES: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// `copy_coalesced` at `big` (8 bytes per element, like D2D) and `copy_strided` at strides
/// 1..32 with `big / 32` outputs (useful bytes 8 per output, as PyTorch counts).
pub fn copies(b: &mut Bench) -> BenchResult<()> {
    b.section("coalescing: coalesced and strided copies");
    let (k, s) = (b.k.clone(), b.s.clone());
    let (x, hx) = check::uniform(&k, &s, 100_003, 11)?;
    let mut y = check::zeros(&s, hx.len())?;
    ops::copy_coalesced(&k, &s, &x, &mut y)?;
    check::exact("copy_coalesced", &s.clone_dtoh(&y)?, &hx)?;
    for stride in STRIDES {
        let n_out = 10_001;
        let (src, hsrc) = check::uniform(&k, &s, (n_out - 1) * stride + 1, 12)?;
        let mut dst = check::zeros(&s, n_out)?;
        ops::copy_strided(&k, &s, &src, &mut dst, stride)?;
        let want = reference::copy_strided(&hsrc, stride, n_out);
        check::exact(
            &format!("copy_strided stride {stride}"),
            &s.clone_dtoh(&dst)?,
            &want,
        )?;
    }

    let n = b.sizes.big;
    {
        let sets = b.sets(8 * n);
        let src = Rotating::uniform(&k, &s, n, sets, 13)?;
        let mut dst = Rotating::zeros(&s, n, sets)?;
        let size = format!("{} f32", fmt_n(n));
        let m = b.time(&format!("copy_coalesced {size}"), |s, i| {
            Ok(ops::copy_coalesced(
                &k,
                s,
                &src.get(i)?,
                &mut dst.get_mut(i)?,
            )?)
        })?;
        let torch = b.torch_fig("d2d", "torch copy_", n == torch_size::N);
        b.mem_row(
            "coalescing",
            "copy_coalesced",
            Kind::Fast,
            size,
            m,
            8.0 * n as f64,
            torch,
            "read + write: 8 bytes/element",
        );
    }

    // Gathers: out[i] = src[window + i * stride] for i < n_out; the source windows rotate
    // through the big buffer when several fit, and the outputs through their own sets.
    let n_out = n / 32;
    let src = Rotating::uniform(&k, &s, n, 1, 14)?;
    let mut dst = Rotating::zeros(&s, n_out, b.sets(4 * n_out))?;
    let whole = src.get(0)?;
    for stride in STRIDES {
        let span = n_out * stride;
        let windows = (n / span).max(1);
        let size = format!("{} out, stride {stride}", fmt_n(n_out));
        let m = b.time(&format!("copy_strided stride {stride}"), |s, i| {
            let off = (i % windows) * span;
            let view = whole.slice(off..off + span)?;
            Ok(ops::copy_strided(
                &k,
                s,
                &view,
                &mut dst.get_mut(i)?,
                stride,
            )?)
        })?;
        let torch = b.torch_fig(
            &format!("strided_{stride}"),
            &format!("torch stride {stride}"),
            n_out == torch_size::STRIDED_OUT,
        );
        b.mem_row(
            "coalescing",
            &format!("copy_strided (stride {stride})"),
            Kind::Educational,
            size,
            m,
            8.0 * n_out as f64,
            torch,
            "useful bytes: 4 read + 4 written per output",
        );
    }
    Ok(())
}

/// The three transposes at seed 004's 1024 × 2048 (rotated) and at 16384² (8 bytes per element:
/// read once, write once). Target: tiled_padded at 16384² >= 0.85x the D2D copy of this run.
pub fn transpose(b: &mut Bench) -> BenchResult<()> {
    b.section("transpose: naive / tiled (bank conflicts) / tiled_padded");
    let (k, s) = (b.k.clone(), b.s.clone());
    let algos = [
        (TransposeAlgo::Naive, "transpose_naive", Kind::Educational),
        (TransposeAlgo::Tiled, "transpose_tiled", Kind::Educational),
        (
            TransposeAlgo::TiledPadded,
            "transpose_tiled_padded",
            Kind::Fast,
        ),
    ];
    for (rows, cols) in [(333, 197), (64, 96)] {
        let (x, hx) = check::uniform(&k, &s, rows * cols, 14)?;
        let want = reference::transpose(&hx, rows, cols);
        for (algo, name, _) in algos {
            let mut out = check::zeros(&s, rows * cols)?;
            ops::transpose(&k, &s, algo, &x, &mut out, rows, cols)?;
            check::exact(
                &format!("{name} {rows}x{cols}"),
                &s.clone_dtoh(&out)?,
                &want,
            )?;
        }
    }

    let t = b.sizes.transpose_big;
    for (rows, cols) in [b.sizes.seed_rc, (t, t)] {
        let n = rows * cols;
        let sets = b.sets(8 * n);
        let px = Rotating::uniform(&k, &s, n, sets, 15)?;
        let mut po = Rotating::zeros(&s, n, sets)?;
        let size = format!("{rows}x{cols} f32");
        let same = rows == torch_size::TRANSPOSE && cols == torch_size::TRANSPOSE;
        for (algo, name, kind) in algos {
            let m = b.time(&format!("{name} {size}"), |s, i| {
                Ok(ops::transpose(
                    &k,
                    s,
                    algo,
                    &px.get(i)?,
                    &mut po.get_mut(i)?,
                    rows,
                    cols,
                )?)
            })?;
            let torch = b.torch_fig("transpose", "torch x.t() copy", same);
            let row = b.mem_row(
                "transpose",
                name,
                kind,
                size.clone(),
                m,
                8.0 * n as f64,
                torch,
                "read + write: 8 bytes/element",
            );
            if algo == TransposeAlgo::TiledPadded && rows == t {
                let remark = match (b.torch.get("transpose").filter(|_| same), b.d2d) {
                    (Some(tt), Some(d)) => {
                        format!("PyTorch's transpose reaches {:.3}x of the same D2D", tt / d)
                    }
                    _ => String::new(),
                };
                b.target(Target {
                    what: format!("transpose {size} (tiled_padded)"),
                    ours: row.rate,
                    theirs: b.d2d,
                    unit: Unit::GBs,
                    need: 0.85,
                    against: "D2D copy (driver memcpy, this run)".into(),
                    remark,
                });
            }
        }
    }
    Ok(())
}
