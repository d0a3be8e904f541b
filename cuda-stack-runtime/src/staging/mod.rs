//! Copies between **pageable** host memory (a `Vec`, a `&[T]`) and the device, staged through
//! pinned buffers, pipelined and spread over threads.
//!
//! The DMA engines can only read and write page-locked (pinned) host memory. Given pageable
//! memory, `cudaMemcpy` (and PyTorch's `tensor.to("cuda")` from a non-pinned tensor) copies
//! through the driver's own small staging buffers, one CPU thread at a time, reaching a fraction
//! of the link's speed. [`StagingPool`] does the staging itself:
//!
//! ```text
//!   worker 0 (calling thread)                 worker 1 (scoped thread)                …
//!   memcpy chunk 0 → A                        memcpy chunk 0' → A'
//!   DMA A → dev  ‖ memcpy chunk 1 → B         DMA A' → dev  ‖ memcpy chunk 1' → B'
//!   wait A; DMA B ‖ memcpy chunk 2 → A        wait A'; DMA B' ‖ …
//! ```
//!
//! - The copy is cut into `k = min(threads, bytes / chunk_bytes)` contiguous **portions**, one per
//!   worker (see [`StagingConfig`]); each worker has its own two pinned buffers, so workers never
//!   wait on one another's host work. The parallelism that matters is the CPU's: one thread's
//!   `memcpy` is far slower than the link, while one copy engine fed by one stream saturates it.
//!   So all workers queue their DMAs on the **caller's stream** (thread-safe in the driver): the
//!   copy is ordered after the work queued there before the call, with no extra events, and
//!   when the stream is the buffer's home stream, `cuda-stack-driver`'s cross-stream tracking costs
//!   nothing per chunk.
//! - Each worker runs a **double-buffered pipeline** over its portion: the DMA of one staging
//!   buffer overlaps the `memcpy` into (or out of) the other. A `PendingCopy` borrows the buffer
//!   the DMA uses, so the worker fills the *other* one and waits for the copy before refilling:
//!   the borrow checker enforces the pipeline's safety.
//! - A portion whose length is not a multiple of the chunk ends with a window that overlaps the
//!   previous one (the same bytes are copied twice), so every DMA uses a whole staging buffer.
//! - Copies smaller than one chunk go straight through the driver.
//! - Ordering: everything queued on the caller's stream before the call runs first; the
//!   destination's (or source's) earlier uses on other streams are ordered by `cuda-stack-driver`'s
//!   per-allocation events. Both functions return when the copy is complete.

mod config;
mod pipeline;
mod plan;

pub use config::StagingConfig;

use crate::{Error, Result};
use cuda_stack_driver::bytemuck;
use cuda_stack_driver::{Context, DeviceRepr, DeviceSlice, Stream};
use pipeline::StagingBuffers;

/// Pinned staging buffers for pipelined pageable copies (see the [module
/// docs](self)). The runtime keeps one per device ([`crate::Runtime::copy_htod_pageable`]); make
/// your own to use other settings (benchmarks, tests) without touching the runtime's.
pub struct StagingPool {
    ctx: Context,
    config: StagingConfig,
    /// One pair per worker, grown as copies need them.
    buffers: Vec<StagingBuffers>,
}

impl std::fmt::Debug for StagingPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagingPool")
            .field("device", &self.ctx.device().ordinal())
            .field("config", &self.config)
            .field("pinned_bytes", &self.pinned_bytes())
            .finish()
    }
}

/// One worker's share of a copy.
struct Job<'a, H> {
    /// Its index (0 is the first portion).
    worker: usize,
    /// The stream every worker queues its DMAs on: the caller's.
    stream: &'a Stream,
    bufs: &'a mut StagingBuffers,
    /// The host side: `&[u8]` for host-to-device, `&mut [u8]` for device-to-host.
    host: H,
}

