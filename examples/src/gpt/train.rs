//! One training iteration as nanoGPT's `train.py` runs it: the scheduled learning rate,
//! `grad_accum` micro-batches whose losses (divided by `grad_accum`) add their gradients, the
//! global gradient norm clipped, one AdamW step that decays the matrices and embeddings only;
//! and the evaluation loss with dropout off. Parameters and optimizer state are f32; the
//! forward and backward compute in `U` (f32, or bf16 for mixed precision).
//!
//! Data-parallel ([`Trainer::with_data_parallel`]): one trainer per rank (GPU), each on its own
//! batch; the f32 parameters' gradients are averaged across the ranks by
//! [`cuda_stack_nn::DataParallel`] (buckets all-reduced over NCCL while the backward pass runs;
//! bf16's cast leaves hand their gradients to the f32 parameters, whose hooks feed the buckets),
//! then every rank clips the averaged gradients and takes the same AdamW step.
//!
//! Where the shapes are fixed, the iteration can be captured once into a CUDA graph
//! ([`Trainer::capture`], `cuda_stack_nn::CapturedStep`) and every later [`Trainer::step`]
//! replays it: the batch is copied into the graph's static inputs in place, the scheduled rate
//! is written into the graph's AdamW nodes (`CapturedStep::set_lr`), and one launch runs the
//! forward, the backward, the clipping and the update. Dropout cannot be captured (its mask
//! position advances on the host, so a replay would repeat the captured mask): a model with
//! dropout > 0 is refused.

use super::forward::GptWeights;
use super::model::Gpt;
use super::schedule::CosineSchedule;
use cuda_stack_nccl::Communicator;
use cuda_stack_nn::{
    clip_grad_scale, no_grad, Adam, AdamConfig, CapturedStep, DataParallel, DataParallelConfig,
    GradElement, NnError, Optimizer, ParamGroup, Result, Var,
};
use cuda_stack_runtime::{AttentionElement, Tensor};
use std::marker::PhantomData;

/// The optimisation settings (nanoGPT's `train.py` names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainConfig {
    /// Sequences per micro-batch (`batch_size`).
    pub batch: usize,
    /// Micro-batches per iteration (`gradient_accumulation_steps`).
    pub grad_accum: usize,
    /// The learning-rate schedule.
    pub schedule: CosineSchedule,
    /// AdamW's (β1, β2).
    pub betas: (f64, f64),
    /// AdamW's ε (PyTorch's default 1e-8).
    pub eps: f64,
    /// Decoupled weight decay of the matrices and embeddings ([`decays`]); others get none.
    pub weight_decay: f64,
    /// Clip the global gradient norm to this (`grad_clip`; 0 turns clipping off).
    pub grad_clip: f64,
    /// Iterations of a full run (`max_iters`).
    pub max_iters: usize,
}

impl TrainConfig {
    /// `config/train_shakespeare_char.py`: batch 64, lr 1e-3 warmed up over 100 iterations and
    /// decayed to 1e-4 at 5,000, β2 0.99, 5,000 iterations; `train.py`'s defaults for the
    /// rest (β1 0.9, weight decay 0.1, clipping at 1.0, one micro-batch).
    pub fn shakespeare_char() -> TrainConfig {
        TrainConfig {
            batch: 64,
            grad_accum: 1,
            schedule: CosineSchedule {
                lr: 1e-3,
                min_lr: 1e-4,
                warmup_iters: 100,
                lr_decay_iters: 5000,
            },
            betas: (0.9, 0.99),
            eps: 1e-8,
            weight_decay: 0.1,
            grad_clip: 1.0,
            max_iters: 5000,
        }
    }

    /// `train.py`'s GPT-2 124M defaults (lr 6e-4 warmed up over 2,000 iterations, decayed to
    /// 6e-5 at 600,000; β 0.9/0.95; weight decay 0.1; clipping at 1.0) at batch 16 of one
    /// micro-batch (nanoGPT's 12 × 40 accumulation is for a real run; this configuration
    /// measures a step).
    pub fn gpt2_124m() -> TrainConfig {
        TrainConfig {
            batch: 16,
            grad_accum: 1,
            schedule: CosineSchedule {
                lr: 6e-4,
                min_lr: 6e-5,
                warmup_iters: 2000,
                lr_decay_iters: 600_000,
            },
            betas: (0.9, 0.95),
            eps: 1e-8,
            weight_decay: 0.1,
            grad_clip: 1.0,
            max_iters: 600_000,
        }
    }
}

