//! Streaming kernels against the driver's D2D copy: the reference itself, vector add (seed and
//! fast) and the full sum (tree and fast).

use super::check;
use super::context::{fmt_n, torch_size, Bench};
use super::rows::{Kind, Target, Unit};
use super::timing::{BenchResult, Rotating};
use cuda_stack_kernels::{ops, ops::ReduceAlgo, reference};

/// The physical reference: `memcpy_dtod` of `big` f32, counting read + write bytes (8 per
/// element). Sets `b.d2d`.
pub fn d2d(b: &mut Bench) -> BenchResult<()> {
    b.section("reference: D2D copy (driver memcpy)");
    let (k, s) = (b.k.clone(), b.s.clone());
    // Check: the copy is exact.
    let (src, want) = check::uniform(&k, &s, 100_003, 1)?;
    let mut dst = check::zeros(&s, want.len())?;
    s.memcpy_dtod(&src, &mut dst)?;
    check::exact("memcpy_dtod", &s.clone_dtoh(&dst)?, &want)?;

    let n = b.sizes.big;
    let sets = b.sets(8 * n);
    let src = Rotating::uniform(&k, &s, n, sets, 2)?;
    let mut dst = Rotating::zeros(&s, n, sets)?;
    // Bring the clocks up before the first measurement: about 0.3 s of copies (full run).
    let spin = if b.quick { 4 } else { 200 };
    for _ in 0..spin {
        s.memcpy_dtod(&src.get(0)?, &mut dst.get_mut(0)?)?;
    }
    s.synchronize()?;
    let m = b.time("D2D memcpy", |s, i| {
        Ok(s.memcpy_dtod(&src.get(i)?, &mut dst.get_mut(i)?)?)
    })?;
    let bytes = 8.0 * n as f64;
    let torch = b.torch_fig("d2d", "torch copy_", n == torch_size::N);
    let row = b.mem_row(
        "reference",
        "D2D memcpy_dtod",
        Kind::Reference,
        format!("{} f32", fmt_n(n)),
        m,
        bytes,
        torch,
        "read + write bytes: 8 per element",
    );
    b.d2d = Some(row.rate);
    // The reference is 100% of itself (so it shows in the chart).
    if let Some(last) = b.rows.last_mut() {
        last.reference = b.d2d.map(|value| super::rows::Figure {
            value,
            label: "D2D".into(),
        });
    }
    Ok(())
}

/// Seed 000's `vector_add` and `vector_add_fast` at 1,000,000 (rotated) and `big`; 12 bytes
/// per element (read a, b; write c). Target: fast at 2^28 >= 1.0x torch add.
pub fn vector_add(b: &mut Bench) -> BenchResult<()> {
    b.section("vector add (seed 000)");
    let (k, s) = (b.k.clone(), b.s.clone());
    let (a, ha) = check::signed(&k, &s, 100_003, 3)?;
    let (bb, hb) = check::signed(&k, &s, 100_003, 4)?;
    let want = reference::vector_add(&ha, &hb);
    let mut c = check::zeros(&s, want.len())?;
    ops::vector_add_seed(&k, &s, &a, &bb, &mut c)?;
    check::exact("vector_add (seed)", &s.clone_dtoh(&c)?, &want)?;
    let mut c = check::zeros(&s, want.len())?;
    ops::vector_add(&k, &s, &a, &bb, &mut c)?;
    check::exact("vector_add_fast", &s.clone_dtoh(&c)?, &want)?;

    for n in [b.sizes.vec_seed, b.sizes.big] {
        let bytes = 12.0 * n as f64;
        let sets = b.sets(12 * n);
        let pa = Rotating::uniform(&k, &s, n, sets, 5)?;
        let pb = Rotating::uniform(&k, &s, n, sets, 6)?;
        let mut pc = Rotating::zeros(&s, n, sets)?;
        let size = format!("{} f32", fmt_n(n));
        let same = n == torch_size::N;
        let m = b.time(&format!("vector_add seed {size}"), |s, i| {
            Ok(ops::vector_add_seed(
                &k,
                s,
                &pa.get(i)?,
                &pb.get(i)?,
                &mut pc.get_mut(i)?,
            )?)
        })?;
        let torch = b.torch_fig("add", "torch add", same);
        b.mem_row(
            "vector add",
            "vector_add (seed 000)",
            Kind::Educational,
            size.clone(),
            m,
            bytes,
            torch,
            "12 bytes/element",
        );
        let m = b.time(&format!("vector_add_fast {size}"), |s, i| {
            Ok(ops::vector_add(
                &k,
                s,
                &pa.get(i)?,
                &pb.get(i)?,
                &mut pc.get_mut(i)?,
            )?)
        })?;
        let torch = b.torch_fig("add", "torch add", same);
        let row = b.mem_row(
            "vector add",
            "vector_add_fast",
            Kind::Fast,
            size.clone(),
            m,
            bytes,
            torch,
            "12 bytes/element",
        );
        if n == b.sizes.big {
            b.target(Target {
                what: format!("vector add {size} (vector_add_fast)"),
                ours: row.rate,
                theirs: b.torch.get("add").copied().filter(|_| same),
                unit: Unit::GBs,
                need: 1.0,
                against: "PyTorch add (key `add`)".into(),
                remark: String::new(),
            });
        }
    }
    Ok(())
}

