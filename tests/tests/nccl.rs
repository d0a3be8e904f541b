//! `cuda-stack-nccl` on the GPU: every collective, every reduction and every dtype against CPU
//! references over all the GPUs present (one rank per GPU, driven from one thread through
//! groups); single-rank communicators without groups; point-to-point to itself and around a
//! ring; `ncclCommInitAll`'s blocking communicators; stream ordering with other streams. Ranks
//! in their own threads need two GPUs (ignored on one). Failures — the group guard's rules,
//! typed errors, abort, timeouts, the watchdog — are in `nccl_failures.rs`.
//!
//! NCCL tests run one at a time (a lock): communicators used concurrently on the same GPUs by
//! unrelated threads may wait on each other's kernels (NCCL's own rule).

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceBuffer, Stream};
use cuda_stack_nccl::{
    CommConfig, CommGroup, Communicator, Error, Group, NcclType, ReduceOp, UniqueId,
};
use cuda_tests::{
    ensure, fill_slowly, gpu2_nccl, gpu_count, gpu_nccl, load_cuda, no_nvrtc_reason,
    slow_fill_kernel, TestResult, TEST_KERNELS,
};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

fn main() {
    // SAFETY: the first statement of main: no other thread exists yet.
    unsafe { cuda_stack_nccl::disable_nvls_in_environment() };
    let mut trials = vec![
        cuda_tests::cpu("nvls_is_off_in_this_process", nvls_off),
        gpu_nccl("single_rank_communicator_reports_itself", single_rank_info),
        gpu_nccl("all_reduce_every_op_and_dtype_matches_cpu", all_reduce_all),
        gpu_nccl(
            "broadcast_and_reduce_every_root_match_cpu",
            broadcast_reduce,
        ),
        gpu_nccl("all_gather_and_reduce_scatter_match_cpu", gather_scatter),
        gpu_nccl("single_rank_ops_without_a_group", single_rank_ops),
        gpu_nccl("send_recv_to_self_in_a_group", send_recv_self),
        gpu_nccl("send_recv_around_the_ring_of_all_gpus", send_recv_ring),
        gpu_nccl("init_all_blocking_communicators_work", init_all),
        gpu2_nccl("ranks_in_their_own_threads_match_cpu", threads),
        gpu2_nccl(
            "blocking_init_rank_per_thread_matches_cpu",
            blocking_init_rank_threads,
        ),
    ];
    let ordering = gpu_nccl(
        "buffers_are_ordered_with_other_streams",
        ordered_with_streams,
    );
    let no_nvrtc = no_nvrtc_reason().is_some();
    trials.push(if no_nvrtc {
        ordering.with_ignored_flag(true)
    } else {
        ordering
    });
    cuda_tests::run(trials);
}

/// One NCCL test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Long enough for a loaded machine, short enough that a hang fails the test in a minute.
fn config() -> CommConfig {
    CommConfig::with_timeout(Some(Duration::from_secs(60)))
}

/// One communicator per GPU of the machine, made once, with a stream each.
fn all_gpus() -> Result<&'static (CommGroup, Vec<Stream>), Box<dyn std::error::Error>> {
    static ALL: OnceLock<Result<(CommGroup, Vec<Stream>), String>> = OnceLock::new();
    let made = ALL.get_or_init(|| {
        let make = || -> Result<(CommGroup, Vec<Stream>), Box<dyn std::error::Error>> {
            let cg = CommGroup::all(&config())?;
            let streams = cg
                .iter()
                .map(|c| c.context().new_stream())
                .collect::<Result<Vec<_>, _>>()?;
            Ok((cg, streams))
        };
        make().map_err(|e| e.to_string())
    });
    made.as_ref().map_err(|e| e.clone().into())
}

/// A fresh one-rank communicator on device 0, and a stream.
fn single() -> Result<(Communicator, Stream), Box<dyn std::error::Error>> {
    let id = UniqueId::new()?;
    let c = Communicator::init_rank(&id, 0, 1, 0, &config())?;
    let s = c.context().new_stream()?;
    Ok((c, s))
}

/// The element types tested, with conversions for the CPU reference.
trait Elem: NcclType + Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    fn of(v: f64) -> Self;
    fn f(self) -> f64;
    /// Relative tolerance against the f64 reference.
    const TOL: f64;
    const FLOAT: bool = true;
}

