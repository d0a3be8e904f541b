//! `ArgList`: the arguments of a launch whose parameter list is known only at run time (kernels
//! generated at run time, such as `cuda-stack-jit`'s templates), with the same buffer ordering as a
//! typed launch.

use crate::memory::{Allocation, DeviceSlice};
use crate::{DeviceRepr, Error, Function, LaunchConfig, Result, Stream};
use smallvec::SmallVec;
use std::ffi::c_void;
use std::marker::PhantomData;

/// Parameters an [`ArgList`] holds without a heap allocation (a cuda-stack-jit elementwise call has
/// 3 to 8); more spill to the heap.
const INLINE_PARAMS: usize = 12;

/// One parameter's bytes in the argument arena: its word offset and byte size.
#[derive(Clone, Copy)]
struct Slot {
    word: usize,
    bytes: usize,
}

/// The arguments of one launch, built at run time: buffers (read or written) and scalars by
/// value, in parameter order. It borrows every buffer it holds (`'a`), shared for
/// [`ArgList::read`] and exclusively for [`ArgList::write`], so the borrow checker enforces
/// for it what it enforces for a typed launch: no buffer is written through two arguments, or
/// written and read at once.
///
/// Launch it with [`Function::launch_args`], which orders every buffer on the stream exactly as
/// [`crate::Kernel::launch`] does (and, during a graph capture, hands the buffers to the graph).
///
/// ```no_run
/// # use cuda_stack_driver::{launch::ArgList, DeviceSlice, Function, LaunchConfig, Stream};
/// # fn demo(f: &Function, s: &Stream, x: &DeviceSlice<f32>, y: &mut DeviceSlice<f32>) -> cuda_stack_driver::Result<()> {
/// let mut args = ArgList::new();
/// args.read(x).write(y).scalar(2.0f32).scalar(x.len() as u64);
/// // SAFETY: `scale(const float*, float*, float, unsigned long long n)` touches i < n only,
/// // and n is the length of both buffers.
/// unsafe { f.launch_args(s, &LaunchConfig::for_num_elems(x.len()), &args)? };
/// # Ok(()) }
/// ```
pub struct ArgList<'a> {
    /// Parameter values, each starting on an 8-byte boundary. Inline (in the list itself) up to
    /// 2 words per parameter: the pointers handed to the driver point into the list, which the
    /// launch borrows, so it cannot move while they are used.
    arena: SmallVec<[u64; 2 * INLINE_PARAMS]>,
    slots: SmallVec<[Slot; INLINE_PARAMS]>,
    /// The allocations of the buffer arguments (for ordering and graph ownership).
    buffers: SmallVec<[*const Allocation; INLINE_PARAMS]>,
    _borrows: PhantomData<&'a mut ()>,
}

impl Default for ArgList<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ArgList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgList")
            .field("param_sizes", &self.param_sizes())
            .field("buffers", &self.buffers.len())
            .finish()
    }
}

impl<'a> ArgList<'a> {
    /// An empty list.
    pub fn new() -> Self {
        Self::with_capacity(8)
    }

    /// An empty list with room for `params` parameters without reallocating.
    #[inline]
    pub fn with_capacity(params: usize) -> Self {
        ArgList {
            arena: SmallVec::with_capacity(params * 2),
            slots: SmallVec::with_capacity(params),
            buffers: SmallVec::with_capacity(params),
            _borrows: PhantomData,
        }
    }

    /// Number of parameters so far.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The byte size of each parameter, in order (compare with [`Function::param_sizes`]).
    pub fn param_sizes(&self) -> Vec<usize> {
        self.slots.iter().map(|s| s.bytes).collect()
    }

    #[inline]
    fn push_bytes(&mut self, bytes: &[u8]) {
        let word = self.arena.len();
        if bytes.len() <= 8 {
            // Pointers and scalars, nearly every parameter: one word, no resize.
            let mut w = [0u8; 8];
            w[..bytes.len()].copy_from_slice(bytes);
            self.arena.push(u64::from_ne_bytes(w));
        } else {
            let words = bytes.len().div_ceil(8);
            self.arena.resize(word + words, 0);
            bytemuck::cast_slice_mut::<u64, u8>(&mut self.arena[word..word + words])[..bytes.len()]
                .copy_from_slice(bytes);
        }
        self.slots.push(Slot {
            word,
            bytes: bytes.len(),
        });
    }