/// `ops::sum` with the tree (seed) and fast first passes, at a seed size (rotated) and `big`;
/// 4 bytes per element. Each call is the whole op: the first pass, the finalize kernel and the
/// op's small partials buffer. Target: fast at 2^28 >= 1.0x torch.sum.
pub fn sum(b: &mut Bench) -> BenchResult<()> {
    b.section("reduce: full sum");
    let (k, s) = (b.k.clone(), b.s.clone());
    let (x, hx) = check::uniform(&k, &s, 100_003, 7)?;
    let want = reference::sum(&hx);
    let abs_sum: f64 = hx.iter().map(|v| f64::from(v.abs())).sum();
    for (algo, name) in [(ReduceAlgo::Tree, "tree"), (ReduceAlgo::Fast, "fast")] {
        let mut out = check::zeros(&s, 1)?;
        ops::sum(&k, &s, algo, &x, &mut out)?;
        let got = f64::from(s.clone_dtoh(&out)?[0]);
        // f32 partial sums in another order than the f64 reference: relative to Σ|x| (a
        // dropped element, about 0.5, would be 10x over).
        check::scalar(
            &format!("reduce sum {name}"),
            got,
            want,
            1e-6 * abs_sum,
            0.0,
        )?;
    }

    for n in [b.sizes.sum_seed, b.sizes.big] {
        let bytes = 4.0 * n as f64;
        let sets = b.sets(4 * n);
        let px = Rotating::uniform(&k, &s, n, sets, 8)?;
        let mut out = s.alloc_zeros::<f32>(1)?;
        let size = format!("{} f32", fmt_n(n));
        let same = n == torch_size::N;
        let mut fast_rate = 0.0;
        for (algo, name, kind) in [
            (
                ReduceAlgo::Tree,
                "reduce_sum_tree + finalize",
                Kind::Educational,
            ),
            (ReduceAlgo::Fast, "reduce_sum_fast + finalize", Kind::Fast),
        ] {
            let m = b.time(&format!("{name} {size}"), |s, i| {
                Ok(ops::sum(&k, s, algo, &px.get(i)?, &mut out)?)
            })?;
            let torch = b.torch_fig("sum", "torch.sum", same);
            let row = b.mem_row(
                "reduce",
                name,
                kind,
                size.clone(),
                m,
                bytes,
                torch,
                "4 bytes/element; whole op (2 kernels + partials buffer)",
            );
            fast_rate = row.rate;
        }
        if n == b.sizes.big {
            b.target(Target {
                what: format!("sum {size} (reduce_sum_fast + finalize)"),
                ours: fast_rate,
                theirs: b.torch.get("sum").copied().filter(|_| same),
                unit: Unit::GBs,
                need: 1.0,
                against: "torch.sum (key `sum`)".into(),
                remark: String::new(),
            });
        }
    }
    Ok(())
}
