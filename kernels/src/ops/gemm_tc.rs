//! Tensor-core GEMMs: f16 / bf16 inputs with f32 accumulation (`mma.sync` on sm_80+, `wgmma` fed
//! by the TMA copy engine on sm_90a), and TF32 (f32 storage, `wgmma` on sm_90a).
//!
//! The ladder these make with [`super::sgemm`] (FP32 FMA on the SIMT cores) is shown step by step
//! by the `tensor_cores` program; `kernels/TUNING.md` records how each step was measured.

#[cfg(doc)]
use super::gemm_half_plan::gemm_half_plan;
use super::gemm_half_plan::{cached_half_plan, HalfPlan, HALF_MAX_SPLITS};
use super::gemm_wgx::gemm_wgx;
use super::gemv_half::{gemv_half, gemv_half_fits};
use super::tc_algo::{tc_choice, TcAlgo};
use super::tc_element::TensorCoreElement;
use super::tma_operand::tma_map_sized;
use super::Transpose;
use crate::launch::{blocks, check_operand, raise_smem, sms, to_i32};
use crate::{DType, Error, Kernels, Result};
use cuda_stack_driver::{
    ComputeCapability, DeviceBuffer, DeviceSlice, LaunchConfig, Stream, TensorMap, TensorMapElement,
};

// Launch geometry, as gemm_mma.cu / gemm_wgmma.cu define it.
const WG_THREADS: u32 = 384;
const WG_SMEM: u32 = 4 * (128 * 128 + 256 * 128) + 1024 + 2 * 4 * 8;
const MM_THREADS: u32 = 256;
const MM_SMEM: u32 = 3 * (128 * 64 * 2 + 256 * 64 * 2) + 128;
const TILE_M: usize = 128;
const TILE_N: usize = 256;

/// An operand as the kernels need it: 16-byte aligned start, row stride a multiple of 16 bytes.
/// Misaligned ones are copied into a padded buffer first (one pass over the operand).
enum Operand<'a, T: cuda_stack_driver::DeviceRepr> {
    Borrowed(&'a DeviceSlice<T>, usize),
    Padded(DeviceBuffer<T>, usize),
}

impl<T: cuda_stack_driver::DeviceRepr> Operand<'_, T> {
    fn slice(&self) -> &DeviceSlice<T> {
        match self {
            Operand::Borrowed(s, _) => s,
            Operand::Padded(b, _) => b,
        }
    }
    fn ld(&self) -> usize {
        match self {
            Operand::Borrowed(_, ld) | Operand::Padded(_, ld) => *ld,
        }
    }
}

/// `x` (a stored `[rows, cols]` matrix with row stride `ld`, already checked to fit) as an
/// aligned operand: itself when it starts on 16 bytes and its rows are multiples of 16 bytes,
/// else a copy with the row stride rounded up (its padding is never read: the kernels bound every
/// load by `cols`).
fn aligned<'a, T: cuda_stack_driver::DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    x: &'a DeviceSlice<T>,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<Operand<'a, T>> {
    let per16 = 16 / std::mem::size_of::<T>();
    if x.as_raw_ptr() % 16 == 0 && ld % per16 == 0 {
        return Ok(Operand::Borrowed(x, ld));
    }
    if x.as_raw_ptr() % 16 == 0 && rows == 1 {
        // One row: its stride is never used, so any multiple of 16 bytes >= cols will do (the
        // slice spans the row's `cols` elements, which is all a map of one row needs).
        return Ok(Operand::Borrowed(x, cols.next_multiple_of(per16)));
    }
    let ldp = cols.div_ceil(per16) * per16;
    Ok(Operand::Padded(
        copy_rows(k, s, x, rows, cols, ld, ldp)?,
        ldp,
    ))
}

/// A new `[rows, ldp]` buffer whose first `cols` columns are those of `x` (stored `[rows, cols]`
/// with row stride `ld`, checked to fit by the caller); the other columns are left unwritten.
#[allow(clippy::too_many_arguments)]
fn copy_rows<T: cuda_stack_driver::DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    rows: usize,
    cols: usize,
    ld: usize,
    ldp: usize,
) -> Result<DeviceBuffer<T>> {
    let len = rows.checked_mul(ldp).ok_or_else(|| Error::TooLarge {
        op: "gemm (tensor cores)",
        what: "padded operand",
        value: rows as u128 * ldp as u128,
        max: usize::MAX as u128,
    })?;
    // SAFETY: the copy below writes columns < cols of every row; the padding columns are never
    // read (every tensor-core kernel load is bounded by the operand's real column count).
    let mut buf = unsafe { s.alloc::<T>(len)? };
    copy_rows_into(k, s, x, ld, &mut buf, ldp, rows, cols)?;
    Ok(buf)
}

