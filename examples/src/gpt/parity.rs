//! Step-for-step parity with PyTorch (issue 33; llm.c's `test_gpt2` idea): the model loaded
//! with the weights `tools/torch_gpt.py` wrote, run on its batch, compared with the loss,
//! the gradients and the following AdamW steps' losses PyTorch computed.
//!
//! The folder holds what `tools/torch_gpt.py --out DIR` writes: `model.safetensors` (initial
//! weights, nanoGPT's names), `batch.safetensors` (`x`, `y`), `grads.safetensors` (PyTorch's
//! step-0 gradients, f32), `expected.json` (the configuration, AdamW's settings, the loss
//! before each step). PyTorch runs in f32 without TF32; this model runs in the compute dtype
//! `U` on f32 parameters, so f32 is compared tightly and bf16 loosely ([`ParityTolerances`]).
//! `train_gpt --check DIR` prints a [`ParityReport`]; the GPU test `gpt_parity` runs it on the
//! committed fixture `examples/tests/fixtures/gpt-tiny` (no Python needed).

use super::{Gpt, GptConfig};
use cuda_stack_nn::checkpoint::Checkpoint;
use cuda_stack_nn::{Adam, AdamConfig, GradElement, Optimizer};
use cuda_stack_runtime::AttentionElement;
use serde_json::Value;
use std::error::Error;
use std::path::Path;

type Res<T> = Result<T, Box<dyn Error>>;

/// How close this model must come to PyTorch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParityTolerances {
    /// The step-0 loss, relative.
    pub loss: f64,
    /// Each parameter's step-0 gradient: max |ours − PyTorch's| over the parameter's largest
    /// |gradient| (GEMM and reduction orders differ, so gradients agree to rounding
    /// accumulated through the layers, not bit for bit).
    pub grad: f64,
    /// The loss before each later AdamW step, relative.
    pub steps: f64,
}

impl ParityTolerances {
    /// f32 compute against PyTorch's f32: float rounding only.
    pub const F32: ParityTolerances = ParityTolerances {
        loss: 1e-5,
        grad: 1e-3,
        steps: 1e-4,
    };
    /// bf16 compute (f32 parameters and optimizer) against PyTorch's f32: bf16 keeps 8
    /// significant bits (a relative step of 2⁻⁸ ≈ 0.4 %), rounded again at every op.
    pub const BF16: ParityTolerances = ParityTolerances {
        loss: 1e-2,
        grad: 5e-2,
        steps: 2e-2,
    };
}

/// One parameter's step-0 gradient against PyTorch's.
#[derive(Debug, Clone)]
pub struct GradComparison {
    /// nanoGPT's name.
    pub name: String,
    /// max |ours − PyTorch's| / max |PyTorch's|.
    pub relative: f64,
    /// max |PyTorch's gradient|.
    pub scale: f64,
}

/// What the comparison found.
#[derive(Debug, Clone)]
pub struct ParityReport {
    /// The model's shapes (from `expected.json`).
    pub config: GptConfig,
    /// The batch's shape `[B, T]`.
    pub batch_shape: Vec<usize>,
    /// The PyTorch version and device that wrote the folder.
    pub torch: String,
    /// Step 0: (ours, PyTorch's) loss.
    pub step0_loss: (f64, f64),
    /// Every parameter's gradient comparison, the worst first.
    pub grads: Vec<GradComparison>,
    /// Steps 1..: (ours, PyTorch's) loss before each step.
    pub step_losses: Vec<(f64, f64)>,
    /// Every comparison outside its tolerance, in words (empty: parity holds).
    pub failures: Vec<String>,
}

impl ParityReport {
    /// The step-0 loss's relative difference.
    pub fn step0_relative(&self) -> f64 {
        rel(self.step0_loss.0, self.step0_loss.1)
    }

    /// The largest relative difference of the later steps' losses (0 without later steps).
    pub fn worst_step_relative(&self) -> f64 {
        self.step_losses
            .iter()
            .fold(0.0, |m, &(g, w)| f64::max(m, rel(g, w)))
    }

