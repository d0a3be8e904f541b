//! Size classes: how a request is rounded before it is looked up in (or added to) the cache.
//!
//! | request (bytes) | pool | rounded up to a multiple of |
//! |---|---|---|
//! | `0 ..= 1 MiB` | [`Pool::Small`] | [`SMALL_ROUND`] = 512 B (a 0-byte request takes 512 B) |
//! | `> 1 MiB` | [`Pool::Large`] | [`LARGE_ROUND`] = 2 MiB |
//!
//! PyTorch's `CUDACachingAllocator` rounds every request to 512 B and carves small ones out of
//! 2 MiB segments and large ones out of segments it may split; this allocator is simpler: each
//! block is one driver allocation of exactly its class size, and a cached block is reused only
//! for a request of the **same class**. Rounding large requests to 2 MiB keeps the number of
//! distinct large classes (and so of idle cached blocks) small, at the price of at most 2 MiB − 1
//! wasted bytes per large block (under 50% at 1 MiB + 1, and falling with size).

/// Requests up to this many bytes use the small pool.
pub const SMALL_LIMIT: usize = 1 << 20;
/// Small requests round up to a multiple of this (and take at least this).
pub const SMALL_ROUND: usize = 512;
/// Large requests round up to a multiple of this.
pub const LARGE_ROUND: usize = 2 << 20;

/// Which pool a size class belongs to (they are counted separately, like PyTorch's
/// `small_pool` / `large_pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pool {
    /// Requests of at most [`SMALL_LIMIT`] bytes.
    Small,
    /// Requests of more than [`SMALL_LIMIT`] bytes.
    Large,
}

impl Pool {
    /// The pool a request of `bytes` bytes goes to.
    pub fn for_request(bytes: usize) -> Pool {
        if bytes <= SMALL_LIMIT {
            Pool::Small
        } else {
            Pool::Large
        }
    }

    /// `"small"` or `"large"`.
    pub fn name(self) -> &'static str {
        match self {
            Pool::Small => "small",
            Pool::Large => "large",
        }
    }
}

/// The block size a request of `bytes` bytes is served with, and its pool; `None` when rounding
/// up would overflow `usize`.
pub fn size_class(bytes: usize) -> Option<(usize, Pool)> {
    let pool = Pool::for_request(bytes);
    let round = match pool {
        Pool::Small => SMALL_ROUND,
        Pool::Large => LARGE_ROUND,
    };
    let rounded = bytes.max(1).checked_next_multiple_of(round)?;
    Some((rounded, pool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_requests_round_to_512() {
        assert_eq!(size_class(0), Some((512, Pool::Small)));
        assert_eq!(size_class(1), Some((512, Pool::Small)));
        assert_eq!(size_class(512), Some((512, Pool::Small)));
        assert_eq!(size_class(513), Some((1024, Pool::Small)));
        assert_eq!(size_class(400), Some((512, Pool::Small)));
        assert_eq!(
            size_class(SMALL_LIMIT - 1),
            Some((SMALL_LIMIT, Pool::Small))
        );
        assert_eq!(size_class(SMALL_LIMIT), Some((SMALL_LIMIT, Pool::Small)));
    }

    #[test]
    fn large_requests_round_to_2_mib() {
        let mib = 1 << 20;
        assert_eq!(size_class(SMALL_LIMIT + 1), Some((2 * mib, Pool::Large)));
        assert_eq!(size_class(2 * mib), Some((2 * mib, Pool::Large)));
        assert_eq!(size_class(2 * mib + 1), Some((4 * mib, Pool::Large)));
        assert_eq!(size_class(5 * mib), Some((6 * mib, Pool::Large)));
        assert_eq!(size_class(1_200_000), Some((2 * mib, Pool::Large)));
    }

    #[test]
    fn rounding_never_shrinks_and_overflow_is_none() {
        for b in [0usize, 7, 511, 4097, 1 << 20, (1 << 20) + 3, 123_456_789] {
            let (r, _) = size_class(b).unwrap();
            assert!(r >= b && r > 0);
        }
        assert_eq!(size_class(usize::MAX), None);
        assert_eq!(size_class(usize::MAX - 1), None);
        assert_eq!(
            size_class(usize::MAX - LARGE_ROUND),
            Some((usize::MAX - LARGE_ROUND + 1, Pool::Large))
        );
    }
}
