//! `nn.Sequential`.

use super::Module;
use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

/// Layers applied in order (`nn.Sequential`); parameters are named `"{index}.{name}"`.
pub struct Sequential<T: GradElement> {
    layers: Vec<Box<dyn Module<T>>>,
}

impl<T: GradElement> Default for Sequential<T> {
    fn default() -> Self {
        Sequential { layers: Vec::new() }
    }
}

impl<T: GradElement> Sequential<T> {
    /// An empty sequence (its forward is the identity).
    pub fn new() -> Sequential<T> {
        Sequential::default()
    }

    /// Appends a layer (`nn.Sequential.append`, builder style).
    pub fn append(mut self, layer: impl Module<T> + 'static) -> Sequential<T> {
        self.layers.push(Box::new(layer));
        self
    }

    /// The number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether there are no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl<T: GradElement> Module<T> for Sequential<T> {
    fn forward(&self, x: &Var<T>) -> Result<Var<T>> {
        let mut y = x.clone();
        for layer in &self.layers {
            y = layer.forward(&y)?;
        }
        Ok(y)
    }

    fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(i, l)| {
                l.named_parameters()
                    .into_iter()
                    .map(move |(n, v)| (format!("{i}.{n}"), v))
            })
            .collect()
    }

    /// PyTorch's layout: `Sequential(\n  (0): Linear(...)\n  ...\n)`.
    fn describe(&self) -> String {
        let mut s = String::from("Sequential(\n");
        for (i, l) in self.layers.iter().enumerate() {
            s.push_str(&format!("  ({i}): {}\n", l.describe()));
        }
        s.push(')');
        s
    }
}
