//! `nn.ReLU`.

use super::Module;
use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

/// `max(x, 0)` as a layer (`nn.ReLU()`); no parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Relu;

impl<T: GradElement> Module<T> for Relu {
    fn forward(&self, x: &Var<T>) -> Result<Var<T>> {
        x.relu()
    }

    fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        Vec::new()
    }

    fn describe(&self) -> String {
        "ReLU()".to_string()
    }
}
