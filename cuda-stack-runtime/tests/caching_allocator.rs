//! The caching allocator on the GPU: exact statistics, cache hits, stream-aware reuse, ordering
//! of reused blocks across streams, graphs, empty_cache and the out-of-memory retry.
//!
//! Each test uses its own `CachingAllocator` (not the runtime's), so the counters are exact.

use cuda_stack_runtime::cuda_stack_driver::{Context, DeviceSlice, Stream};
use cuda_stack_runtime::{CachingAllocator, Pool};
use cuda_tests::{ensure, gpu, TestResult};
use std::sync::Mutex;

/// The out-of-memory test takes most of the device's memory: run the tests one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const MIB: usize = 1 << 20;

fn main() {
    cuda_tests::run(vec![
        gpu("statistics_are_exact", stats_exact),
        gpu(
            "cache_hit_reuses_the_block_for_any_type",
            cache_hit_any_type,
        ),
        gpu(
            "other_streams_never_take_a_cached_block",
            stream_aware_reuse,
        ),
        gpu(
            "reuse_after_use_on_another_stream_is_ordered",
            reuse_after_foreign_use,
        ),
        gpu(
            "reuse_on_home_stream_after_queued_work_is_ordered",
            reuse_on_home_ordered,
        ),
        gpu("blocks_held_by_a_graph_are_not_cached", graph_held_blocks),
        gpu("out_of_memory_empties_the_cache_and_retries", oom_retry),
        gpu("summary_reports_the_counters", summary_counts),
    ]);
}

