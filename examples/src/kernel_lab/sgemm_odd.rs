//! Issue 9's remaining SGEMM misses (kernels/TUNING.md, round 4), two hypotheses:
//!
//! - **the last tile column**: n = 128 q + 1 (2049, 1025) costs a whole column of 128 × 128 tiles
//!   for one useful column. Tried: the product on n' = 128 q columns (the library's own plan for
//!   that shape) plus `kernels/tuning/sgemm_strip.cu` for the last n - n' ≤ 8 columns.
//! - **unaligned leading dimensions** (2051, 2049, 2047 floats): every operand load is 4 scalar
//!   loads instead of one float4. Tried at 2048³ with the kernel alone (the same tiles, only the
//!   leading dimensions differ), and on the odd shapes with padded copies of the operands (B's
//!   relayout written with a padded leading dimension, A copied).
//!
//! `library` is `ops::sgemm` as this branch has it (with the column strip where its plan takes
//! one); `tiles-only plan` is the plan before it, through `ops::sgemm_with_plan`. Every variant
//! is checked exactly: sampled entries and the whole strip against
//! `reference::sgemm_dot` with the slices each entry was computed with. cuBLAS's time comes from
//! `tools/torch_sweep.py` on the cases `kernel_lab --lab-cases` prints (`--torch-sweep`).

use super::common::{time_auto, Lab, Res, Unit};
use super::rounds::Gemm;
use cuda_stack_driver::{DeviceBuffer, DeviceSlice, Kernel, LaunchConfig, Module, Stream};
use cuda_stack_kernels::ops::{self, Transpose};
use cuda_stack_kernels::{reference, Kernels};

const STRIP: &str = include_str!("../../../kernels/tuning/sgemm_strip.cu");
const TRANSPOSE_V2: &str = include_str!("../../../kernels/tuning/transpose_v2.cu");
/// k slices of every strip output (`STRIP_S` in sgemm_strip.cu).
const STRIP_SLICES: usize = 32;
/// GPU seconds per timing trial.
const TRIAL: f64 = 0.005;

/// `tal_ld(in, out, rows, cols, ldo)`.
type TransposeLd = Kernel<(
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    i32,
    i32,
    i32,
)>;

/// One product `C[m, n] = op(A) op(B)` with dense operands, as the sweep stores them.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// A stored transposed (`[k, m]`).
    pub ta: bool,
    /// B stored transposed (`[n, k]`).
    pub tb: bool,
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
}

fn tr(t: bool) -> Transpose {
    if t {
        Transpose::Trans
    } else {
        Transpose::NoTrans
    }
}

