//! `train_digits`: a real data set, trained on the GPU end to end with `cuda-stack-nn` — scikit-learn's
//! handwritten digits (1,797 8 × 8 images, `examples/data/digits.csv.gz`, BSD-licensed; see
//! `examples/data/README.md`), embedded in the program at build time.
//!
//! A fixed-seed shuffle splits it 80 / 20 into train and held-out test sets; an MLP
//! `Linear(64, 128) → ReLU → Linear(128, 10)` is trained with `Adam(lr=1e-3)` on minibatches of
//! 64 (reshuffled each epoch from the same seed) under cross-entropy, with a progress bar; the
//! loss curve (mean training loss per epoch) is printed as a table and a chart, and the held-out
//! accuracy must reach 95 %. The whole training runs twice: both runs must give bit-identical
//! loss curves and parameters (every kernel sums in a fixed order: no atomics), so the result
//! is reproducible run to run.
//!
//! Run: `cargo run --release -p cuda-examples --bin train_digits` (`--quick`: 15 epochs, 90 %).

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_stack_nn::{
    class_targets, no_grad, Adam, AdamConfig, Linear, Module, Optimizer, Relu, Sequential, Var,
};
use cuda_stack_runtime::Tensor;
use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::json;
use std::io::Read;
use std::process::ExitCode;
use std::time::Instant;

/// The data file, as scikit-learn ships it (64 pixels 0..16 and a label per line).
const DIGITS_GZ: &[u8] = include_bytes!("../../data/digits.csv.gz");
const PIXELS: usize = 64;
const CLASSES: usize = 10;

/// Trains an MLP on scikit-learn's digits and reports held-out accuracy.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Training epochs.
    #[arg(long, default_value_t = 60)]
    epochs: usize,
    /// Minibatch size.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Seed of the split, the shuffles and the initial parameters.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("train_digits", || body(&args))
}

/// The images (scaled to 0..1) and labels.
struct Digits {
    x: Vec<f32>,
    y: Vec<usize>,
}

fn load() -> Result<Digits, Box<dyn std::error::Error>> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(DIGITS_GZ).read_to_string(&mut text)?;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let vals: Vec<f32> = line
            .split(',')
            .map(|v| v.trim().parse::<f32>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("digits.csv line {}: {e}", i + 1))?;
        if vals.len() != PIXELS + 1 {
            return Err(format!("digits.csv line {}: {} values, not 65", i + 1, vals.len()).into());
        }
        x.extend(vals[..PIXELS].iter().map(|p| p / 16.0));
        y.push(vals[PIXELS] as usize);
    }
    if y.len() != 1797 || y.iter().any(|&c| c >= CLASSES) {
        return Err(format!(
            "digits.csv: {} images (expected 1797) or a bad label",
            y.len()
        )
        .into());
    }
    Ok(Digits { x, y })
}

/// Rows `idx` of the data as a `[len, 64]` tensor and their targets.
fn gather(
    d: &Digits,
    idx: &[usize],
) -> Result<(Tensor<f32>, Vec<usize>), Box<dyn std::error::Error>> {
    let mut x = Vec::with_capacity(idx.len() * PIXELS);
    for &i in idx {
        x.extend_from_slice(&d.x[i * PIXELS..(i + 1) * PIXELS]);
    }
    let y = idx.iter().map(|&i| d.y[i]).collect();
    Ok((Tensor::from_vec(x, &[idx.len(), PIXELS])?, y))
}

/// One training run's results.
struct Trained {
    curve: Vec<f32>,
    accuracy: f64,
    params: Vec<Vec<f32>>,
    seconds: f64,
    steps: usize,
}

