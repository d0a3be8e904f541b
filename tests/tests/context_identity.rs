//! One device, one context, across every crate, in any order, from any thread.
//!
//! Tests whose point is *what the process touched first* run in a child process of this test
//! binary (the same binary, filtered to that one test, with `CUDA_RS_CHILD` set), so each starts
//! from a fresh process.

use cuda_stack_driver::{Context, LaunchConfig, Stream};
use cuda_stack_kernels::{ops, Kernels};
use cuda_stack_runtime::Tensor;
use cuda_tests::{ensure, gpu, Axpy, TestResult};

fn main() {
    cuda_tests::run(vec![
        gpu("two_handles_are_one_context", two_handles),
        gpu("every_pairing_of_two_handles_works", pairings),
        gpu("kernels_get_with_user_context_then_tensor", || {
            in_child(
                "kernels_get_with_user_context_then_tensor",
                kernels_then_tensor,
            )
        }),
        gpu("tensor_then_kernels_get_with_user_context", || {
            in_child(
                "tensor_then_kernels_get_with_user_context",
                tensor_then_kernels,
            )
        }),
        gpu("context_released_and_retained_again", || {
            in_child("context_released_and_retained_again", release_and_retain)
        }),
        gpu("sixteen_threads_new_context_and_launch", sixteen_threads),
        gpu("tensor_ops_on_user_streams", tensor_on_user_streams),
        gpu("external_memory_borrowed", external_memory),
    ]);
}

/// Runs `body` in a fresh child process (this binary, only this test).
fn in_child(name: &str, body: fn() -> TestResult) -> TestResult {
    if std::env::var_os("CUDA_RS_CHILD").is_some() {
        return body();
    }
    let out = std::process::Command::new(std::env::current_exe()?)
        .args([name, "--exact", "--test-threads", "1"])
        .env("CUDA_RS_CHILD", "1")
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && stdout.contains("1 passed"),
        "child process failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn two_handles() -> TestResult {
    let a = Context::new(0)?;
    let b = Context::new(0)?;
    ensure!(a.same_as(&b), "two Context::new(0) are different handles");
    ensure!(a.as_raw() == b.as_raw(), "raw handles differ");
    Ok(())
}

/// Buffers, kernels, streams, events and graphs made through one handle work with the other's.
fn pairings() -> TestResult {
    let a = Context::new(0)?;
    let b = Context::new(0)?;
    let sa = a.new_stream()?;
    let sb = b.new_stream()?;
    let k = Kernels::get(&a)?;
    let x = sa.clone_htod(&[1.0f32; 256])?;
    let mut y = sb.alloc_zeros::<f32>(256)?;
    // buffer of a, stream of b
    sb.memcpy_dtod(&x, &mut y)?;
    // kernel loaded through a's kernel cache, launched on b's stream
    ops::axpy(&k, &sb, 2.0f32, &x, &mut y)?;
    // event of a, waited on b's stream; recorded on b, waited on a
    let e = cuda_stack_driver::Event::new(&a, false)?;
    e.record(&sb)?;
    sa.wait_event(&e)?;
    // graph captured through a, replayed on b's stream
    let exec = a.capture(|cs| {
        ops::axpy(&k, cs, 1.0f32, &x, &mut y).map_err(|e| cuda_stack_driver::Error::Unsupported {
            what: "axpy",
            why: e.to_string(),
        })
    })?;
    exec.instantiate()?.launch(&sb)?;
    ensure!(
        sa.clone_dtoh(&y)?.iter().all(|&v| v == 4.0),
        "result through mixed handles"
    );
    Ok(())
}

fn kernels_then_tensor() -> TestResult {
    let mine = Context::new(0)?;
    let k = Kernels::get(&mine)?;
    let s = mine.new_stream()?;
    let x = s.clone_htod(&[1.0f32; 8])?;
    let mut y = s.alloc_zeros::<f32>(8)?;
    ops::axpy(&k, &s, 1.0f32, &x, &mut y)?;
    let t = Tensor::<f32>::from_slice(&[1.0, 2.0, 3.0], &[3])?;
    let u = t.add(&t)?.scale(2.0)?;
    ensure!(
        u.to_vec()? == [4.0, 8.0, 12.0],
        "tensor ops after Kernels::get"
    );
    Ok(())
}

fn tensor_then_kernels() -> TestResult {
    let t = Tensor::<f32>::from_slice(&[1.0, 2.0], &[2])?;
    ensure!(t.add(&t)?.to_vec()? == [2.0, 4.0], "tensor");
    let mine = Context::new(0)?;
    let k = Kernels::get(&mine)?;
    let s = mine.new_stream()?;
    let x = s.clone_htod(&[1.0f32; 8])?;
    let mut y = s.alloc_zeros::<f32>(8)?;
    ops::axpy(&k, &s, 3.0f32, &x, &mut y)?;
    ensure!(
        s.clone_dtoh(&y)? == [3.0; 8],
        "Kernels::get after tensor ops"
    );
    let t2 = t.mul(&t)?;
    ensure!(t2.to_vec()? == [1.0, 4.0], "tensor after Kernels::get");
    Ok(())
}

