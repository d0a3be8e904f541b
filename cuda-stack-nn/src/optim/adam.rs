//! `torch.optim.Adam` / `AdamW`.

use super::{check_hyper, check_params, Optimizer};
use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::{adam_many_, zeros_like_many, AdamParams, AdamSlot, GradElement, Tensor};

/// Adam's settings (PyTorch's defaults: `lr = 1e-3`, `betas = (0.9, 0.999)`, `eps = 1e-8`,
/// no weight decay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConfig {
    /// Learning rate.
    pub lr: f64,
    /// (β1, β2).
    pub betas: (f64, f64),
    /// Added to the denominator.
    pub eps: f64,
    /// Weight decay (L2 in the gradient for Adam, decoupled for AdamW).
    pub weight_decay: f64,
    /// AdamW's decoupled weight decay.
    pub decoupled_weight_decay: bool,
}

impl AdamConfig {
    /// PyTorch's defaults with learning rate `lr`.
    pub fn new(lr: f64) -> AdamConfig {
        AdamConfig {
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
        }
    }
}

/// Parameters that share a weight decay: one of PyTorch's `param_groups` with its own
/// `weight_decay` (nanoGPT's AdamW decays the matrices and embeddings, not the biases and
/// LayerNorm parameters). See [`Adam::with_groups`].
#[derive(Clone)]
pub struct ParamGroup<T: GradElement> {
    /// The group's parameters.
    pub params: Vec<Var<T>>,
    /// Their weight decay (in place of [`AdamConfig::weight_decay`]).
    pub weight_decay: f64,
}

impl<T: GradElement> ParamGroup<T> {
    /// A group of `params` with weight decay `weight_decay`.
    pub fn new(params: Vec<Var<T>>, weight_decay: f64) -> ParamGroup<T> {
        ParamGroup {
            params,
            weight_decay,
        }
    }
}

/// Adam (`torch.optim.Adam`, or `AdamW` with `decoupled_weight_decay`): one kernel updates up
/// to 64 parameters and their moment estimates in place (the multi-tensor launch, across
/// parameter groups: each parameter carries its weight decay), optionally scaling the
/// gradients by a device-side clip coefficient as it reads them
/// ([`Adam::step_with_grad_scale`]); the step counts live on the device (PyTorch's `capturable=True`),
/// advanced by one launch per step for all parameters. Parameters may come in groups with
/// weight decays of their own ([`Adam::with_groups`]); the learning rate can change between
/// steps ([`Adam::set_lr`], a schedule's `param_group["lr"] = lr`).
pub struct Adam<T: GradElement> {
    params: Vec<Var<T>>,
    config: AdamConfig,
    /// Per parameter: the weight decay of its group.
    decay: Vec<f64>,
    /// Per parameter (m, v); `None` until its first step.
    state: Vec<Option<(Tensor<T>, Tensor<T>)>>,
    /// Steps taken by each parameter, on the device; made at the first step.
    steps: Option<Tensor<i32>>,
    steps_taken: u64,
}

impl<T: GradElement> Adam<T> {
    /// An optimizer over `params`.
    pub fn new(params: Vec<Var<T>>, config: AdamConfig) -> Result<Adam<T>> {
        let weight_decay = config.weight_decay;
        Adam::with_groups(vec![ParamGroup::new(params, weight_decay)], config)
    }

    /// An optimizer over the parameters of `groups` (in order: the first group's, then the
    /// next group's, …), each group with its own weight decay, every other setting from
    /// `config` (whose `weight_decay` is not used): PyTorch's
    /// `AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}])`.
    /// A parameter may be in one group only; a group may be empty, not all of them.
    pub fn with_groups(groups: Vec<ParamGroup<T>>, config: AdamConfig) -> Result<Adam<T>> {
        const NAME: &str = "Adam";
        let mut params = Vec::new();
        let mut decay = Vec::new();
        for (i, g) in groups.into_iter().enumerate() {
            check_hyper(
                NAME,
                &format!("weight_decay of group {i}"),
                g.weight_decay,
                0.0,
            )?;
            decay.extend(std::iter::repeat_n(g.weight_decay, g.params.len()));
            params.extend(g.params);
        }
        check_params(NAME, &params)?;
        check_hyper(NAME, "lr", config.lr, 0.0)?;
        check_hyper(NAME, "eps", config.eps, 0.0)?;
        let (b1, b2) = config.betas;
        if !(0.0..1.0).contains(&b1) || !(0.0..1.0).contains(&b2) {
            return Err(NnError::Invalid {
                what: NAME,
                problem: format!("betas = ({b1}, {b2}): each must be in [0, 1)"),
            });
        }
        let n = params.len();
        Ok(Adam {
            params,
            config,
            decay,
            state: (0..n).map(|_| None).collect(),
            steps: None,
            steps_taken: 0,
        })
    }

    /// Bytes of optimizer state on the device: the two moment estimates (two elements per
    /// parameter element, made at the first step) and the step counters (one `i32` per
    /// parameter).
    pub fn state_bytes(&self) -> usize {
        let moments: usize = self
            .state
            .iter()
            .flatten()
            .map(|(m, v)| (m.numel() + v.numel()) * std::mem::size_of::<T>())
            .sum();
        moments
            + self
                .steps
                .as_ref()
                .map_or(0, |s| s.numel() * std::mem::size_of::<i32>())
    }

    /// The settings (`weight_decay` as given to [`Adam::new`]; see [`Adam::weight_decays`]).
    pub fn config(&self) -> AdamConfig {
        self.config
    }

    /// Each parameter's weight decay, in the order of [`Optimizer::parameters`].
    pub fn weight_decays(&self) -> &[f64] {
        &self.decay
    }