impl Elem for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn f(self) -> f64 {
        self as f64
    }
    const TOL: f64 = 1e-6;
}
impl Elem for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn f(self) -> f64 {
        self
    }
    const TOL: f64 = 1e-12;
}
impl Elem for f16 {
    fn of(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn f(self) -> f64 {
        self.to_f64()
    }
    const TOL: f64 = 2e-3;
}
impl Elem for bf16 {
    fn of(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn f(self) -> f64 {
        self.to_f64()
    }
    const TOL: f64 = 1.6e-2;
}
impl Elem for i32 {
    fn of(v: f64) -> Self {
        v as i32
    }
    fn f(self) -> f64 {
        self as f64
    }
    const TOL: f64 = 0.0;
    const FLOAT: bool = false;
}

/// Rank `r`'s element `i`: 1, 2 or 3 (sums, products and averages stay exact or nearly so in
/// every dtype for up to 8 ranks).
fn value(r: usize, i: usize) -> f64 {
    1.0 + ((i * 7 + r * 3) % 3) as f64
}

fn data<T: Elem>(r: usize, n: usize) -> Vec<T> {
    (0..n).map(|i| T::of(value(r, i))).collect()
}

fn reduce_ref(op: ReduceOp, vals: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = vals.collect();
    match op {
        ReduceOp::Sum => v.iter().sum(),
        ReduceOp::Prod => v.iter().product(),
        ReduceOp::Max => v.iter().copied().fold(f64::MIN, f64::max),
        ReduceOp::Min => v.iter().copied().fold(f64::MAX, f64::min),
        ReduceOp::Avg => v.iter().sum::<f64>() / v.len() as f64,
    }
}

fn compare<T: Elem>(what: &str, got: &[T], want: &[f64]) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} elements, want {}",
        got.len(),
        want.len()
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.f() - w).abs() <= T::TOL * w.abs().max(1.0);
        ensure!(
            ok,
            "{what} [{}]: element {i} is {g:?}, the CPU says {w}",
            T::NAME
        );
    }
    Ok(())
}

fn ops_for<T: Elem>() -> Vec<ReduceOp> {
    ReduceOp::ALL
        .into_iter()
        .filter(|&op| T::FLOAT || op != ReduceOp::Avg)
        .collect()
}

fn upload<T: Elem>(
    streams: &[Stream],
    f: impl Fn(usize) -> Vec<T>,
) -> cuda_stack_driver::Result<Vec<DeviceBuffer<T>>> {
    streams
        .iter()
        .enumerate()
        .map(|(r, s)| s.clone_htod(&f(r)))
        .collect()
}

fn zeros<T: Elem>(streams: &[Stream], n: usize) -> cuda_stack_driver::Result<Vec<DeviceBuffer<T>>> {
    streams.iter().map(|s| s.alloc_zeros::<T>(n)).collect()
}

fn nvls_off() -> TestResult {
    cuda_stack_nccl::check_nvls_disabled()?;
    Ok(())
}

fn single_rank_info() -> TestResult {
    let _l = serial();
    let (c, _s) = single()?;
    ensure!(c.rank() == 0 && c.size() == 1 && c.device() == 0, "{c:?}");
    ensure!(!c.is_blocking(), "init_rank made a blocking communicator");
    ensure!(c.abort_reason().is_none(), "fresh communicator aborted");
    c.check()?;
    let v = cuda_stack_nccl::nccl_version()?;
    eprintln!("NCCL {v:?}");
    Ok(())
}

fn all_reduce_case<T: Elem>(n: usize) -> TestResult {
    let (cg, streams) = all_gpus()?;
    let ranks = cg.len();
    for op in ops_for::<T>() {
        let want: Vec<f64> = (0..n)
            .map(|i| reduce_ref(op, (0..ranks).map(|r| T::of(value(r, i)).f())))
            .collect();
        let sends = upload(streams, |r| data::<T>(r, n))?;
        let mut recvs = zeros::<T>(streams, n)?;
        let mut g = Group::new()?;
        for ((c, s), (x, y)) in cg
            .iter()
            .zip(streams)
            .zip(sends.iter().zip(recvs.iter_mut()))
        {
            g.all_reduce(c, x, y, op, s)?;
        }
        g.end()?;
        for (r, (s, y)) in streams.iter().zip(&recvs).enumerate() {
            compare(
                &format!("all_reduce {op:?} rank {r}"),
                &s.clone_dtoh(y)?,
                &want,
            )?;
        }
        let mut bufs = upload(streams, |r| data::<T>(r, n))?;
        let mut g = Group::new()?;
        for ((c, s), b) in cg.iter().zip(streams).zip(bufs.iter_mut()) {
            g.all_reduce_in_place(c, b, op, s)?;
        }
        g.end()?;
        for (r, (s, b)) in streams.iter().zip(&bufs).enumerate() {
            compare(
                &format!("all_reduce_in_place {op:?} rank {r}"),
                &s.clone_dtoh(b)?,
                &want,
            )?;
        }
    }
    Ok(())
}

