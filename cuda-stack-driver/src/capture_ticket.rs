//! [`CaptureTicket`]: whether the work one graph capture recorded has run yet.
//!
//! Work queued on a capturing stream is recorded, not run: a buffer it "writes" holds nothing
//! until the graph is launched. Layers above (the tensor layer) mark what a capture produced
//! with the capture's ticket ([`Stream::capture_ticket`]) and refuse to read it before the
//! graph's first launch, instead of handing out whatever the memory held.

use crate::Stream;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// Where the work of one capture is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureState {
    /// The capture is still recording.
    Capturing,
    /// The capture ended; its graph has not been launched yet.
    Captured,
    /// Its graph has been launched at least once (work queued after the launch sees its
    /// results: buffers are ordered across streams).
    Launched,
    /// The capture was discarded (ended in an error, or dropped without `end`), or its graph
    /// was dropped without ever being launched: the work will never run.
    Discarded,
}

/// A shared handle on one capture's [`CaptureState`]. Cheap to clone.
#[derive(Clone)]
pub struct CaptureTicket {
    state: Arc<AtomicU8>,
}

impl std::fmt::Debug for CaptureTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureTicket")
            .field("state", &self.state())
            .finish()
    }
}

const CAPTURING: u8 = 0;
const CAPTURED: u8 = 1;
const LAUNCHED: u8 = 2;
const DISCARDED: u8 = 3;

impl CaptureTicket {
    pub(crate) fn new() -> CaptureTicket {
        CaptureTicket {
            state: Arc::new(AtomicU8::new(CAPTURING)),
        }
    }

    /// The capture's state now.
    pub fn state(&self) -> CaptureState {
        match self.state.load(Ordering::Acquire) {
            CAPTURING => CaptureState::Capturing,
            CAPTURED => CaptureState::Captured,
            LAUNCHED => CaptureState::Launched,
            _ => CaptureState::Discarded,
        }
    }

    /// Whether the graph has been launched (one atomic load).
    pub fn has_run(&self) -> bool {
        self.state.load(Ordering::Acquire) == LAUNCHED
    }

    /// Whether both tickets are of the same capture.
    pub fn same_capture(&self, other: &CaptureTicket) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    /// The capture ended with a graph.
    pub(crate) fn set_captured(&self) {
        let _ =
            self.state
                .compare_exchange(CAPTURING, CAPTURED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The graph was launched.
    pub(crate) fn set_launched(&self) {
        self.state.store(LAUNCHED, Ordering::Release);
    }

    /// The work will never run (unless it already has).
    pub(crate) fn set_discarded_unless_launched(&self) {
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s != LAUNCHED).then_some(DISCARDED)
            });
    }
}

impl Stream {
    /// The ticket of the capture in progress on this stream, or `None` when it is not capturing
    /// (only streams made by [`crate::Context::begin_capture`] ever capture).
    pub fn capture_ticket(&self) -> Option<CaptureTicket> {
        if !self.inner.is_capturing() {
            return None;
        }
        let captured = self
            .inner
            .captured
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        captured
            .ticket
            .as_ref()
            .filter(|t| t.state() == CaptureState::Capturing)
            .cloned()
    }
}