fn setup() -> Result<(Context, Stream, CachingAllocator), Box<dyn std::error::Error>> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let alloc = CachingAllocator::new(&ctx);
    Ok((ctx, s, alloc))
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn stats_exact() -> TestResult {
    let _g = serial();
    let (_ctx, s, a) = setup()?;
    let f = a.alloc_zeros::<f32>(&s, 100)?; // 400 B -> 512 (small)
    let mut g = a.alloc_zeros::<u8>(&s, 513)?; // -> 1024 (small)
    let h = a.alloc_zeros::<f32>(&s, 300_000)?; // 1.2 MB -> 2 MiB (large)
    let k = a.alloc_zeros::<u8>(&s, 5 * MIB)?; // -> 6 MiB (large)
    ensure!(f.block_bytes() == 512 && f.pool() == Pool::Small, "f class");
    ensure!(g.block_bytes() == 1024, "g class");
    ensure!(
        h.block_bytes() == 2 * MIB && h.pool() == Pool::Large,
        "h class"
    );
    ensure!(k.block_bytes() == 6 * MIB, "k class");
    let live = 512 + 1024 + 2 * MIB + 6 * MIB;
    ensure!(
        a.memory_allocated() == live,
        "allocated {}",
        a.memory_allocated()
    );
    ensure!(
        a.memory_reserved() == live,
        "reserved {}",
        a.memory_reserved()
    );
    let st = a.stats();
    ensure!(
        st.small.cache_misses == 2 && st.large.cache_misses == 2,
        "misses {st:?}"
    );
    ensure!(st.small.cache_hits + st.large.cache_hits == 0, "hits");
    ensure!(
        st.small.requested_bytes == 400 + 513 && st.large.requested_bytes == 1_200_000 + 5 * MIB,
        "requested {st:?}"
    );
    ensure!(
        st.small.active_blocks == 2 && st.large.active_blocks == 2,
        "active"
    );

    // The block is written, used, then freed: allocated drops, reserved stays.
    s.memset_bytes(&mut g, 7)?;
    let g_ptr = g.as_raw_ptr();
    drop(g);
    ensure!(a.memory_allocated() == live - 1024, "after free");
    ensure!(a.memory_reserved() == live, "reserved after free");
    ensure!(a.stats().small.cached_blocks == 1, "cached count");

    // Same class again: a cache hit, same block, reserved unchanged.
    let g2 = a.alloc_zeros::<u8>(&s, 1000)?;
    ensure!(g2.as_raw_ptr() == g_ptr, "not the cached block");
    ensure!(a.stats().small.cache_hits == 1, "no hit");
    ensure!(a.memory_reserved() == live, "reserved changed on a hit");
    ensure!(a.memory_allocated() == live, "allocated after hit");
    ensure!(
        s.clone_dtoh(&g2)?.iter().all(|&x| x == 0),
        "alloc_zeros on a reused block"
    );

    // A new class: a miss.
    let m = a.alloc_zeros::<u8>(&s, 1025)?; // -> 1536
    ensure!(a.stats().small.cache_misses == 3, "miss");
    ensure!(a.memory_reserved() == live + 1536, "reserved after miss");
    let peak = live + 1536;
    ensure!(
        a.max_memory_allocated() == peak,
        "peak {}",
        a.max_memory_allocated()
    );

    // Peaks survive frees, and reset to current.
    drop(k);
    drop(m);
    ensure!(a.max_memory_allocated() == peak, "peak after frees");
    ensure!(a.memory_allocated() == peak - 6 * MIB - 1536, "allocated");
    a.reset_peak_stats();
    ensure!(
        a.max_memory_allocated() == a.memory_allocated(),
        "peak reset"
    );
    ensure!(
        a.max_memory_reserved() == a.memory_reserved(),
        "reserved peak reset"
    );

    // empty_cache gives back the cached blocks only.
    let before = a.stats();
    a.empty_cache()?;
    ensure!(
        a.memory_reserved() == a.memory_allocated(),
        "reserved {} != allocated {} after empty_cache",
        a.memory_reserved(),
        a.memory_allocated()
    );
    ensure!(
        a.memory_allocated() == 512 + 1024 + 2 * MIB,
        "live after empty_cache"
    );
    let after = a.stats();
    ensure!(
        after.small.cached_blocks == 0 && after.large.cached_blocks == 0,
        "cached blocks left"
    );
    ensure!(
        after.large.driver_frees == before.large.driver_frees + 1
            && after.small.driver_frees == before.small.driver_frees + 1,
        "driver frees {after:?}"
    );
    drop((f, g2, h));
    ensure!(a.memory_allocated() == 0, "allocated at the end");
    let st = a.stats();
    ensure!(
        st.small.allocs == 4 && st.large.allocs == 2 && st.small.frees == 4 && st.large.frees == 2,
        "alloc/free counts {st:?}"
    );
    a.empty_cache()?;
    ensure!(a.memory_reserved() == 0, "reserved at the end");
    Ok(())
}

fn cache_hit_any_type() -> TestResult {
    let _g = serial();
    let (_ctx, s, a) = setup()?;
    let data: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let x = a.clone_htod(&s, &data)?; // 4000 B -> 4096
    ensure!(s.clone_dtoh(&x)? == data, "clone_htod");
    let p = x.as_raw_ptr();
    drop(x);
    // Same class, another type: the same block, typed anew.
    let ints: Vec<i64> = (0..500).map(|i| i * 3 - 7).collect();
    let y = a.clone_htod(&s, &ints)?;
    ensure!(
        y.as_raw_ptr() == p && y.len() == 500,
        "hit with another type"
    );
    ensure!(s.clone_dtoh(&y)? == ints, "data through the reused block");
    let bytes: &DeviceSlice<i64> = &y;
    ensure!(bytes.num_bytes() == 4000, "typed view length");
    ensure!(a.stats().small.cache_hits == 1, "hit count");
    Ok(())
}

/// Makes `s` busy for a while (a few ms): 100 device-to-device copies of 64 MiB.
fn keep_busy(s: &Stream, big_src: &DeviceSlice<u8>, big_dst: &mut DeviceSlice<u8>) -> TestResult {
    for _ in 0..100 {
        s.memcpy_dtod(big_src, big_dst)?;
    }
    Ok(())
}