/// Whether nanoGPT's `configure_optimizers` decays a parameter of this shape: every parameter
/// of two or more dimensions (the Linear weights and the embeddings, `wte` tied to the
/// classifier among them); biases and LayerNorm parameters are not decayed.
pub fn decays(shape: &[usize]) -> bool {
    shape.len() >= 2
}

/// nanoGPT's AdamW over `named` (decoupled weight decay `config.weight_decay` on the
/// parameters [`decays`] picks, none on the others; the first group's parameters, then the
/// second's).
pub fn adamw<T: GradElement>(named: &[(String, Var<T>)], config: &TrainConfig) -> Result<Adam<T>> {
    let (decay, rest): (Vec<_>, Vec<_>) = named.iter().partition(|(_, p)| decays(&p.shape()));
    let params = |v: Vec<&(String, Var<T>)>| v.into_iter().map(|(_, p)| p.clone()).collect();
    Adam::with_groups(
        vec![
            ParamGroup::new(params(decay), config.weight_decay),
            ParamGroup::new(params(rest), 0.0),
        ],
        AdamConfig {
            lr: config.schedule.lr_at(0),
            betas: config.betas,
            eps: config.eps,
            weight_decay: config.weight_decay,
            decoupled_weight_decay: true,
        },
    )
}

/// What one iteration leaves on the device (read them when you report: each read waits for
/// the GPU).
pub struct StepStats {
    /// The mean loss over the micro-batches, f32 (rounded to `U` per micro-batch).
    pub loss: Tensor<f32>,
    /// The global gradient norm before clipping (when clipping is on).
    pub grad_norm: Option<Tensor<f32>>,
    /// The learning rate the step used.
    pub lr: f64,
}

/// A [`Gpt`] with f32 parameters, its AdamW and the iteration count, training in `U`.
pub struct Trainer<U> {
    model: Gpt<f32>,
    params: Vec<Var<f32>>,
    opt: Adam<f32>,
    config: TrainConfig,
    iter: usize,
    /// The gradient exchange with the other ranks, when data-parallel.
    ddp: Option<DataParallel<f32>>,
    /// The iteration captured into a CUDA graph, once [`Trainer::capture`] made it.
    graph: Option<GraphedStep>,
    compute: PhantomData<fn() -> U>,
}

/// An iteration captured into a CUDA graph: what a replay reads (the static micro-batches)
/// and writes (the loss and the gradient norm).
struct GraphedStep {
    step: CapturedStep,
    inputs: Vec<(Tensor<i32>, Tensor<i32>)>,
    loss: Var<f32>,
    grad_norm: Option<Var<f32>>,
    kernels: usize,
}

/// Copies `src` into the static input `dst` in place; an error if that would not be in place
/// (another handle shares `dst`), since the graph would keep reading the old storage.
fn feed(dst: &mut Tensor<i32>, src: &Tensor<i32>) -> Result<()> {
    let before = dst.data_ptr();
    dst.copy_from_(src)?;
    if dst.data_ptr() != before {
        return Err(NnError::Invalid {
            what: "Trainer::step (captured)",
            problem: "a static input of the graph is shared with another handle, so it was \
                      copied instead of written in place"
                .into(),
        });
    }
    Ok(())
}