fn release_and_retain() -> TestResult {
    for round in 0..3 {
        let ctx = Context::new(0)?;
        let s = ctx.new_stream()?;
        let b = s.clone_htod(&[round as f32; 16])?;
        ensure!(s.clone_dtoh(&b)? == [round as f32; 16], "round {round}");
        let m = cuda_tests::load_cuda(&ctx, cuda_tests::TEST_KERNELS)?;
        let k: Axpy = cuda_tests::axpy_kernel(&m)?;
        let mut y = s.alloc_zeros::<f32>(16)?;
        // SAFETY: i < n = 16 = len of both buffers.
        unsafe { k.launch(&s, &LaunchConfig::for_num_elems(16), 1.0, &b, &mut y, 16)? };
        ensure!(
            s.clone_dtoh(&y)? == [round as f32; 16],
            "launch in round {round}"
        );
        // Everything drops here: the primary context is released, and retained next round.
    }
    Ok(())
}

fn sixteen_threads() -> TestResult {
    let first = Context::new(0)?;
    let handles: Vec<_> = (0..16)
        .map(|t| {
            std::thread::spawn(move || -> Result<Context, String> {
                let ctx = Context::new(0).map_err(|e| e.to_string())?;
                let k = Kernels::get(&ctx).map_err(|e| e.to_string())?;
                let s = ctx.new_stream().map_err(|e| e.to_string())?;
                let x = s.clone_htod(&[1.0f32; 1000]).map_err(|e| e.to_string())?;
                let mut y = s.alloc_zeros::<f32>(1000).map_err(|e| e.to_string())?;
                for _ in 0..100 {
                    ops::axpy(&k, &s, t as f32, &x, &mut y).map_err(|e| e.to_string())?;
                }
                let v = s.clone_dtoh(&y).map_err(|e| e.to_string())?;
                if v.iter().any(|&v| v != 100.0 * t as f32) {
                    return Err(format!("thread {t}: wrong result {}", v[0]));
                }
                Ok(ctx)
            })
        })
        .collect();
    for h in handles {
        let ctx = h.join().map_err(|_| "thread panicked")??;
        ensure!(ctx.same_as(&first), "a thread got another handle");
    }
    Ok(())
}

/// Tensor ops on two user streams, alternating, with a user kernel on the same streams: results
/// are right (cross-stream order is kept) and the work went to the streams asked for.
fn tensor_on_user_streams() -> TestResult {
    let ctx = Context::new(0)?;
    cuda_stack_runtime::set_device(0)?;
    let s1 = ctx.new_stream()?;
    let s2 = ctx.new_stream()?;
    let mut t = Tensor::<f32>::ones(&[1024])?;
    for i in 0..20 {
        let s = if i % 2 == 0 { &s1 } else { &s2 };
        let _on = cuda_stack_runtime::use_stream(s);
        ensure!(
            cuda_stack_runtime::current_stream()?.same_as(s),
            "current stream"
        );
        t = t.add(&t)?.scale(0.5)?.add(&Tensor::<f32>::ones(&[1024])?)?;
    }
    let default = cuda_stack_runtime::current_stream()?;
    ensure!(
        !default.same_as(&s1) && !default.same_as(&s2),
        "scope not restored"
    );
    ensure!(
        t.to_vec()?.iter().all(|&v| v == 21.0),
        "values {:?}",
        &t.to_vec()?[..2]
    );
    let nested = cuda_stack_runtime::with_stream(&s1, || {
        cuda_stack_runtime::with_stream(&s2, cuda_stack_runtime::current_stream)
    })?;
    ensure!(nested.same_as(&s2), "innermost scope wins");
    Ok(())
}

/// Memory another library owns, borrowed: used by kernels and copies, and idle when the borrow
/// ends (dropping it waits for the work queued on it).
fn external_memory() -> TestResult {
    let ctx = Context::new(0)?;
    let owner = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let foreign = owner.clone_htod(&[1.0f32; 4096])?; // stands for another library's memory
    let user = ctx.new_stream()?;
    // SAFETY: the stream is `owner`'s handle, which outlives `borrowed_stream`.
    let borrowed_stream = unsafe { Stream::from_raw(&ctx, owner.as_raw())? };
    {
        // SAFETY: `foreign` holds 4096 f32s and outlives the borrow; nothing else touches it
        // while the borrow lives.
        let mut ext =
            unsafe { borrowed_stream.borrow_external::<f32>(foreign.as_raw_ptr(), foreign.len())? };
        let x = user.clone_htod(&[2.0f32; 4096])?;
        ops::axpy(&k, &user, 1.0f32, &x, &mut ext)?; // on another stream: ordered by events
                                                     // Graphs may not capture borrowed memory.
        let refused = ctx.capture(|cs| {
            ops::axpy(&k, cs, 1.0f32, &x, &mut ext).map_err(|e| {
                cuda_stack_driver::Error::Unsupported {
                    what: "axpy",
                    why: e.to_string(),
                }
            })
        });
        ensure!(
            refused.is_err(),
            "an external slice was captured into a graph"
        );
    } // drop waits for the kernel on `user`
    ensure!(
        user.query()?,
        "borrow ended while work on it was still queued"
    );
    ensure!(
        owner.clone_dtoh(&foreign)?.iter().all(|&v| v == 3.0),
        "external memory result"
    );
    Ok(())
}