impl StagingPool {
    /// A pool for the device of `ctx`; allocates nothing until the first staged copy (or
    /// [`StagingPool::reserve`]).
    pub fn new(ctx: &Context, config: StagingConfig) -> Result<StagingPool> {
        config.validate()?;
        Ok(StagingPool {
            ctx: ctx.clone(),
            config,
            buffers: Vec::new(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &StagingConfig {
        &self.config
    }

    /// Changes the settings; staging buffers of the old chunk size are freed (new ones are made
    /// on the next copy), surplus workers' buffers are dropped.
    pub fn set_config(&mut self, config: StagingConfig) -> Result<()> {
        config.validate()?;
        if config.chunk_bytes != self.config.chunk_bytes {
            self.buffers.clear();
        }
        self.buffers.truncate(config.threads);
        self.config = config;
        Ok(())
    }

    /// Allocates every worker's staging buffers now, so the first copy does not pay
    /// for pinned allocation (`cuMemHostAlloc` of several MiB takes milliseconds).
    pub fn reserve(&mut self) -> Result<()> {
        self.ensure_workers(self.config.threads)
    }

    /// Pinned bytes held now.
    pub fn pinned_bytes(&self) -> usize {
        self.buffers.iter().map(StagingBuffers::bytes).sum()
    }

    /// Frees the staging buffers (they are made again when needed).
    pub fn release(&mut self) {
        self.buffers.clear();
    }

    fn ensure_workers(&mut self, k: usize) -> Result<()> {
        self.ctx.bind()?;
        while self.buffers.len() < k {
            self.buffers
                .push(StagingBuffers::new(&self.ctx, self.config.chunk_bytes)?);
        }
        Ok(())
    }

    fn check(&self, op: &'static str, stream: &Stream, src: usize, dst: usize) -> Result<()> {
        if src != dst {
            return Err(cuda_stack_driver::Error::LengthMismatch { op, src, dst }.into());
        }
        if !stream.context().same_as(&self.ctx) {
            return Err(cuda_stack_driver::Error::DeviceMismatch {
                what: "the stream",
                expected: self.ctx.device().ordinal() as i32,
                found: stream.context().device().ordinal() as i32,
            }
            .into());
        }
        Ok(())
    }

    /// Builds one job per portion, given each portion's host side (workers must exist).
    fn jobs<'a, H>(&'a mut self, stream: &'a Stream, hosts: Vec<H>) -> Vec<Job<'a, H>> {
        hosts
            .into_iter()
            .zip(self.buffers.iter_mut())
            .enumerate()
            .map(|(worker, (host, bufs))| Job {
                worker,
                stream,
                bufs,
                host,
            })
            .collect()
    }

    /// Copies `src` (pageable host memory) into `dst`, staged and pipelined (see the [module
    /// docs](self)); returns when the copy is complete. Work queued on `stream` before the call
    /// runs first. The lengths must match (else nothing is copied). Copies shorter than one
    /// chunk go straight through the driver on `stream`.
    pub fn copy_htod<T: DeviceRepr>(
        &mut self,
        stream: &Stream,
        src: &[T],
        dst: &mut DeviceSlice<T>,
    ) -> Result<()> {
        self.check("copy_htod_pageable", stream, src.len(), dst.len())?;
        let chunk = self.config.chunk_bytes;
        let total = std::mem::size_of_val(src);
        if total < chunk {
            return Ok(stream.memcpy_htod(src, dst)?);
        }
        let parts = plan::portions(total, chunk, self.config.threads);
        self.ensure_workers(parts.len())?;
        let src: &[u8] = bytemuck::cast_slice(src);
        let mut dst = dst.cast_mut::<u8>()?;
        let ctx = self.ctx.clone();
        let hosts: Vec<&[u8]> = parts.iter().map(|r| &src[r.clone()]).collect();
        let mut jobs = self.jobs(stream, hosts);
        fan_out_htod(&ctx, chunk, &mut jobs, &mut dst)
    }

    /// Copies `src` into `dst` (pageable host memory), staged and pipelined; returns when `dst`
    /// is written. Work queued on `stream` before the call runs first. The lengths must match
    /// (else nothing is copied). Copies shorter than one chunk go straight through the driver.
    pub fn copy_dtoh<T: DeviceRepr>(
        &mut self,
        stream: &Stream,
        src: &DeviceSlice<T>,
        dst: &mut [T],
    ) -> Result<()> {
        self.check("copy_dtoh_pageable", stream, src.len(), dst.len())?;
        let chunk = self.config.chunk_bytes;
        let total = std::mem::size_of_val(dst);
        if total < chunk {
            return Ok(stream.memcpy_dtoh(src, dst)?);
        }
        let parts = plan::portions(total, chunk, self.config.threads);
        self.ensure_workers(parts.len())?;
        let src = src.cast::<u8>()?;
        let dst: &mut [u8] = bytemuck::cast_slice_mut(dst);
        let ctx = self.ctx.clone();
        let mut hosts: Vec<&mut [u8]> = Vec::with_capacity(parts.len());
        let mut rest = dst;
        for r in &parts {
            let (head, tail) = rest.split_at_mut(r.len());
            hosts.push(head);
            rest = tail;
        }
        let mut jobs = self.jobs(stream, hosts);
        let mut results = Vec::with_capacity(jobs.len());
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            let mut offset = 0;
            let mut own = None;
            for job in jobs.iter_mut() {
                let range = offset..offset + job.host.len();
                offset = range.end;
                let view = src.slice(range);
                if job.worker == 0 {
                    own = Some((job, view));
                    continue;
                }
                let ctx = &ctx;
                let worker = job.worker;
                handles.push((
                    worker,
                    s.spawn(move || -> Result<()> {
                        let view = view?;
                        run_dtoh(ctx, chunk, job, &view)
                    }),
                ));
            }
            if let Some((job, view)) = own {
                results.push(
                    view.map_err(Error::from)
                        .and_then(|v| run_dtoh(&ctx, chunk, job, &v)),
                );
            }
            for (worker, h) in handles {
                results.push(h.join().unwrap_or(Err(Error::StagingWorkerPanicked {
                    worker,
                    direction: "device-to-host",
                })));
            }
        });
        results.into_iter().collect()
    }
}

fn run_dtoh(
    ctx: &Context,
    chunk: usize,
    job: &mut Job<'_, &mut [u8]>,
    src: &DeviceSlice<u8>,
) -> Result<()> {
    ctx.bind()?;
    Ok(pipeline::dtoh(job.stream, job.bufs, src, job.host, chunk)?)
}

fn run_htod(
    ctx: &Context,
    chunk: usize,
    job: &mut Job<'_, &[u8]>,
    dst: &mut DeviceSlice<u8>,
) -> Result<()> {
    ctx.bind()?;
    Ok(pipeline::htod(job.stream, job.bufs, job.host, dst, chunk)?)
}

/// Runs the host-to-device jobs in parallel: the first on a scoped thread, the rest by recursing
/// on the remainder of `dst` (a `DeviceSlice` can be split in two at a time, so each level splits
/// off one job's part); the last job runs on the calling thread.
fn fan_out_htod(
    ctx: &Context,
    chunk: usize,
    jobs: &mut [Job<'_, &[u8]>],
    dst: &mut DeviceSlice<u8>,
) -> Result<()> {
    match jobs {
        [] => Ok(()),
        [only] => run_htod(ctx, chunk, only, dst),
        [first, rest @ ..] => {
            let (mut head, mut tail) = dst.split_at_mut(first.host.len())?;
            let worker = first.worker;
            std::thread::scope(|s| {
                let h = s.spawn(move || run_htod(ctx, chunk, first, &mut head));
                let r_rest = fan_out_htod(ctx, chunk, rest, &mut tail);
                let r_first = h.join().unwrap_or(Err(Error::StagingWorkerPanicked {
                    worker,
                    direction: "host-to-device",
                }));
                r_first.and(r_rest)
            })
        }
    }
}