    #[inline]
    fn push_buffer<T: DeviceRepr>(&mut self, s: &DeviceSlice<T>, offset: usize) -> Result<()> {
        if offset > s.len() {
            return Err(Error::OutOfBounds {
                op: "ArgList: buffer offset",
                start: offset,
                end: offset,
                len: s.len(),
            });
        }
        let ptr = s.as_raw_ptr() + (offset * std::mem::size_of::<T>()) as u64;
        self.push_bytes(&ptr.to_ne_bytes());
        self.buffers.push(s.allocation_ptr());
        Ok(())
    }

    /// A pointer parameter the kernel only reads (`const T*`), to `s[0]`.
    #[inline]
    pub fn read<T: DeviceRepr>(&mut self, s: &'a DeviceSlice<T>) -> &mut Self {
        // An offset of 0 is always within the slice.
        let _ = self.push_buffer(s, 0);
        self
    }

    /// A read-only pointer parameter to `s[offset]` (`offset <= s.len()`, else
    /// [`Error::OutOfBounds`]); the kernel's reads stay ordered and tracked for all of `s`.
    #[inline]
    pub fn read_at<T: DeviceRepr>(&mut self, s: &'a DeviceSlice<T>, offset: usize) -> Result<()> {
        self.push_buffer(s, offset)
    }

    /// A pointer parameter the kernel writes (`T*`), to `s[0]`.
    #[inline]
    pub fn write<T: DeviceRepr>(&mut self, s: &'a mut DeviceSlice<T>) -> &mut Self {
        let _ = self.push_buffer(&*s, 0);
        self
    }

    /// A written pointer parameter to `s[offset]` (`offset <= s.len()`).
    #[inline]
    pub fn write_at<T: DeviceRepr>(
        &mut self,
        s: &'a mut DeviceSlice<T>,
        offset: usize,
    ) -> Result<()> {
        self.push_buffer(&*s, offset)
    }

    /// A buffer the kernel only reads through an address **inside a by-value parameter** (a
    /// multi-tensor kernel's table of pointers, PyTorch's `multi_tensor_apply`): adds no
    /// parameter, returns the address of `s[0]` to write into that table, and orders and tracks
    /// `s` for the launch exactly as a [`ArgList::read`] parameter (and during a graph capture
    /// hands it to the graph). The list borrows `s` for `'a`, so it stays alive for the launch.
    #[inline]
    pub fn read_in_table<T: DeviceRepr>(&mut self, s: &'a DeviceSlice<T>) -> u64 {
        self.buffers.push(s.allocation_ptr());
        s.as_raw_ptr()
    }

    /// [`ArgList::read_in_table`] for a buffer the kernel writes through the table: borrowed
    /// exclusively for `'a`, so no other argument of the list reads or writes it.
    #[inline]
    pub fn write_in_table<T: DeviceRepr>(&mut self, s: &'a mut DeviceSlice<T>) -> u64 {
        self.buffers.push(s.allocation_ptr());
        s.as_raw_ptr()
    }

    /// A parameter passed by value: its bytes, exactly `size_of::<T>()` of them. Types aligned
    /// to more than 8 bytes do not compile (no kernel parameter of this crate needs them).
    #[inline]
    pub fn scalar<T: DeviceRepr>(&mut self, value: T) -> &mut Self {
        const {
            assert!(
                std::mem::align_of::<T>() <= 8,
                "ArgList scalars are 8-byte aligned"
            )
        };
        self.push_bytes(bytemuck::bytes_of(&value));
        self
    }

    /// A parameter passed by value as these bytes: a struct or array the kernel declares
    /// (`struct Dims { long long v[3]; }` as 24 bytes), aligned to 8 bytes.
    pub fn bytes(&mut self, value: &[u8]) -> &mut Self {
        self.push_bytes(value);
        self
    }

