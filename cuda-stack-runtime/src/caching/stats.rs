//! Allocator statistics and the `memory_summary` table.

use super::size_class::Pool;
use std::fmt::Write as _;

/// Counters of one pool (small or large); a snapshot, like one half of
/// `torch.cuda.memory_stats()`.
///
/// Byte counts are of **size-class-rounded** blocks, as in PyTorch: `allocated_bytes` is what
/// live buffers hold, `reserved_bytes` what the allocator holds from the driver (live buffers plus
/// cached blocks). `requested_bytes` is the unrounded total the live buffers asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes in live buffers (rounded to their size class).
    pub allocated_bytes: usize,
    /// Highest `allocated_bytes` since creation or the last peak reset.
    pub peak_allocated_bytes: usize,
    /// Bytes held from the driver: live plus cached blocks.
    pub reserved_bytes: usize,
    /// Highest `reserved_bytes` since creation or the last peak reset.
    pub peak_reserved_bytes: usize,
    /// Bytes live buffers asked for (before rounding).
    pub requested_bytes: usize,
    /// Live buffers.
    pub active_blocks: usize,
    /// Blocks in the cache, ready for reuse.
    pub cached_blocks: usize,
    /// Allocation requests served.
    pub allocs: u64,
    /// Buffers returned (dropped or freed).
    pub frees: u64,
    /// Requests served from the cache.
    pub cache_hits: u64,
    /// Requests that allocated a new block from the driver.
    pub cache_misses: u64,
    /// Blocks given back to the driver (by `empty_cache`, an out-of-memory retry, or because a
    /// CUDA graph still held them when they were returned).
    pub driver_frees: u64,
}

/// A snapshot of a caching allocator's counters, per pool; [`MemoryStats::summary`] formats it
/// like `torch.cuda.memory_summary()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// The device ordinal.
    pub device: usize,
    /// Requests of at most 1 MiB.
    pub small: PoolStats,
    /// Requests of more than 1 MiB.
    pub large: PoolStats,
    /// Highest total allocated bytes (both pools together) since creation or the last reset.
    pub peak_allocated_bytes: usize,
    /// Highest total reserved bytes since creation or the last reset.
    pub peak_reserved_bytes: usize,
    /// Times a driver allocation ran out of memory and was retried after emptying the cache.
    pub oom_retries: u64,
}

impl MemoryStats {
    /// One pool's counters.
    pub fn pool(&self, pool: Pool) -> &PoolStats {
        match pool {
            Pool::Small => &self.small,
            Pool::Large => &self.large,
        }
    }

    pub(crate) fn pool_mut(&mut self, pool: Pool) -> &mut PoolStats {
        match pool {
            Pool::Small => &mut self.small,
            Pool::Large => &mut self.large,
        }
    }

    /// Bytes in live buffers, both pools (`torch.cuda.memory_allocated()`).
    pub fn allocated_bytes(&self) -> usize {
        self.small.allocated_bytes + self.large.allocated_bytes
    }

    /// Bytes held from the driver, both pools (`torch.cuda.memory_reserved()`).
    pub fn reserved_bytes(&self) -> usize {
        self.small.reserved_bytes + self.large.reserved_bytes
    }

    /// Bytes held in cached (free) blocks: reserved minus allocated.
    pub fn cached_bytes(&self) -> usize {
        self.reserved_bytes().saturating_sub(self.allocated_bytes())
    }

    /// Updates the peaks after a change of the current values.
    pub(crate) fn update_peaks(&mut self, pool: Pool) {
        let p = self.pool_mut(pool);
        p.peak_allocated_bytes = p.peak_allocated_bytes.max(p.allocated_bytes);
        p.peak_reserved_bytes = p.peak_reserved_bytes.max(p.reserved_bytes);
        self.peak_allocated_bytes = self.peak_allocated_bytes.max(self.allocated_bytes());
        self.peak_reserved_bytes = self.peak_reserved_bytes.max(self.reserved_bytes());
    }