fn all_reduce_all() -> TestResult {
    let _l = serial();
    for n in [1000, 3, 0] {
        all_reduce_case::<f32>(n)?;
        all_reduce_case::<f64>(n)?;
        all_reduce_case::<f16>(n)?;
        all_reduce_case::<bf16>(n)?;
        all_reduce_case::<i32>(n)?;
    }
    Ok(())
}

fn broadcast_reduce_case<T: Elem>(n: usize) -> TestResult {
    let (cg, streams) = all_gpus()?;
    let ranks = cg.len();
    for root in 0..ranks {
        let want: Vec<f64> = data::<T>(root, n).iter().map(|v| v.f()).collect();
        let sends = upload(streams, |r| data::<T>(r, n))?;
        let mut recvs = zeros::<T>(streams, n)?;
        let mut g = Group::new()?;
        for ((c, s), (x, y)) in cg
            .iter()
            .zip(streams)
            .zip(sends.iter().zip(recvs.iter_mut()))
        {
            g.broadcast(c, x, y, root, s)?;
        }
        g.end()?;
        for (r, (s, y)) in streams.iter().zip(&recvs).enumerate() {
            compare(
                &format!("broadcast root {root}, rank {r}"),
                &s.clone_dtoh(y)?,
                &want,
            )?;
        }
        let mut bufs = upload(streams, |r| data::<T>(r, n))?;
        let mut g = Group::new()?;
        for ((c, s), b) in cg.iter().zip(streams).zip(bufs.iter_mut()) {
            g.broadcast_in_place(c, b, root, s)?;
        }
        g.end()?;
        for (r, (s, b)) in streams.iter().zip(&bufs).enumerate() {
            compare(
                &format!("broadcast_in_place root {root}, rank {r}"),
                &s.clone_dtoh(b)?,
                &want,
            )?;
        }
        for op in ops_for::<T>() {
            let want: Vec<f64> = (0..n)
                .map(|i| reduce_ref(op, (0..ranks).map(|r| T::of(value(r, i)).f())))
                .collect();
            let sends = upload(streams, |r| data::<T>(r, n))?;
            let mut recvs = zeros::<T>(streams, n)?;
            let mut g = Group::new()?;
            for ((c, s), (x, y)) in cg
                .iter()
                .zip(streams)
                .zip(sends.iter().zip(recvs.iter_mut()))
            {
                g.reduce(c, x, y, op, root, s)?;
            }
            g.end()?;
            compare(
                &format!("reduce {op:?} at root {root}"),
                &streams[root].clone_dtoh(&recvs[root])?,
                &want,
            )?;
            let mut bufs = upload(streams, |r| data::<T>(r, n))?;
            let mut g = Group::new()?;
            for ((c, s), b) in cg.iter().zip(streams).zip(bufs.iter_mut()) {
                g.reduce_in_place(c, b, op, root, s)?;
            }
            g.end()?;
            compare(
                &format!("reduce_in_place {op:?} at root {root}"),
                &streams[root].clone_dtoh(&bufs[root])?,
                &want,
            )?;
        }
    }
    Ok(())
}

fn broadcast_reduce() -> TestResult {
    let _l = serial();
    for n in [777, 1] {
        broadcast_reduce_case::<f32>(n)?;
        broadcast_reduce_case::<f64>(n)?;
        broadcast_reduce_case::<f16>(n)?;
        broadcast_reduce_case::<bf16>(n)?;
        broadcast_reduce_case::<i32>(n)?;
    }
    Ok(())
}

