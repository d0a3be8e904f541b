//! The knobs of staged pageable copies.

use crate::{Error, Result};

/// How [`super::StagingPool`] stages copies from and to pageable host memory.
///
/// A copy of `n` bytes with `n >= chunk_bytes` is split into `k = min(threads, n / chunk_bytes)`
/// contiguous portions, one per worker; each worker owns two pinned staging buffers of
/// `chunk_bytes` and pipelines its portion chunk by chunk: while the DMA engine copies one staging
/// buffer, the worker's CPU thread fills (or drains) the other. All DMAs go on the caller's
/// stream. Copies
/// smaller than `chunk_bytes` go straight through the driver (`cuMemcpyHtoD`/`DtoH` from pageable
/// memory, which stages internally and is the faster choice for small copies).
///
/// Pinned memory held: `threads × 2 × chunk_bytes` once the largest copies have run (allocated
/// lazily, or up front with [`super::StagingPool::reserve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingConfig {
    /// Bytes per staging buffer (and per DMA). Default [`StagingConfig::DEFAULT_CHUNK_BYTES`]
    /// (4 MiB): large enough that each DMA runs near the link's peak and the per-chunk costs
    /// (a launch, two events, a wait: tens of µs) stay small, small enough that filling the first
    /// chunk (which nothing overlaps) is short. Between [`StagingConfig::MIN_CHUNK_BYTES`] and
    /// [`StagingConfig::MAX_CHUNK_BYTES`].
    pub chunk_bytes: usize,
    /// Worker threads (the calling thread is one of them), each with two staging buffers. One thread's `memcpy` moves roughly 5–15 GB/s, below a PCIe 5 link's
    /// ~55 GB/s, so several are needed to keep the DMA engines busy. Default: the number of CPUs,
    /// at most [`StagingConfig::DEFAULT_MAX_THREADS`] (8). Between 1 and
    /// [`StagingConfig::MAX_THREADS`].
    pub threads: usize,
}

impl StagingConfig {
    /// The default chunk size: 4 MiB.
    pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;
    /// The default thread count is `min(available CPUs, this)`.
    pub const DEFAULT_MAX_THREADS: usize = 8;
    /// The smallest allowed chunk: 4 KiB.
    pub const MIN_CHUNK_BYTES: usize = 4 << 10;
    /// The largest allowed chunk: 1 GiB.
    pub const MAX_CHUNK_BYTES: usize = 1 << 30;
    /// The most worker threads allowed.
    pub const MAX_THREADS: usize = 64;

    /// Checks the limits above.
    pub fn validate(&self) -> Result<()> {
        if !(Self::MIN_CHUNK_BYTES..=Self::MAX_CHUNK_BYTES).contains(&self.chunk_bytes) {
            return Err(Error::InvalidStagingConfig {
                problem: format!(
                    "chunk_bytes is {}, but must be between {} (4 KiB) and {} (1 GiB)",
                    self.chunk_bytes,
                    Self::MIN_CHUNK_BYTES,
                    Self::MAX_CHUNK_BYTES
                ),
            });
        }
        if !(1..=Self::MAX_THREADS).contains(&self.threads) {
            return Err(Error::InvalidStagingConfig {
                problem: format!(
                    "threads is {}, but must be between 1 and {}",
                    self.threads,
                    Self::MAX_THREADS
                ),
            });
        }
        Ok(())
    }

    /// Pinned bytes the pool holds once every worker has been used: `threads × 2 × chunk_bytes`.
    pub fn max_pinned_bytes(&self) -> usize {
        self.threads
            .saturating_mul(2)
            .saturating_mul(self.chunk_bytes)
    }
}

impl Default for StagingConfig {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        StagingConfig {
            chunk_bytes: Self::DEFAULT_CHUNK_BYTES,
            threads: cpus.clamp(1, Self::DEFAULT_MAX_THREADS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StagingConfig;

    #[test]
    fn default_is_valid() {
        let c = StagingConfig::default();
        c.validate().unwrap();
        assert_eq!(c.chunk_bytes, 4 << 20);
        assert!((1..=8).contains(&c.threads));
        assert_eq!(c.max_pinned_bytes(), c.threads * 2 * c.chunk_bytes);
    }

    #[test]
    fn limits_are_checked() {
        let ok = StagingConfig {
            chunk_bytes: 4096,
            threads: 1,
        };
        ok.validate().unwrap();
        for bad in [
            StagingConfig {
                chunk_bytes: 4095,
                threads: 1,
            },
            StagingConfig {
                chunk_bytes: (1 << 30) + 1,
                threads: 1,
            },
            StagingConfig {
                chunk_bytes: 1 << 20,
                threads: 0,
            },
            StagingConfig {
                chunk_bytes: 1 << 20,
                threads: 65,
            },
        ] {
            let msg = bad.validate().unwrap_err().to_string();
            assert!(msg.contains("invalid staging configuration"), "{msg}");
        }
    }
}
