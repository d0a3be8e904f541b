//! `tests/soundness_devices`: what a second GPU exposes. A library handle, kernel family or
//! communicator made for one device, used with another device's stream or buffers, is refused
//! with a typed error before anything is queued (cuBLAS, NCCL and the driver do not define such
//! work). Run on a machine with two GPUs; elsewhere these are reported as ignored.

use cuda_stack_blas::{Blas, BlasError, Epilogue, Gemm};
use cuda_stack_driver::half::bf16;
use cuda_stack_driver::{Context, Error, Event};
use cuda_stack_kernels::ops::{gemm_half, TcAlgo, Transpose};
use cuda_stack_kernels::Kernels;
use cuda_stack_nccl::{CommConfig, CommGroup, ReduceOp};
use cuda_tests::{ensure, gpu2, gpu2_cublas, gpu2_nccl, TestResult};
use std::time::Duration;

fn main() {
    // SAFETY: the first statement of main: no other thread exists yet.
    unsafe { cuda_stack_nccl::disable_nvls_in_environment() };
    cuda_tests::run(vec![
        gpu2_cublas(
            "blas_handle_refuses_another_devices_stream",
            blas_other_device,
        ),
        gpu2(
            "tensor_core_gemm_refuses_another_devices_stream_or_buffers",
            kernels_other_device,
        ),
        gpu2_nccl(
            "communicator_refuses_another_devices_stream_or_buffers",
            nccl_other_device,
        ),
        gpu2("events_refuse_another_devices_stream", events_other_device),
    ]);
}

fn two() -> Result<(Context, Context), Box<dyn std::error::Error>> {
    Ok((Context::new(0)?, Context::new(1)?))
}

fn blas_other_device() -> TestResult {
    let (c0, c1) = two()?;
    let blas0 = Blas::get(&c0)?;
    let s1 = c1.new_stream()?;
    let a = s1.clone_htod(&[1.0f32; 16])?;
    let b = s1.clone_htod(&[1.0f32; 16])?;
    let mut c = s1.alloc_zeros::<f32>(16)?;
    let g = Gemm::new(4, 4, 4);
    let r = blas0.gemm(&s1, &g, &a, &b, &mut c);
    ensure!(
        matches!(
            r,
            Err(BlasError::DeviceMismatch {
                handle_device: 0,
                stream_device: 1,
                ..
            })
        ),
        "cuBLAS gemm through a device-0 handle on a device-1 stream: {r:?}"
    );
    let r = blas0.matmul(&s1, &g, Epilogue::None, &a, &b, None, &mut c);
    ensure!(
        matches!(r, Err(BlasError::DeviceMismatch { .. })),
        "cuBLASLt matmul through a device-0 handle on a device-1 stream: {r:?}"
    );
    ensure!(s1.clone_dtoh(&c)? == [0.0f32; 16], "a refused GEMM wrote C");
    // The handle of the stream's own device works, and a device-0 stream with device-1
    // buffers is refused by the buffers' check.
    Blas::get(&c1)?.gemm(&s1, &g, &a, &b, &mut c)?;
    ensure!(s1.clone_dtoh(&c)? == [4.0f32; 16], "device-1 GEMM");
    let s0 = c0.new_stream()?;
    let r = blas0.gemm(&s0, &g, &a, &b, &mut c);
    ensure!(
        matches!(r, Err(BlasError::Driver(Error::DeviceMismatch { .. }))),
        "device-1 buffers on a device-0 stream: {r:?}"
    );
    Ok(())
}

