//! Staged pageable copies on the GPU, checked byte for byte against the host data: every length
//! class (0, 1, odd, around one chunk, several chunks with a partial tail, 64 MiB), sub-slices
//! with guard bytes around them, element types of odd sizes, thread counts, and stream order.

use cuda_stack_runtime::cuda_stack_driver::{Context, DeviceRepr, DeviceSlice, Stream};
use cuda_stack_runtime::{self as rt, Runtime, StagingConfig, StagingPool};
use cuda_tests::{ensure, gpu, TestResult};

const MIB: usize = 1 << 20;

fn main() {
    cuda_tests::run(vec![
        gpu(
            "htod_and_dtoh_every_length_class_small_chunks",
            small_chunks,
        ),
        gpu("htod_and_dtoh_default_config", default_config),
        gpu("sub_slices_leave_their_neighbours_alone", sub_slices),
        gpu("element_types_of_odd_sizes", odd_elements),
        gpu("one_thread_and_many_threads", thread_counts),
        gpu("copies_start_after_work_queued_on_the_stream", stream_order),
        gpu("mismatched_lengths_copy_nothing", mismatch),
        gpu("config_changes_and_reserve", config_changes),
        gpu(
            "runtime_pageable_copies_on_the_default_stream",
            runtime_pageable,
        ),
    ]);
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

fn setup() -> Result<(Context, Stream), Box<dyn std::error::Error>> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    Ok((ctx, s))
}