    /// Sets the learning rate of the steps that follow (a schedule's
    /// `param_group["lr"] = lr` for every group): finite and non-negative. The rate is an
    /// argument of the update kernels, read when a step is queued: a step captured into a CUDA
    /// graph ([`crate::CapturedStep`]) keeps the rate it was captured with.
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        check_hyper("Adam", "lr", lr, 0.0)?;
        self.config.lr = lr;
        Ok(())
    }

    /// The parameters, the settings (with the groups' weight decay, when they all have the
    /// same one), the steps taken (a sharded optimizer takes them over), and whether the groups
    /// have different weight decays (which a sharded optimizer's one launch per bucket cannot
    /// apply).
    pub(crate) fn into_parts(self) -> (Vec<Var<T>>, AdamConfig, u64, bool) {
        let mut config = self.config;
        let first = self.decay.first().copied().unwrap_or(config.weight_decay);
        let mixed = self.decay.iter().any(|&d| d != first);
        config.weight_decay = first;
        (self.params, config, self.steps_taken, mixed)
    }
}

impl AdamConfig {
    /// The hyper-parameters as the update kernels take them.
    pub(crate) fn kernel_params(&self) -> AdamParams<f64> {
        AdamParams {
            lr: self.lr,
            beta1: self.betas.0,
            beta2: self.betas.1,
            eps: self.eps,
            weight_decay: self.weight_decay,
            decoupled: self.decoupled_weight_decay,
        }
    }
}

impl<T: GradElement> Adam<T> {
    /// [`Optimizer::step`] with every gradient multiplied by `grad_scale` (a one-element
    /// tensor on the parameters' device) as the update reads it: the clip coefficient of
    /// [`crate::clip_grad_scale`], so that clipping needs neither a pass over the gradients
    /// nor a host round trip (the updated parameters are bit-identical to
    /// [`crate::clip_grad_norm`] followed by [`Optimizer::step`]; the gradients themselves stay
    /// unscaled).
    pub fn step_with_grad_scale(&mut self, grad_scale: &Tensor<T>) -> Result<()> {
        self.step_scaled(Some(grad_scale))
    }

    /// The step: the step counts advanced, missing moments made (one launch per 192 tensors),
    /// then every parameter with a gradient updated by the multi-tensor Adam (one launch per 64
    /// parameters, each with its group's weight decay), last parameter first.
    fn step_scaled(&mut self, grad_scale: Option<&Tensor<T>>) -> Result<()> {
        self.steps_taken += 1;
        let hyper = self.config.kernel_params();
        let grads = self
            .params
            .iter()
            .map(Var::grad)
            .collect::<Result<Vec<_>>>()?;
        if grads.iter().all(Option::is_none) {
            return Ok(());
        }
        let steps = match &mut self.steps {
            Some(s) => s,
            None => {
                let device = self.params[0].value().device();
                let zeros = vec![0i32; self.params.len()];
                self.steps
                    .insert(Tensor::from_slice_on(device, &zeros, &[zeros.len()])?)
            }
        };
        // Advance the step count of every parameter that has a gradient: one launch when all do.
        if grads.iter().all(Option::is_some) {
            steps.increment_()?;
        } else {
            for (i, g) in grads.iter().enumerate() {
                if g.is_some() {
                    steps.increment_at_(i)?;
                }
            }
        }
        let steps: &Tensor<i32> = steps;
        // Moments start at zero, made on the parameters' device, all in one go.
        let need: Vec<usize> = (0..self.params.len())
            .filter(|&i| grads[i].is_some() && self.state[i].is_none())
            .collect();
        if !need.is_empty() {
            // The values are dropped before the update, which must find them unshared.
            let values: Vec<Tensor<T>> = need.iter().map(|&i| self.params[i].value()).collect();
            let refs: Vec<&Tensor<T>> = values.iter().chain(values.iter()).collect();
            let mut ms = zeros_like_many(&refs)?;
            let vs = ms.split_off(need.len());
            for ((&i, m), v) in need.iter().zip(ms).zip(vs) {
                self.state[i] = Some((m, v));
            }
        }
        let mut guards: Vec<_> = self
            .params
            .iter()
            .zip(&grads)
            .filter(|(_, g)| g.is_some())
            .map(|(p, _)| p.value_mut())
            .collect();
        let mut slots = Vec::with_capacity(guards.len());
        let with_grads = self
            .state
            .iter_mut()
            .zip(&grads)
            .zip(&self.decay)
            .enumerate()
            .filter(|(_, ((_, g), _))| g.is_some());
        for (guard, (i, ((state, g), &weight_decay))) in guards.iter_mut().zip(with_grads) {
            let (Some((m, v)), Some(g)) = (state, g) else {
                return Err(NnError::Invalid {
                    what: "Adam",
                    problem: "internal error: missing moments".into(),
                });
            };
            slots.push(AdamSlot {
                param: &mut **guard,
                grad: g,
                exp_avg: m,
                exp_avg_sq: v,
                step_index: i,
                weight_decay,
            });
        }
        // Last parameter first, the order in which a backward pass finishes the gradients (see
        // `super::groups`): the first launch waits only for the last layers' gradients.
        slots.reverse();
        Ok(adam_many_(&mut slots, steps, grad_scale, hyper)?)
    }
}

impl<T: GradElement> Optimizer<T> for Adam<T> {
    fn step(&mut self) -> Result<()> {
        self.step_scaled(None)
    }

    fn parameters(&self) -> &[Var<T>] {
        &self.params
    }

    fn steps_taken(&self) -> u64 {
        self.steps_taken
    }

    fn state_addresses(&self) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .state
            .iter()
            .flatten()
            .flat_map(|(m, v)| [m.data_ptr(), v.data_ptr()])
            .collect();
        out.extend(self.steps.as_ref().map(Tensor::data_ptr));
        out
    }
}