fn gather_scatter_case<T: Elem>(n: usize) -> TestResult {
    let (cg, streams) = all_gpus()?;
    let ranks = cg.len();
    // all_gather: chunk r of every result is rank r's data.
    let want: Vec<f64> = (0..ranks)
        .flat_map(|r| data::<T>(r, n).into_iter().map(|v| v.f()))
        .collect();
    let sends = upload(streams, |r| data::<T>(r, n))?;
    let mut recvs = zeros::<T>(streams, n * ranks)?;
    let mut g = Group::new()?;
    for ((c, s), (x, y)) in cg
        .iter()
        .zip(streams)
        .zip(sends.iter().zip(recvs.iter_mut()))
    {
        g.all_gather(c, x, y, s)?;
    }
    g.end()?;
    for (r, (s, y)) in streams.iter().zip(&recvs).enumerate() {
        compare(&format!("all_gather rank {r}"), &s.clone_dtoh(y)?, &want)?;
    }
    // In place: each rank's own chunk holds its data, the rest is garbage before.
    let mut bufs = upload(streams, |r| {
        let mut v = vec![T::of(-9.0); n * ranks];
        v[r * n..(r + 1) * n].copy_from_slice(&data::<T>(r, n));
        v
    })?;
    let mut g = Group::new()?;
    for ((c, s), b) in cg.iter().zip(streams).zip(bufs.iter_mut()) {
        g.all_gather_in_place(c, b, s)?;
    }
    g.end()?;
    for (r, (s, b)) in streams.iter().zip(&bufs).enumerate() {
        compare(
            &format!("all_gather_in_place rank {r}"),
            &s.clone_dtoh(b)?,
            &want,
        )?;
    }
    // reduce_scatter: rank k sends `data(k, n * ranks)`; rank r gets chunk r of the reduction.
    for op in ops_for::<T>() {
        let full: Vec<f64> = (0..n * ranks)
            .map(|i| reduce_ref(op, (0..ranks).map(|k| T::of(value(k, i)).f())))
            .collect();
        let sends = upload(streams, |k| data::<T>(k, n * ranks))?;
        let mut recvs = zeros::<T>(streams, n)?;
        let mut g = Group::new()?;
        for ((c, s), (x, y)) in cg
            .iter()
            .zip(streams)
            .zip(sends.iter().zip(recvs.iter_mut()))
        {
            g.reduce_scatter(c, x, y, op, s)?;
        }
        g.end()?;
        for (r, (s, y)) in streams.iter().zip(&recvs).enumerate() {
            compare(
                &format!("reduce_scatter {op:?} rank {r}"),
                &s.clone_dtoh(y)?,
                &full[r * n..(r + 1) * n],
            )?;
        }
        let mut bufs = upload(streams, |k| data::<T>(k, n * ranks))?;
        let mut g = Group::new()?;
        for ((c, s), b) in cg.iter().zip(streams).zip(bufs.iter_mut()) {
            g.reduce_scatter_in_place(c, b, op, s)?;
        }
        g.end()?;
        for (r, (s, b)) in streams.iter().zip(&bufs).enumerate() {
            let got = s.clone_dtoh(b)?;
            compare(
                &format!("reduce_scatter_in_place {op:?} rank {r}"),
                &got[r * n..(r + 1) * n],
                &full[r * n..(r + 1) * n],
            )?;
        }
    }
    Ok(())
}

fn gather_scatter() -> TestResult {
    let _l = serial();
    for n in [513, 1] {
        gather_scatter_case::<f32>(n)?;
        gather_scatter_case::<f64>(n)?;
        gather_scatter_case::<f16>(n)?;
        gather_scatter_case::<bf16>(n)?;
        gather_scatter_case::<i32>(n)?;
    }
    Ok(())
}

