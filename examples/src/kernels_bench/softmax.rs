//! Row softmax: one warp per row vs one block per row vs the row held in registers, at
//! 4096 × 4096 (PyTorch's `softmax` line) and at the attention shape 32·1024 rows × 1024
//! columns. 8 bytes per element (read x once, write y once).

use super::check;
use super::context::{torch_size, Bench};
use super::rows::{Kind, Target, Unit};
use super::timing::{BenchResult, Rotating};
use cuda_stack_kernels::ops::{self, SoftmaxAlgo};
use cuda_stack_kernels::reference;

const ALGOS: [(SoftmaxAlgo, &str); 6] = [
    (SoftmaxAlgo::Warp, "softmax_warp_f32 (warp per row)"),
    (SoftmaxAlgo::Block, "softmax_block_f32 (block per row)"),
    (
        SoftmaxAlgo::Registers,
        "softmax_rows_regs_f32 (row in registers)",
    ),
    (
        SoftmaxAlgo::Narrow,
        "softmax_small_g*_p*_f32 (lanes per row)",
    ),
    (SoftmaxAlgo::Split, "softmax_part_* (chunks per row)"),
    (
        SoftmaxAlgo::Shared,
        "softmax_smem_f32 (row in shared memory)",
    ),
];

/// Whether `algo` takes rows of `cols` columns.
fn takes(algo: SoftmaxAlgo, cols: usize) -> bool {
    match algo {
        SoftmaxAlgo::Registers => cols <= ops::REGISTERS_MAX_COLS,
        SoftmaxAlgo::Narrow => cols <= ops::NARROW_MAX_COLS,
        _ => true,
    }
}

/// Checks the kernels on short and long rows, then times them. Target: the kernel
/// `softmax_rows` picks at 4096 × 4096 >= 0.9x torch.softmax.
pub fn softmax(b: &mut Bench) -> BenchResult<()> {
    b.section("softmax: warp per row vs block per row vs row in registers");
    let (k, s) = (b.k.clone(), b.s.clone());
    for (rows, cols) in [(37, 1000), (9, 4096), (5, 33)] {
        let (x, hx) = check::signed(&k, &s, rows * cols, 51)?;
        // expf within 2 ulp and f32 sums of up to 128 terms per lane: 2e-5 relative.
        let want = reference::softmax_rows(&hx, rows, cols);
        for (algo, name) in ALGOS {
            if !takes(algo, cols) {
                continue;
            }
            let mut y = check::zeros(&s, rows * cols)?;
            ops::softmax_rows_with(&k, &s, algo, &x, &mut y, rows, cols)?;
            check::close(
                &format!("{name} {rows}x{cols}"),
                &s.clone_dtoh(&y)?,
                &want,
                1e-8,
                2e-5,
            )?;
        }
    }

    for (rows, cols) in b.sizes.softmax.clone() {
        let n = rows * cols;
        let sets = b.sets(8 * n);
        let px = Rotating::uniform(&k, &s, n, sets, 52)?;
        let mut py = Rotating::zeros(&s, n, sets)?;
        let size = format!("{rows}x{cols} f32");
        let same = (rows, cols) == torch_size::SOFTMAX;
        let shared = s.context().limits().max_shared_per_block_optin as usize;
        let auto = ops::softmax_choice(rows, cols, b.sm_count, shared);
        let mut rates = Vec::new();
        for (algo, name) in ALGOS {
            if !takes(algo, cols) {
                continue;
            }
            let m = b.time(&format!("{name} {size}"), |s, i| {
                Ok(ops::softmax_rows_with(
                    &k,
                    s,
                    algo,
                    &px.get(i)?,
                    &mut py.get_mut(i)?,
                    rows,
                    cols,
                )?)
            })?;
            let torch = b.torch_fig("softmax", "torch.softmax", same);
            let note = if algo == auto {
                "8 bytes/element; softmax_rows picks this one"
            } else {
                "8 bytes/element"
            };
            let row = b.mem_row(
                "softmax",
                name,
                Kind::Fast,
                size.clone(),
                m,
                8.0 * n as f64,
                torch,
                note,
            );
            rates.push((algo, name, row.rate));
        }
        let (_, auto_name, auto_rate) = rates
            .iter()
            .copied()
            .find(|r| r.0 == auto)
            .ok_or("softmax: the automatic choice was not measured")?;
        let best = rates
            .iter()
            .copied()
            .fold(rates[0], |m, r| if r.2 > m.2 { r } else { m });
        let remark = if best.0 != auto {
            format!(
                "note: {} is {:.2}x faster here than softmax_rows' choice",
                best.1,
                best.2 / auto_rate
            )
        } else {
            String::new()
        };
        if same || (rows, cols) == b.sizes.softmax[0] {
            b.target(Target {
                what: format!("softmax {size} (softmax_rows -> {auto_name})"),
                ours: auto_rate,
                theirs: b.torch.get("softmax").copied().filter(|_| same),
                unit: Unit::GBs,
                need: 0.9,
                against: "torch.softmax (key `softmax`)".into(),
                remark,
            });
        } else if !remark.is_empty() {
            b.log(&format!("softmax {size}: {remark}"));
        }
    }
    Ok(())
}
