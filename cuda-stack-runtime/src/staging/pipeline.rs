//! One worker's double-buffered pipeline: host memcpy into one pinned buffer while the DMA
//! engine copies the other.

use super::plan::windows;
use cuda_stack_driver::{Context, DeviceSlice, Error, PendingCopy, PinnedBuffer, Result, Stream};

/// A worker's two pinned staging buffers, each exactly one chunk long.
pub(crate) struct StagingBuffers {
    a: PinnedBuffer<u8>,
    b: PinnedBuffer<u8>,
}

impl StagingBuffers {
    pub(crate) fn new(ctx: &Context, chunk: usize) -> Result<StagingBuffers> {
        Ok(StagingBuffers {
            a: PinnedBuffer::zeroed(ctx, chunk)?,
            b: PinnedBuffer::zeroed(ctx, chunk)?,
        })
    }

    pub(crate) fn bytes(&self) -> usize {
        self.a.len() + self.b.len()
    }

    /// Both buffers, checked to be `chunk` long (they are, by construction; an error rather than
    /// a panic if that were ever broken).
    fn pair(&mut self, chunk: usize) -> Result<(&mut PinnedBuffer<u8>, &mut PinnedBuffer<u8>)> {
        use cuda_stack_driver::PinnedHost;
        if PinnedHost::len(&self.a) != chunk || PinnedHost::len(&self.b) != chunk {
            return Err(Error::LengthMismatch {
                op: "staged copy (staging buffer vs chunk size)",
                src: PinnedHost::len(&self.a),
                dst: chunk,
            });
        }
        Ok((&mut self.a, &mut self.b))
    }
}

fn window(op: &'static str, len: usize, at: usize, chunk: usize) -> Result<std::ops::Range<usize>> {
    match at.checked_add(chunk) {
        Some(end) if end <= len => Ok(at..end),
        _ => Err(Error::OutOfBounds {
            op,
            start: at,
            end: at.saturating_add(chunk),
            len,
        }),
    }
}

/// Copies `src` (pageable host memory, `len >= chunk`) into `dst` (same length) on `stream`,
/// through the two staging buffers; returns when every DMA is complete.
///
/// Loop invariant: at the top of iteration `i`, `cur` holds window `i` and no copy uses either
/// buffer. The DMA of `cur` is queued, the CPU fills `next` with window `i + 1` meanwhile, then
/// waits for the DMA (which ends `cur`'s borrow) and swaps the two.
pub(crate) fn htod(
    stream: &Stream,
    bufs: &mut StagingBuffers,
    src: &[u8],
    dst: &mut DeviceSlice<u8>,
    chunk: usize,
) -> Result<()> {
    const OP: &str = "staged host-to-device copy";
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch {
            op: OP,
            src: src.len(),
            dst: dst.len(),
        });
    }
    let starts = windows(src.len(), chunk);
    let Some(&first) = starts.first() else {
        return stream.memcpy_htod(src, dst);
    };
    let (mut cur, mut next) = bufs.pair(chunk)?;
    cur.copy_from_slice(&src[window(OP, src.len(), first, chunk)?]);
    for (i, &at) in starts.iter().enumerate() {
        let mut target = dst.slice_mut(window(OP, src.len(), at, chunk)?)?;
        let pending = stream.copy_htod_async(&*cur, &mut target)?;
        if let Some(&n) = starts.get(i + 1) {
            next.copy_from_slice(&src[window(OP, src.len(), n, chunk)?]);
        }
        pending.wait()?;
        std::mem::swap(&mut cur, &mut next);
    }
    Ok(())
}

/// Copies `src` (device, `len >= chunk`) into `dst` (pageable host memory, same length) on
/// `stream`, through the two staging buffers; returns when all of `dst` is written.
///
/// Loop invariant: at the top of iteration `i`, `cur` holds window `i` (its DMA is complete).
/// The DMA of window `i + 1` into `next` is queued, the CPU drains `cur` meanwhile, then waits for
/// the DMA and swaps the two.
pub(crate) fn dtoh(
    stream: &Stream,
    bufs: &mut StagingBuffers,
    src: &DeviceSlice<u8>,
    dst: &mut [u8],
    chunk: usize,
) -> Result<()> {
    const OP: &str = "staged device-to-host copy";
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch {
            op: OP,
            src: src.len(),
            dst: dst.len(),
        });
    }
    let len = dst.len();
    let starts = windows(len, chunk);
    let Some(&first) = starts.first() else {
        return stream.memcpy_dtoh(src, dst);
    };
    let (mut cur, mut next) = bufs.pair(chunk)?;
    stream
        .copy_dtoh_async(&src.slice(window(OP, len, first, chunk)?)?, &mut *cur)?
        .wait()?;
    for (i, &at) in starts.iter().enumerate() {
        let pending = match starts.get(i + 1) {
            Some(&n) => {
                Some(stream.copy_dtoh_async(&src.slice(window(OP, len, n, chunk)?)?, &mut *next)?)
            }
            None => None,
        };
        dst[window(OP, len, at, chunk)?].copy_from_slice(&cur[..]);
        // Consumes `pending` on both paths, ending its borrow of `next` before the swap.
        pending.map(PendingCopy::wait).transpose()?;
        std::mem::swap(&mut cur, &mut next);
    }
    Ok(())
}