/// `dst[r·ldd + c] = src[r·lds + c]` for r < rows, c < cols (`copy_rows_b2` / `_b4`). Both slices
/// must span their `[rows, cols]` matrices with those strides (checked here).
#[allow(clippy::too_many_arguments)]
fn copy_rows_into<T: cuda_stack_driver::DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    src: &DeviceSlice<T>,
    lds: usize,
    dst: &mut DeviceSlice<T>,
    ldd: usize,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "gemm (tensor cores)";
    check_operand(OP, "src", src.len(), rows, cols, lds)?;
    check_operand(OP, "dst", dst.len(), rows, cols, ldd)?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    // 16 bytes per thread where dst's rows allow it (pad_rows.cu), else one element.
    let per16 = 16 / std::mem::size_of::<T>();
    let cfg = LaunchConfig::new(
        (
            blocks(cols.div_ceil(per16), 256).min(64),
            rows.min(65535) as u32,
        ),
        256,
    );
    match std::mem::size_of::<T>() {
        2 => {
            let src = src.cast::<u16>()?;
            let mut dst = dst.cast_mut::<u16>()?;
            // SAFETY: reads src[r·lds + c] and writes dst[r·ldd + c] for r < rows, c < cols, inside
            // both slices (checked above); any grid is correct (grid-stride loops).
            unsafe {
                k.copy_rows_b2()?
                    .launch(s, &cfg, &src, lds as i64, &mut dst, ldd as i64, r, c)
            }?;
        }
        4 => {
            let src = src.cast::<u32>()?;
            let mut dst = dst.cast_mut::<u32>()?;
            // SAFETY: as above, for 4-byte elements.
            unsafe {
                k.copy_rows_b4()?
                    .launch(s, &cfg, &src, lds as i64, &mut dst, ldd as i64, r, c)
            }?;
        }
        _ => {
            return Err(Error::Invalid {
                op: OP,
                problem: "only 2- and 4-byte elements are copied".into(),
            })
        }
    }
    Ok(())
}

/// `C[i·ldc + j] = 0` for i < m, j < n (the product when k == 0): a zeroed scratch matrix copied
/// into C's rows, so elements of C outside the product stay untouched.
fn zero_product<T: cuda_stack_driver::DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    c: &mut DeviceSlice<T>,
    m: usize,
    n: usize,
    ldc: usize,
) -> Result<()> {
    let zeros = s.alloc_zeros::<T>(m * n)?;
    copy_rows_into(k, s, &zeros, n, c, ldc, m, n)
}

/// `C = op(A) · op(B)` on the tensor cores, row-major, f16 or bf16 in and out, f32 accumulation
/// (each output rounded once; under a split-K plan the f32 partials of the k slices are added in
/// slice order, then rounded once). Shapes and leading dimensions as in [`super::sgemm`]:
/// `op(A)` is `[m, kdim]` (`A` stored `[m, kdim]` or, transposed, `[kdim, m]`), `op(B)` is
/// `[kdim, n]`, `C` is `[m, n]` with row stride `ldc >= n`; every slice must span its stored
/// matrix.
///
/// The family is [`tc_choice`]'s; the kernel within it is [`gemm_half_plan`]'s (by shape and SM
/// count: `gemm_wgmma_*`, the persistent split-K `gemm_wgx_*` tiles, or `gemm_mma_*`; the table
/// is in `gemm_half_plan`'s module), asked once per shape and thread. With [`TcAlgo::Auto`], a
/// matrix with rows contiguous in k times a vector runs `gemv_half_rows_*` instead
/// ([`HalfPlan::Gemv`], where [`gemv_half_fits`] says so; no tensor cores). Operands whose start
/// or rows are not 16-byte aligned are copied into aligned buffers first. Returns the family
/// [`tc_choice`] resolved `algo` to (the one that ran, but for a matrix-vector product).
#[allow(clippy::too_many_arguments)]
pub fn gemm_half<T: TensorCoreElement>(
    k: &Kernels,
    s: &Stream,
    algo: TcAlgo,
    ta: Transpose,
    tb: Transpose,
    m: usize,
    n: usize,
    kdim: usize,
    a: &DeviceSlice<T>,
    lda: usize,
    b: &DeviceSlice<T>,
    ldb: usize,
    c: &mut DeviceSlice<T>,
    ldc: usize,
) -> Result<TcAlgo> {
    let family = tc_choice(algo, s.context().limits().compute_capability, T::DTYPE)?;
    // An explicit family is honoured; `Auto` may leave the tensor cores for a matrix-vector
    // product.
    let plan = if algo == TcAlgo::Auto && gemv_half_fits(ta, tb, m, n, kdim) {
        HalfPlan::Gemv
    } else {
        cached_half_plan(family, m, n, kdim, sms(s) as u32)
    };
    gemm_half_with_plan(k, s, plan, ta, tb, m, n, kdim, a, lda, b, ldb, c, ldc)?;
    Ok(family)
}

