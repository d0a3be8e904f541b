//! The calling thread's current stream per device (`torch.cuda.stream(s)` /
//! `torch.cuda.current_stream()`): tensor ops and runtime calls queue their work on it.

use crate::runtime::Runtime;
use crate::Result;
use cuda_stack_driver::Stream;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

/// One entry of a thread's scope stack: which guard made it (its id), the device and the stream.
struct Scope {
    id: u64,
    ordinal: usize,
    stream: Stream,
}

thread_local! {
    /// Streams made current with [`use_stream`] on this thread, innermost last.
    static SCOPES: RefCell<Vec<Scope>> = const { RefCell::new(Vec::new()) };
    /// The id the next guard on this thread gets (ids are never reused on a thread).
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// While alive, `stream` is the calling thread's current stream on its device (like
/// `with torch.cuda.stream(s):`): tensor ops and runtime calls for that device queue their work
/// on it instead of the device's default stream. Guards nest; dropping one restores the stream
/// that was current before it.
///
/// Guards may be dropped in any order: each removes exactly its own entry, so the current
/// stream is always the one of the innermost guard still alive (or the default stream once
/// none is). A guard leaked with `mem::forget` never ends its scope: its stream stays current
/// for its device on this thread (as a leaked `with` block would), until
/// [`reset_current_streams`] clears the thread's scopes.
///
/// Not `Send`: the scope belongs to the thread that opened it.
#[must_use = "the stream is current only while the guard lives"]
pub struct StreamGuard {
    id: u64,
    _not_send: PhantomData<*const ()>,
}

/// Makes `stream` current for its device on the calling thread until the guard drops.
///
/// Buffers and tensors stay correct across streams without user synchronization: `cuda-stack-driver`
/// orders every use of an allocation on a stream after its earlier uses on other streams.
pub fn use_stream(stream: &Stream) -> StreamGuard {
    let ordinal = stream.context().device().ordinal();
    let id = NEXT_ID.with(|n| {
        let id = n.get();
        n.set(id + 1);
        id
    });
    SCOPES.with(|s| {
        s.borrow_mut().push(Scope {
            id,
            ordinal,
            stream: stream.clone(),
        })
    });
    StreamGuard {
        id,
        _not_send: PhantomData,
    }
}

/// Ends every stream scope of the calling thread, leaked guards' included: afterwards each
/// device's default stream is current again on this thread, and the guards still alive do
/// nothing when dropped. For code that must start from a known state (a thread pool's worker
/// between jobs, say).
pub fn reset_current_streams() {
    SCOPES.with(|s| s.borrow_mut().clear());
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
            .find(|e| e.ordinal == ordinal)
            .map(|e| e.stream.clone())
    })
}

impl Runtime {
    /// The stream work for this device goes to on the calling thread: the innermost
    /// [`crate::use_stream`] scope for the device, else [`Runtime::default_stream`]
    /// ([`crate::stream_for`] without looking the runtime up again).
    pub fn current_stream(&self) -> Stream {
        scoped(self.ordinal()).unwrap_or_else(|| self.default_stream().clone())
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        // Guards are !Send and dropped in reverse order in ordinary code; a guard dropped out of
        // order (kept in a struct, say) removes its own entry, found by id, and no other. After
        // `reset_current_streams` its entry is gone and there is nothing to remove. (`try_with`:
        // a guard dropped while the thread's locals are being destroyed has nothing to do.)
        let _ = SCOPES.try_with(|s| {
            let mut s = s.borrow_mut();
            if let Some(i) = s.iter().rposition(|e| e.id == self.id) {
                s.remove(i);
            }
        });
    }
}
