//! `torch.optim.SGD`.

use super::{check_hyper, check_params, four_grads, four_mut, groups, Group, Optimizer};
use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::{sgd4_, sgd_momentum4_, GradElement, SgdParams, Tensor};

/// SGD's settings (PyTorch's names and defaults except `lr`, which has none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdConfig {
    /// Learning rate.
    pub lr: f64,
    /// Momentum factor (0: plain SGD).
    pub momentum: f64,
    /// Dampening of the momentum.
    pub dampening: f64,
    /// L2 penalty.
    pub weight_decay: f64,
    /// Nesterov momentum (needs momentum > 0 and dampening 0).
    pub nesterov: bool,
}

impl SgdConfig {
    /// Plain SGD with learning rate `lr`.
    pub fn new(lr: f64) -> SgdConfig {
        SgdConfig {
            lr,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
        }
    }
}

/// Stochastic gradient descent, with optional momentum, dampening, Nesterov and weight decay
/// (`torch.optim.SGD`, same update rule).
pub struct Sgd<T: GradElement> {
    params: Vec<Var<T>>,
    config: SgdConfig,
    momentum_buffers: Vec<Option<Tensor<T>>>,
    steps_taken: u64,
}

impl<T: GradElement> Sgd<T> {
    /// An optimizer over `params` (e.g. `model.parameters()`).
    pub fn new(params: Vec<Var<T>>, config: SgdConfig) -> Result<Sgd<T>> {
        const NAME: &str = "SGD";
        check_params(NAME, &params)?;
        check_hyper(NAME, "lr", config.lr, 0.0)?;
        check_hyper(NAME, "momentum", config.momentum, 0.0)?;
        check_hyper(NAME, "dampening", config.dampening, f64::MIN)?;
        check_hyper(NAME, "weight_decay", config.weight_decay, 0.0)?;
        if config.nesterov && (config.momentum <= 0.0 || config.dampening != 0.0) {
            return Err(NnError::Invalid {
                what: NAME,
                problem: "Nesterov momentum requires a momentum and zero dampening".into(),
            });
        }
        let n = params.len();
        Ok(Sgd {
            params,
            config,
            momentum_buffers: vec![None; n],
            steps_taken: 0,
        })
    }

    /// Bytes of optimizer state on the device: the momentum buffers (one element per parameter
    /// element with a momentum, made at the first step; none for plain SGD).
    pub fn state_bytes(&self) -> usize {
        self.momentum_buffers
            .iter()
            .flatten()
            .map(|b| b.numel() * std::mem::size_of::<T>())
            .sum()
    }

    /// The parameters, the settings and the steps taken (a sharded optimizer takes them over).
    pub(crate) fn into_parts(self) -> (Vec<Var<T>>, SgdConfig, u64) {
        (self.params, self.config, self.steps_taken)
    }
}

impl<T: GradElement> Sgd<T> {
    /// Parameter `i` alone (one launch).
    fn step1(
        &mut self,
        i: usize,
        grads: &[Option<Tensor<T>>],
        params: SgdParams<f64>,
    ) -> Result<()> {
        let Some(g) = &grads[i] else { return Ok(()) };
        let c = self.config;
        let buf = &mut self.momentum_buffers[i];
        self.params[i].with_value_mut(|value| -> Result<()> {
            if c.momentum == 0.0 {
                value.sgd_(g, c.lr, c.weight_decay)?;
                return Ok(());
            }
            match buf {
                Some(b) => value.sgd_momentum_(g, b, params, false)?,
                None => {
                    let mut b = value.full_like(value.shape(), T::from_f64(0.0))?;
                    value.sgd_momentum_(g, &mut b, params, true)?;
                    *buf = Some(b);
                }
            }
            Ok(())
        })
    }

    /// Parameters `i .. i + 4` in one multi-tensor launch (their momentum buffers all exist or
    /// all do not).
    fn step4(
        &mut self,
        i: usize,
        grads: &[Option<Tensor<T>>],
        params: SgdParams<f64>,
    ) -> Result<()> {
        let c = self.config;
        let g = four_grads(grads, i)?;
        let mut guards = [
            self.params[i].value_mut(),
            self.params[i + 1].value_mut(),
            self.params[i + 2].value_mut(),
            self.params[i + 3].value_mut(),
        ];
        let [v0, v1, v2, v3] = &mut guards;
        let p = [&mut **v0, &mut **v1, &mut **v2, &mut **v3];
        if c.momentum == 0.0 {
            sgd4_(p, g, c.lr, c.weight_decay)?;
            return Ok(());
        }
        let first = self.momentum_buffers[i].is_none();
        if first {
            for (j, pv) in p.iter().enumerate() {
                self.momentum_buffers[i + j] = Some(pv.full_like(pv.shape(), T::from_f64(0.0))?);
            }
        }
        let bufs = four_mut(&mut self.momentum_buffers, i)?;
        let [b0, b1, b2, b3] = bufs;
        match (b0, b1, b2, b3) {
            (Some(b0), Some(b1), Some(b2), Some(b3)) => {
                sgd_momentum4_(p, g, [b0, b1, b2, b3], params, first)?;
                Ok(())
            }
            _ => Err(NnError::Invalid {
                what: "SGD",
                problem: "internal error: a momentum buffer is missing".into(),
            }),
        }
    }
}

impl SgdConfig {
    /// The hyper-parameters as the update kernels take them.
    pub(crate) fn kernel_params(&self) -> SgdParams<f64> {
        SgdParams {
            lr: self.lr,
            momentum: self.momentum,
            dampening: self.dampening,
            weight_decay: self.weight_decay,
            nesterov: self.nesterov,
        }
    }
}

impl<T: GradElement> Optimizer<T> for Sgd<T> {
    fn step(&mut self) -> Result<()> {
        self.steps_taken += 1;
        let c = self.config;
        let params = c.kernel_params();
        let grads = self
            .params
            .iter()
            .map(Var::grad)
            .collect::<Result<Vec<_>>>()?;
        let has: Vec<bool> = grads.iter().map(Option::is_some).collect();
        for group in groups(&has) {
            match group {
                Group::Four(i)
                    if c.momentum == 0.0
                        || self.momentum_buffers[i..i + 4]
                            .iter()
                            .all(|b| b.is_some() == self.momentum_buffers[i].is_some()) =>
                {
                    self.step4(i, &grads, params)?;
                }
                Group::Four(i) => {
                    for j in i..i + 4 {
                        self.step1(j, &grads, params)?;
                    }
                }
                Group::One(i) => self.step1(i, &grads, params)?,
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
        self.momentum_buffers
            .iter()
            .flatten()
            .map(Tensor::data_ptr)
            .collect()
    }
}