    /// The pointer array the driver takes: one pointer per parameter, into the arena.
    #[inline]
    fn pointers(&self, out: &mut SmallVec<[*mut c_void; INLINE_PARAMS]>) {
        let base = self.arena.as_ptr();
        out.extend(self.slots.iter().map(|s| {
            // SAFETY: `word` is within the arena (pushed with at least one word).
            unsafe { base.add(s.word) as *mut c_void }
        }));
    }
}

impl Function {
    /// Launches with a run-time argument list: validates `cfg`, orders every buffer of `args` on
    /// `stream` (waiting for its uses on other streams, recording this one), and queues the
    /// kernel, like [`crate::Kernel::launch`] does for a typed kernel. During a graph capture the
    /// graph keeps the buffers and the module alive.
    ///
    /// # Safety
    /// - `args` must match the kernel's parameters in number, order, size and meaning (a buffer
    ///   the kernel writes must be pushed with [`ArgList::write`]); the byte sizes can be checked
    ///   once against [`Function::param_sizes`].
    /// - With `cfg`'s grid and block and these scalar values, every memory access the kernel
    ///   makes through a buffer argument must fall inside that buffer, and it must access no
    ///   other device memory (as for [`crate::Kernel::launch`]). A buffer added with
    ///   [`ArgList::read_in_table`] / [`ArgList::write_in_table`] is a buffer argument too: the
    ///   kernel may reach it only through the address those returned, written into a by-value
    ///   parameter of this list, within its length, and write it only if added with
    ///   `write_in_table`.
    pub unsafe fn launch_args(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        args: &ArgList<'_>,
    ) -> Result<()> {
        let _gate = self.prepare(stream, cfg)?;
        for &a in &args.buffers {
            // SAFETY: the list borrows a slice of this allocation for its lifetime, and a slice
            // keeps its buffer (which owns the allocation's `Arc`) alive.
            let home = &unsafe { &*a }.home.ctx;
            if !home.same_as(stream.context()) {
                return Err(Error::DeviceMismatch {
                    what: "a kernel argument buffer",
                    expected: stream.context().device().ordinal() as i32,
                    found: home.device().ordinal() as i32,
                });
            }
            // SAFETY: as above.
            unsafe { Allocation::before_use_ptr(a, &stream.inner)? };
        }
        let mut params = SmallVec::with_capacity(args.slots.len());
        args.pointers(&mut params);
        // SAFETY: the parameters match the kernel (our caller's promise) and each pointer refers
        // to a live value of the parameter's size in the arena, which outlives the call; bounds
        // are promised by our caller; every buffer is live and ordered on `stream`; `_gate`
        // keeps the capture state fixed.
        unsafe { self.launch_prepared(stream, cfg, &mut params)? };
        // After-use bookkeeping settles the stream itself if it fails, so an error here leaves
        // nothing untracked.
        let mut first_err = Ok(());
        for &a in &args.buffers {
            // SAFETY: as above.
            if let Err(e) = unsafe { Allocation::after_use_ptr(a, &stream.inner) } {
                if first_err.is_ok() {
                    first_err = Err(e);
                }
            }
        }
        first_err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_laid_out_on_word_boundaries() {
        let mut a = ArgList::new();
        a.scalar(1u8).scalar(2.5f64).scalar([7u32; 3]).scalar(3i32);
        assert_eq!(a.param_sizes(), [1, 8, 12, 4]);
        let words: Vec<usize> = a.slots.iter().map(|s| s.word).collect();
        assert_eq!(words, [0, 1, 2, 4]);
        let mut p = SmallVec::new();
        a.pointers(&mut p);
        // SAFETY: each pointer refers to the bytes pushed for it.
        unsafe {
            assert_eq!(*(p[1] as *const f64), 2.5);
            assert_eq!(*(p[2] as *const [u32; 3]), [7, 7, 7]);
            assert_eq!(*(p[3] as *const i32), 3);
        }
    }
}
