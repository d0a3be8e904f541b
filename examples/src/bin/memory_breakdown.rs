//! `memory_breakdown`: seed 002, section 5 ("Understanding GPU Memory Usage"), made runnable.
//!
//! For the small MLP 784 → 512 → 10 at batch 256, allocates every consumer the seed lists, for
//! real, through `cuda-runtime-lite`'s caching allocator, and measures each one's bytes as the
//! change in `memory_allocated()`:
//!
//! 1. **parameters** (W1, b1, W2, b2);
//! 2. **gradients** (one per parameter: ×1);
//! 3. **optimizer state** (Adam's two moments per parameter: ×2);
//! 4. **activations** (input, pre-activation, hidden, logits, probabilities: what the backward
//!    pass reads), measured again at batch 1024 to show they grow with the batch;
//! 5. **workspace** (the scratch the kernels need: the bias-gradient partial sums of
//!    `bias_relu_bwd` and a ones-vector for the output bias);
//! 6. the **caching allocator**: after the activations are freed, `memory_allocated` drops but
//!    `memory_reserved` (what `nvidia-smi` shows) does not, until `empty_cache()`.
//!
//! Each category's measured bytes are checked against the allocator's size classes (requests are
//! rounded to 512 B, or 2 MiB above 1 MiB). Then one real forward pass runs on these buffers
//! (`relu(X @ W1 + b1) @ W2 + b2`, softmax), checked against an f64 CPU computation.
//!
//! Run: `cargo run --release -p cuda-examples --bin memory_breakdown [-- --quick] [--device N] [--json]`

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::say;
use cuda_kernels::ops::{self, Transpose};
use cuda_kernels::Kernels;
use cuda_runtime_lite::caching::{format_bytes, size_class};
use cuda_runtime_lite::{self as rt, CachedBuffer, Runtime};
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Seed 002 section 5: where GPU memory goes for a small MLP")]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    exit::run("memory_breakdown", || body(Args::parse()))
}

const IN: usize = 784;
const HID: usize = 512;
const OUT: usize = 10;
const BATCH: usize = 256;

type Buf = CachedBuffer<f32>;

/// One category: its buffers (kept alive) and what it cost.
struct Category {
    name: &'static str,
    bufs: Vec<Buf>,
    requested: usize,
    allocated: usize,
}

/// Allocates zeroed buffers of these lengths and measures `memory_allocated`'s change; checks it
/// against the allocator's size classes.
fn allocate(name: &'static str, lens: &[usize]) -> Result<Category, Box<dyn std::error::Error>> {
    let before = rt::memory_allocated()?;
    let bufs = lens
        .iter()
        .map(|&n| rt::malloc_zeros::<f32>(n))
        .collect::<Result<Vec<_>, _>>()?;
    let allocated = rt::memory_allocated()? - before;
    let requested: usize = lens.iter().map(|n| n * 4).sum();
    let expected: usize = lens
        .iter()
        .map(|n| size_class(n * 4).map_or(0, |c| c.0))
        .sum();
    if allocated != expected {
        return Err(format!(
            "{name}: memory_allocated grew by {allocated} B, but the size classes of the \
             requests ({requested} B) add up to {expected} B"
        )
        .into());
    }
    Ok(Category {
        name,
        bufs,
        requested,
        allocated,
    })
}