/// One iteration's forward, backward, clipping and update (the rate already set), recording
/// nothing on the host: what [`Trainer::step`] runs eagerly and [`Trainer::capture`] captures.
fn run_step<U: GradElement + AttentionElement + 'static>(
    model: &Gpt<f32>,
    params: &[Var<f32>],
    config: &TrainConfig,
    opt: &mut Adam<f32>,
    ddp: Option<&DataParallel<f32>>,
    micro: &[(Tensor<i32>, Tensor<i32>)],
) -> Result<(Tensor<f32>, Option<Tensor<f32>>)> {
    opt.zero_grad();
    let n = micro.len();
    let mut total: Option<Tensor<f32>> = None;
    for (x, y) in micro {
        // Cast for each forward: the cast leaves hand their gradients to the parameters.
        let w: GptWeights<U> = model.weights_as::<U>()?;
        let loss = model.loss_with(&w, x, y)?;
        if n > 1 {
            loss.scale(1.0 / n as f64)?.backward()?;
        } else {
            loss.backward()?;
        }
        let l = loss.value().to_dtype::<f32>()?;
        total = Some(match total {
            None => l,
            Some(t) => (&t + &l)?,
        });
    }
    let mut loss = total.ok_or_else(|| NnError::Invalid {
        what: "Trainer::step",
        problem: "no micro-batch".into(),
    })?;
    if n > 1 {
        loss = loss.scale(1.0 / n as f32)?;
    }
    // Data-parallel: every gradient becomes the mean over the ranks (its bucket's all-reduce
    // was queued during the backward pass); clipping sees the averaged ones.
    if let Some(d) = ddp {
        d.finish_gradients()?;
    }
    // Clipping: the norm and the scale on the device, the scale applied by AdamW as it
    // reads each gradient (the same update as scaling the gradients first; one launch per
    // 192 tensors for the norm, none for the scaling).
    let grad_norm = if config.grad_clip > 0.0 {
        let (norm, scale) = clip_grad_scale(params, config.grad_clip)?;
        opt.step_with_grad_scale(&scale)?;
        Some(norm)
    } else {
        opt.step()?;
        None
    };
    Ok((loss, grad_norm))
}

