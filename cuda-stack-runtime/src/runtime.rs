//! The per-device runtime state: context, default stream, caching allocator, staging buffers.

use crate::caching::CachingAllocator;
use crate::staging::{StagingConfig, StagingPool};
use crate::{Error, Result};
use cuda_stack_driver::{Context, Device, DeviceRepr, DeviceSlice, Stream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// What the CUDA runtime keeps per device, made once per process on first use (like the
/// runtime's lazy primary-context initialisation) and kept until the process exits:
///
/// - the device's primary [`Context`];
/// - its **default stream** ([`Runtime::default_stream`]): a stream created by the runtime with
///   `ctx.new_stream()` (non-blocking), *not* the legacy NULL stream. Reasons: work on it can be
///   captured into CUDA graphs (the NULL stream cannot be captured); it does not implicitly
///   synchronize with every other blocking stream in the process (other libraries' work); and
///   buffers used on several streams are ordered by `cuda-stack-driver`'s per-allocation events anyway,
///   so the legacy stream's implicit barrier is not needed for correctness. Like PyTorch's
///   per-device default stream, it is shared by all threads;
/// - the [`CachingAllocator`] every `malloc` goes through;
/// - a [`StagingPool`] for pageable copies.
pub struct Runtime {
    ordinal: usize,
    ctx: Context,
    stream: Stream,
    allocator: CachingAllocator,
    staging: Mutex<StagingPool>,
    /// `staging`'s chunk size, readable without the lock (copies smaller than one chunk skip it).
    chunk_bytes: AtomicUsize,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("device", &self.ordinal)
            .field("default_stream", &self.stream)
            .field("allocator", &self.allocator)
            .finish()
    }
}

/// One slot per device, filled on first use.
struct Registry {
    slots: Vec<OnceLock<Runtime>>,
    /// Serialises initialisation, so two threads do not both create a device's runtime.
    init: Mutex<()>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

fn registry() -> Result<&'static Registry> {
    if let Some(r) = REGISTRY.get() {
        return Ok(r);
    }
    let count = Device::count()?;
    Ok(REGISTRY.get_or_init(|| Registry {
        slots: (0..count).map(|_| OnceLock::new()).collect(),
        init: Mutex::new(()),
    }))
}

/// How many CUDA devices there are (`cudaGetDeviceCount`); read once per process.
pub fn device_count() -> Result<usize> {
    Ok(registry()?.slots.len())
}

/// The error for an ordinal outside `0..count`.
pub(crate) fn invalid_device(ordinal: usize, count: usize) -> Error {
    if count == 0 {
        Error::NoDevice
    } else {
        Error::InvalidDevice { ordinal, count }
    }
}

impl Runtime {
    /// The runtime of device `ordinal`, initialised on first use (retains the primary context,
    /// creates the default stream). Does not change the calling thread's current device (the
    /// first call may leave the device's context bound on this thread at the driver level;
    /// runtime calls always bind the context they use).
    pub fn get(ordinal: usize) -> Result<&'static Runtime> {
        let reg = registry()?;
        let slot = reg
            .slots
            .get(ordinal)
            .ok_or_else(|| invalid_device(ordinal, reg.slots.len()))?;
        if let Some(rt) = slot.get() {
            return Ok(rt);
        }
        let _guard = reg.init.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rt) = slot.get() {
            return Ok(rt);
        }
        let rt = Runtime::new(ordinal)?;
        Ok(slot.get_or_init(move || rt))
    }

    fn new(ordinal: usize) -> Result<Runtime> {
        let ctx = Context::new(ordinal)?;
        let stream = ctx.new_stream()?;
        let config = StagingConfig::default();
        Ok(Runtime {
            ordinal,
            allocator: CachingAllocator::new(&ctx),
            staging: Mutex::new(StagingPool::new(&ctx, config)?),
            chunk_bytes: AtomicUsize::new(config.chunk_bytes),
            ctx,
            stream,
        })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.ctx.device()
    }

    /// The device's primary context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The device's default stream (see the type docs for why it is not the NULL stream).
    pub fn default_stream(&self) -> &Stream {
        &self.stream
    }

    /// The device's caching allocator.
    pub fn allocator(&self) -> &CachingAllocator {
        &self.allocator
    }

    /// Waits for all work on the device, on every stream (`cudaDeviceSynchronize`).
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.ctx.synchronize()?)
    }

    /// The staging settings used by pageable copies on this device.
    pub fn staging_config(&self) -> StagingConfig {
        *self.lock_staging().config()
    }

    /// Changes the staging settings (chunk size, threads) of this device's pageable copies.
    pub fn set_staging_config(&self, config: StagingConfig) -> Result<()> {
        let mut pool = self.lock_staging();
        pool.set_config(config)?;
        self.chunk_bytes
            .store(config.chunk_bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Runs `f` with this device's staging pool (e.g. to [`StagingPool::reserve`] it before a
    /// benchmark). Other pageable copies on this device wait meanwhile.
    pub fn with_staging<R>(&self, f: impl FnOnce(&mut StagingPool) -> R) -> R {
        f(&mut self.lock_staging())
    }

    fn lock_staging(&self) -> std::sync::MutexGuard<'_, StagingPool> {
        self.staging.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Copies pageable host memory to the device through this device's [`StagingPool`] (see
    /// [`StagingPool::copy_htod`]); copies shorter than one chunk go through the driver without
    /// touching the pool. Concurrent staged copies on one device take turns.
    pub fn copy_htod_pageable<T: DeviceRepr>(
        &self,
        stream: &Stream,
        src: &[T],
        dst: &mut DeviceSlice<T>,
    ) -> Result<()> {
        if std::mem::size_of_val(src) < self.chunk_bytes.load(Ordering::Relaxed) {
            return Ok(stream.memcpy_htod(src, dst)?);
        }
        self.lock_staging().copy_htod(stream, src, dst)
    }

    /// Copies device memory to pageable host memory through this device's [`StagingPool`] (see
    /// [`StagingPool::copy_dtoh`]).
    pub fn copy_dtoh_pageable<T: DeviceRepr>(
        &self,
        stream: &Stream,
        src: &DeviceSlice<T>,
        dst: &mut [T],
    ) -> Result<()> {
        if std::mem::size_of_val(dst) < self.chunk_bytes.load(Ordering::Relaxed) {
            return Ok(stream.memcpy_dtoh(src, dst)?);
        }
        self.lock_staging().copy_dtoh(stream, src, dst)
    }
}
