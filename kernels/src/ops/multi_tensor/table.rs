//! The by-value tables of `cuda/multi_tensor.cu`: `#[repr(C)]` twins of `MtTable1`,
//! `MtTable2` and `MtAdamTable`, byte for byte (sizes asserted here; `gen-ptx` checks the
//! kernels' parameter sizes against the PTX).
//!
//! A table travels as a kernel **parameter**: the driver copies it into the launch's constant
//! bank, so it needs no device allocation and no upload, and a CUDA graph captures it with the
//! launch. Its addresses must come from [`cuda_stack_driver::launch::ArgList::read_in_table`] /
//! [`cuda_stack_driver::launch::ArgList::write_in_table`], which keep the buffers borrowed,
//! ordered and (in a capture) owned by the graph; the safe ops of
//! [`crate::ops::multi_tensor`](super) are the only code that fills them.

use bytemuck::{Pod, Zeroable};

/// Tensors per launch of the depth-1 kernels (`mt_fill`, `mt_scale`, `mt_sumsq`).
pub const MT1_CAP: usize = 192;
/// Tensors per launch of the casts (`mt_cast_*`).
pub const MT2_CAP: usize = 136;
/// Tensors per launch of Adam (`mt_adam_*`).
pub const MTA_CAP: usize = 64;

/// `struct MtTable1` of `multi_tensor.cu` (3848 bytes): one buffer per tensor.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MtTable1 {
    /// Device address of tensor j's first element.
    pub addr: [u64; MT1_CAP],
    /// Elements of tensor j.
    pub len: [u64; MT1_CAP],
    /// Tensor j's first block; `block_start[count]` is the launch's block count.
    pub block_start: [u32; MT1_CAP + 1],
    /// Tensors in this launch.
    pub count: u32,
}

/// `struct MtTable2` of `multi_tensor.cu` (3816 bytes): a source and a destination per tensor.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MtTable2 {
    /// Device address of tensor j's source.
    pub src: [u64; MT2_CAP],
    /// Device address of tensor j's destination.
    pub dst: [u64; MT2_CAP],
    /// Elements of tensor j.
    pub len: [u64; MT2_CAP],
    /// Tensor j's first block; `block_start[count]` is the launch's block count.
    pub block_start: [u32; MT2_CAP + 1],
    /// Tensors in this launch.
    pub count: u32,
}

/// `struct MtAdamTable` of `multi_tensor.cu` (3600 bytes): parameter, gradient and both
/// moments per tensor, its weight decay and step counter, and the optional gradient scale.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MtAdamTable {
    /// Parameters (written).
    pub p: [u64; MTA_CAP],
    /// Gradients (read).
    pub g: [u64; MTA_CAP],
    /// First moments (written).
    pub m: [u64; MTA_CAP],
    /// Second moments (written).
    pub v: [u64; MTA_CAP],
    /// Elements of tensor j.
    pub len: [u64; MTA_CAP],
    /// Weight decay of tensor j (converted to the element type on the device).
    pub wd: [f64; MTA_CAP],
    /// Device address of a one-element gradient scale (the clip coefficient), or 0 for none.
    pub scale: u64,
    /// Tensor j's first block; `block_start[count]` is the launch's block count.
    pub block_start: [u32; MTA_CAP + 1],
    /// Tensor j's step counter: an index into the `steps` buffer.
    pub step: [i32; MTA_CAP],
    /// Tensors in this launch.
    pub count: u32,
}

const _: () = assert!(std::mem::size_of::<MtTable1>() == 3848);
const _: () = assert!(std::mem::size_of::<MtTable2>() == 3816);
const _: () = assert!(std::mem::size_of::<MtAdamTable>() == 3600);
const _: () = assert!(std::mem::align_of::<MtTable1>() == 8);
const _: () = assert!(std::mem::align_of::<MtTable2>() == 8);
const _: () = assert!(std::mem::align_of::<MtAdamTable>() == 8);
// No padding: each size is the sum of its fields' sizes.
const _: () = assert!(3848 == 8 * MT1_CAP * 2 + 4 * (MT1_CAP + 1) + 4);
const _: () = assert!(3816 == 8 * MT2_CAP * 3 + 4 * (MT2_CAP + 1) + 4);
const _: () = assert!(3600 == 8 * MTA_CAP * 6 + 8 + 4 * (MTA_CAP + 1) + 4 * MTA_CAP + 4);

// SAFETY (all six impls): each table is `repr(C)` of integer and float arrays only, with no
// padding (the sizes above equal the sums of the fields), so the all-zero pattern and every
// other bit pattern is a valid value, and the types are `Copy + 'static`.
unsafe impl Zeroable for MtTable1 {}
// SAFETY: see above.
unsafe impl Pod for MtTable1 {}
// SAFETY: see above.
unsafe impl Zeroable for MtTable2 {}
// SAFETY: see above.
unsafe impl Pod for MtTable2 {}
// SAFETY: see above.
unsafe impl Zeroable for MtAdamTable {}
// SAFETY: see above.
unsafe impl Pod for MtAdamTable {}
