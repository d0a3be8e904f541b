//! Data-parallel training on one rank and on N ranks: hooks, set_grad, a missing gradient, a
//! rank that refuses.

use super::*;

pub(crate) fn hooks() -> TestResult {
    let p = Var::parameter(Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?);
    let c = Var::constant(Tensor::from_vec(vec![2.0f32, 3.0, 4.0], &[3])?);
    let seen: Arc<Mutex<Vec<Vec<f32>>>> = Arc::default();
    let log = seen.clone();
    let h = p.register_grad_ready_hook(move |g| {
        log.lock().unwrap().push(g.to_vec()?);
        Ok(())
    })?;
    p.mul(&c)?.sum_all()?.backward()?;
    // Used twice in one graph, accumulated onto the first gradient: the hook sees the sum, once.
    p.mul(&c)?.add(&p)?.sum_all()?.backward()?;
    let got = seen.lock().unwrap().clone();
    ensure!(
        got == [vec![2.0, 3.0, 4.0], vec![5.0, 7.0, 9.0]],
        "hook saw {got:?}"
    );
    drop(h);
    p.sum_all()?.backward()?;
    ensure!(seen.lock().unwrap().len() == 2, "a removed hook fired");
    let _e = p.register_grad_ready_hook(|_| {
        Err(NnError::Invalid {
            what: "test hook",
            problem: "refuses".into(),
        })
    })?;
    let r = p.sum_all()?.backward();
    ensure!(
        matches!(
            r,
            Err(NnError::Invalid {
                what: "test hook",
                ..
            })
        ),
        "{r:?}"
    );
    ensure!(
        matches!(
            p.mul(&c)?.register_grad_ready_hook(|_| Ok(())),
            Err(NnError::Invalid { .. })
        ),
        "a hook on a computed value was accepted"
    );
    ensure!(
        matches!(
            c.register_grad_ready_hook(|_| Ok(())),
            Err(NnError::NotRequiringGrad { .. })
        ),
        "a hook on a constant was accepted"
    );
    Ok(())
}

pub(crate) fn set_grad() -> TestResult {
    let p = Var::parameter(Tensor::from_vec(vec![1.0f32, 2.0], &[2])?);
    p.set_grad(Some(Tensor::from_vec(vec![0.5f32, 0.25], &[2])?))?;
    ensure!(
        p.grad()?.unwrap().to_vec()? == [0.5, 0.25],
        "set_grad value"
    );
    ensure!(
        matches!(
            p.set_grad(Some(Tensor::zeros(&[3])?)),
            Err(NnError::Invalid { .. })
        ),
        "a gradient of the wrong shape was accepted"
    );
    p.set_grad(None)?;
    ensure!(p.grad()?.is_none(), "set_grad(None)");
    Ok(())
}

/// Held by each test that runs communicators over several GPUs: the test harness runs tests on
/// parallel threads, and NCCL kernels of two communicators over the same GPUs, queued in
/// different orders on each, may wait for each other for good (NCCL's documented hazard).
pub(crate) fn one_multi_rank_test_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static MULTI_RANK: Mutex<()> = Mutex::new(());
    MULTI_RANK.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn single_comm() -> Result<Communicator, Box<dyn std::error::Error>> {
    let id = UniqueId::new()?;
    let cfg = CommConfig::with_timeout(Some(Duration::from_secs(60)));
    Ok(Communicator::init_rank(&id, 0, 1, 0, &cfg)?)
}

pub(crate) fn one_rank() -> TestResult {
    set_device(0)?;
    let (want_loss, want_params) = plain(GLOBAL_ROWS)?;
    // Small buckets (several per model) and one bucket for everything.
    for bucket_bytes in [1024, 25 << 20] {
        let (loss, params) = data_parallel(single_comm()?, GLOBAL_ROWS, bucket_bytes)?;
        close("loss curve", &loss, &want_loss, 1e-6)?;
        for (i, (p, w)) in params.iter().zip(&want_params).enumerate() {
            close(&format!("parameter {i}"), p, w, 1e-6)?;
        }
        eprintln!(
            "bucket {bucket_bytes} B: loss {:.5} -> {:.5}, bit-identical: {}",
            loss[0],
            loss[STEPS - 1],
            loss == want_loss
        );
    }
    ensure!(
        want_loss[STEPS - 1] < want_loss[0],
        "the model did not learn: {want_loss:?}"
    );
    Ok(())
}

