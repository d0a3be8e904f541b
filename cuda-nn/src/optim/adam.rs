//! `torch.optim.Adam` / `AdamW`.

use super::{check_hyper, check_params, Optimizer};
use crate::error::{NnError, Result};
use crate::Var;
use cuda_runtime_lite::{AdamParams, GradElement, Tensor};

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

/// Adam (`torch.optim.Adam`, or `AdamW` with `decoupled_weight_decay`): per parameter, one
/// kernel updates the parameter and both moment estimates.
pub struct Adam<T: GradElement> {
    params: Vec<Var<T>>,
    config: AdamConfig,
    /// Per parameter; `None` until its first step.
    state: Vec<Option<AdamState<T>>>,
}

/// One parameter's Adam state.
struct AdamState<T: GradElement> {
    /// First moment (`exp_avg`).
    m: Tensor<T>,
    /// Second moment (`exp_avg_sq`).
    v: Tensor<T>,
    /// Steps taken.
    steps: u32,
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
        })
    }
}

impl<T: GradElement> Optimizer<T> for Adam<T> {
    fn step(&mut self) -> Result<()> {
        let c = self.config;
        for (p, state) in self.params.iter().zip(&mut self.state) {
            let Some(g) = p.grad()? else { continue };
            let value = p.value();
            let (m, v, t) = match state.take() {
                Some(s) => (s.m, s.v, s.steps),
                None => {
                    let z = value.full_like(value.shape(), T::from_f64(0.0))?;
                    (z.clone(), z, 0)
                }
            };
            let t = t + 1;
            let params = AdamParams {
                lr: c.lr,
                beta1: c.betas.0,
                beta2: c.betas.1,
                eps: c.eps,
                weight_decay: c.weight_decay,
                bias_correction1: 1.0 - c.betas.0.powi(t as i32),
                bias_correction2: 1.0 - c.betas.1.powi(t as i32),
                decoupled: c.decoupled_weight_decay,
            };
            let (np, nm, nv) = value.adam_step(&g, &m, &v, params)?;
            p.set_value(np);
            *state = Some(AdamState {
                m: nm,
                v: nv,
                steps: t,
            });
        }
        Ok(())
    }

    fn parameters(&self) -> &[Var<T>] {
        &self.params
    }
}