/// Activation lengths at batch `b`: input X, Z1 = X @ W1, A1 = relu(Z1 + b1), logits, probs.
fn activation_lens(b: usize) -> [usize; 5] {
    [b * IN, b * HID, b * HID, b * OUT, b * OUT]
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    rt::set_device(args.common.device)?;
    let runtime = Runtime::current()?;
    let (ctx, s) = (runtime.context(), runtime.default_stream());
    let k = Kernels::get(ctx)?; // loaded first: module memory is not the allocator's
    runtime.synchronize()?;
    let free_start = ctx.mem_get_info()?.0;
    let start_alloc = rt::memory_allocated()?;
    say!(
        q,
        "memory_breakdown on {}: MLP {IN} -> {HID} -> {OUT}, f32, batch {BATCH}, Adam",
        runtime.device().name()?
    );

    let param_lens = [IN * HID, HID, HID * OUT, OUT];
    let mut params = allocate("1. parameters (W1, b1, W2, b2)", &param_lens)?;
    let grads = allocate("2. gradients (one per parameter)", &param_lens)?;
    let adam_lens: Vec<usize> = param_lens.iter().chain(&param_lens).copied().collect();
    let adam = allocate("3. optimizer state (Adam m, v)", &adam_lens)?;
    let mut acts = allocate("4. activations, batch 256", &activation_lens(BATCH))?;
    let parts = ops::bias_relu_bwd_parts(BATCH, HID, ctx.limits().sm_count) as usize;
    let mut work = allocate(
        "5. workspace (bias-grad partials, ones)",
        &[parts * HID, BATCH],
    )?;
    runtime.synchronize()?;
    let (alloc_all, reserved_all) = (rt::memory_allocated()?, rt::memory_reserved()?);
    let free_all = ctx.mem_get_info()?.0;
    if alloc_all - start_alloc
        != params.allocated + grads.allocated + adam.allocated + acts.allocated + work.allocated
    {
        return Err("the categories do not add up to memory_allocated".into());
    }
    if grads.allocated != params.allocated || adam.allocated != 2 * params.allocated {
        return Err("gradients must take 1× and Adam 2× the parameters' memory".into());
    }

    // One forward pass on these buffers, checked on the CPU.
    let worst = forward_check(&k, s, &mut params, &mut acts, &mut work)?;

    // End of a training step: activations freed. Allocated drops, reserved stays.
    let (acts_requested, acts_allocated, acts_name) = (acts.requested, acts.allocated, acts.name);
    drop(acts.bufs);
    runtime.synchronize()?;
    let (alloc_freed, reserved_freed) = (rt::memory_allocated()?, rt::memory_reserved()?);
    let free_freed = ctx.mem_get_info()?.0;
    if reserved_freed != reserved_all || alloc_freed + acts_allocated != alloc_all {
        return Err(
            "freeing the activations must lower allocated by their bytes and keep \
                    reserved"
                .into(),
        );
    }

    // Activations grow with the batch: the same five tensors at batch 1024.
    let acts_1024 = allocate("4'. activations, batch 1024", &activation_lens(4 * BATCH))?;
    drop(acts_1024.bufs);

    // Everything freed, then empty_cache.
    drop((params.bufs, grads.bufs, adam.bufs, work.bufs));
    rt::empty_cache()?;
    runtime.synchronize()?;
    let (alloc_end, reserved_end) = (rt::memory_allocated()?, rt::memory_reserved()?);
    let free_end = ctx.mem_get_info()?.0;
    if reserved_end != alloc_end {
        return Err("after empty_cache, reserved must equal allocated".into());
    }

    let cats: [(&str, usize, usize, usize); 6] = [
        (
            params.name,
            param_lens.len(),
            params.requested,
            params.allocated,
        ),
        (
            grads.name,
            param_lens.len(),
            grads.requested,
            grads.allocated,
        ),
        (adam.name, adam_lens.len(), adam.requested, adam.allocated),
        (acts_name, 5, acts_requested, acts_allocated),
        (acts_1024.name, 5, acts_1024.requested, acts_1024.allocated),
        (work.name, 2, work.requested, work.allocated),
    ];
    if q {
        let rows: Vec<_> = cats
            .iter()
            .map(|c| {
                serde_json::json!({
                    "category": c.0, "buffers": c.1, "requested": c.2, "allocated": c.3,
                })
            })
            .collect();
        let j = serde_json::json!({
            "program": "memory_breakdown",
            "categories": rows,
            "allocated_all": alloc_all, "reserved_all": reserved_all,
            "allocated_after_freeing_activations": alloc_freed,
            "reserved_after_freeing_activations": reserved_freed,
            "reserved_after_empty_cache": reserved_end,
            "device_free_start": free_start, "device_free_all": free_all,
            "device_free_after_freeing_activations": free_freed, "device_free_end": free_end,
            "forward_max_abs_error": worst,
            "verified": true,
        });
        println!("{j}");
        return Ok(());
    }
    let p = params.allocated as f64;
    let mut t = Table::new(&[
        "category",
        "buffers",
        "requested",
        "memory_allocated Δ",
        "× parameters",
    ]);
    for c in cats {
        t.row(&[
            c.0.into(),
            c.1.to_string(),
            format_bytes(c.2),
            format_bytes(c.3),
            format!("{:.2}", c.3 as f64 / p),
        ]);
    }
    println!();
    t.print();
    let used = |free: usize| format_bytes(free_start.saturating_sub(free));
    println!(
        "everything live (batch 256): allocated {}, reserved {}; the device's used memory grew by \
         {} (cuMemGetInfo)",
        format_bytes(alloc_all - start_alloc),
        format_bytes(reserved_all),
        used(free_all)
    );
    println!(
        "activations freed (end of step): allocated {}, reserved still {} — nvidia-smi still \
         shows {} in use",
        format_bytes(alloc_freed - start_alloc),
        format_bytes(reserved_freed),
        used(free_freed)
    );
    println!(
        "everything freed + empty_cache(): allocated {}, reserved {}, device use back to {}",
        format_bytes(alloc_end - start_alloc),
        format_bytes(reserved_end),
        used(free_end)
    );
    println!(
        "\nParameters + gradients + Adam = 4× the parameters. Activations grow with the batch \
         ({:.1}× the bytes requested at 4× the batch;\nthe allocator's 2 MiB rounding of large \
         blocks makes it {:.2}× allocated). Small tensors round up to 512 B (b2: 40 B).\nOne \
         forward pass on these buffers matches an f64 CPU computation (max abs error of the \
         probabilities {worst:.1e}).",
        acts_1024.requested as f64 / acts_requested as f64,
        acts_1024.allocated as f64 / acts_allocated as f64
    );
    Ok(())
}

