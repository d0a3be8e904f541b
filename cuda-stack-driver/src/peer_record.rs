//! The record of which peers a context has enabled access to (see `Context::enable_peer_access`
//! in `peer.rs`), kept in the context itself. It knows peers only as weak handles, so a peer
//! context released and retained again since (a new context) no longer counts as enabled.

use std::sync::{Arc, Weak};

/// The peers one context has enabled access to: the peer's ordinal and the peer context it was
/// enabled for (weak: a released and re-retained peer context is a new one).
pub(crate) struct PeerRecord<C> {
    enabled: Vec<(usize, Weak<C>)>,
}

impl<C> Default for PeerRecord<C> {
    fn default() -> Self {
        PeerRecord {
            enabled: Vec::new(),
        }
    }
}

impl<C> PeerRecord<C> {
    /// Whether access to `peer` (this very context, not a later one of its device) is enabled.
    pub(crate) fn is_enabled(&self, peer: &Arc<C>) -> bool {
        self.enabled
            .iter()
            .any(|(_, w)| w.upgrade().is_some_and(|p| Arc::ptr_eq(&p, peer)))
    }

    /// Notes that access to `peer` (device `ordinal`) is enabled, forgetting released peers.
    pub(crate) fn insert(&mut self, ordinal: usize, peer: &Arc<C>) {
        self.enabled.retain(|(_, w)| w.strong_count() > 0);
        self.enabled.push((ordinal, Arc::downgrade(peer)));
    }
}