/// [`gemm_half`] under a given plan instead of [`gemm_half_plan`]'s (to test or measure one
/// kernel). `HalfPlan::Wide` and `Tiles` need compute capability 9.0 exactly, `MmaSync` 8.0 or
/// newer ([`Error::Unsupported`] otherwise); `Tiles` takes `splits` in 1..=[`HALF_MAX_SPLITS`]
/// (more than the k tiles of 64 there are runs as one slice per k tile).
#[allow(clippy::too_many_arguments)]
pub fn gemm_half_with_plan<T: TensorCoreElement>(
    k: &Kernels,
    s: &Stream,
    plan: HalfPlan,
    ta: Transpose,
    tb: Transpose,
    m: usize,
    n: usize,
    kdim: usize,
    a: &DeviceSlice<T>,
    lda: usize,
    b: &DeviceSlice<T>,
    ldb: usize,
    c: &mut DeviceSlice<T>,
    ldc: usize,
) -> Result<()> {
    const OP: &str = "gemm (tensor cores)";
    let (a_rows, a_cols) = stored(ta, m, kdim);
    let (b_rows, b_cols) = stored(tb, kdim, n);
    check_operand(OP, "a", a.len(), a_rows, a_cols, lda)?;
    check_operand(OP, "b", b.len(), b_rows, b_cols, ldb)?;
    check_operand(OP, "c", c.len(), m, n, ldc)?;
    let (mi, ni, ki) = (
        to_i32(OP, "m", m)?,
        to_i32(OP, "n", n)?,
        to_i32(OP, "k", kdim)?,
    );
    let lc = to_i32(OP, "ldc", ldc)?;
    to_i32(OP, "lda", lda)?;
    to_i32(OP, "ldb", ldb)?;
    // A dense single column (op(A) = [1, k] stored [k, 1], op(B) = [k, 1] stored [k, 1], row
    // stride 1) is the same memory as a single row [1, k]: read it as one (the other layout's
    // kernel), so it needs no padded copy (`aligned` takes one row as it is).
    let (ta, lda) = match ta {
        Transpose::Trans if m == 1 && lda == 1 => (Transpose::NoTrans, kdim),
        _ => (ta, lda),
    };
    let (tb, ldb) = match tb {
        Transpose::NoTrans if n == 1 && ldb == 1 => (Transpose::Trans, kdim),
        _ => (tb, ldb),
    };
    let (a_rows, a_cols) = stored(ta, m, kdim);
    let (b_rows, b_cols) = stored(tb, kdim, n);
    let needs = match plan {
        HalfPlan::MmaSync => Some(TcAlgo::MmaSync),
        HalfPlan::Wide | HalfPlan::Tiles { .. } => Some(TcAlgo::Wgmma),
        // No tensor cores: every GPU the crate supports runs it; only the shape is checked.
        HalfPlan::Gemv => None,
    };
    if let Some(needs) = needs {
        tc_choice(needs, s.context().limits().compute_capability, T::DTYPE)?;
    } else if m != 1 && n != 1 {
        return Err(Error::Invalid {
            op: OP,
            problem: format!(
                "HalfPlan::Gemv multiplies a matrix by a vector: m or n must be 1, not {m} x {n}; \
                 use ops::gemm_half_plan's plan or ops::gemm_half"
            ),
        });
    }
    if let HalfPlan::Tiles { splits, .. } = plan {
        if !(1..=HALF_MAX_SPLITS).contains(&splits) {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "splits = {splits} is not in 1..={HALF_MAX_SPLITS}; use ops::gemm_half_plan's \
                     plan or ops::gemm_half"
                ),
            });
        }
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if kdim == 0 {
        return zero_product(k, s, c, m, n, ldc);
    }
    let a = aligned(k, s, a, a_rows, a_cols, lda)?;
    let b = aligned(k, s, b, b_rows, b_cols, ldb)?;
    let grid = (m.div_ceil(TILE_M) * n.div_ceil(TILE_N)) as u32;
    match plan {
        HalfPlan::Gemv => gemv_half(
            k,
            s,
            (ta, tb),
            (m, n, kdim),
            (a.slice(), a.ld()),
            (b.slice(), b.ld()),
            c,
            ldc,
        )?,
        HalfPlan::Tiles { tile, splits } => gemm_wgx(
            k,
            s,
            tile,
            splits,
            (ta, tb),
            (m, n, kdim),
            (a.slice(), a_rows, a_cols, a.ld()),
            (b.slice(), b_rows, b_cols, b.ld()),
            c,
            ldc,
        )?,
        HalfPlan::Wide => {
            let kern = T::wgmma(k.gemm_wgmma_kernels()?, ta, tb);
            raise_smem(kern.function(), WG_SMEM)?;
            let map_a = operand_map::<T>(a.slice(), ta, true, a_rows, a_cols, a.ld())?;
            let map_b = operand_map::<T>(b.slice(), tb, false, b_rows, b_cols, b.ld())?;
            let cfg = LaunchConfig::new(grid, WG_THREADS).with_shared_mem(WG_SMEM);
            // SAFETY: the maps address exactly the stored matrices of `a` and `b` (extents
            // checked against the slices by TensorMap::tiled_2d; the copy engine reads nothing
            // outside them and zero-fills the rest); A and B are passed so the launch orders those
            // buffers; the kernel writes C[i·ldc + j] only for i < m, j < n, inside `c` (checked).
            // Block 384 and the dynamic shared memory are what the kernel is written for.
            unsafe {
                kern.launch(
                    s,
                    &cfg,
                    map_a,
                    map_b,
                    a.slice(),
                    b.slice(),
                    c,
                    mi,
                    ni,
                    ki,
                    lc,
                )
            }?;
        }
        HalfPlan::MmaSync => {
            let kern = T::mma(k.gemm_mma_kernels()?, ta, tb);
            raise_smem(kern.function(), MM_SMEM)?;
            let (la, lb) = (to_i32(OP, "lda", a.ld())?, to_i32(OP, "ldb", b.ld())?);
            let cfg = LaunchConfig::new(grid, MM_THREADS).with_shared_mem(MM_SMEM);
            // SAFETY: every 16-byte copy the kernel issues is bounded by the stored rows and
            // columns of A and B (zero-filled beyond them), whose slices span those matrices with
            // row strides la, lb (multiples of 8, 16-byte aligned starts: `aligned`); C is written
            // only at i < m, j < n with ldc (checked). Block 256 and the shared memory as required.
            unsafe { kern.launch(s, &cfg, a.slice(), b.slice(), c, mi, ni, ki, la, lb, lc) }?;
        }
    }
    Ok(())
}