fn stream_aware_reuse() -> TestResult {
    let _g = serial();
    let (ctx, a_stream, alloc) = setup()?;
    let b_stream = ctx.new_stream()?;
    let big_src = a_stream.alloc_zeros::<u8>(64 * MIB)?;
    let mut big_dst = a_stream.alloc_zeros::<u8>(64 * MIB)?;
    let p = pattern(3000, 1);
    let q = pattern(3000, 2);

    let src_p = a_stream.clone_htod(&p)?;
    // A block written on stream A (after a long queue) and freed while A is still busy …
    let mut x = unsafe_alloc(&alloc, &a_stream, 3000)?;
    keep_busy(&a_stream, &big_src, &mut big_dst)?;
    a_stream.memcpy_dtod(&src_p, &mut x)?;
    let x_ptr = x.as_raw_ptr();
    drop(x);
    // … is not handed to stream B: B gets a block of its own.
    let mut y = unsafe_alloc(&alloc, &b_stream, 3000)?;
    ensure!(y.as_raw_ptr() != x_ptr, "stream B reused stream A's block");
    ensure!(
        alloc.stats().small.cache_misses == 2,
        "B's alloc was not a miss"
    );
    b_stream.memcpy_htod(&q, &mut y)?;
    a_stream.synchronize()?;
    b_stream.synchronize()?;
    ensure!(b_stream.clone_dtoh(&y)? == q, "B's data was overwritten");
    // Stream A still reuses its own block, with A's data intact until it is rewritten.
    let x2 = unsafe_alloc(&alloc, &a_stream, 3000)?;
    ensure!(x2.as_raw_ptr() == x_ptr, "A did not get its block back");
    ensure!(a_stream.clone_dtoh(&x2)? == p, "A's block content");
    Ok(())
}

fn unsafe_alloc(
    alloc: &CachingAllocator,
    s: &Stream,
    n: usize,
) -> Result<cuda_stack_runtime::CachedBuffer<u8>, Box<dyn std::error::Error>> {
    // SAFETY: every caller writes the buffer before reading it.
    Ok(unsafe { alloc.alloc::<u8>(s, n)? })
}

fn reuse_after_foreign_use() -> TestResult {
    let _g = serial();
    let (ctx, home, alloc) = setup()?;
    let other = ctx.new_stream()?;
    let big_src = other.alloc_zeros::<u8>(64 * MIB)?;
    let mut big_dst = other.alloc_zeros::<u8>(64 * MIB)?;
    let n = 100_000;
    let p = pattern(n, 3);
    let src_p = other.clone_htod(&p)?;
    for round in 0..3 {
        // Allocated for `home`, written late on `other` (after a long queue), freed at once.
        let mut x = unsafe_alloc(&alloc, &home, n)?;
        keep_busy(&other, &big_src, &mut big_dst)?;
        other.memcpy_dtod(&src_p, &mut x)?;
        let x_ptr = x.as_raw_ptr();
        drop(x);
        // Reused on `home` right away: its memset must run after `other`'s pending write.
        let mut y = unsafe_alloc(&alloc, &home, n)?;
        ensure!(y.as_raw_ptr() == x_ptr, "round {round}: not a cache hit");
        home.memset_bytes(&mut y, 0x5A)?;
        other.synchronize()?;
        home.synchronize()?;
        let got = home.clone_dtoh(&y)?;
        let bad = got.iter().filter(|&&b| b != 0x5A).count();
        ensure!(
            bad == 0,
            "round {round}: {bad} bytes overwritten by the earlier user's late write"
        );
    }
    Ok(())
}