impl Case {
    /// The sweep's (and torch_sweep.py's) id, e.g. `sgemm NT 2047x2049x2051`.
    pub fn id(&self) -> String {
        let l = |t: bool| if t { "T" } else { "N" };
        format!(
            "sgemm {}{} {}x{}x{}",
            l(self.ta),
            l(self.tb),
            self.m,
            self.n,
            self.k
        )
    }
    fn layout(&self) -> String {
        self.id()[6..8].to_string()
    }
    /// Stored A: (rows, cols); its dense leading dimension is cols.
    fn a_dims(&self) -> (usize, usize) {
        if self.ta {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        }
    }
    fn b_dims(&self) -> (usize, usize) {
        if self.tb {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        }
    }
    fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

/// The products: the misses and their NN/TN neighbours; the square 2048³ is the kernel
/// alone's reference.
pub fn cases(quick: bool) -> Vec<Case> {
    let c = |ta, tb, m, n, k| Case { ta, tb, m, n, k };
    let (m, n, k) = if quick {
        (255, 257, 259)
    } else {
        (2047, 2049, 2051)
    };
    let (m1, n1, k1) = if quick {
        (127, 129, 131)
    } else {
        (1023, 1025, 1027)
    };
    let g = if quick { 256 } else { 2048 };
    vec![
        c(false, false, g, g, g),
        c(false, false, m1, n1, k1),
        c(false, false, m, n, k),
        c(false, true, m, n, k),
        c(true, false, m, n, k),
        c(true, true, m, n, k),
    ]
}

/// The cases as `tools/torch_sweep.py` reads them.
pub fn cases_json(quick: bool) -> Vec<serde_json::Value> {
    cases(quick)
        .iter()
        .map(|c| serde_json::json!({"id": c.id(), "op": "sgemm", "m": c.m, "n": c.n, "k": c.k, "ta": c.ta, "tb": c.tb}))
        .collect()
}

/// `dst[r · ldd + c] = src[r · lds + c]` into a new `[rows, ldd]` buffer (`copy_rows_b4`; the
/// padding columns are left unwritten).
fn pad_copy(
    k: &Kernels,
    s: &Stream,
    src: &DeviceSlice<f32>,
    rows: usize,
    cols: usize,
    lds: usize,
    ldd: usize,
) -> Res<DeviceBuffer<f32>> {
    // SAFETY: columns < cols of every row are written below; the padding columns are never read
    // (the kernels load only the operand's own columns), so no element is read unwritten.
    let mut dst = unsafe { s.alloc::<f32>(rows * ldd)? };
    let cfg = LaunchConfig::new(
        (cols.div_ceil(256).min(64) as u32, rows.min(65_535) as u32),
        256,
    );
    {
        let sv = src.cast::<u32>()?;
        let mut dv = dst.cast_mut::<u32>()?;
        // SAFETY: reads src[r·lds + c], writes dst[r·ldd + c] for r < rows, c < cols: src spans a
        // [rows, cols] matrix with stride lds (the callers' operands), dst holds rows·ldd elements.
        unsafe {
            k.copy_rows_b4()?.launch(
                s,
                &cfg,
                &sv,
                lds as i64,
                &mut dv,
                ldd as i64,
                rows as i32,
                cols as i32,
            )
        }?;
    }
    Ok(dst)
}

/// `[rows, cols]` dense → `[cols, ldo]` transposed (`tal_ld`), a new buffer.
fn relayout_padded(
    t: &TransposeLd,
    s: &Stream,
    x: &DeviceSlice<f32>,
    rows: usize,
    cols: usize,
    ldo: usize,
) -> Res<DeviceBuffer<f32>> {
    // SAFETY: every element the product reads (columns < rows of each row) is written below.
    let mut out = unsafe { s.alloc::<f32>(cols * ldo)? };
    let cfg = LaunchConfig::new(
        (rows.div_ceil(64) as u32, cols.div_ceil(64) as u32),
        (32, 8),
    );
    // SAFETY: reads x[r·cols + c] (r < rows, c < cols: x is dense [rows, cols]) and writes
    // out[c·ldo + r] < cols·ldo.
    unsafe { t.launch(s, &cfg, x, &mut out, rows as i32, cols as i32, ldo as i32) }?;
    Ok(out)
}

/// The operands of one product as a variant runs it (stored layouts, leading dimensions).
struct Ops<'a> {
    ta: Transpose,
    tb: Transpose,
    a: &'a DeviceSlice<f32>,
    lda: usize,
    b: &'a DeviceSlice<f32>,
    ldb: usize,
}

/// Runs `C[:, 0..n1) = op(A) op(B)` with the library (its own plan for n1 columns), then the strip
/// kernel for `C[:, n1..n)` from `strip_b` (the original B, stored as the case says, and its
/// leading dimension).
#[allow(clippy::too_many_arguments)]
fn strip_plan(
    k: &Kernels,
    s: &Stream,
    strips: &[Gemm; 4],
    c: &Case,
    o: &Ops<'_>,
    strip_b: (&DeviceSlice<f32>, usize),
    out: &mut DeviceSlice<f32>,
    n1: usize,
) -> Res<()> {
    let (m, n, kd) = (c.m, c.n, c.k);
    ops::sgemm(
        k, s, o.ta, o.tb, m, n1, kd, 1.0, o.a, o.lda, o.b, o.ldb, 0.0, out, n,
    )?;
    let (b, ldb) = strip_b;
    let off = if c.tb { n1 * ldb } else { n1 };
    let bv = b.slice(off..)?;
    let mut cv = out.slice_mut(n1..)?;
    let kern = &strips[2 * c.ta as usize + c.tb as usize];
    let cfg = LaunchConfig::new(m.div_ceil(8) as u32, 256);
    let (mi, wi, ki) = (m as i32, (n - n1) as i32, kd as i32);
    // SAFETY: sgemm_strip_XY reads op(A) [m, k] (A with o.lda, the stored layout of `ta`), op(B)
    // [k, n - n1] from column n1 of the original B (its leading dimension, layout `tb`), and
    // writes C[i·n + n1 + j] for i < m, j < n - n1: all inside the buffers (dense [m, n] C).
    unsafe {
        kern.launch(
            s,
            &cfg,
            mi,
            wi,
            ki,
            1.0,
            o.a,
            o.lda as i32,
            &bv,
            ldb as i32,
            0.0,
            &mut cv,
            n as i32,
        )
    }?;
    Ok(())
}

