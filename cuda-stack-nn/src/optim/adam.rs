//! `torch.optim.Adam` / `AdamW`.

use super::{check_hyper, check_params, four_grads, four_mut, groups, Group, Optimizer};
use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::{adam4_, AdamParams, GradElement, Tensor};

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

/// Adam (`torch.optim.Adam`, or `AdamW` with `decoupled_weight_decay`): one kernel updates
/// four parameters and their moment estimates in place (the multi-tensor launch; a leftover
/// parameter gets its own); the step counts live on the device (PyTorch's `capturable=True`),
/// advanced by one launch per step for all parameters.
pub struct Adam<T: GradElement> {
    params: Vec<Var<T>>,
    config: AdamConfig,
    /// Per parameter (m, v); `None` until its first step.
    state: Vec<Option<(Tensor<T>, Tensor<T>)>>,
    /// Steps taken by each parameter, on the device; made at the first step.
    steps: Option<Tensor<i32>>,
    steps_taken: u64,
}

impl<T: GradElement> Adam<T> {
    /// An optimizer over `params`.
    pub fn new(params: Vec<Var<T>>, config: AdamConfig) -> Result<Adam<T>> {
        const NAME: &str = "Adam";
        check_params(NAME, &params)?;
        check_hyper(NAME, "lr", config.lr, 0.0)?;
        check_hyper(NAME, "eps", config.eps, 0.0)?;
        check_hyper(NAME, "weight_decay", config.weight_decay, 0.0)?;
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

    /// The parameters, the settings and the steps taken (a sharded optimizer takes them over).
    pub(crate) fn into_parts(self) -> (Vec<Var<T>>, AdamConfig, u64) {
        (self.params, self.config, self.steps_taken)
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

impl<T: GradElement> Optimizer<T> for Adam<T> {
    fn step(&mut self) -> Result<()> {
        self.steps_taken += 1;
        let params = self.config.kernel_params();
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
        let has: Vec<bool> = grads.iter().map(Option::is_some).collect();
        for group in groups(&has) {
            let (first, count) = match group {
                Group::Four(i) => (i, 4),
                Group::One(i) => (i, 1),
            };
            // Moments start at zero, made on the parameter's device.
            for j in first..first + count {
                if self.state[j].is_none() {
                    let value = self.params[j].value();
                    let m = value.full_like(value.shape(), T::from_f64(0.0))?;
                    let v = value.full_like(value.shape(), T::from_f64(0.0))?;
                    self.state[j] = Some((m, v));
                }
            }
            if count == 4 {
                let g = four_grads(&grads, first)?;
                let mut guards = [
                    self.params[first].value_mut(),
                    self.params[first + 1].value_mut(),
                    self.params[first + 2].value_mut(),
                    self.params[first + 3].value_mut(),
                ];
                let [v0, v1, v2, v3] = &mut guards;
                let p = [&mut **v0, &mut **v1, &mut **v2, &mut **v3];
                let [s0, s1, s2, s3] = four_mut(&mut self.state, first)?;
                match (s0, s1, s2, s3) {
                    (Some((m0, w0)), Some((m1, w1)), Some((m2, w2)), Some((m3, w3))) => adam4_(
                        p,
                        g,
                        [m0, m1, m2, m3],
                        [w0, w1, w2, w3],
                        steps,
                        first,
                        params,
                    )?,
                    _ => {
                        return Err(NnError::Invalid {
                            what: "Adam",
                            problem: "internal error: missing moments".into(),
                        })
                    }
                }
            } else {
                let Some(g) = &grads[first] else { continue };
                let Some((m, v)) = &mut self.state[first] else {
                    continue;
                };
                self.params[first]
                    .with_value_mut(|value| value.adam_(g, m, v, steps, first, params))?;
            }
        }
        Ok(())
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
