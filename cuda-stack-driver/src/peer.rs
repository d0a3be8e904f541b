//! Peer access between devices: whether one GPU can read and write another's memory directly
//! (over NVLink or PCIe), and turning that on once per ordered pair of contexts.
//!
//! | CUDA | here |
//! |---|---|
//! | `cuDeviceCanAccessPeer` | [`Device::can_access_peer`] |
//! | `cuCtxEnablePeerAccess` (+ `cuMemPoolSetAccess` on the peer's default pool) | [`Context::enable_peer_access`] |
//! | `cuMemcpyPeerAsync` | [`crate::Stream::memcpy_peer`] |
//!
//! ## Once per ordered pair, from any thread
//! The driver keeps peer access per (context, peer context) pair, and a second
//! `cuCtxEnablePeerAccess` for a pair fails with `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`. Each
//! [`Context`] remembers the peers it enabled, under a lock held across the check and the driver
//! call, so concurrent callers enable a pair exactly once and every later call is a lookup. Access
//! enabled behind this crate's back (NCCL, another library, the CUDA runtime in the same primary
//! context) makes the driver answer "already enabled", which is success here.
//!
//! The record lives in the context: when a primary context is released (its last handle
//! dropped) and retained again, its peer mappings are gone with it and the new context starts
//! with none; a record for a peer whose context was released since is stale and is redone.
//!
//! ## Stream-ordered memory
//! This crate allocates from each device's default memory pool (`cuMemAllocAsync`). Pool memory
//! is **not** covered by `cuCtxEnablePeerAccess`: a pool grants access per device
//! (`cuMemPoolSetAccess`). Enabling access from `A` to `B` therefore also gives device `A`
//! read-write access to `B`'s default pool, so that kernels on `A` (and libraries such as NCCL,
//! which may read a peer's buffers directly when both ranks live in one process) can touch every
//! buffer on `B`, whichever way it was allocated.

use crate::{driver, Context, Device, Error, Result};
use cuda_stack_sys::CUresult;

impl Device {
    /// Whether kernels on this device can access memory of `peer` directly
    /// (`cuDeviceCanAccessPeer`). A device can always access its own memory: `d.can_access_peer(&d)`
    /// is `true` without asking the driver (which answers 0 for a device and itself, since no
    /// peer mapping is involved).
    pub fn can_access_peer(&self, peer: &Device) -> Result<bool> {
        if self.as_raw() == peer.as_raw() {
            return Ok(true);
        }
        let mut can = 0;
        // SAFETY: out-pointer to a local; both are devices the driver enumerated.
        unsafe { driver()?.cuDeviceCanAccessPeer(&mut can, self.as_raw(), peer.as_raw())? };
        Ok(can != 0)
    }
}

impl Context {
    /// Lets kernels (and copies) in this context access `peer`'s memory directly
    /// (`cuCtxEnablePeerAccess` with this context current, and `cuMemPoolSetAccess` giving this
    /// device read-write access to `peer`'s default memory pool: this crate's buffers come from
    /// that pool, which `cuCtxEnablePeerAccess` does not map for peers).
    ///
    /// Idempotent and thread-safe: the first call for an ordered pair does the work, later ones
    /// (from any thread) return at once; access already enabled by someone else is success. For
    /// the same context it does nothing. Access is one-directional: call it on both contexts for
    /// both directions.
    ///
    /// Fails with [`Error::Unsupported`] (naming both devices) when the hardware cannot do it
    /// ([`Device::can_access_peer`] is false), and with the driver's error otherwise (e.g.
    /// `CUDA_ERROR_TOO_MANY_PEERS`). The calling thread's current context is left as it was.
    pub fn enable_peer_access(&self, peer: &Context) -> Result<()> {
        if self.same_as(peer) {
            return Ok(());
        }
        let (me, them) = (self.device(), peer.device());
        let mut record = self.inner.peers.lock().unwrap_or_else(|p| p.into_inner());
        if record.is_enabled(&peer.inner) {
            return Ok(());
        }
        if !me.can_access_peer(&them)? {
            return Err(Error::Unsupported {
                what: "peer access",
                why: format!(
                    "device {} cannot access device {}'s memory directly (cuDeviceCanAccessPeer \
                     is 0: no NVLink or PCIe peer path); copies between them still work \
                     (Stream::memcpy_peer stages them)",
                    me.ordinal(),
                    them.ordinal()
                ),
            });
        }
        let drv = driver()?;
        {
            let _current = self.push_current()?;
            // SAFETY: both contexts are live (retained by the handles); this context is current
            // on this thread until the guard pops it.
            match unsafe { drv.cuCtxEnablePeerAccess(peer.as_raw(), 0) } {
                Ok(()) => {}
                Err(e) if e.code() == Some(CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if peer.limits().memory_pools {
            grant_pool_access(me, them)?;
        }
        record.insert(them.ordinal(), &peer.inner);
        Ok(())
    }

    /// Whether [`Context::enable_peer_access`] has enabled access from this context to `peer`
    /// (always true for the same context). Access enabled by other libraries is not seen here
    /// until `enable_peer_access` is called for the pair.
    pub fn peer_access_enabled(&self, peer: &Context) -> bool {
        self.same_as(peer)
            || self
                .inner
                .peers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_enabled(&peer.inner)
    }
}

/// Gives device `accessor` read-write access to the default memory pool of device `owner`.
fn grant_pool_access(accessor: Device, owner: Device) -> Result<()> {
    let drv = driver()?;
    let mut pool = std::ptr::null_mut();
    let desc = cuda_stack_sys::CUmemAccessDesc {
        location: cuda_stack_sys::CUmemLocation {
            type_: cuda_stack_sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: accessor.as_raw(),
        },
        flags: cuda_stack_sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: out-pointer to a local; `desc` is one valid descriptor, passed with count 1.
    unsafe {
        drv.cuDeviceGetDefaultMemPool(&mut pool, owner.as_raw())?;
        drv.cuMemPoolSetAccess(pool, &desc, 1)?;
    }
    Ok(())
}
