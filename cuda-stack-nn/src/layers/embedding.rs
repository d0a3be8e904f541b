//! `nn.Embedding`.

use super::Module;
use crate::error::{NnError, Result};
use crate::{init, Var};
use cuda_stack_runtime::{GradElement, Tensor};

/// A `[vocab, dim]` lookup table (`nn.Embedding`), initialised `N(0, 0.02²)` as GPT-2 does.
/// Its input is a tensor of i32 ids, not a `Var`: call [`Embedding::forward_ids`] (the
/// [`Module::forward`] of a `Var` is an error that says so); [`Module::parameters`] serves the
/// optimizers as for any layer.
pub struct Embedding<T: GradElement> {
    weight: Var<T>,
    vocab: usize,
    dim: usize,
}

impl<T: GradElement> Embedding<T> {
    /// A `[vocab, dim]` table initialised from `seed`.
    pub fn new(vocab: usize, dim: usize, seed: u64) -> Result<Embedding<T>> {
        if vocab == 0 || dim == 0 {
            return Err(NnError::Invalid {
                what: "Embedding",
                problem: format!("vocab = {vocab}, dim = {dim}: both must be at least 1"),
            });
        }
        Ok(Embedding {
            weight: Var::parameter(init::normal(&[vocab, dim], 0.02, seed)?),
            vocab,
            dim,
        })
    }

    /// The table, `[vocab, dim]`.
    pub fn weight(&self) -> &Var<T> {
        &self.weight
    }

    /// The rows of the table for `ids` (any shape, e.g. from [`crate::token_ids`]): shape
    /// `ids.shape() + [dim]`. Backward: the deterministic scatter-add.
    pub fn forward_ids(&self, ids: &Tensor<i32>) -> Result<Var<T>> {
        self.weight.embedding(ids)
    }
}

impl<T: GradElement> Module<T> for Embedding<T> {
    /// Always an error: an embedding takes ids, see [`Embedding::forward_ids`].
    fn forward(&self, x: &Var<T>) -> Result<Var<T>> {
        Err(NnError::Invalid {
            what: "Embedding::forward",
            problem: format!(
                "an embedding looks up i32 ids, not a floating-point input of shape {:?}; call \
                 Embedding::forward_ids",
                x.shape()
            ),
        })
    }

    fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        vec![("weight".to_string(), self.weight.clone())]
    }

    fn describe(&self) -> String {
        format!("Embedding({}, {})", self.vocab, self.dim)
    }
}