/// On one rank every collective is a copy (or nothing, in place); each is queued without a group.
fn single_rank_ops() -> TestResult {
    let _l = serial();
    let (c, s) = single()?;
    let n = 4099;
    let host: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
    let want: Vec<f64> = host.iter().map(|&v| v as f64).collect();
    let x = s.clone_htod(&host)?;
    for op in ReduceOp::ALL {
        let mut y = s.alloc_zeros::<f32>(n)?;
        c.all_reduce(&x, &mut y, op, &s)?;
        compare(
            &format!("1-rank all_reduce {op:?}"),
            &s.clone_dtoh(&y)?,
            &want,
        )?;
        let mut z = s.clone_htod(&host)?;
        c.all_reduce_in_place(&mut z, op, &s)?;
        compare(
            &format!("1-rank all_reduce_in_place {op:?}"),
            &s.clone_dtoh(&z)?,
            &want,
        )?;
        let mut y = s.alloc_zeros::<f32>(n)?;
        c.reduce(&x, &mut y, op, 0, &s)?;
        compare(&format!("1-rank reduce {op:?}"), &s.clone_dtoh(&y)?, &want)?;
        let mut y = s.alloc_zeros::<f32>(n)?;
        c.reduce_scatter(&x, &mut y, op, &s)?;
        compare(
            &format!("1-rank reduce_scatter {op:?}"),
            &s.clone_dtoh(&y)?,
            &want,
        )?;
    }
    let mut y = s.alloc_zeros::<f32>(n)?;
    c.broadcast(&x, &mut y, 0, &s)?;
    compare("1-rank broadcast", &s.clone_dtoh(&y)?, &want)?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    c.all_gather(&x, &mut y, &s)?;
    compare("1-rank all_gather", &s.clone_dtoh(&y)?, &want)?;
    let mut z = s.clone_htod(&host)?;
    c.broadcast_in_place(&mut z, 0, &s)?;
    c.reduce_in_place(&mut z, ReduceOp::Sum, 0, &s)?;
    c.all_gather_in_place(&mut z, &s)?;
    c.reduce_scatter_in_place(&mut z, ReduceOp::Max, &s)?;
    compare("1-rank in-place chain", &s.clone_dtoh(&z)?, &want)?;
    c.synchronize(&s)?;
    Ok(())
}

fn send_recv_self() -> TestResult {
    let _l = serial();
    let (c, s) = single()?;
    let host: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5).collect();
    let x = s.clone_htod(&host)?;
    let mut y = s.alloc_zeros::<f64>(1000)?;
    let mut g = Group::new()?;
    g.send(&c, &x, 0, &s)?;
    g.recv(&c, &mut y, 0, &s)?;
    g.end()?;
    compare("send/recv to self", &s.clone_dtoh(&y)?, &host)?;
    c.check()?;
    Ok(())
}

fn send_recv_ring() -> TestResult {
    let _l = serial();
    let (cg, streams) = all_gpus()?;
    let ranks = cg.len();
    let n = 2049;
    let sends = upload(streams, |r| data::<f32>(r, n))?;
    let mut recvs = zeros::<f32>(streams, n)?;
    let mut g = Group::new()?;
    for (r, ((c, s), (x, y))) in cg
        .iter()
        .zip(streams)
        .zip(sends.iter().zip(recvs.iter_mut()))
        .enumerate()
    {
        g.send(c, x, (r + 1) % ranks, s)?;
        g.recv(c, y, (r + ranks - 1) % ranks, s)?;
    }
    g.end()?;
    for (r, (s, y)) in streams.iter().zip(&recvs).enumerate() {
        let from = (r + ranks - 1) % ranks;
        let want: Vec<f64> = data::<f32>(from, n).iter().map(|&v| v as f64).collect();
        compare(
            &format!("ring: rank {r} from {from}"),
            &s.clone_dtoh(y)?,
            &want,
        )?;
    }
    Ok(())
}

fn init_all() -> TestResult {
    let _l = serial();
    let devices: Vec<usize> = (0..gpu_count()).collect();
    let cg = CommGroup::init_all(&devices, &config())?;
    ensure!(
        cg.iter().all(Communicator::is_blocking),
        "init_all made non-blocking comms"
    );
    let streams = cg
        .iter()
        .map(|c| c.context().new_stream())
        .collect::<Result<Vec<_>, _>>()?;
    let mut bufs = upload(&streams, |r| data::<f32>(r, 1000))?;
    let mut g = Group::new()?;
    for ((c, s), b) in cg.iter().zip(&streams).zip(bufs.iter_mut()) {
        g.all_reduce_in_place(c, b, ReduceOp::Sum, s)?;
    }
    g.end()?;
    let want: Vec<f64> = (0..1000)
        .map(|i| (0..cg.len()).map(|r| value(r, i)).sum())
        .collect();
    for (r, (s, b)) in streams.iter().zip(&bufs).enumerate() {
        compare(
            &format!("init_all all_reduce rank {r}"),
            &s.clone_dtoh(b)?,
            &want,
        )?;
    }
    for (c, s) in cg.iter().zip(&streams) {
        c.synchronize(s)?;
    }
    // Duplicates and unknown devices are refused before NCCL.
    ensure!(
        matches!(
            CommGroup::init_all(&[0, 0], &config()),
            Err(Error::Invalid { .. })
        ),
        "a duplicated device was accepted"
    );
    ensure!(
        matches!(
            CommGroup::new(&[gpu_count()], &config()),
            Err(Error::Invalid { .. })
        ),
        "a missing device was accepted"
    );
    ensure!(
        matches!(CommGroup::new(&[], &config()), Err(Error::Invalid { .. })),
        "an empty list was accepted"
    );
    Ok(())
}

