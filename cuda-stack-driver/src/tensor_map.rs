//! TMA tensor maps: how Hopper's bulk tensor copy engine addresses tiles of an array.
//!
//! A kernel that copies tiles with `cp.async.bulk.tensor` (sm_90+) does not compute addresses: it
//! names a tensor map, a 128-byte descriptor the host encodes once (`cuTensorMapEncodeTiled`) with
//! the array's base address, extents, row stride, the tile ("box") shape and the shared-memory
//! swizzle, and passes to the kernel by value (a `const __grid_constant__ CUtensorMap` parameter).
//! The engine then copies whole boxes, filling what lies outside the array with zeros.
//!
//! [`TensorMap::tiled_2d`] encodes the 2-D case from a [`DeviceSlice`], checking every rule the
//! driver has (alignment, strides, box limits, the slice's length) first, so a bad argument is a
//! typed error naming it. The map holds the slice's raw address but not a borrow: a kernel that
//! reads through a map must also take the slice itself as an argument, so the launch orders the
//! buffer like any other (the project's tensor-core kernels do exactly that).

use crate::memory::DeviceSlice;
use crate::{driver, DeviceRepr, Error, Result};
use cuda_stack_sys::{
    CUtensorMap, CUtensorMapDataType as DT, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};

/// An encoded `CUtensorMap` (128 bytes, 64-byte aligned), passed to kernels by value.
#[repr(C, align(64))]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TensorMap {
    bits: [u64; 16],
}

// SAFETY: 16 u64 and no padding (size 128 = align 64 x 2); every bit pattern is a valid value.
unsafe impl bytemuck::Zeroable for TensorMap {}
// SAFETY: as above; `Copy` and `'static`.
unsafe impl bytemuck::Pod for TensorMap {}

impl std::fmt::Debug for TensorMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TensorMap { .. }")
    }
}

/// The element type of a tensor map, as the copy engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorMapElement {
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
    /// f32.
    F32,
    /// f32 storage read as TF32 by the tensor cores (the copy itself is bit-exact).
    TF32,
    /// f64.
    F64,
    /// Any 1-byte element copied as bits (FP8 operands).
    U8,
    /// Any 2-byte element copied as bits.
    U16,
    /// Any 4-byte element copied as bits.
    U32,
}

impl TensorMapElement {
    fn bytes(self) -> u64 {
        match self {
            Self::U8 => 1,
            Self::F16 | Self::BF16 | Self::U16 => 2,
            Self::F32 | Self::TF32 | Self::U32 => 4,
            Self::F64 => 8,
        }
    }
    fn raw(self) -> DT {
        match self {
            Self::F16 => DT::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            Self::BF16 => DT::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            Self::F32 => DT::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            Self::TF32 => DT::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
            Self::F64 => DT::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
            Self::U8 => DT::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            Self::U16 => DT::CU_TENSOR_MAP_DATA_TYPE_UINT16,
            Self::U32 => DT::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        }
    }
}

/// How the copy engine permutes 16-byte chunks within each row of a box in shared memory (what
/// the tensor cores' matrix descriptors expect; the chunk index is XORed with the row's low bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorMapSwizzle {
    /// Rows stored as they are.
    None,
    /// 32-byte pattern (box rows of at most 32 bytes).
    B32,
    /// 64-byte pattern (box rows of at most 64 bytes).
    B64,
    /// 128-byte pattern (box rows of at most 128 bytes).
    B128,
}

