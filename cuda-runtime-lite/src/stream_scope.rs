//! The calling thread's current stream per device (`torch.cuda.stream(s)` /
//! `torch.cuda.current_stream()`): tensor ops and runtime calls queue their work on it.

use crate::runtime::Runtime;
use crate::Result;
use cuda_driver::Stream;
use std::cell::RefCell;
use std::marker::PhantomData;

thread_local! {
    /// Streams made current with [`use_stream`] on this thread, innermost last.
    static SCOPES: RefCell<Vec<(usize, Stream)>> = const { RefCell::new(Vec::new()) };
}

/// While alive, `stream` is the calling thread's current stream on its device (like
/// `with torch.cuda.stream(s):`): tensor ops and runtime calls for that device queue their work
/// on it instead of the device's default stream. Guards nest; dropping one restores the stream
/// that was current before it.
///
/// Not `Send`: the scope belongs to the thread that opened it.
#[must_use = "the stream is current only while the guard lives"]
pub struct StreamGuard {
    depth: usize,
    _not_send: PhantomData<*const ()>,
}

/// Makes `stream` current for its device on the calling thread until the guard drops.
///
/// Buffers and tensors stay correct across streams without user synchronization: `cuda-driver`
/// orders every use of an allocation on a stream after its earlier uses on other streams.
pub fn use_stream(stream: &Stream) -> StreamGuard {
    let ordinal = stream.context().device().ordinal();
    let depth = SCOPES.with(|s| {
        let mut s = s.borrow_mut();
        s.push((ordinal, stream.clone()));
        s.len()
    });
    StreamGuard {
        depth,
        _not_send: PhantomData,
    }
}

/// Runs `f` with `stream` current for its device on the calling thread (see [`use_stream`]).
pub fn with_stream<R>(stream: &Stream, f: impl FnOnce() -> R) -> R {
    let _guard = use_stream(stream);
    f()
}

/// The stream work for device `ordinal` goes to on this thread: the innermost [`use_stream`]
/// for that device, else the device's default stream.
pub fn stream_for(ordinal: usize) -> Result<Stream> {
    if let Some(s) = scoped(ordinal) {
        return Ok(s);
    }
    Ok(Runtime::get(ordinal)?.default_stream().clone())
}

/// The current stream of the calling thread's current device (`torch.cuda.current_stream()`).
pub fn current_stream() -> Result<Stream> {
    stream_for(crate::current_device()?)
}

/// The innermost scoped stream for `ordinal` on this thread, if any.
pub(crate) fn scoped(ordinal: usize) -> Option<Stream> {
    SCOPES.with(|s| {
        s.borrow()
            .iter()
            .rev()
            .find(|(o, _)| *o == ordinal)
            .map(|(_, st)| st.clone())
    })
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        // Guards are !Send and dropped in reverse order in ordinary code; a guard dropped out of
        // order (kept in a struct, say) removes its own entry and leaves the others.
        SCOPES.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() >= self.depth {
                s.remove(self.depth - 1);
            }
        });
    }
}