pub(crate) fn missing_grad() -> TestResult {
    set_device(0)?;
    let used = Var::parameter(Tensor::from_vec(vec![1.0f32; 4], &[4])?);
    let unused = Var::parameter(Tensor::from_vec(vec![1.0f32; 2], &[2])?);
    let ddp = DataParallel::new(
        vec![used.clone(), unused.clone()],
        single_comm()?,
        DataParallelConfig::default(),
    )?;
    used.sum_all()?.backward()?;
    let r = ddp.finish_gradients();
    ensure!(
        matches!(&r, Err(NnError::Invalid { problem, .. }) if problem.contains("parameter 1")),
        "{r:?}"
    );
    // The next step works once every parameter takes part.
    used.zero_grad();
    used.sum_all()?.add(&unused.sum_all()?)?.backward()?;
    ddp.finish_gradients()?;
    ensure!(
        unused.grad()?.unwrap().to_vec()? == [1.0, 1.0],
        "gradient after recovery"
    );
    ensure!(
        matches!(
            DataParallel::new(
                vec![used.clone(), used],
                single_comm()?,
                DataParallelConfig::default()
            ),
            Err(NnError::Invalid { .. })
        ),
        "a duplicated parameter was accepted"
    );
    Ok(())
}

pub(crate) fn n_ranks() -> TestResult {
    let _alone = one_multi_rank_test_at_a_time();
    let comms =
        CommGroup::all(&CommConfig::with_timeout(Some(Duration::from_secs(60))))?.into_comms();
    let n = comms.len();
    let rows = 64 * n;
    set_device(0)?;
    let (want_loss, want_params) = plain(rows)?;
    // 4096 B: the first layer's weight fills a bucket alone (reduced in its own gradient), the
    // rest share one; 16 B: every parameter alone; 25 MiB: one bucket of all, copied into it.
    let mut comms = comms;
    for bucket_bytes in [4096, 16, 25 << 20] {
        let handles: Vec<_> = comms
            .iter()
            .map(|c| {
                let c = c.clone();
                std::thread::spawn(move || {
                    data_parallel(c, rows, bucket_bytes).map_err(|e| e.to_string())
                })
            })
            .collect();
        let mut results = Vec::new();
        for h in handles {
            results.push(h.join().map_err(|_| "a rank panicked")??);
        }
        for (r, (loss, params)) in results.iter().enumerate() {
            close(
                &format!("buckets of {bucket_bytes} B: rank {r} global loss curve"),
                loss,
                &want_loss,
                1e-4,
            )?;
            for (i, (p, w)) in params.iter().zip(&want_params).enumerate() {
                close(
                    &format!("buckets of {bucket_bytes} B: rank {r} parameter {i}"),
                    p,
                    w,
                    1e-4,
                )?;
            }
        }
        eprintln!(
            "{n} GPUs, buckets of {bucket_bytes} B: loss {:.5} -> {:.5} (one GPU: {:.5} -> {:.5})",
            results[0].0[0],
            results[0].0[STEPS - 1],
            want_loss[0],
            want_loss[STEPS - 1]
        );
    }
    comms.clear();
    Ok(())
}

/// One thread per GPU, but rank 1 builds its replica on GPU 0 (its thread never set its device:
/// the `dp_train` hang). Rank 1 refuses its parameters; rank 0 must not wait in the parameter
/// broadcast for a rank that will never come: both fail within seconds, rank 0 naming rank 1.
pub(crate) fn refusing_rank() -> TestResult {
    let _alone = one_multi_rank_test_at_a_time();
    let config = CommConfig::with_timeout(Some(Duration::from_secs(120)));
    let comms = CommGroup::new(&[0, 1], &config)?.into_comms();
    let start = std::time::Instant::now();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || -> Result<(), String> {
                if c.rank() == 0 {
                    set_device(0).map_err(|e| e.to_string())?;
                } // rank 1 stays on this thread's default, GPU 0: wrong for its communicator
                let m = model(3).map_err(|e| e.to_string())?;
                DataParallel::new(m.parameters(), c, DataParallelConfig::default())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    let results: Vec<Result<(), String>> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
        .collect();
    let took = start.elapsed();
    ensure!(
        took < Duration::from_secs(30),
        "the ranks took {took:?} to fail (a wait for the timeout): {results:?}"
    );
    ensure!(
        matches!(&results[1], Err(e) if e.contains("cuda:0") && e.contains("cuda:1")),
        "rank 1's own error: {:?}",
        results[1]
    );
    ensure!(
        matches!(&results[0], Err(e) if e.contains("rank 1 refused")),
        "rank 0 must fail at once, naming rank 1: {:?}",
        results[0]
    );
    Ok(())
}