impl TensorMapSwizzle {
    fn span(self) -> Option<u64> {
        match self {
            Self::None => None,
            Self::B32 => Some(32),
            Self::B64 => Some(64),
            Self::B128 => Some(128),
        }
    }
    fn raw(self) -> CUtensorMapSwizzle {
        match self {
            Self::None => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            Self::B32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            Self::B64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            Self::B128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }
}

fn bad(problem: String) -> Error {
    Error::TensorMap { problem }
}

impl TensorMap {
    /// Encodes a 2-D map over `slice` seen as `rows` rows of `cols` elements, row `r` starting at
    /// element `r * ld`, copied in boxes of `box_rows` x `box_cols` elements. Outside the array
    /// the engine reads zeros.
    ///
    /// Checked first (each failure is [`Error::TensorMap`] naming the rule): `element` has the
    /// size of `T`; the slice starts on a 16-byte boundary; `ld * element size` is a multiple of
    /// 16 bytes and `ld >= cols`; `rows, cols >= 1` and below 2^32; the rows fit in the slice
    /// (`(rows - 1) * ld + cols <= len`); `1 <= box_rows, box_cols <= 256`; the box row is a
    /// multiple of 16 bytes and, when swizzled, no wider than the swizzle span.
    #[allow(clippy::too_many_arguments)]
    pub fn tiled_2d<T: DeviceRepr>(
        slice: &DeviceSlice<T>,
        element: TensorMapElement,
        rows: u64,
        cols: u64,
        ld: u64,
        box_rows: u32,
        box_cols: u32,
        swizzle: TensorMapSwizzle,
    ) -> Result<TensorMap> {
        let es = element.bytes();
        if es != std::mem::size_of::<T>() as u64 {
            return Err(bad(format!(
                "element {element:?} is {es} bytes but the slice holds {}-byte values",
                std::mem::size_of::<T>()
            )));
        }
        let addr = slice.as_raw_ptr();
        if addr % 16 != 0 {
            return Err(bad(format!(
                "the array starts at {addr:#x}, not on a 16-byte boundary; the copy engine needs one \
                 (copy the data into an aligned buffer)"
            )));
        }
        if rows == 0 || cols == 0 || rows > u32::MAX as u64 || cols > u32::MAX as u64 {
            return Err(bad(format!(
                "extents {rows} x {cols} must each be between 1 and 2^32 - 1"
            )));
        }
        if ld < cols || (ld * es) % 16 != 0 {
            return Err(bad(format!(
                "row stride {ld} elements ({} bytes) must be >= the {cols} columns and a multiple \
                 of 16 bytes (pad the rows)",
                ld * es
            )));
        }
        let need = (rows - 1)
            .checked_mul(ld)
            .and_then(|v| v.checked_add(cols))
            .unwrap_or(u64::MAX);
        if need > slice.len() as u64 {
            return Err(bad(format!(
                "{rows} rows of {cols} with row stride {ld} need {need} elements; the slice has {}",
                slice.len()
            )));
        }
        encode(
            slice,
            element,
            &[cols, rows],
            &[ld * es],
            &[box_cols, box_rows],
            swizzle,
        )
    }