/// Checks `got` (C, dense [m, n]) exactly against `reference::sgemm_dot` with `splits(i, j)` k
/// slices: 1500 sampled entries, the corners, and every column from `all_from` on.
fn check(
    c: &Case,
    got: &[f32],
    ha: &[f32],
    hb: &[f32],
    splits: impl Fn(usize, usize) -> usize,
    all_from: usize,
) -> String {
    let (m, n) = (c.m, c.n);
    let (lda, ldb) = (c.a_dims().1, c.b_dims().1);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    let mut picks: Vec<(usize, usize)> = (0..1500).map(|_| (next() % m, next() % n)).collect();
    picks.extend([(0, 0), (m - 1, n - 1), (m - 1, 0), (0, n - 1)]);
    for j in all_from..n {
        picks.extend((0..m).map(|i| (i, j)));
    }
    for &(i, j) in &picks {
        let want = reference::sgemm_dot(
            tr(c.ta),
            tr(c.tb),
            c.k,
            ha,
            lda,
            hb,
            ldb,
            i,
            j,
            splits(i, j),
        );
        let g = got[i * n + j];
        if g.to_bits() != want.to_bits() {
            return format!(
                "MISMATCH C[{i}][{j}] = {g}, want {want} ({} slices)",
                splits(i, j)
            );
        }
    }
    format!("exact ({} entries)", picks.len())
}

/// The kernel alone at `g`³ (one launch, `g / 128` squared tiles): NN and TN with aligned and
/// unaligned leading dimensions (the same matrices copied with other strides).
fn isolation(lab: &mut Lab, c: &Case) -> Res<()> {
    let (k, s) = (lab.k.clone(), lab.s.clone());
    let g = c.m;
    let cublas = lab.sweep.get(&c.id()).copied();
    let mut a0 = s.alloc_zeros::<f32>(g * g)?;
    let mut b0 = s.alloc_zeros::<f32>(g * g)?;
    ops::fill_uniform(&k, &s, &mut a0, 41, 0)?;
    ops::fill_uniform(&k, &s, &mut b0, 42, 0)?;
    let mut out = s.alloc_zeros::<f32>(g * g)?;
    let gi = g as i32;
    let cfg = LaunchConfig::new(((g / 128) as u32, (g / 128) as u32), 256);
    for (name, ta, a_pads) in [("NN", false, [0usize, 3]), ("TN", true, [0, 1])] {
        let kern = if ta { k.sgemm_tn()? } else { k.sgemm_nn()? };
        let mut want: Option<Vec<f32>> = None;
        for (pa, pb) in [(a_pads[0], 0usize), (a_pads[1], 0), (0, 1), (a_pads[1], 1)] {
            let (lda, ldb) = (g + pa, g + pb);
            let a = pad_copy(&k, &s, &a0, g, g, g, lda)?;
            let b = pad_copy(&k, &s, &b0, g, g, g, ldb)?;
            s.memset_bytes(&mut out, 0xFF)?;
            let run = |s: &Stream, out: &mut DeviceSlice<f32>| -> Res<()> {
                // SAFETY: sgemm reads op(A), op(B) [g, g] with strides lda, ldb (both g rows of
                // lda / ldb elements) and writes C [g, g] (dense); the grid is g/128 square.
                unsafe {
                    kern.launch(
                        s, &cfg, gi, gi, gi, 1.0, &a, lda as i32, &b, ldb as i32, 0.0, out, gi,
                    )
                }?;
                Ok(())
            };
            run(&s, &mut out)?;
            let got = s.clone_dtoh(&out)?;
            let check = match &want {
                None => {
                    want = Some(got);
                    "reference of the rows below".to_string()
                }
                Some(w) => super::common::same(&got, w),
            };
            let t = time_auto(&s, TRIAL, |s| run(s, &mut out))?;
            let variant = format!("{name} {g}^3 kernel only, lda {lda} ldb {ldb}");
            lab.rel(
                "sgemm align",
                &variant,
                t,
                c.flops(),
                Unit::Flops,
                cublas,
                &check,
            );
        }
    }
    Ok(())
}