fn kernels_other_device() -> TestResult {
    let (c0, c1) = two()?;
    let k0 = Kernels::get(&c0)?;
    let (s0, s1) = (c0.new_stream()?, c1.new_stream()?);
    let n = 64;
    let one = bf16::from_f32(1.0);
    let gemm = |s: &cuda_stack_driver::Stream,
                a: &cuda_stack_driver::DeviceSlice<bf16>,
                b: &cuda_stack_driver::DeviceSlice<bf16>,
                c: &mut cuda_stack_driver::DeviceSlice<bf16>| {
        gemm_half(
            &k0,
            s,
            TcAlgo::Auto,
            Transpose::NoTrans,
            Transpose::NoTrans,
            n,
            n,
            n,
            a,
            n,
            b,
            n,
            c,
            n,
        )
    };
    // Device-0 kernels (the tensor maps encode device-1 addresses) on a device-1 stream.
    let a1 = s1.clone_htod(&vec![one; n * n])?;
    let b1 = s1.clone_htod(&vec![one; n * n])?;
    let mut c1b = s1.alloc_zeros::<bf16>(n * n)?;
    let r = gemm(&s1, &a1, &b1, &mut c1b);
    ensure!(
        matches!(
            r,
            Err(cuda_stack_kernels::Error::Driver(
                Error::DeviceMismatch { .. }
            ))
        ),
        "device-0 kernels on a device-1 stream: {r:?}"
    );
    // Device-0 kernels and stream with device-1 buffers.
    let mut c0b = s0.alloc_zeros::<bf16>(n * n)?;
    let r = gemm(&s0, &a1, &b1, &mut c0b);
    ensure!(
        matches!(
            r,
            Err(cuda_stack_kernels::Error::Driver(
                Error::DeviceMismatch { .. }
            ))
        ),
        "device-1 buffers with device-0 kernels and stream: {r:?}"
    );
    ensure!(
        s1.clone_dtoh(&c1b)?.iter().all(|v| v.to_f32() == 0.0),
        "a refused GEMM wrote C"
    );
    // Each device with its own kernels works.
    let a0 = s0.clone_htod(&vec![one; n * n])?;
    let b0 = s0.clone_htod(&vec![one; n * n])?;
    gemm(&s0, &a0, &b0, &mut c0b)?;
    ensure!(
        s0.clone_dtoh(&c0b)?.iter().all(|v| v.to_f32() == n as f32),
        "device-0 GEMM"
    );
    Ok(())
}

fn nccl_other_device() -> TestResult {
    let group = CommGroup::new(
        &[0, 1],
        &CommConfig::with_timeout(Some(Duration::from_secs(60))),
    )?;
    let comms = group.comms();
    let (c0, c1) = two()?;
    let (s0, s1) = (c0.new_stream()?, c1.new_stream()?);
    let mut b0 = s0.clone_htod(&[1.0f32; 32])?;
    let mut b1 = s1.clone_htod(&[1.0f32; 32])?;
    // Rank 0 (device 0) with device 1's stream.
    let r = comms[0].all_reduce_in_place(&mut b1, ReduceOp::Sum, &s1);
    ensure!(
        matches!(
            r,
            Err(cuda_stack_nccl::Error::DeviceMismatch {
                rank: 0,
                expected: 0,
                found: 1,
                ..
            })
        ),
        "rank 0's communicator on a device-1 stream: {r:?}"
    );
    // Rank 0 with its own stream but device 1's buffer.
    let r = comms[0].all_reduce_in_place(&mut b1, ReduceOp::Sum, &s0);
    ensure!(
        matches!(
            r,
            Err(cuda_stack_nccl::Error::Driver(Error::DeviceMismatch { .. }))
        ),
        "rank 0's communicator with a device-1 buffer: {r:?}"
    );
    // In a group the same holds, and the group still ends cleanly.
    {
        let mut g = cuda_stack_nccl::Group::new()?;
        let r = g.all_reduce_in_place(&comms[1], &mut b0, ReduceOp::Sum, &s0);
        ensure!(
            matches!(
                r,
                Err(cuda_stack_nccl::Error::DeviceMismatch { rank: 1, .. })
            ),
            "rank 1's communicator on a device-0 stream, in a group: {r:?}"
        );
        g.end()?;
    }
    // Correct use works.
    {
        let mut g = cuda_stack_nccl::Group::new()?;
        g.all_reduce_in_place(&comms[0], &mut b0, ReduceOp::Sum, &s0)?;
        g.all_reduce_in_place(&comms[1], &mut b1, ReduceOp::Sum, &s1)?;
        g.end()?;
    }
    ensure!(
        s0.clone_dtoh(&b0)? == [2.0f32; 32] && s1.clone_dtoh(&b1)? == [2.0f32; 32],
        "two-rank all-reduce"
    );
    Ok(())
}

fn events_other_device() -> TestResult {
    let (c0, c1) = two()?;
    let (s0, s1) = (c0.new_stream()?, c1.new_stream()?);
    let e0 = Event::new(&c0, false)?;
    ensure!(
        matches!(e0.record(&s1), Err(Error::DeviceMismatch { .. })),
        "a device-0 event recorded on a device-1 stream"
    );
    e0.record(&s0)?;
    ensure!(
        matches!(s1.wait_event(&e0), Err(Error::DeviceMismatch { .. })),
        "a device-1 stream waiting on a device-0 event"
    );
    // A peer copy refused during a capture, with the capture still usable after.
    let b1 = s1.clone_htod(&[1.0f32; 8])?;
    let cap = c0.begin_capture()?;
    let mut dst = cap.stream().alloc_zeros::<f32>(8)?;
    let r = cap.stream().memcpy_peer(&b1, &mut dst);
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "a peer copy on a capturing stream: {r:?}"
    );
    cap.end()?;
    Ok(())
}
