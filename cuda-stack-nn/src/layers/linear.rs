//! `nn.Linear`.

use super::Module;
use crate::error::{NnError, Result};
use crate::{init, Var};
use cuda_stack_runtime::GradElement;

/// `y = x · Wᵀ + b` with `W` of shape `[out, in]` and `b` of shape `[out]` (`nn.Linear`).
/// Initialised as PyTorch does by default: `W` and `b` uniform in `±1/√in`.
pub struct Linear<T: GradElement> {
    weight: Var<T>,
    bias: Option<Var<T>>,
    in_features: usize,
    out_features: usize,
}

impl<T: GradElement> Linear<T> {
    /// A layer from `in_features` to `out_features` with a bias, initialised from `seed`.
    pub fn new(in_features: usize, out_features: usize, seed: u64) -> Result<Linear<T>> {
        Linear::with_bias(in_features, out_features, true, seed)
    }

    /// As [`Linear::new`], with or without the bias.
    pub fn with_bias(
        in_features: usize,
        out_features: usize,
        bias: bool,
        seed: u64,
    ) -> Result<Linear<T>> {
        if in_features == 0 || out_features == 0 {
            return Err(NnError::Invalid {
                what: "Linear",
                problem: format!(
                    "in_features = {in_features}, out_features = {out_features}: both must be \
                     at least 1"
                ),
            });
        }
        let bound = 1.0 / (in_features as f64).sqrt();
        let weight = Var::parameter(init::uniform(&[out_features, in_features], bound, seed)?);
        let bias = if bias {
            let seed_b = seed ^ 0x9e37_79b9_7f4a_7c15;
            Some(Var::parameter(init::uniform(
                &[out_features],
                bound,
                seed_b,
            )?))
        } else {
            None
        };
        Ok(Linear {
            weight,
            bias,
            in_features,
            out_features,
        })
    }

    /// The weight `[out, in]`.
    pub fn weight(&self) -> &Var<T> {
        &self.weight
    }

    /// The bias `[out]`, if any.
    pub fn bias(&self) -> Option<&Var<T>> {
        self.bias.as_ref()
    }
}

impl<T: GradElement> Module<T> for Linear<T> {
    /// `x · Wᵀ (+ b)` for `x` of shape `[…, in]` ([`Var::linear`]): on cuBLAS one GEMM that
    /// reads `W` transposed in place and adds `b` in its epilogue, as PyTorch's `addmm`.
    fn forward(&self, x: &Var<T>) -> Result<Var<T>> {
        x.linear(&self.weight, self.bias.as_ref())
    }

    fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        let mut v = vec![("weight".to_string(), self.weight.clone())];
        if let Some(b) = &self.bias {
            v.push(("bias".to_string(), b.clone()));
        }
        v
    }

    fn describe(&self) -> String {
        format!(
            "Linear(in_features={}, out_features={}, bias={})",
            self.in_features,
            self.out_features,
            if self.bias.is_some() { "True" } else { "False" }
        )
    }
}
