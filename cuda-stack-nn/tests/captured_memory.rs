//! A captured training step's memory: the caching allocator's graph-private pool lets a
//! capture reuse the temporaries it frees, so a captured step holds about an eager step's peak
//! of temporaries, not their sum; and the replays still match eager steps bit for bit.
//!
//! One test per binary: it measures the device's free memory, which other tests running at the
//! same time would disturb.

use cuda_stack_nn::{
    class_targets, Adam, AdamConfig, CapturedStep, Linear, Module, NnError, Optimizer, Relu,
    Sequential, Var,
};
use cuda_stack_runtime::{Runtime, Tensor};
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![gpu(
        "a_captured_mlp_step_needs_the_eager_peak_not_the_sum_of_its_temporaries",
        captured_peak,
    )]);
}

const MIB: usize = 1 << 20;
const WIDTH: usize = 512;
const BATCH: usize = 4096;
const LAYERS: usize = 16;

/// A deep MLP: `LAYERS` × (Linear WIDTH → WIDTH, ReLU), then Linear WIDTH → 10. Each
/// activation is BATCH × WIDTH f32 = 8 MiB, each weight 1 MiB.
fn model() -> Result<(Sequential<f32>, Adam<f32>), NnError> {
    let mut m = Sequential::<f32>::new();
    for i in 0..LAYERS {
        m = m
            .append(Linear::new(WIDTH, WIDTH, 100 + i as u64)?)
            .append(Relu);
    }
    m = m.append(Linear::new(WIDTH, 10, 7)?);
    let opt = Adam::new(m.parameters(), AdamConfig::new(1e-3))?;
    Ok((m, opt))
}

fn step(
    m: &Sequential<f32>,
    o: &mut Adam<f32>,
    x: &Var<f32>,
    t: &Tensor<i32>,
) -> Result<Var<f32>, NnError> {
    o.zero_grad();
    let loss = m.forward(x)?.cross_entropy(t)?;
    loss.backward()?;
    o.step()?;
    Ok(loss)
}

fn captured_peak() -> TestResult {
    let labels: Vec<usize> = (0..BATCH).map(|i| (i * 7) % 10).collect();
    let t = class_targets(&labels, 10)?;
    let batches = [
        Tensor::<f32>::randn(&[BATCH, WIDTH], 5)?,
        Tensor::<f32>::randn(&[BATCH, WIDTH], 6)?,
    ];
    let rt = Runtime::get(batches[0].device())?;
    let ctx = rt.context().clone();
    let steps = 4;

    // Eager: `steps` steps; the second one's temporaries measured.
    let (ma, mut oa) = model()?;
    let mut eager_temporaries = 0;
    let mut eager_loss = 0.0f32;
    for i in 0..steps {
        let x = Var::constant(batches[i % 2].clone());
        if i == 1 {
            ctx.synchronize()?;
            let rest = cuda_stack_runtime::memory_allocated()?;
            cuda_stack_runtime::reset_peak_stats()?;
            let loss = step(&ma, &mut oa, &x, &t)?;
            eager_loss = loss.value().item()?;
            eager_temporaries = cuda_stack_runtime::max_memory_allocated()? - rest;
        } else {
            eager_loss = step(&ma, &mut oa, &x, &t)?.value().item()?;
        }
    }

    // Captured: one eager step, then the step captured and replayed `steps - 1` times.
    let (mb, mut ob) = model()?;
    let x = Var::constant(Tensor::<f32>::zeros(&[BATCH, WIDTH])?);
    x.copy_from_(&batches[0])?;
    step(&mb, &mut ob, &x, &t)?;
    // The eager step's cached blocks belong to the eager stream, which the capture cannot use.
    cuda_stack_runtime::empty_cache()?;
    ctx.synchronize()?;
    let (free_before, _) = ctx.mem_get_info()?;
    let rest = cuda_stack_runtime::memory_allocated()?;
    cuda_stack_runtime::reset_peak_stats()?;
    let hits_before = {
        let s = cuda_stack_runtime::memory_stats()?;
        s.small.cache_hits + s.large.cache_hits
    };
    let (graph, loss) = CapturedStep::capture(&mut ob, |o| step(&mb, o, &x, &t))?;
    ctx.synchronize()?;
    let (free_after, _) = ctx.mem_get_info()?;
    let hits = {
        let s = cuda_stack_runtime::memory_stats()?;
        s.small.cache_hits + s.large.cache_hits
    } - hits_before;
    // Measured as the eager step's temporaries are (the allocator's peak of allocated bytes):
    // the driver's free memory also moves by its allocation granularity and by what the capture
    // stream's libraries reserve, which the eager figure leaves out; it is printed beside.
    let captured = cuda_stack_runtime::max_memory_allocated()? - rest;
    let driver_delta = free_before.saturating_sub(free_after);
    // Without reuse the capture would hold every temporary: the 2 × LAYERS saved activations
    // (256 MiB) plus as many again for their gradients. With it: the eager peak, plus one set of
    // gradients (16 MiB; the eager ones are freed into the eager stream's cache), plus slack for
    // library workspaces and the executable graph.
    let bound = eager_temporaries + 16 * MIB + 64 * MIB;
    ensure!(
        captured <= bound,
        "the captured step's temporaries peak at {} MiB (driver memory taken: {} MiB); an \
         eager step's peak at {} MiB (bound {} MiB; {hits} cache hits during the capture)",
        captured / MIB,
        driver_delta / MIB,
        eager_temporaries / MIB,
        bound / MIB
    );
    eprintln!(
        "captured step: temporaries peak {} MiB, driver memory taken {} MiB; eager peak {} MiB; \
         {hits} cache hits during the capture",
        captured / MIB,
        driver_delta / MIB,
        eager_temporaries / MIB
    );
    ensure!(hits > 0, "no block was reused during the capture");
    for i in 1..steps {
        x.copy_from_(&batches[i % 2])?;
        graph.replay()?;
    }
    graph.synchronize()?;
    let graph_loss = loss.value().item()?;
    ensure!(
        graph_loss.to_bits() == eager_loss.to_bits(),
        "replayed loss {graph_loss} vs eager {eager_loss}"
    );
    for (i, (a, b)) in ma.parameters().iter().zip(mb.parameters()).enumerate() {
        let (va, vb) = (a.value().to_vec()?, b.value().to_vec()?);
        ensure!(
            va.iter().zip(&vb).all(|(x, y)| x.to_bits() == y.to_bits()),
            "parameter {i} differs between eager and replayed steps"
        );
    }
    Ok(())
}