/// The stored shape of `op(X)` = `[rows, cols]`.
fn stored(t: Transpose, rows: usize, cols: usize) -> (usize, usize) {
    match t {
        Transpose::NoTrans => (rows, cols),
        Transpose::Trans => (cols, rows),
    }
}

/// The tensor map `gemm_wgmma_*` expects for an operand stored `[rows, cols]` with row stride `ld`:
/// K-major operands (A untransposed, B transposed) in boxes of 128 bytes of k by 128 (A) or 256
/// (B) rows; M/N-major ones in boxes of 64 columns by 128 bytes' worth of k rows (64 for 16-bit).
fn operand_map<T: TensorCoreElement>(
    x: &DeviceSlice<T>,
    t: Transpose,
    is_a: bool,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<TensorMap> {
    tma_map(x, T::TMA, t, is_a, rows, cols, ld)
}

fn tma_map<T: cuda_stack_driver::DeviceRepr>(
    x: &DeviceSlice<T>,
    elem: TensorMapElement,
    t: Transpose,
    is_a: bool,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<TensorMap> {
    let box_mn = if is_a { TILE_M as u32 } else { TILE_N as u32 };
    tma_map_sized(x, elem, t, is_a, rows, cols, ld, box_mn)
}

/// `C = op(A) · op(B)` in f32 storage on the TF32 tensor cores (`gemm_wgmma_tf32_nt`: inputs
/// rounded to TF32, f32 accumulation), compute capability 9.0 only. The kernel reads both operands
/// K-major, so an untransposed `B` or a transposed `A` is first transposed into a scratch buffer
/// (one pass over it), and misaligned operands are padded, as in [`gemm_half`]. Shapes as there.
#[allow(clippy::too_many_arguments)]
pub fn gemm_tf32(
    k: &Kernels,
    s: &Stream,
    ta: Transpose,
    tb: Transpose,
    m: usize,
    n: usize,
    kdim: usize,
    a: &DeviceSlice<f32>,
    lda: usize,
    b: &DeviceSlice<f32>,
    ldb: usize,
    c: &mut DeviceSlice<f32>,
    ldc: usize,
) -> Result<()> {
    const OP: &str = "gemm (tf32)";
    let (a_rows, a_cols) = stored(ta, m, kdim);
    let (b_rows, b_cols) = stored(tb, kdim, n);
    check_operand(OP, "a", a.len(), a_rows, a_cols, lda)?;
    check_operand(OP, "b", b.len(), b_rows, b_cols, ldb)?;
    check_operand(OP, "c", c.len(), m, n, ldc)?;
    let (mi, ni, ki) = (
        to_i32(OP, "m", m)?,
        to_i32(OP, "n", n)?,
        to_i32(OP, "k", kdim)?,
    );
    let lc = to_i32(OP, "ldc", ldc)?;
    if s.context().limits().compute_capability != (ComputeCapability { major: 9, minor: 0 }) {
        return Err(Error::Unsupported {
            op: OP,
            dtype: DType::F32,
            why: "the TF32 tensor-core GEMM is a wgmma kernel (compute capability 9.0 only); use \
                  sgemm",
        });
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if kdim == 0 {
        return zero_product(k, s, c, m, n, ldc);
    }
    // K-major copies: A as [m, k], B as [n, k].
    let a = k_major(k, s, a, ta == Transpose::Trans, a_rows, a_cols, lda)?;
    let b = k_major(k, s, b, tb == Transpose::NoTrans, b_rows, b_cols, ldb)?;
    let kern = &k.gemm_wgmma_kernels()?.gemm_wgmma_tf32_nt;
    raise_smem(kern.function(), WG_SMEM)?;
    let map_a = tma_map(
        a.slice(),
        TensorMapElement::TF32,
        Transpose::NoTrans,
        true,
        m,
        kdim,
        a.ld(),
    )?;
    let map_b = tma_map(
        b.slice(),
        TensorMapElement::TF32,
        Transpose::Trans,
        false,
        n,
        kdim,
        b.ld(),
    )?;
    let grid = (m.div_ceil(TILE_M) * n.div_ceil(TILE_N)) as u32;
    let cfg = LaunchConfig::new(grid, WG_THREADS).with_shared_mem(WG_SMEM);
    // SAFETY: as in gemm_half: the maps cover exactly A [m, k] and B [n, k] (checked by
    // TensorMap::tiled_2d against the slices passed beside them); C is written at i < m, j < n.
    unsafe {
        kern.launch(
            s,
            &cfg,
            map_a,
            map_b,
            a.slice(),
            b.slice(),
            c,
            mi,
            ni,
            ki,
            lc,
        )
    }?;
    Ok(())
}

/// `x`, stored `[rows, cols]` with row stride `ld`, as an aligned K-major operand: itself (or a
/// padded copy) when `transposed` is false; else its transpose `[cols, rows]` (made dense first if
/// `ld > cols`, padded after if `rows` is not a multiple of 4).
#[allow(clippy::too_many_arguments)]
fn k_major<'a>(
    k: &Kernels,
    s: &Stream,
    x: &'a DeviceSlice<f32>,
    transposed: bool,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<Operand<'a, f32>> {
    if !transposed {
        return aligned(k, s, x, rows, cols, ld);
    }
    let (view, copy);
    let dense: &DeviceSlice<f32> = if ld == cols {
        view = x.slice(0..rows * cols)?;
        &view
    } else {
        copy = copy_rows(k, s, x, rows, cols, ld, cols)?;
        &copy
    };
    // SAFETY: the transpose writes every element of [cols, rows].
    let mut t = unsafe { s.alloc::<f32>(rows * cols)? };
    super::transpose(k, s, super::TransposeAlgo::Auto, dense, &mut t, rows, cols)?;
    if rows % 4 == 0 {
        Ok(Operand::Padded(t, rows))
    } else {
        let ldp = rows.div_ceil(4) * 4;
        Ok(Operand::Padded(
            copy_rows(k, s, &t, cols, rows, rows, ldp)?,
            ldp,
        ))
    }
}
