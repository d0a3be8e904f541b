//! `out = a op b` for operands read as any strided or broadcast views (`<op>_strided_<dt>`):
//! nothing expanded, nothing copied.

use super::BinaryOp;
use crate::binary_strides::{BinaryStrides, PlannedOperand, MAX_BINARY_DIMS};
use crate::launch::{check_len, grid, BLOCK};
use crate::Kernels;
use crate::{dispatch, Element, Error, Result, StridedLayout};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

const OP: &str = "binary_strided";

/// Whether [`binary_strided`] takes views like these: the same shape, valid, and at most
/// [`MAX_BINARY_DIMS`] dimensions after [`crate::collapse_binary`] (empty views are taken:
/// nothing is launched). Callers with more dimensions materialise an operand first.
pub fn binary_strided_fits(a_view: &StridedLayout, b_view: &StridedLayout) -> bool {
    match (a_view.dims(), b_view.dims()) {
        (Some(da), Some(db)) if da == db => {
            let r = da.len();
            crate::collapse_binary(da, &a_view.strides[..r], &b_view.strides[..r])
                .0
                .len()
                <= MAX_BINARY_DIMS
        }
        _ => false,
    }
}

/// Checks that every element `view` reaches lies inside `len` elements.
fn check_inside(what: &'static str, view: &StridedLayout, len: usize) -> Result<()> {
    let inside = view
        .index_range()
        .is_some_and(|(lo, hi)| lo >= 0 && (hi as u64) < len as u64);
    if inside {
        return Ok(());
    }
    Err(Error::Shape {
        op: OP,
        what,
        expected: format!(
            "every element of the view (shape {:?}, strides {:?}, offset {}), i.e. indices {}",
            view.dims().unwrap_or(&[]),
            &view.strides[..view.dims().map_or(0, |d| d.len())],
            view.offset,
            view.index_range()
                .map_or("beyond i64".to_string(), |(lo, hi)| format!("{lo}..={hi}"))
        ),
        found: format!("{len} elements"),
    })
}

/// `out[i] = a[a_view(i)] op b[b_view(i)]` for every element `i` of the views' common shape,
/// in row-major order into a dense `out` (f16/bf16 computed in f32 and rounded once, i32
/// wrapping, as [`super::binary`]). Each view says where its operand's elements lie: any
/// strides (0 where the operand is broadcast, negative ones too) and offset, up to
/// [`crate::MAX_RANK`] dimensions, at most [`MAX_BINARY_DIMS`] after collapsing
/// ([`binary_strided_fits`]). Every element each view reaches is checked to lie inside its
/// buffer.
///
/// The walk is planned on the host ([`BinaryStrides::plan`]): 16-byte packets along the
/// innermost collapsed dimension where every packet is aligned (block 256, one packet per
/// thread, grid `ceil(packets / 256)`), else one element per work item with 4 in flight per
/// thread (grid `ceil(n / 1024)`); 32-bit index arithmetic where every index fits, 64-bit
/// otherwise.
#[allow(clippy::too_many_arguments)]
pub fn binary_strided<T: Element>(
    k: &Kernels,
    s: &Stream,
    op: BinaryOp,
    a: &DeviceSlice<T>,
    a_view: &StridedLayout,
    b: &DeviceSlice<T>,
    b_view: &StridedLayout,
    out: &mut DeviceSlice<T>,
) -> Result<()> {
    let kernel = dispatch::binary_strided::<T>(k, op)?;
    let (da, db) = (a_view.dims(), b_view.dims());
    if da.is_none() || da != db {
        return Err(Error::Invalid {
            op: OP,
            problem: format!(
                "the views must have the same valid shape (rank 0..=8): `a` {da:?}, `b` {db:?}"
            ),
        });
    }
    let n = a_view.numel().ok_or_else(|| Error::Invalid {
        op: OP,
        problem: format!("the shape {da:?} has more than usize::MAX elements"),
    })?;
    check_len(OP, "out", out.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    check_inside("a", a_view, a.len())?;
    check_inside("b", b_view, b.len())?;
    let plan = BinaryStrides::plan(
        PlannedOperand {
            view: a_view,
            ptr: a.as_raw_ptr(),
        },
        PlannedOperand {
            view: b_view,
            ptr: b.as_raw_ptr(),
        },
        std::mem::size_of::<T>(),
        out.as_raw_ptr(),
    )
    .ok_or_else(|| Error::Invalid {
        op: OP,
        problem: format!(
            "the views of shape {da:?} (strides {:?} and {:?}) keep more than \
             {MAX_BINARY_DIMS} dimensions after collapsing; make an operand contiguous first",
            &a_view.strides[..a_view.rank as usize],
            &b_view.strides[..b_view.rank as usize]
        ),
    })?;
    let per_thread = if plan.vec > 1 { 1 } else { 4 };
    let cfg = LaunchConfig::new(
        grid(plan.units, BLOCK as u64 * per_thread, i32::MAX as u64),
        BLOCK,
    );
    // SAFETY: `plan` walks exactly the element pairs of the two views in row-major order
    // (collapsing keeps every pair and its order; packets cover whole aligned runs of the
    // innermost dimension, which `plan` took only when its extent is a multiple of the packet),
    // and every element each view reaches lies inside its buffer (checked above; every index
    // the kernel computes is one of those, and its 32-bit path runs only when `plan` found all
    // of them below 2^31). It writes out[0..units·vec] = out[0..n] (n = out.len(), checked),
    // guarding every work item with i < units.
    unsafe { kernel.launch(s, &cfg, a, b, out, plan) }?;
    Ok(())
}
