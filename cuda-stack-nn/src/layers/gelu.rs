//! `nn.GELU(approximate='tanh')`.

use super::Module;
use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

/// GELU in the tanh form GPT-2 uses, as a layer (`nn.GELU(approximate='tanh')`); no
/// parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gelu;

impl<T: GradElement> Module<T> for Gelu {
    fn forward(&self, x: &Var<T>) -> Result<Var<T>> {
        x.gelu()
    }

    fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        Vec::new()
    }

    fn describe(&self) -> String {
        "GELU(approximate='tanh')".to_string()
    }
}