/// A buffer written by a slow kernel on another stream is reduced only after the kernel; the
/// result is read by a kernel on yet another stream only after the reduction; the source is
/// dropped right after the op is queued.
fn ordered_with_streams() -> TestResult {
    let _l = serial();
    let (c, s) = single()?;
    let m = load_cuda(c.context(), TEST_KERNELS)?;
    let k = slow_fill_kernel(&m)?;
    let other = c.context().new_stream()?;
    let n = 1 << 20;
    let mut x = other.alloc_zeros::<f32>(n)?;
    fill_slowly(&k, &other, &mut x, 5.0)?;
    let mut y = other.alloc_zeros::<f32>(n)?;
    c.all_reduce(&x, &mut y, ReduceOp::Sum, &s)?;
    drop(x);
    let reuse = other.clone_htod(&vec![-1.0f32; n])?;
    ensure!(
        other.clone_dtoh(&y)?.iter().all(|&v| v == 5.0),
        "the op ran before the kernel"
    );
    // In place on `s`, then a slow kernel on `other` overwrites: the kernel must come after.
    c.all_reduce_in_place(&mut y, ReduceOp::Sum, &s)?;
    fill_slowly(&k, &other, &mut y, 8.0)?;
    c.all_reduce_in_place(&mut y, ReduceOp::Max, &s)?;
    ensure!(
        s.clone_dtoh(&y)?.iter().all(|&v| v == 8.0),
        "a kernel overtook NCCL, or the reverse"
    );
    drop(reuse);
    Ok(())
}

/// Each rank in its own thread, with plain (group-less) calls on its own communicator.
/// `init_rank` with `CommConfig::blocking` from one thread per GPU (its initialisation runs on a
/// thread of its own): blocking communicators whose all-reduce matches the CPU.
fn blocking_init_rank_threads() -> TestResult {
    let _l = serial();
    let n_gpus = cuda_tests::gpu_count();
    let ctxs = (0..n_gpus)
        .map(cuda_stack_driver::Context::new)
        .collect::<cuda_stack_driver::Result<Vec<_>>>()?;
    cuda_stack_nccl::enable_peer_access(&ctxs)?;
    let id = UniqueId::new()?;
    let handles: Vec<_> = (0..n_gpus)
        .map(|r| {
            std::thread::spawn(move || -> Result<(), String> {
                let go = || -> Result<(), Box<dyn std::error::Error>> {
                    let cfg = CommConfig {
                        blocking: true,
                        ..config()
                    };
                    let c = Communicator::init_rank(&id, r, n_gpus, r, &cfg)?;
                    ensure!(c.is_blocking(), "rank {r}: not a blocking communicator");
                    rank_matches_cpu(&c, "blocking")
                };
                go().map_err(|e| e.to_string())
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "a rank's thread panicked")??;
    }
    Ok(())
}

fn threads() -> TestResult {
    let _l = serial();
    let comms = CommGroup::all(&config())?.into_comms();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || rank_matches_cpu(&c, "thread").map_err(|e| e.to_string()))
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "a rank's thread panicked")??;
    }
    Ok(())
}

/// One rank's all-reduce and all-gather of [`data`] against the CPU, from its own thread.
fn rank_matches_cpu(c: &Communicator, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    let (r, ranks, n) = (c.rank(), c.size(), 4097);
    let s = c.context().new_stream()?;
    let x = s.clone_htod(&data::<f32>(r, n))?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    c.all_reduce(&x, &mut y, ReduceOp::Sum, &s)?;
    let want: Vec<f64> = (0..n)
        .map(|i| (0..ranks).map(|k| value(k, i)).sum())
        .collect();
    compare(
        &format!("{what} rank {r} all_reduce"),
        &s.clone_dtoh(&y)?,
        &want,
    )?;
    let mut all = s.alloc_zeros::<f32>(n * ranks)?;
    c.all_gather(&x, &mut all, &s)?;
    let want: Vec<f64> = (0..ranks)
        .flat_map(|k| data::<f32>(k, n).into_iter().map(|v| v as f64))
        .collect();
    compare(
        &format!("{what} rank {r} all_gather"),
        &s.clone_dtoh(&all)?,
        &want,
    )?;
    c.synchronize(&s)?;
    Ok(())
}