/// `probs = softmax(relu(X @ W1 + b1) @ W2 + b2)` on the categories' buffers (the output bias is
/// added as the rank-1 product `ones[B, 1] @ b2[1, 10]`, then the GEMM accumulates onto it), with
/// random parameters and input; returns the worst absolute error of `probs` against f64.
fn forward_check(
    k: &Kernels,
    s: &cuda_driver::Stream,
    params: &mut Category,
    acts: &mut Category,
    work: &mut Category,
) -> Result<f64, Box<dyn std::error::Error>> {
    use Transpose::NoTrans as N;
    let [w1, b1, w2, b2] = &mut params.bufs[..] else {
        return Err("expected 4 parameter buffers".into());
    };
    let [x, z1, a1, logits, probs] = &mut acts.bufs[..] else {
        return Err("expected 5 activation buffers".into());
    };
    let ones = &mut work.bufs[1];
    let randn = |n: usize, seed: u64, sc: f32| -> Vec<f32> {
        cuda_kernels::reference::fill_normal(n, seed, 0)
            .into_iter()
            .map(|v| v * sc)
            .collect()
    };
    let h_w1 = randn(IN * HID, 41, 1.0 / (IN as f32).sqrt());
    let h_b1 = randn(HID, 42, 0.1);
    let h_w2 = randn(HID * OUT, 43, 1.0 / (HID as f32).sqrt());
    let h_b2 = randn(OUT, 44, 0.1);
    let h_x = randn(BATCH * IN, 45, 1.0);
    for (h, d) in [
        (&h_w1, &mut *w1),
        (&h_b1, b1),
        (&h_w2, w2),
        (&h_b2, b2),
        (&h_x, x),
    ] {
        s.memcpy_htod(h, &mut **d)?;
    }
    ops::fill(k, s, ones, 1.0)?;
    ops::sgemm(
        k, s, N, N, BATCH, HID, IN, 1.0, x, IN, w1, HID, 0.0, z1, HID,
    )?;
    ops::bias_relu_fwd(k, s, z1, b1, 1.0, a1, BATCH, HID)?;
    ops::sgemm(
        k, s, N, N, BATCH, OUT, 1, 1.0, ones, 1, b2, OUT, 0.0, logits, OUT,
    )?;
    ops::sgemm(
        k, s, N, N, BATCH, OUT, HID, 1.0, a1, HID, w2, OUT, 1.0, logits, OUT,
    )?;
    ops::softmax_rows(k, s, logits, probs, BATCH, OUT)?;
    let got = s.clone_dtoh(&**probs)?;

    let mut worst = 0.0f64;
    for r in 0..BATCH {
        let hidden: Vec<f64> = (0..HID)
            .map(|c| {
                let z: f64 = (0..IN)
                    .map(|i| f64::from(h_x[r * IN + i]) * f64::from(h_w1[i * HID + c]))
                    .sum();
                (z + f64::from(h_b1[c])).max(0.0)
            })
            .collect();
        let lg: Vec<f64> = (0..OUT)
            .map(|o| {
                (0..HID)
                    .map(|j| hidden[j] * f64::from(h_w2[j * OUT + o]))
                    .sum::<f64>()
                    + f64::from(h_b2[o])
            })
            .collect();
        let mx = lg.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let den: f64 = lg.iter().map(|v| (v - mx).exp()).sum();
        for o in 0..OUT {
            let want = (lg[o] - mx).exp() / den;
            worst = worst.max((f64::from(got[r * OUT + o]) - want).abs());
        }
    }
    if worst.is_nan() || worst > 1e-5 {
        return Err(format!(
            "the forward pass's probabilities differ from the f64 CPU computation by {worst:.2e} \
             (> 1e-5)"
        )
        .into());
    }
    Ok(worst)
}