/// The library beside the strip plan and padded operands on one odd product.
fn odd(lab: &mut Lab, strips: &[Gemm; 4], tal_ld: &TransposeLd, c: &Case) -> Res<()> {
    let (k, s) = (lab.k.clone(), lab.s.clone());
    let sms = lab.ctx.limits().sm_count;
    let cublas = lab.sweep.get(&c.id()).copied();
    let (m, n, kd) = (c.m, c.n, c.k);
    let ((ar, ac), (br, bc)) = (c.a_dims(), c.b_dims());
    let mut a = s.alloc_zeros::<f32>(ar * ac)?;
    let mut b = s.alloc_zeros::<f32>(br * bc)?;
    ops::fill_uniform(&k, &s, &mut a, 43, 0)?;
    ops::fill_uniform(&k, &s, &mut b, 44, 0)?;
    let (ha, hb) = (s.clone_dtoh(&a)?, s.clone_dtoh(&b)?);
    let mut out = s.alloc_zeros::<f32>(m * n)?;
    let group = format!("sgemm {}", c.layout());
    let shape = format!("{m}x{n}x{kd}");
    let plain = Ops {
        ta: tr(c.ta),
        tb: tr(c.tb),
        a: &a,
        lda: ac,
        b: &b,
        ldb: bc,
    };

    // The library as it is.
    let plan = ops::sgemm_plan(m, n, kd, sms);
    let lib = |s: &Stream, out: &mut DeviceSlice<f32>| -> Res<()> {
        Ok(ops::sgemm(
            &k, s, plain.ta, plain.tb, m, n, kd, 1.0, &a, ac, &b, bc, 0.0, out, n,
        )?)
    };
    s.memset_bytes(&mut out, 0xFF)?;
    lib(&s, &mut out)?;
    let chk = check(
        c,
        &s.clone_dtoh(&out)?,
        &ha,
        &hb,
        |i, j| plan.splits_for(i, j, n),
        n - plan.strip_cols,
    );
    let t = time_auto(&s, TRIAL, |s| lib(s, &mut out))?;
    lab.rel(
        &group,
        &format!("library {shape}, plan {plan:?}"),
        t,
        c.flops(),
        Unit::Flops,
        cublas,
        &chk,
    );

    // The plan on tiles alone: what ops::sgemm ran before the column strip.
    let tiles = ops::sgemm_tile_plan(m, n, kd, sms);
    if tiles != plan {
        let run = |s: &Stream, out: &mut DeviceSlice<f32>| -> Res<()> {
            Ok(ops::sgemm_with_plan(
                &k, s, tiles, plain.ta, plain.tb, m, n, kd, 1.0, &a, ac, &b, bc, 0.0, out, n,
            )?)
        };
        s.memset_bytes(&mut out, 0xFF)?;
        run(&s, &mut out)?;
        let chk = check(
            c,
            &s.clone_dtoh(&out)?,
            &ha,
            &hb,
            |i, _| tiles.splits_for_row(i),
            n,
        );
        let t = time_auto(&s, TRIAL, |s| run(s, &mut out))?;
        let what = format!("library, tiles-only plan (before the strip) {tiles:?}");
        lab.rel(&group, &what, t, c.flops(), Unit::Flops, cublas, &chk);
    }
    let w = n % 128;
    let n1 = n - w;
    let strip_ok = (1..=8).contains(&w) && n1 > 0;
    // Padded operands, prepared once (kernel-only rows) and in the timed call (net rows).
    let (a4, b4) = (
        ac.next_multiple_of(4),
        if c.tb {
            n.next_multiple_of(4)
        } else {
            bc.next_multiple_of(4)
        },
    );
    let pad_a = |s: &Stream| pad_copy(&k, s, &a, ar, ac, ac, a4);
    let pad_b = |s: &Stream| -> Res<DeviceBuffer<f32>> {
        if c.tb {
            relayout_padded(tal_ld, s, &b, n, kd, b4) // [n, k] -> [k, n] with ld b4
        } else {
            pad_copy(&k, s, &b, br, bc, bc, b4)
        }
    };
    let (ap, bp) = (pad_a(&s)?, pad_b(&s)?);
    let padded = Ops {
        ta: tr(c.ta),
        tb: Transpose::NoTrans,
        a: &ap,
        lda: a4,
        b: &bp,
        ldb: b4,
    };

    // The library's plan on padded operands (kernel only): the alignment effect alone.
    let run = |s: &Stream, out: &mut DeviceSlice<f32>| -> Res<()> {
        Ok(ops::sgemm(
            &k, s, padded.ta, padded.tb, m, n, kd, 1.0, padded.a, a4, padded.b, b4, 0.0, out, n,
        )?)
    };
    s.memset_bytes(&mut out, 0xFF)?;
    run(&s, &mut out)?;
    let chk = check(
        c,
        &s.clone_dtoh(&out)?,
        &ha,
        &hb,
        |i, j| plan.splits_for(i, j, n),
        n - plan.strip_cols,
    );
    let t = time_auto(&s, TRIAL, |s| run(s, &mut out))?;
    lab.rel(
        &group,
        &format!("library plan, A lda {a4} + B ldb {b4} padded (copies untimed)"),
        t,
        c.flops(),
        Unit::Flops,
        cublas,
        &chk,
    );

    if c.tb {
        // The in-place cost of the relayout: the product on a dense [k, n] B made beforehand.
        let mut bd = s.alloc_zeros::<f32>(kd * n)?;
        ops::transpose(&k, &s, ops::TransposeAlgo::Auto, &b, &mut bd, n, kd)?;
        let run = |s: &Stream, out: &mut DeviceSlice<f32>| -> Res<()> {
            Ok(ops::sgemm(
                &k,
                s,
                plain.ta,
                Transpose::NoTrans,
                m,
                n,
                kd,
                1.0,
                &a,
                ac,
                &bd,
                n,
                0.0,
                out,
                n,
            )?)
        };
        s.memset_bytes(&mut out, 0xFF)?;
        run(&s, &mut out)?;
        let chk = check(
            c,
            &s.clone_dtoh(&out)?,
            &ha,
            &hb,
            |i, j| plan.splits_for(i, j, n),
            n - plan.strip_cols,
        );
        let t = time_auto(&s, TRIAL, |s| run(s, &mut out))?;
        lab.rel(
            &group,
            &format!("library plan, dense B relayout (ldb {n}) made beforehand (untimed)"),
            t,
            c.flops(),
            Unit::Flops,
            cublas,
            &chk,
        );
        // ... and made in the call: the library before its relayout's rows were padded.
        let run = |s: &Stream, out: &mut DeviceSlice<f32>| -> Res<()> {
            // SAFETY: the transpose writes every element before the product reads it.
            let mut bq = unsafe { s.alloc::<f32>(kd * n)? };
            ops::transpose(&k, s, ops::TransposeAlgo::Auto, &b, &mut bq, n, kd)?;
            let (ta, nt) = (plain.ta, Transpose::NoTrans);
            Ok(ops::sgemm(
                &k, s, ta, nt, m, n, kd, 1.0, &a, ac, &bq, n, 0.0, out, n,
            )?)
        };
        s.memset_bytes(&mut out, 0xFF)?;
        run(&s, &mut out)?;
        let chk = check(
            c,
            &s.clone_dtoh(&out)?,
            &ha,
            &hb,
            |i, j| plan.splits_for(i, j, n),
            n - plan.strip_cols,
        );
        let t = time_auto(&s, TRIAL, |s| run(s, &mut out))?;
        lab.rel(
            &group,
            &format!("library plan, dense B relayout (ldb {n}) in the call (timed)"),
            t,
            c.flops(),
            Unit::Flops,
            cublas,
            &chk,
        );
    }
    if !strip_ok {
        return Ok(());
    }
    let main = ops::sgemm_plan(m, n1, kd, sms);
    let splits = |i: usize, j: usize| {
        if j < n1 {
            main.splits_for_row(i)
        } else {
            STRIP_SLICES
        }
    };

    // The strip plan on the operands as they are.
    s.memset_bytes(&mut out, 0xFF)?;
    strip_plan(&k, &s, strips, c, &plain, (&b, bc), &mut out, n1)?;
    let chk = check(c, &s.clone_dtoh(&out)?, &ha, &hb, splits, n1);
    let t = time_auto(&s, TRIAL, |s| {
        strip_plan(&k, s, strips, c, &plain, (&b, bc), &mut out, n1)
    })?;
    lab.rel(
        &group,
        &format!("strip: library on n' = {n1} ({main:?}) + {w}-column strip"),
        t,
        c.flops(),
        Unit::Flops,
        cublas,
        &chk,
    );

    if c.tb {
        // ... with B's relayout written with a padded leading dimension (timed).
        let run = |s: &Stream, out: &mut DeviceSlice<f32>| -> Res<()> {
            let bq = pad_b(s)?;
            let o = Ops {
                ta: tr(c.ta),
                tb: Transpose::NoTrans,
                a: &a,
                lda: ac,
                b: &bq,
                ldb: b4,
            };
            strip_plan(&k, s, strips, c, &o, (&b, bc), out, n1)
        };
        s.memset_bytes(&mut out, 0xFF)?;
        run(&s, &mut out)?;
        let chk = check(c, &s.clone_dtoh(&out)?, &ha, &hb, splits, n1);
        let t = time_auto(&s, TRIAL, |s| run(s, &mut out))?;
        lab.rel(
            &group,
            &format!("strip + B relayout with ldb {b4} (timed)"),
            t,
            c.flops(),
            Unit::Flops,
            cublas,
            &chk,
        );
    }

    if c.tb && main.main_rows == 0 && main.rest_splits == 1 {
        // ... with the main part on the transposed-B kernel itself (no relayout): one launch.
        let kern = if c.ta { k.sgemm_tt()? } else { k.sgemm_nt()? };
        let cfg = LaunchConfig::new(((n1 / 128) as u32, m.div_ceil(128) as u32), 256);
        let run = |s: &Stream, out: &mut DeviceSlice<f32>| -> Res<()> {
            // SAFETY: sgemm_XT reads op(A) [m, k] (A, lda ac), op(B) [k, n1] (rows < n1 of the
            // stored [n, k] B, ldb bc) and writes C[i·n + j] for i < m, j < n1 (dense [m, n]);
            // one k slice (grid z = 1), so C itself is the output.
            unsafe {
                kern.launch(
                    s, &cfg, m as i32, n1 as i32, kd as i32, 1.0, &a, ac as i32, &b, bc as i32,
                    0.0, &mut *out, n as i32,
                )
            }?;
            let off = n1 * bc;
            let bv = b.slice(off..)?;
            let mut cv = out.slice_mut(n1..)?;
            let sk = &strips[2 * c.ta as usize + 1];
            let scfg = LaunchConfig::new(m.div_ceil(8) as u32, 256);
            // SAFETY: as in `strip_plan`.
            unsafe {
                sk.launch(
                    s, &scfg, m as i32, w as i32, kd as i32, 1.0, &a, ac as i32, &bv, bc as i32,
                    0.0, &mut cv, n as i32,
                )
            }?;
            Ok(())
        };
        s.memset_bytes(&mut out, 0xFF)?;
        run(&s, &mut out)?;
        let chk = check(c, &s.clone_dtoh(&out)?, &ha, &hb, splits, n1);
        let t = time_auto(&s, TRIAL, |s| run(s, &mut out))?;
        let what = format!(
            "strip, main on sgemm_{}t directly (no relayout)",
            if c.ta { "t" } else { "n" }
        );
        lab.rel(&group, &what, t, c.flops(), Unit::Flops, cublas, &chk);
    }

    // ... with both operands padded: copies timed, then untimed.
    let run = |s: &Stream, out: &mut DeviceSlice<f32>| -> Res<()> {
        let (aq, bq) = (pad_a(s)?, pad_b(s)?);
        let o = Ops {
            ta: tr(c.ta),
            tb: Transpose::NoTrans,
            a: &aq,
            lda: a4,
            b: &bq,
            ldb: b4,
        };
        strip_plan(&k, s, strips, c, &o, (&b, bc), out, n1)
    };
    s.memset_bytes(&mut out, 0xFF)?;
    run(&s, &mut out)?;
    let chk = check(c, &s.clone_dtoh(&out)?, &ha, &hb, splits, n1);
    let t = time_auto(&s, TRIAL, |s| run(s, &mut out))?;
    lab.rel(
        &group,
        &format!("strip + A lda {a4}, B ldb {b4} padded (copies timed)"),
        t,
        c.flops(),
        Unit::Flops,
        cublas,
        &chk,
    );

    let run = |s: &Stream, out: &mut DeviceSlice<f32>| {
        strip_plan(&k, s, strips, c, &padded, (&b, bc), out, n1)
    };
    s.memset_bytes(&mut out, 0xFF)?;
    run(&s, &mut out)?;
    let chk = check(c, &s.clone_dtoh(&out)?, &ha, &hb, splits, n1);
    let t = time_auto(&s, TRIAL, |s| run(s, &mut out))?;
    lab.rel(
        &group,
        "strip + A, B padded (copies untimed)",
        t,
        c.flops(),
        Unit::Flops,
        cublas,
        &chk,
    );

    // The strip kernel alone (its share of the time).
    let mut strip_only = |s: &Stream| -> Res<()> {
        let off = if c.tb { n1 * bc } else { n1 };
        let bv = b.slice(off..)?;
        let mut cv = out.slice_mut(n1..)?;
        let kern = &strips[2 * c.ta as usize + c.tb as usize];
        let cfg = LaunchConfig::new(m.div_ceil(8) as u32, 256);
        // SAFETY: as in `strip_plan`.
        unsafe {
            kern.launch(
                s, &cfg, m as i32, w as i32, kd as i32, 1.0, &a, ac as i32, &bv, bc as i32, 0.0,
                &mut cv, n as i32,
            )
        }?;
        Ok(())
    };
    let t = time_auto(&s, TRIAL, &mut strip_only)?;
    let flops = 2.0 * (m * w * kd) as f64;
    lab.rel(
        &group,
        &format!(
            "strip kernel alone ({m} x {w} x {kd}, {:.1} MB of A)",
            (m * kd * 4) as f64 / 1e6
        ),
        t,
        flops,
        Unit::Flops,
        None,
        "",
    );
    Ok(())
}

/// Runs the SGEMM experiments.
pub fn run(lab: &mut Lab) -> Res<()> {
    let strip: Module = lab.compile("sgemm_strip.cu", STRIP)?;
    let tv2: Module = lab.compile("transpose_v2.cu", TRANSPOSE_V2)?;
    // SAFETY: sgemm_strip_XY(int M, int W, int K, float alpha, const float* A, int lda, const
    // float* B, int ldb, float beta, float* C, int ldc): the library sgemm's signature.
    let strips: [Gemm; 4] = unsafe {
        [
            strip.kernel("sgemm_strip_nn")?,
            strip.kernel("sgemm_strip_nt")?,
            strip.kernel("sgemm_strip_tn")?,
            strip.kernel("sgemm_strip_tt")?,
        ]
    };
    // SAFETY: tal_ld(const float* in, float* out, int rows, int cols, int ldo).
    let tal_ld: TransposeLd = unsafe { tv2.kernel("tal_ld")? };
    let all = cases(lab.quick);
    isolation(lab, &all[0])?;
    for c in &all[1..] {
        odd(lab, &strips, &tal_ld, c)?;
    }
    Ok(())
}
