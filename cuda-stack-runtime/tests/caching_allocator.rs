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
        // Graph-private pools: reuse within one capture, and nowhere else.
        gpu(
            "a_capture_reuses_its_own_freed_temporaries_and_replays_correctly",
            capture_reuses_own_temporaries,
        ),
        gpu(
            "a_capture_pool_block_is_never_handed_out_after_the_capture",
            capture_pool_closed_after_end,
        ),
        gpu(
            "blocks_of_another_graph_or_capture_are_not_reused_in_a_capture",
            capture_pool_refuses_shared_blocks,
        ),
        gpu(
            "an_abandoned_capture_leaves_the_allocator_consistent",
            abandoned_capture_consistent,
        ),
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

/// Reserved bytes equal live plus cached bytes, per pool (the counters agree with each other).
fn counters_agree(a: &CachingAllocator, what: &str) -> TestResult {
    let st = a.stats();
    ensure!(
        st.reserved_bytes() >= st.allocated_bytes(),
        "{what}: reserved {} < allocated {}",
        st.reserved_bytes(),
        st.allocated_bytes()
    );
    ensure!(
        st.small.frees <= st.small.allocs && st.large.frees <= st.large.allocs,
        "{what}: more frees than allocations"
    );
    ensure!(
        st.small.allocs - st.small.frees == st.small.active_blocks as u64
            && st.large.allocs - st.large.frees == st.large.active_blocks as u64,
        "{what}: active blocks {}/{} vs allocations minus frees",
        st.small.active_blocks,
        st.large.active_blocks
    );
    Ok(())
}

/// Inside one capture: a temporary written, copied out and freed; a second temporary of the
/// same class takes its memory (same address, a cache hit), is written with other data and
/// copied out. Every replay must give both outputs their own data: the second user's nodes run
/// after the first's.
fn capture_reuses_own_temporaries() -> TestResult {
    let _g = serial();
    let (ctx, s, a) = setup()?;
    for n in [3000usize, 3 * MIB] {
        let mut src_a = s.clone_htod(&pattern(n, 10))?;
        let mut src_b = s.clone_htod(&pattern(n, 11))?;
        let mut out1 = s.alloc_zeros::<u8>(n)?;
        let mut out2 = s.alloc_zeros::<u8>(n)?;
        s.synchronize()?;
        let cap = ctx.begin_capture()?;
        let cs = cap.stream().clone();
        let before = a.stats();
        let mut t1 = unsafe_alloc(&a, &cs, n)?;
        let t1_ptr = t1.as_raw_ptr();
        cs.memcpy_dtod(&src_a, &mut t1)?;
        cs.memcpy_dtod(&t1, &mut out1)?;
        drop(t1);
        let mut t2 = unsafe_alloc(&a, &cs, n)?;
        ensure!(
            t2.as_raw_ptr() == t1_ptr,
            "n={n}: the second temporary did not reuse the first's block"
        );
        let mid = a.stats();
        ensure!(
            mid.small.cache_hits + mid.large.cache_hits
                == before.small.cache_hits + before.large.cache_hits + 1,
            "n={n}: the reuse was not counted as a hit"
        );
        cs.memcpy_dtod(&src_b, &mut t2)?;
        cs.memcpy_dtod(&t2, &mut out2)?;
        drop(t2);
        let exec = cap.end()?.instantiate()?;
        counters_agree(&a, "after the capture")?;
        for round in 0..3u64 {
            let (pa, pb) = (pattern(n, 20 + round), pattern(n, 40 + round));
            s.memcpy_htod(&pa, &mut src_a)?;
            s.memcpy_htod(&pb, &mut src_b)?;
            exec.launch(&s)?;
            ensure!(s.clone_dtoh(&out1)? == pa, "n={n} round {round}: out1");
            ensure!(s.clone_dtoh(&out2)? == pb, "n={n} round {round}: out2");
        }
        drop(exec);
        counters_agree(&a, "after the graph")?;
    }
    Ok(())
}

/// A block the capture freed stays out of every later allocation while the graph lives: an
/// allocation on the capture's stream after the capture, and one on another stream, get other
/// memory, and the graph's replays do not touch them.
fn capture_pool_closed_after_end() -> TestResult {
    let _g = serial();
    let (ctx, s, a) = setup()?;
    let n = 4096;
    let src = s.clone_htod(&pattern(n, 7))?;
    let mut out = s.alloc_zeros::<u8>(n)?;
    s.synchronize()?;
    let cap = ctx.begin_capture()?;
    let cs = cap.stream().clone();
    let mut t = unsafe_alloc(&a, &cs, n)?;
    let t_ptr = t.as_raw_ptr();
    cs.memcpy_dtod(&src, &mut t)?;
    cs.memcpy_dtod(&t, &mut out)?;
    drop(t);
    let exec = cap.end()?.instantiate()?;
    let after = a.stats();
    ensure!(
        after.small.cached_blocks == 0,
        "the capture's private block is still counted as cached"
    );
    // After the capture, on its stream and on another: other memory.
    let mut x = a.alloc_zeros::<u8>(&cs, n)?;
    let mut y = a.alloc_zeros::<u8>(&s, n)?;
    ensure!(
        x.as_raw_ptr() != t_ptr && y.as_raw_ptr() != t_ptr,
        "a block the capture freed was handed out after it"
    );
    cs.memset_bytes(&mut x, 0x33)?;
    s.memset_bytes(&mut y, 0x44)?;
    cs.synchronize()?;
    for _ in 0..3 {
        exec.launch(&s)?;
    }
    ensure!(s.clone_dtoh(&out)? == pattern(n, 7), "the graph's output");
    ensure!(
        cs.clone_dtoh(&x)?.iter().all(|&b| b == 0x33),
        "a replay wrote the buffer allocated on the capture stream after the capture"
    );
    ensure!(
        s.clone_dtoh(&y)?.iter().all(|&b| b == 0x44),
        "a replay wrote a buffer allocated after the capture"
    );
    counters_agree(&a, "end")?;
    Ok(())
}