    /// Whether every comparison is within its tolerance.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

fn rel(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs().max(f64::MIN_POSITIVE)
}

fn num(v: &Value, key: &str) -> Res<f64> {
    v[key]
        .as_f64()
        .ok_or_else(|| format!("expected.json has no number `{key}`").into())
}

/// The configuration `expected.json` names (dropout 0: the comparison is deterministic).
fn config_of(exp: &Value) -> Res<GptConfig> {
    let c = &exp["config"];
    let size = |k: &str| num(c, k).map(|v| v as usize);
    Ok(GptConfig {
        vocab: size("vocab")?,
        block_size: size("block_size")?,
        n_layer: size("n_layer")?,
        n_head: size("n_head")?,
        n_embd: size("n_embd")?,
        dropout: 0.0,
    })
}

/// Compares this model, computing in `U` on f32 parameters (`fused_mlp`: the MLP as
/// [`cuda_stack_nn::Var::mlp_gelu`]), with what `tools/torch_gpt.py` wrote into `dir`. An
/// unreadable or inconsistent folder is an error; a comparison outside `tol` is a
/// [`ParityReport::failures`] entry.
pub fn compare_with_torch<U: GradElement + AttentionElement + 'static>(
    dir: &Path,
    tol: ParityTolerances,
    fused_mlp: bool,
) -> Res<ParityReport> {
    let json = dir.join("expected.json");
    let text =
        std::fs::read_to_string(&json).map_err(|e| format!("reading {}: {e}", json.display()))?;
    let exp: Value = serde_json::from_str(&text)?;
    let config = config_of(&exp)?;
    let losses: Vec<f64> = exp["losses"]
        .as_array()
        .ok_or("expected.json has no `losses`")?
        .iter()
        .map(|v| {
            v.as_f64()
                .ok_or("expected.json: a loss that is not a number")
        })
        .collect::<Result<_, _>>()?;
    let want0 = *losses.first().ok_or("no losses in expected.json")?;

    let model = Gpt::<f32>::new(config, 0)?;
    model.set_fused_mlp(fused_mlp);
    let named = model.named_parameters();
    Checkpoint::open(dir.join("model.safetensors"))?.load_into(&named)?;
    let batch = Checkpoint::open(dir.join("batch.safetensors"))?;
    let (x, y) = (batch.tensor::<i32>("x")?, batch.tensor::<i32>("y")?);
    let loss_of = |l: &cuda_stack_nn::Var<U>| -> Res<f64> {
        Ok(f64::from(l.value().to_dtype::<f32>()?.item()?))
    };
    let mut failures = Vec::new();

    // Step 0: the loss and every gradient.
    let loss = model.loss_with(&model.weights_as::<U>()?, &x, &y)?;
    loss.backward()?;
    let step0_loss = (loss_of(&loss)?, want0);
    let r0 = rel(step0_loss.0, want0);
    if r0.is_nan() || r0 > tol.loss {
        failures.push(format!(
            "step-0 loss {} vs PyTorch {want0}: {r0:.2e} > {}",
            step0_loss.0, tol.loss
        ));
    }
    let torch_grads = Checkpoint::open(dir.join("grads.safetensors"))?;
    let mut grads = Vec::new();
    for (name, p) in &named {
        let want = torch_grads.tensor::<f32>(name)?.to_vec()?;
        let got = p
            .grad()?
            .ok_or_else(|| format!("no gradient for {name}"))?
            .to_vec()?;
        if got.len() != want.len() {
            return Err(format!(
                "gradient of {name}: {} values here, {} in grads.safetensors",
                got.len(),
                want.len()
            )
            .into());
        }
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = got
            .iter()
            .zip(&want)
            .fold(0.0f32, |m, (g, w)| m.max((g - w).abs()));
        let relative = f64::from(err) / f64::from(scale).max(f64::from(f32::MIN_POSITIVE));
        if relative.is_nan() || relative > tol.grad {
            failures.push(format!(
                "gradient of {name}: {relative:.2e} of its largest value > {}",
                tol.grad
            ));
        }
        grads.push(GradComparison {
            name: name.clone(),
            relative,
            scale: f64::from(scale),
        });
    }
    grads.sort_by(|p, q| q.relative.total_cmp(&p.relative));

    // The AdamW steps (PyTorch's settings; no weight decay).
    let betas = &exp["betas"];
    let config_adam = AdamConfig {
        lr: num(&exp, "lr")?,
        betas: (
            betas[0].as_f64().ok_or("expected.json: betas")?,
            betas[1].as_f64().ok_or("expected.json: betas")?,
        ),
        eps: num(&exp, "eps")?,
        weight_decay: 0.0,
        decoupled_weight_decay: true,
    };
    let mut opt = Adam::new(model.parameters(), config_adam)?;
    opt.step()?; // step 0's update, from the gradients compared above
    let mut step_losses = Vec::new();
    for (i, &want) in losses.iter().enumerate().skip(1) {
        opt.zero_grad();
        let l = model.loss_with(&model.weights_as::<U>()?, &x, &y)?;
        l.backward()?;
        opt.step()?;
        let got = loss_of(&l)?;
        let r = rel(got, want);
        if r.is_nan() || r > tol.steps {
            failures.push(format!(
                "step {i} loss {got} vs PyTorch {want}: {r:.2e} > {}",
                tol.steps
            ));
        }
        step_losses.push((got, want));
    }
    Ok(ParityReport {
        config,
        batch_shape: x.shape().to_vec(),
        torch: format!(
            "PyTorch {} on {}",
            exp["torch"].as_str().unwrap_or("?"),
            exp["device"].as_str().unwrap_or("?")
        ),
        step0_loss,
        grads,
        step_losses,
        failures,
    })
}