fn reuse_on_home_ordered() -> TestResult {
    let _g = serial();
    let (_ctx, s, alloc) = setup()?;
    let big_src = s.alloc_zeros::<u8>(64 * MIB)?;
    let mut big_dst = s.alloc_zeros::<u8>(64 * MIB)?;
    let n = 4 * MIB; // a large-pool block
    let p = pattern(n, 4);
    let q = pattern(n, 5);
    let src_p = s.clone_htod(&p)?;
    let src_q = s.clone_htod(&q)?;
    let mut x = unsafe_alloc(&alloc, &s, n)?;
    keep_busy(&s, &big_src, &mut big_dst)?;
    s.memcpy_dtod(&src_p, &mut x)?;
    drop(x);
    let mut y = unsafe_alloc(&alloc, &s, n)?;
    ensure!(alloc.stats().large.cache_hits == 1, "not a hit");
    s.memcpy_dtod(&src_q, &mut y)?;
    ensure!(s.clone_dtoh(&y)? == q, "reused block holds stale data");
    Ok(())
}

fn graph_held_blocks() -> TestResult {
    let _g = serial();
    let (_ctx, s, alloc) = setup()?;
    let mut x = alloc.alloc_zeros::<f32>(&s, 1000)?; // 4096 B
    s.synchronize()?;
    let graph = s.capture(|st| st.memset_bytes(&mut x, 1))?;
    let reserved = alloc.memory_reserved();
    let before = alloc.stats();
    drop(x);
    let after = alloc.stats();
    ensure!(
        after.small.cached_blocks == before.small.cached_blocks,
        "a graph-held block was cached"
    );
    ensure!(
        alloc.memory_reserved() == reserved - 4096,
        "reserved did not drop"
    );
    ensure!(
        after.small.driver_frees == before.small.driver_frees + 1,
        "driver frees"
    );
    let y = alloc.alloc_zeros::<f32>(&s, 1000)?;
    ensure!(
        alloc.stats().small.cache_misses == before.small.cache_misses + 1,
        "the graph's block was reused"
    );
    // The graph still runs (its memory is alive until it is dropped).
    let exec = graph.instantiate()?;
    exec.launch(&s)?;
    s.synchronize()?;
    ensure!(
        s.clone_dtoh(&y)?.iter().all(|&v| v == 0.0),
        "the graph wrote into a new buffer"
    );
    drop(exec);
    Ok(())
}

fn oom_retry() -> TestResult {
    let _g = serial();
    let (ctx, s, alloc) = setup()?;
    let (free, _total) = ctx.mem_get_info()?;
    // Two blocks of 60% of free memory do not fit together: the second fits only once the
    // first (cached) is given back.
    let first = (free / 10 * 6) / (2 * MIB) * (2 * MIB);
    let second = first + 2 * MIB; // another class, so not a cache hit
    let a = alloc.alloc_zeros::<u8>(&s, first)?;
    drop(a);
    ensure!(alloc.memory_reserved() == first, "cached");
    let b = alloc.alloc_zeros::<u8>(&s, second)?;
    let st = alloc.stats();
    ensure!(st.oom_retries == 1, "oom_retries {}", st.oom_retries);
    ensure!(
        alloc.memory_reserved() == second,
        "reserved {}",
        alloc.memory_reserved()
    );
    ensure!(st.large.cached_blocks == 0, "cache not emptied");
    drop(b);
    alloc.empty_cache()?;
    Ok(())
}

fn summary_counts() -> TestResult {
    let _g = serial();
    let (_ctx, s, alloc) = setup()?;
    let a = alloc.alloc_zeros::<u8>(&s, 100)?;
    drop(a);
    let _b = alloc.alloc_zeros::<u8>(&s, 200)?;
    let _c = alloc.alloc_zeros::<u8>(&s, 3 * MIB)?;
    let text = alloc.memory_summary();
    let row = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.starts_with(&format!("| {name} ")))
            .map(|l| {
                l.split('|')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    ensure!(
        row("Allocations") == ["Allocations", "3", "2", "1"],
        "{text}"
    );
    ensure!(row("Cache hits") == ["Cache hits", "1", "1", "0"], "{text}");
    ensure!(
        row("Cache misses") == ["Cache misses", "2", "1", "1"],
        "{text}"
    );
    ensure!(
        row("Allocated memory") == ["Allocated memory", "4.0 MiB", "512 B", "4.0 MiB"],
        "{text}"
    );
    Ok(())
}