fn train(
    d: &Digits,
    train_idx: &[usize],
    test_idx: &[usize],
    args: &Args,
    epochs: usize,
    pb: Option<&ProgressBar>,
) -> Result<Trained, Box<dyn std::error::Error>> {
    let model = Sequential::<f32>::new()
        .append(Linear::new(PIXELS, 128, args.seed + 1)?)
        .append(Relu)
        .append(Linear::new(128, CLASSES, args.seed + 2)?);
    let mut opt = Adam::new(model.parameters(), AdamConfig::new(1e-3))?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(args.seed + 3);
    let mut order = train_idx.to_vec();
    let mut curve = Vec::with_capacity(epochs);
    let t0 = Instant::now();
    let mut steps = 0;
    for _ in 0..epochs {
        order.shuffle(&mut rng);
        // The epoch's losses are added on the device and read once per epoch.
        let mut total: Option<Tensor<f32>> = None;
        let batches = order.chunks(args.batch);
        let n_batches = batches.len();
        for chunk in batches {
            let (x, y) = gather(d, chunk)?;
            opt.zero_grad();
            let loss = model
                .forward(&Var::constant(x))?
                .cross_entropy(&class_targets(&y, CLASSES)?)?;
            loss.backward()?;
            opt.step()?;
            let l = loss.value();
            total = Some(match total {
                None => l,
                Some(t) => (&t + &l)?,
            });
            steps += 1;
        }
        let mean = total.ok_or("an epoch without batches")?.item()? / n_batches as f32;
        curve.push(mean);
        if let Some(pb) = pb {
            pb.set_message(format!("loss {mean:.4}"));
            pb.inc(1);
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let (xt, yt) = gather(d, test_idx)?;
    let logits = no_grad(|| model.forward(&Var::constant(xt)))?
        .value()
        .to_vec()?;
    let correct = logits
        .chunks(CLASSES)
        .zip(&yt)
        .filter(|(row, &label)| {
            let best = row
                .iter()
                .enumerate()
                .fold(
                    (0, f32::NEG_INFINITY),
                    |b, (c, &v)| if v > b.1 { (c, v) } else { b },
                );
            best.0 == label
        })
        .count();
    let params = model
        .parameters()
        .iter()
        .map(|p| p.value().to_vec())
        .collect::<Result<_, _>>()?;
    Ok(Trained {
        curve,
        accuracy: correct as f64 / yt.len() as f64,
        params,
        seconds,
        steps,
    })
}

/// A text chart of the loss curve: one row per epoch (at most 20 rows), a bar per value.
fn chart(curve: &[f32]) -> String {
    let max = curve.iter().cloned().fold(f32::MIN, f32::max).max(1e-9);
    let every = curve.len().div_ceil(20).max(1);
    let mut s = String::new();
    for (e, &l) in curve.iter().enumerate() {
        if e % every == 0 || e + 1 == curve.len() {
            let bar = "█".repeat(((l / max) * 50.0).round() as usize);
            s.push_str(&format!("  epoch {:>3}  {l:>7.4}  {bar}\n", e + 1));
        }
    }
    s
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    cuda_stack_runtime::set_device(q.device)?;
    if args.batch == 0 || args.epochs == 0 {
        return Err("--batch and --epochs must be at least 1".into());
    }
    let epochs = q.pick(15, args.epochs);
    let target = if q.quick { 0.90 } else { 0.95 };
    let d = load()?;
    let mut idx: Vec<usize> = (0..d.y.len()).collect();
    idx.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(args.seed));
    let n_train = d.y.len() * 4 / 5;
    let (train_idx, test_idx) = idx.split_at(n_train);
    out.say(format!(
        "train_digits: scikit-learn's handwritten digits, {} images of 8×8 (embedded, \
         examples/data/digits.csv.gz); split {} train / {} held out (seed {})\n\
         model Linear(64, 128) → ReLU → Linear(128, 10), Adam(lr=1e-3), batch {}, {epochs} \
         epochs, cross-entropy",
        d.y.len(),
        train_idx.len(),
        test_idx.len(),
        args.seed,
        args.batch
    ));

    let pb = if q.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(epochs as u64)
    };
    pb.set_style(
        ProgressStyle::with_template("  training {bar:30} epoch {pos}/{len} {msg}")
            .map_err(|e| e.to_string())?,
    );
    let first = train(&d, train_idx, test_idx, args, epochs, Some(&pb))?;
    pb.finish_and_clear();
    let second = train(&d, train_idx, test_idx, args, epochs, None)?;

    out.say(format!(
        "\nloss curve (mean training loss per epoch):\n{}",
        chart(&first.curve)
    ));
    let same_curve = first
        .curve
        .iter()
        .zip(&second.curve)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    let same_params = first.params.iter().zip(&second.params).all(|(a, b)| {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    });
    out.say(format!(
        "held-out accuracy: {:.2} % ({} images); {} steps in {:.2} s ({:.0} µs per step, \
         including the host's batch gathering and copies)",
        first.accuracy * 100.0,
        test_idx.len(),
        first.steps,
        first.seconds,
        first.seconds / first.steps as f64 * 1e6
    ));
    out.say(format!(
        "reproducible: a second run from the same seed gives {} loss curve and {} parameters",
        if same_curve {
            "a bit-identical"
        } else {
            "a DIFFERENT"
        },
        if same_params {
            "bit-identical"
        } else {
            "DIFFERENT"
        },
    ));
    out.put("epochs", json!(epochs));
    out.put("loss_curve", json!(first.curve));
    out.put("test_accuracy", json!(first.accuracy));
    out.put("train_seconds", json!(first.seconds));
    out.put("reproducible", json!(same_curve && same_params));
    out.finish();
    if !(same_curve && same_params) {
        return Err("two runs from the same seed differ".into());
    }
    if first.accuracy < target {
        return Err(format!(
            "held-out accuracy {:.2} % is below the {:.0} % target",
            first.accuracy * 100.0,
            target * 100.0
        )
        .into());
    }
    Ok(())
}