    /// Sets every peak to the current value (`torch.cuda.reset_peak_memory_stats()`).
    pub(crate) fn reset_peaks(&mut self) {
        for p in [&mut self.small, &mut self.large] {
            p.peak_allocated_bytes = p.allocated_bytes;
            p.peak_reserved_bytes = p.reserved_bytes;
        }
        self.peak_allocated_bytes = self.allocated_bytes();
        self.peak_reserved_bytes = self.reserved_bytes();
    }

    /// A table of the counters, like `torch.cuda.memory_summary()`: one row per metric, with
    /// columns for all / small pool / large pool.
    pub fn summary(&self) -> String {
        let (s, l) = (&self.small, &self.large);
        let bytes_rows: [(&str, usize, usize, usize); 6] = [
            (
                "Allocated memory",
                self.allocated_bytes(),
                s.allocated_bytes,
                l.allocated_bytes,
            ),
            (
                "  peak",
                self.peak_allocated_bytes,
                s.peak_allocated_bytes,
                l.peak_allocated_bytes,
            ),
            (
                "Requested memory",
                s.requested_bytes + l.requested_bytes,
                s.requested_bytes,
                l.requested_bytes,
            ),
            (
                "Reserved memory",
                self.reserved_bytes(),
                s.reserved_bytes,
                l.reserved_bytes,
            ),
            (
                "  peak",
                self.peak_reserved_bytes,
                s.peak_reserved_bytes,
                l.peak_reserved_bytes,
            ),
            (
                "Cached (free) memory",
                self.cached_bytes(),
                s.reserved_bytes.saturating_sub(s.allocated_bytes),
                l.reserved_bytes.saturating_sub(l.allocated_bytes),
            ),
        ];
        let count = |small: u64, large: u64| {
            [
                (small + large).to_string(),
                small.to_string(),
                large.to_string(),
            ]
        };
        let count_rows: [(&str, [String; 3]); 8] = [
            (
                "Active blocks",
                count(s.active_blocks as u64, l.active_blocks as u64),
            ),
            (
                "Cached blocks",
                count(s.cached_blocks as u64, l.cached_blocks as u64),
            ),
            ("Allocations", count(s.allocs, l.allocs)),
            ("Frees", count(s.frees, l.frees)),
            ("Cache hits", count(s.cache_hits, l.cache_hits)),
            ("Cache misses", count(s.cache_misses, l.cache_misses)),
            ("Driver frees", count(s.driver_frees, l.driver_frees)),
            (
                "OOM retries",
                [self.oom_retries.to_string(), "-".into(), "-".into()],
            ),
        ];
        const W: usize = 71;
        let rule = |c: char| c.to_string().repeat(W);
        let mut out = String::new();
        let _ = writeln!(out, "|{}|", rule('='));
        let title = format!(
            "cuda-stack-runtime caching allocator, device {}",
            self.device
        );
        let _ = writeln!(out, "|{title:^W$}|");
        let _ = writeln!(out, "|{}|", rule('-'));
        let _ = writeln!(
            out,
            "| {:<24} | {:>12} | {:>12} | {:>12} |",
            "Metric", "All", "Small pool", "Large pool"
        );
        let _ = writeln!(out, "|{}|", rule('-'));
        for (name, all, small, large) in bytes_rows {
            let _ = writeln!(
                out,
                "| {:<24} | {:>12} | {:>12} | {:>12} |",
                name,
                format_bytes(all),
                format_bytes(small),
                format_bytes(large)
            );
        }
        let _ = writeln!(out, "|{}|", rule('-'));
        for (name, [all, small, large]) in count_rows {
            let _ = writeln!(
                out,
                "| {:<24} | {:>12} | {:>12} | {:>12} |",
                name, all, small, large
            );
        }
        let _ = writeln!(out, "|{}|", rule('='));
        out
    }
}