fn first_difference<T: PartialEq>(a: &[T], b: &[T]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// H→D with the pool, checked with the driver's own D→H; then D→H with the pool, checked against
/// the host data.
fn roundtrip<T: DeviceRepr + PartialEq + std::fmt::Debug>(
    pool: &mut StagingPool,
    s: &Stream,
    host: &[T],
    what: &str,
) -> TestResult {
    let mut d = s.alloc_zeros::<T>(host.len())?;
    pool.copy_htod(s, host, &mut d)?;
    let via_driver = s.clone_dtoh(&d)?;
    if let Some(i) = first_difference(&via_driver, host) {
        return Err(format!(
            "{what}: htod differs first at element {i} of {}",
            host.len()
        )
        .into());
    }
    let mut back = vec![T::zeroed(); host.len()];
    pool.copy_dtoh(s, &d, &mut back)?;
    if let Some(i) = first_difference(&back, host) {
        return Err(format!(
            "{what}: dtoh differs first at element {i} of {}",
            host.len()
        )
        .into());
    }
    Ok(())
}

fn lengths(chunk: usize) -> Vec<usize> {
    vec![
        0,
        1,
        4097,
        chunk - 1,
        chunk,
        chunk + 1,
        2 * chunk,
        chunk * 7 / 2,
        64 * MIB,
        64 * MIB + 12345,
    ]
}

fn small_chunks() -> TestResult {
    let (ctx, s) = setup()?;
    let chunk = 64 << 10;
    let mut pool = StagingPool::new(
        &ctx,
        StagingConfig {
            chunk_bytes: chunk,
            threads: 3,
        },
    )?;
    for (i, n) in lengths(chunk).into_iter().enumerate() {
        let host = pattern(n, i as u64 + 1);
        roundtrip(&mut pool, &s, &host, &format!("u8 × {n}"))?;
    }
    // f32 lengths around the chunk, in elements.
    for n in [
        chunk / 4 - 1,
        chunk / 4,
        chunk / 4 + 1,
        chunk * 7 / 8,
        (chunk * 7 / 2) / 4 + 3,
    ] {
        let host: Vec<f32> = (0..n).map(|i| (i as f32).sqrt() - 3.0).collect();
        roundtrip(&mut pool, &s, &host, &format!("f32 × {n}"))?;
    }
    ensure!(
        pool.pinned_bytes() == 3 * 2 * chunk,
        "pinned {}",
        pool.pinned_bytes()
    );
    Ok(())
}

fn default_config() -> TestResult {
    let (ctx, s) = setup()?;
    let mut pool = StagingPool::new(&ctx, StagingConfig::default())?;
    let chunk = pool.config().chunk_bytes;
    for (i, n) in lengths(chunk).into_iter().enumerate() {
        let host = pattern(n, 100 + i as u64);
        roundtrip(&mut pool, &s, &host, &format!("u8 × {n} (default config)"))?;
    }
    let host: Vec<f32> = (0..(64 * MIB / 4)).map(|i| i as f32).collect();
    roundtrip(&mut pool, &s, &host, "f32 × 16 Mi")?;
    Ok(())
}

fn sub_slices() -> TestResult {
    let (ctx, s) = setup()?;
    let chunk = 64 << 10;
    let mut pool = StagingPool::new(
        &ctx,
        StagingConfig {
            chunk_bytes: chunk,
            threads: 4,
        },
    )?;
    for (i, (pad, n)) in [
        (1usize, chunk + 1),
        (3, chunk * 7 / 2),
        (4096, 5 * chunk - 7),
        (77, 3 * MIB + 1),
        (5, 0),
        (9, 100),
    ]
    .into_iter()
    .enumerate()
    {
        let total = n + 2 * pad;
        let guard = pattern(total, 1000 + i as u64);
        let data = pattern(n, 2000 + i as u64);
        // H→D into the middle of a guarded device buffer.
        let mut d = s.clone_htod(&guard)?;
        {
            let mut mid = d.slice_mut(pad..pad + n)?;
            pool.copy_htod(&s, &data, &mut mid)?;
        }
        let got = s.clone_dtoh(&d)?;
        ensure!(
            got[..pad] == guard[..pad],
            "case {i}: bytes before the slice changed"
        );
        ensure!(
            got[pad + n..] == guard[pad + n..],
            "case {i}: bytes after the slice changed"
        );
        if let Some(j) = first_difference(&got[pad..pad + n], &data) {
            return Err(format!("case {i}: htod slice differs at {j}").into());
        }
        // D→H from a device sub-slice into the middle of a guarded host buffer.
        let mut host = guard.clone();
        let src = d.slice(pad..pad + n)?;
        pool.copy_dtoh(&s, &src, &mut host[pad..pad + n])?;
        ensure!(
            host[..pad] == guard[..pad],
            "case {i}: host bytes before changed"
        );
        ensure!(
            host[pad + n..] == guard[pad + n..],
            "case {i}: host bytes after changed"
        );
        if let Some(j) = first_difference(&host[pad..pad + n], &data) {
            return Err(format!("case {i}: dtoh slice differs at {j}").into());
        }
    }
    Ok(())
}

fn odd_elements() -> TestResult {
    let (ctx, s) = setup()?;
    let chunk = 64 << 10;
    let mut pool = StagingPool::new(
        &ctx,
        StagingConfig {
            chunk_bytes: chunk,
            threads: 3,
        },
    )?;
    // 6-byte elements: portions and windows cut through elements; bytes must still line up.
    let host: Vec<[u16; 3]> = (0..(chunk * 5 / 6 + 11))
        .map(|i| [i as u16, (i >> 16) as u16, (i * 7) as u16])
        .collect();
    roundtrip(&mut pool, &s, &host, "[u16; 3]")?;
    let host: Vec<f64> = (0..(3 * MIB / 8 + 1)).map(|i| i as f64 / 7.0).collect();
    roundtrip(&mut pool, &s, &host, "f64")?;
    let host: Vec<rt::cuda_stack_driver::half::f16> = (0..(chunk + 3))
        .map(|i| rt::cuda_stack_driver::half::f16::from_f32((i % 2048) as f32))
        .collect();
    roundtrip(&mut pool, &s, &host, "f16")?;
    Ok(())
}

fn thread_counts() -> TestResult {
    let (ctx, s) = setup()?;
    let chunk = 64 << 10;
    for threads in [1, 2, 7, 16] {
        let mut pool = StagingPool::new(
            &ctx,
            StagingConfig {
                chunk_bytes: chunk,
                threads,
            },
        )?;
        for n in [chunk, 3 * chunk + 1, 16 * chunk + 5, 8 * MIB - 1] {
            let host = pattern(n, (threads * 31 + n) as u64);
            roundtrip(
                &mut pool,
                &s,
                &host,
                &format!("{threads} threads, {n} bytes"),
            )?;
        }
    }
    Ok(())
}

fn stream_order() -> TestResult {
    let (ctx, s) = setup()?;
    let chunk = 64 << 10;
    let mut pool = StagingPool::new(
        &ctx,
        StagingConfig {
            chunk_bytes: chunk,
            threads: 4,
        },
    )?;
    let n = 6 * MIB + 3;
    let big_src = s.alloc_zeros::<u8>(64 * MIB)?;
    let mut big_dst = s.alloc_zeros::<u8>(64 * MIB)?;
    let mut d = s.alloc_zeros::<u8>(n)?;
    for round in 0..3u8 {
        // Queue slow work, then a memset of `d` on `s`; the staged read must see the memset.
        for _ in 0..20 {
            s.memcpy_dtod(&big_src, &mut big_dst)?;
        }
        s.memset_bytes(&mut d, 0x30 + round)?;
        let mut host = vec![0u8; n];
        pool.copy_dtoh(&s, &d, &mut host)?;
        let bad = host.iter().filter(|&&b| b != 0x30 + round).count();
        ensure!(
            bad == 0,
            "round {round}: {bad} bytes read before the memset ran"
        );
        // And a staged write followed by work on `s`: `s` sees the written data.
        let data = pattern(n, round as u64);
        pool.copy_htod(&s, &data, &mut d)?;
        let mut copy = s.alloc_zeros::<u8>(n)?;
        s.memcpy_dtod(&d, &mut copy)?;
        ensure!(
            s.clone_dtoh(&copy)? == data,
            "round {round}: later work saw old data"
        );
    }
    Ok(())
}

fn mismatch() -> TestResult {
    let (ctx, s) = setup()?;
    let mut pool = StagingPool::new(
        &ctx,
        StagingConfig {
            chunk_bytes: 64 << 10,
            threads: 2,
        },
    )?;
    let host = pattern(MIB, 9);
    let mut d = s.alloc_zeros::<u8>(MIB - 1)?;
    ensure!(
        pool.copy_htod(&s, &host, &mut d).is_err(),
        "htod mismatch accepted"
    );
    ensure!(
        s.clone_dtoh(&d)?.iter().all(|&b| b == 0),
        "mismatched htod wrote"
    );
    let mut back = vec![7u8; MIB];
    ensure!(
        pool.copy_dtoh(&s, &d, &mut back).is_err(),
        "dtoh mismatch accepted"
    );
    ensure!(back.iter().all(|&b| b == 7), "mismatched dtoh wrote");
    Ok(())
}

fn config_changes() -> TestResult {
    let (ctx, s) = setup()?;
    ensure!(
        StagingPool::new(
            &ctx,
            StagingConfig {
                chunk_bytes: 100,
                threads: 1
            }
        )
        .is_err(),
        "tiny chunk accepted"
    );
    let mut pool = StagingPool::new(
        &ctx,
        StagingConfig {
            chunk_bytes: 64 << 10,
            threads: 4,
        },
    )?;
    pool.reserve()?;
    ensure!(pool.pinned_bytes() == 4 * 2 * (64 << 10), "reserve");
    let host = pattern(2 * MIB + 1, 11);
    roundtrip(&mut pool, &s, &host, "before change")?;
    pool.set_config(StagingConfig {
        chunk_bytes: 256 << 10,
        threads: 2,
    })?;
    ensure!(pool.pinned_bytes() == 0, "old buffers kept");
    roundtrip(&mut pool, &s, &host, "after change")?;
    ensure!(pool.pinned_bytes() == 2 * 2 * (256 << 10), "new buffers");
    pool.set_config(StagingConfig {
        chunk_bytes: 256 << 10,
        threads: 1,
    })?;
    ensure!(pool.pinned_bytes() == 2 * (256 << 10), "threads shrink");
    pool.release();
    ensure!(pool.pinned_bytes() == 0, "release");
    roundtrip(&mut pool, &s, &host, "after release")?;
    Ok(())
}

fn runtime_pageable() -> TestResult {
    rt::set_device(0)?;
    let r = Runtime::current()?;
    let chunk = r.staging_config().chunk_bytes;
    let s = r.default_stream();
    for n in [0, 5, chunk - 1, chunk + 1, 64 * MIB] {
        let host = pattern(n, n as u64);
        let mut d = rt::malloc_zeros::<u8>(n)?;
        rt::copy_htod_pageable(s, &host, &mut d)?;
        let mut back = vec![0u8; n];
        rt::copy_dtoh_pageable(s, &d, &mut back)?;
        ensure!(first_difference(&back, &host).is_none(), "{n} bytes");
        // On another stream of the same device too.
        let other = r.context().new_stream()?;
        let mut back2 = vec![0u8; n];
        rt::copy_dtoh_pageable(&other, &d, &mut back2)?;
        ensure!(back2 == host, "{n} bytes via another stream");
        let slice: &DeviceSlice<u8> = &d;
        ensure!(slice.len() == n, "len");
    }
    Ok(())
}