/// A block that another graph or another capture also used is not put in a capture's private
/// pool: the next allocation of the capture is a miss with other memory. And a block a finished
/// graph holds is not reused by a later capture.
fn capture_pool_refuses_shared_blocks() -> TestResult {
    let _g = serial();
    let (ctx, s, a) = setup()?;
    let n = 2048;
    // A finished graph's block.
    let mut old = a.alloc_zeros::<u8>(&s, n)?;
    let old_ptr = old.as_raw_ptr();
    s.synchronize()?;
    let g1 = s.capture(|st| st.memset_bytes(&mut old, 1))?;
    drop(old);
    // Two captures in progress at once; a block of the second's stream used by both.
    let c1 = ctx.begin_capture()?;
    let c2 = ctx.begin_capture()?;
    let mut shared = unsafe_alloc(&a, c2.stream(), n)?;
    let shared_ptr = shared.as_raw_ptr();
    c2.stream().memset_bytes(&mut shared, 2)?;
    c1.stream().memset_bytes(&mut shared, 3)?;
    drop(shared);
    // A block of the second's stream that only the first capture used.
    let mut foreign = unsafe_alloc(&a, c2.stream(), n)?;
    let foreign_ptr = foreign.as_raw_ptr();
    c1.stream().memset_bytes(&mut foreign, 4)?;
    drop(foreign);
    let misses = a.stats().small.cache_misses;
    let mut fresh = unsafe_alloc(&a, c2.stream(), n)?;
    let fresh_ptr = fresh.as_raw_ptr();
    ensure!(
        fresh_ptr != shared_ptr && fresh_ptr != foreign_ptr && fresh_ptr != old_ptr,
        "a capture reused a block another graph or capture holds"
    );
    ensure!(
        a.stats().small.cache_misses == misses + 1,
        "the allocation was not a miss"
    );
    c2.stream().memset_bytes(&mut fresh, 5)?;
    drop(fresh);
    let g2 = c2.end()?;
    let g1b = c1.end()?;
    counters_agree(&a, "end")?;
    drop((g1, g2, g1b));
    Ok(())
}

/// A runtime error as the driver's (what a capture closure returns).
fn as_driver_error(e: cuda_stack_runtime::Error) -> cuda_stack_runtime::cuda_stack_driver::Error {
    match e {
        cuda_stack_runtime::Error::Driver(d) => d,
        other => cuda_stack_runtime::cuda_stack_driver::Error::Unsupported {
            what: "CachingAllocator::alloc",
            why: other.to_string(),
        },
    }
}

/// A capture abandoned with an error after its private pool filled: the pool is given up (the
/// memory goes back to the driver), the counters agree, and a later capture allocates afresh.
fn abandoned_capture_consistent() -> TestResult {
    let _g = serial();
    let (ctx, s, a) = setup()?;
    let n = 64 * MIB;
    s.synchronize()?;
    let (free_before, _) = ctx.mem_get_info()?;
    let reserved_before = a.memory_reserved();
    let r = ctx.capture(|cs| {
        let mut t = unsafe { a.alloc::<u8>(cs, n) }.map_err(as_driver_error)?;
        cs.memset_bytes(&mut t, 9)?;
        drop(t);
        Err(cuda_stack_runtime::cuda_stack_driver::Error::Unsupported {
            what: "this step",
            why: "the test abandons it".into(),
        })
    });
    ensure!(r.is_err(), "the capture did not fail");
    let st = a.stats();
    ensure!(
        st.large.cached_blocks == 0 && st.allocated_bytes() == 0,
        "the abandoned capture left blocks: {st:?}"
    );
    ensure!(
        a.memory_reserved() == reserved_before,
        "reserved {} after the abandoned capture, {reserved_before} before",
        a.memory_reserved()
    );
    counters_agree(&a, "after the abandoned capture")?;
    ctx.synchronize()?;
    let (free_after, _) = ctx.mem_get_info()?;
    ensure!(
        free_after + 8 * MIB >= free_before,
        "the abandoned capture's memory was not given back: {} MiB less free",
        (free_before - free_after) / MIB
    );
    // A new capture: fresh memory (the old block may have the same address again, since it was
    // freed; what matters is that it is a miss).
    let misses = a.stats().large.cache_misses;
    let g = ctx.capture(|cs| {
        let mut t = unsafe { a.alloc::<u8>(cs, n) }.map_err(as_driver_error)?;
        cs.memset_bytes(&mut t, 1)
    })?;
    ensure!(
        a.stats().large.cache_misses == misses + 1,
        "the new capture took a block of the abandoned one"
    );
    drop(g);
    counters_agree(&a, "end")?;
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