    /// Encodes a map of rank `dims.len()` (1 to 5) over `slice`: element `(i0, i1, …)` (`i0`
    /// fastest) is at `i0 + i1 * strides[0] + i2 * strides[1] + …` elements from the start,
    /// copied in boxes of `boxes[0] x boxes[1] x …` elements; outside the extents the engine reads
    /// zeros. The strides need not grow with the dimension (a permuted view is fine), so a
    /// `[B, H, N, D]` view of a packed `[B, N, 3, H, D]` array is `dims = [D, N, H, B]`,
    /// `strides = [3·H·D, D, N·3·H·D]`.
    ///
    /// Checked first (each failure is [`Error::TensorMap`] naming the rule): the rank; `element`
    /// has the size of `T`; the slice starts on a 16-byte boundary; every extent is between 1 and
    /// 2^32 − 1; every stride is a multiple of 16 bytes and below 2^40 bytes; the last element
    /// lies inside the slice; every box side is between 1 and 256; the box row (`boxes[0]`
    /// elements) is a multiple of 16 bytes and, when swizzled, no wider than the swizzle span.
    pub fn tiled<T: DeviceRepr>(
        slice: &DeviceSlice<T>,
        element: TensorMapElement,
        dims: &[u64],
        strides: &[u64],
        boxes: &[u32],
        swizzle: TensorMapSwizzle,
    ) -> Result<TensorMap> {
        let rank = dims.len();
        if !(1..=5).contains(&rank) || strides.len() + 1 != rank || boxes.len() != rank {
            return Err(bad(format!(
                "rank {rank} with {} strides and {} box sides: the rank must be 1 to 5, with one \
                 stride fewer than extents and one box side per extent",
                strides.len(),
                boxes.len()
            )));
        }
        let es = element.bytes();
        if es != std::mem::size_of::<T>() as u64 {
            return Err(bad(format!(
                "element {element:?} is {es} bytes but the slice holds {}-byte values",
                std::mem::size_of::<T>()
            )));
        }
        let addr = slice.as_raw_ptr();
        if addr % 16 != 0 {
            return Err(bad(format!(
                "the array starts at {addr:#x}, not on a 16-byte boundary; the copy engine needs one \
                 (copy the data into an aligned buffer)"
            )));
        }
        if let Some(d) = dims.iter().find(|&&d| d == 0 || d > u32::MAX as u64) {
            return Err(bad(format!(
                "extent {d} of {dims:?}: each must be between 1 and 2^32 - 1"
            )));
        }
        let mut byte_strides = [0u64; 4];
        for (i, &st) in strides.iter().enumerate() {
            let bytes = st.saturating_mul(es);
            if bytes % 16 != 0 || bytes >= 1 << 40 {
                return Err(bad(format!(
                    "stride {st} elements ({bytes} bytes) of dimension {}: it must be a multiple \
                     of 16 bytes and below 2^40 bytes",
                    i + 1
                )));
            }
            byte_strides[i] = bytes;
        }
        let last = strides
            .iter()
            .zip(&dims[1..])
            .try_fold(dims[0], |acc, (&st, &d)| {
                (d - 1).checked_mul(st).and_then(|x| x.checked_add(acc))
            })
            .unwrap_or(u64::MAX);
        if last > slice.len() as u64 {
            return Err(bad(format!(
                "extents {dims:?} with strides {strides:?} reach element {}; the slice has {}",
                last.saturating_sub(1),
                slice.len()
            )));
        }
        encode(
            slice,
            element,
            dims,
            &byte_strides[..rank - 1],
            boxes,
            swizzle,
        )
    }
}

/// Checks the box and calls `cuTensorMapEncodeTiled` (extents, byte strides and address already
/// checked by the caller).
fn encode<T: DeviceRepr>(
    slice: &DeviceSlice<T>,
    element: TensorMapElement,
    dims: &[u64],
    byte_strides: &[u64],
    boxes: &[u32],
    swizzle: TensorMapSwizzle,
) -> Result<TensorMap> {
    let es = element.bytes();
    if let Some(b) = boxes.iter().find(|b| !(1..=256).contains(*b)) {
        return Err(bad(format!(
            "box side {b} of {boxes:?}: each side must be between 1 and 256"
        )));
    }
    let box_bytes = boxes[0] as u64 * es;
    if box_bytes % 16 != 0 {
        return Err(bad(format!(
            "a box row is {box_bytes} bytes; it must be a multiple of 16"
        )));
    }
    if let Some(span) = swizzle.span() {
        if box_bytes > span {
            return Err(bad(format!(
                "a box row is {box_bytes} bytes, wider than the {span}-byte swizzle"
            )));
        }
    }
    let elem_strides = [1u32; 5];
    let mut raw = CUtensorMap::default();
    let drv = driver()?;
    // SAFETY: `dims`, `boxes` and `elem_strides` hold at least `rank` values and `byte_strides`
    // `rank - 1` (the callers pass matching lengths, rank 1..=5); the address, extents, strides,
    // box and swizzle were checked against the driver's rules and the slice (which outlives this
    // call; the map holds only its address).
    unsafe {
        drv.cuTensorMapEncodeTiled(
            &mut raw,
            element.raw(),
            dims.len() as u32,
            slice.as_raw_ptr() as *mut std::ffi::c_void,
            dims.as_ptr(),
            byte_strides.as_ptr(),
            boxes.as_ptr(),
            elem_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle.raw(),
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )?
    };
    Ok(bytemuck::cast(raw.opaque))
}