impl<U: GradElement + AttentionElement + 'static> Trainer<U> {
    /// A trainer of `model` with `config` (which must have a batch and micro-batch count of at
    /// least 1), starting at iteration 0.
    pub fn new(model: Gpt<f32>, config: TrainConfig) -> Result<Trainer<U>> {
        if config.batch == 0
            || config.grad_accum == 0
            || config.grad_clip.is_nan()
            || config.grad_clip < 0.0
        {
            return Err(NnError::Invalid {
                what: "TrainConfig",
                problem: format!(
                    "{config:?}: batch and grad_accum must be at least 1 and grad_clip >= 0"
                ),
            });
        }
        let named = model.named_parameters();
        let opt = adamw(&named, &config)?;
        let params = named.into_iter().map(|(_, p)| p).collect();
        Ok(Trainer {
            model,
            params,
            opt,
            config,
            iter: 0,
            ddp: None,
            graph: None,
            compute: PhantomData,
        })
    }

    /// A trainer of this rank's replica `model` for data-parallel training with the other
    /// ranks of `comm` (a collective: every rank calls it, with the same model shapes).
    /// `dp` as [`DataParallelConfig`] says; with its `broadcast_parameters` (the default) every
    /// replica starts from rank 0's weights. Each [`Trainer::step`] then averages the
    /// gradients across the ranks before clipping and AdamW, so every replica takes the same
    /// step. Gradient accumulation is refused (`config.grad_accum` must be 1: a second
    /// backward pass before the exchange ends is an error of `DataParallel`).
    pub fn with_data_parallel(
        model: Gpt<f32>,
        config: TrainConfig,
        comm: Communicator,
        dp: DataParallelConfig,
    ) -> Result<Trainer<U>> {
        if config.grad_accum != 1 {
            return Err(NnError::Invalid {
                what: "Trainer::with_data_parallel",
                problem: format!(
                    "grad_accum = {}: data-parallel training runs one micro-batch per step \
                     (raise the batch per GPU, or the number of GPUs, instead)",
                    config.grad_accum
                ),
            });
        }
        let mut t = Trainer::new(model, config)?;
        t.ddp = Some(DataParallel::new(t.params.clone(), comm, dp)?);
        Ok(t)
    }

    /// The gradient exchange, when data-parallel.
    pub fn data_parallel(&self) -> Option<&DataParallel<f32>> {
        self.ddp.as_ref()
    }

    /// The model.
    pub fn model(&self) -> &Gpt<f32> {
        &self.model
    }

    /// The settings.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// The optimizer.
    pub fn optimizer(&self) -> &Adam<f32> {
        &self.opt
    }

    /// Iterations done (the next one's schedule position).
    pub fn iter(&self) -> usize {
        self.iter
    }

    /// Continues the schedule from iteration `iter` (after loading a checkpoint).
    pub fn set_iter(&mut self, iter: usize) {
        self.iter = iter;
    }

    /// One iteration over `micro` (`grad_accum` pairs of ids and targets, each `[batch, T]`):
    /// see the module documentation. Nothing is read back to the host. Data-parallel, the
    /// returned loss is this rank's (see [`DataParallel::mean_over_ranks`] for the global one).
    /// Once [`Trainer::capture`] has run, the iteration is a replay of the captured graph
    /// (`micro` must then have the captured shapes).
    pub fn step(&mut self, micro: &[(Tensor<i32>, Tensor<i32>)]) -> Result<StepStats> {
        if micro.len() != self.config.grad_accum {
            return Err(NnError::Invalid {
                what: "Trainer::step",
                problem: format!(
                    "{} micro-batches for grad_accum = {}",
                    micro.len(),
                    self.config.grad_accum
                ),
            });
        }
        let lr = self.config.schedule.lr_at(self.iter);
        self.opt.set_lr(lr)?;
        if let Some(g) = &mut self.graph {
            for ((sx, sy), (x, y)) in g.inputs.iter_mut().zip(micro) {
                feed(sx, x)?;
                feed(sy, y)?;
            }
            g.step.set_lr(lr)?;
            g.step.replay()?;
            self.iter += 1;
            // Copies: the graph rewrites its outputs at the next replay, which a handle kept
            // by the caller would refuse.
            let loss = g.loss.value().deep_copy()?;
            let grad_norm = match &g.grad_norm {
                Some(v) => Some(v.value().deep_copy()?),
                None => None,
            };
            return Ok(StepStats {
                loss,
                grad_norm,
                lr,
            });
        }
        self.model.set_training(true);
        let (loss, grad_norm) = run_step::<U>(
            &self.model,
            &self.params,
            &self.config,
            &mut self.opt,
            self.ddp.as_ref(),
            micro,
        )?;
        self.iter += 1;
        Ok(StepStats {
            loss,
            grad_norm,
            lr,
        })
    }

    /// Captures the iteration into a CUDA graph, with `micro`'s shapes: every later
    /// [`Trainer::step`] replays it (see the module documentation). Nothing runs now and the
    /// iteration count does not advance. Take at least one eager step first (AdamW's state must
    /// exist). Refused when the model has dropout (a replay would repeat the captured mask).
    /// The caching allocator's free blocks are given back first: the capture cannot reuse the
    /// eager steps' blocks (they belong to another stream), and reuses its own temporaries
    /// within the capture, so the captured step needs about an eager step's peak.
    pub fn capture(&mut self, micro: &[(Tensor<i32>, Tensor<i32>)]) -> Result<()> {
        let dropout = self.model.config().dropout;
        if dropout > 0.0 {
            return Err(NnError::Invalid {
                what: "Trainer::capture",
                problem: format!(
                    "dropout {dropout}: its mask position advances on the host, so every replay \
                     would repeat the mask drawn during the capture; train eagerly"
                ),
            });
        }
        if self.ddp.is_some() {
            return Err(NnError::Invalid {
                what: "Trainer::capture",
                problem: "data-parallel: the gradient exchange runs on NCCL's own schedule, \
                          which a CUDA graph of this stream cannot hold; train eagerly"
                    .into(),
            });
        }
        if micro.len() != self.config.grad_accum {
            return Err(NnError::Invalid {
                what: "Trainer::capture",
                problem: format!(
                    "{} micro-batches for grad_accum = {}",
                    micro.len(),
                    self.config.grad_accum
                ),
            });
        }
        self.graph = None;
        // The static inputs: storages of their own, rewritten in place before each replay.
        let inputs = micro
            .iter()
            .map(|(x, y)| Ok((x.deep_copy()?, y.deep_copy()?)))
            .collect::<Result<Vec<_>>>()?;
        cuda_stack_runtime::empty_cache()?;
        self.opt.set_lr(self.config.schedule.lr_at(self.iter))?;
        self.model.set_training(true);
        let (model, params, config) = (&self.model, &self.params, &self.config);
        let (step, (loss, grad_norm)) = CapturedStep::capture(&mut self.opt, |opt| {
            let (loss, norm) = run_step::<U>(model, params, config, opt, None, &inputs)?;
            Ok((Var::constant(loss), norm.map(Var::constant)))
        })?;
        let kernels = step.kernel_count()?;
        self.graph = Some(GraphedStep {
            step,
            inputs,
            loss,
            grad_norm,
            kernels,
        });
        Ok(())
    }

    /// The number of kernels one replay launches, once [`Trainer::capture`] has run (`None`:
    /// the steps run eagerly).
    pub fn captured_kernels(&self) -> Option<usize> {
        self.graph.as_ref().map(|g| g.kernels)
    }

    /// Drops the captured graph: later steps run eagerly.
    pub fn release_graph(&mut self) {
        self.graph = None;
    }

    /// The mean loss over `batches` (pairs of ids and targets) with dropout off and no graph
    /// (`estimate_loss`), each batch's loss unrounded (f32 statistics); training mode is back
    /// on afterwards. One read of the device at the end.
    pub fn eval_loss(
        &self,
        batches: impl IntoIterator<Item = Result<(Tensor<i32>, Tensor<i32>)>>,
    ) -> Result<f32> {
        self.model.set_training(false);
        let out = no_grad(|| -> Result<f32> {
            let w: GptWeights<U> = self.model.weights_as::<U>()?;
            let mut total: Option<Tensor<f32>> = None;
            let mut n = 0usize;
            for b in batches {
                let (x, y) = b?;
                let l = self.model.eval_loss_with(&w, &x, &y)?;
                total = Some(match total {
                    None => l,
                    Some(t) => (&t + &l)?,
                });
                n += 1;
            }
            let total = total.ok_or_else(|| NnError::Invalid {
                what: "Trainer::eval_loss",
                problem: "no batch to evaluate".into(),
            })?;
            Ok(total.item()? / n as f32)
        });
        self.model.set_training(true);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpt::GptConfig;

    #[test]
    fn matrices_and_embeddings_decay_biases_and_norms_do_not() {
        let cfg = GptConfig::shakespeare_char(65);
        let shapes = cfg.parameter_shapes();
        let decayed: Vec<&str> = shapes
            .iter()
            .filter(|(_, s)| decays(s))
            .map(|(n, _)| n.as_str())
            .collect();
        // nanoGPT (bias=True) prints "num decayed parameter tensors: 26" for this model: two
        // embeddings and four Linear weights per block.
        assert_eq!(decayed.len(), 2 + 4 * 6);
        for n in &decayed {
            assert!(n.ends_with(".weight") && !n.contains("ln_"), "{n} decays");
        }
        assert!(decayed.contains(&"transformer.wte.weight"));
        assert!(decayed.contains(&"transformer.wpe.weight"));
        assert!(decayed.contains(&"transformer.h.3.attn.c_attn.weight"));
        let kept: Vec<&str> = shapes
            .iter()
            .filter(|(_, s)| !decays(s))
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(kept.len(), 8 * 6 + 2);
        for n in &kept {
            assert!(
                n.ends_with(".bias") || n.contains("ln_"),
                "{n} is not decayed"
            );
        }
        let decayed_elems: usize = shapes
            .iter()
            .filter(|(_, s)| decays(s))
            .map(|(_, s)| s.iter().product::<usize>())
            .sum();
        assert_eq!(decayed_elems, 65 * 384 + 256 * 384 + 6 * 12 * 384 * 384);
    }

    #[test]
    fn configurations_are_nanogpts() {
        let s = TrainConfig::shakespeare_char();
        assert_eq!((s.batch, s.betas, s.max_iters), (64, (0.9, 0.99), 5000));
        assert_eq!(s.schedule.lr_at(100), 1e-3);
        assert_eq!(s.schedule.lr_at(5000), 1e-4);
        let g = TrainConfig::gpt2_124m();
        assert_eq!((g.batch, g.betas, g.weight_decay), (16, (0.9, 0.95), 0.1));
    }
}