/// `bytes` in the largest binary unit that keeps the number at least 1, with one decimal
/// (`"512 B"`, `"1.5 KiB"`, `"6.0 MiB"`).
pub fn format_bytes(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_format_in_binary_units() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1024), "1.0 KiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(6 << 20), "6.0 MiB");
        assert_eq!(format_bytes(3 << 30), "3.0 GiB");
    }

    fn sample() -> MemoryStats {
        let mut m = MemoryStats {
            device: 1,
            ..Default::default()
        };
        m.small = PoolStats {
            allocated_bytes: 1536,
            reserved_bytes: 2048,
            requested_bytes: 1400,
            active_blocks: 2,
            cached_blocks: 1,
            allocs: 3,
            frees: 1,
            cache_hits: 0,
            cache_misses: 3,
            ..Default::default()
        };
        m.large = PoolStats {
            allocated_bytes: 6 << 20,
            reserved_bytes: 8 << 20,
            requested_bytes: 5 << 20,
            active_blocks: 1,
            cached_blocks: 1,
            allocs: 4,
            frees: 3,
            cache_hits: 2,
            cache_misses: 2,
            driver_frees: 1,
            ..Default::default()
        };
        m.update_peaks(Pool::Small);
        m.update_peaks(Pool::Large);
        m.oom_retries = 1;
        m
    }

    #[test]
    fn totals_add_the_pools() {
        let m = sample();
        assert_eq!(m.allocated_bytes(), 1536 + (6 << 20));
        assert_eq!(m.reserved_bytes(), 2048 + (8 << 20));
        assert_eq!(m.cached_bytes(), 512 + (2 << 20));
        assert_eq!(m.peak_allocated_bytes, m.allocated_bytes());
    }

    #[test]
    fn peaks_track_the_maximum_and_reset_to_current() {
        let mut m = sample();
        m.large.allocated_bytes -= 2 << 20;
        m.update_peaks(Pool::Large);
        assert_eq!(m.large.peak_allocated_bytes, 6 << 20);
        assert_eq!(m.peak_allocated_bytes, 1536 + (6 << 20));
        m.reset_peaks();
        assert_eq!(m.large.peak_allocated_bytes, 4 << 20);
        assert_eq!(m.peak_allocated_bytes, 1536 + (4 << 20));
        assert_eq!(m.peak_reserved_bytes, m.reserved_bytes());
    }

    #[test]
    fn summary_is_a_table_with_every_metric() {
        let text = sample().summary();
        let lines: Vec<&str> = text.lines().collect();
        // Every line has the same width and is framed with `|`.
        let width = lines[0].chars().count();
        for l in &lines {
            assert_eq!(l.chars().count(), width, "ragged line: {l:?}");
            assert!(l.starts_with('|') && l.ends_with('|'), "{l:?}");
        }
        assert!(text.contains("device 1"));
        let row = |name: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(&format!("| {name} ")))
                .map(|l| {
                    l.split('|')
                        .map(str::trim)
                        .filter(|c| !c.is_empty())
                        .map(String::from)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_else(|| panic!("no row {name}"))
        };
        assert_eq!(
            row("Allocated memory"),
            ["Allocated memory", "6.0 MiB", "1.5 KiB", "6.0 MiB"]
        );
        assert_eq!(
            row("Reserved memory"),
            ["Reserved memory", "8.0 MiB", "2.0 KiB", "8.0 MiB"]
        );
        assert_eq!(
            row("Cached (free) memory"),
            ["Cached (free) memory", "2.0 MiB", "512 B", "2.0 MiB"]
        );
        assert_eq!(row("Cache hits"), ["Cache hits", "2", "0", "2"]);
        assert_eq!(row("Cache misses"), ["Cache misses", "5", "3", "2"]);
        assert_eq!(row("Allocations"), ["Allocations", "7", "3", "4"]);
        assert_eq!(row("Active blocks"), ["Active blocks", "3", "2", "1"]);
        assert_eq!(row("Cached blocks"), ["Cached blocks", "2", "1", "1"]);
        assert_eq!(row("Driver frees"), ["Driver frees", "1", "0", "1"]);
        assert_eq!(row("OOM retries"), ["OOM retries", "1", "-", "-"]);
    }
}
