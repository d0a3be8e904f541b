//! The reverse-mode pass over the recorded graph ([`Var::backward`]).
//!
//! `backward` orders the nodes reachable from the output (see `record.rs`) so that every node
//! runs after all its consumers (a depth-first post-order, reversed), hands each node the sum of
//! its consumers' gradients, and adds the gradients reaching leaves into their `.grad` — then
//! calls the leaf's grad-ready hooks ([`Var::register_grad_ready_hook`]), so data-parallel
//! training can start reducing a gradient while the rest of the backward runs. Unless the graph
//! is retained, each node's closure is dropped once run, freeing its saved tensors; a second
//! backward through it is [`NnError::GraphFreed`].
//!
//! A node that folds (`Node::folds_first`: LayerNorm) is handed the gradient summed so far for
//! its first input and returns it with its own added, in its own kernel: in a pre-LayerNorm
//! residual stream the LayerNorm of a sum runs after every other consumer of that sum (they
//! all depend on its output), so the stream's gradient reaches it whole and no add is launched.
//! Cast leaves' gradients are converted in one batch when the outermost pass ends
//! (`deferred_cast.rs`).

use crate::deferred_cast::PassGuard;
use crate::error::{NnError, Result};
use crate::lock::lock;
use crate::record::Meta;
use crate::var::Var;
use cuda_stack_runtime::{GradElement, Tensor};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

impl<T: GradElement> Var<T> {
    /// Computes the gradient of this one-element value with respect to every leaf that requires
    /// grad and adds it to their [`Var::grad`] (`loss.backward()`). Frees the graph's saved
    /// tensors as it goes.
    pub fn backward(&self) -> Result<()> {
        self.run_backward(None, false)
    }

    /// [`Var::backward`] keeping the saved tensors, so the graph can be differentiated again
    /// (`loss.backward(retain_graph=True)`).
    pub fn backward_retain_graph(&self) -> Result<()> {
        self.run_backward(None, true)
    }

    /// The backward pass of a value of any shape given its gradient (`y.backward(gradient=g)`),
    /// keeping the graph when `retain_graph`.
    pub fn backward_with(&self, grad: &Tensor<T>, retain_graph: bool) -> Result<()> {
        if grad.shape() != self.shape() {
            return Err(NnError::GradShape {
                output: self.shape(),
                grad: grad.shape().to_vec(),
            });
        }
        self.run_backward(Some(grad.clone()), retain_graph)
    }

    /// One backward pass: `backward_pass` inside a `PassGuard`, which converts the
    /// cast leaves' deferred gradients when the outermost pass ends (see `deferred_cast.rs`),
    /// after an error too.
    fn run_backward(&self, seed: Option<Tensor<T>>, retain: bool) -> Result<()> {
        let pass = PassGuard::enter();
        let result = self.backward_pass(seed, retain);
        pass.finish(result)
    }

    fn backward_pass(&self, seed: Option<Tensor<T>>, retain: bool) -> Result<()> {
        let root = &self.inner.meta;
        if !root.requires_grad {
            return Err(NnError::NoGradPath {
                shape: self.shape(),
            });
        }
        let seed = match seed {
            Some(g) => g,
            None => {
                let value = self.value();
                if value.numel() != 1 {
                    return Err(NnError::NonScalarBackward {
                        shape: value.shape().to_vec(),
                    });
                }
                value.full_like(value.shape(), T::from_f64(1.0))?
            }
        };
        let order = topological_order(root);
        let mut grads: HashMap<u64, Tensor<T>> = HashMap::new();
        grads.insert(root.id, seed);
        for meta in order.iter().rev() {
            let Some(g) = grads.remove(&meta.id) else {
                continue;
            };
            let Some(node) = &meta.node else {
                meta.accumulate_grad(g)?;
                meta.run_grad_hooks()?;
                continue;
            };
            // A folding node gets what is pending for its first input (see `Node::folds_first`);
            // what it leaves there goes back into the pass.
            let mut pending = match node.inputs.first() {
                Some(first) if node.folds_first && first.requires_grad => grads.remove(&first.id),
                _ => None,
            };
            let input_grads = {
                let mut slot = lock(&node.backward);
                let f = slot.as_ref().ok_or(NnError::GraphFreed { op: node.op })?;
                let out = f(&g, &mut pending)?;
                if !retain {
                    *slot = None;
                }
                out
            };
            if let (Some(p), Some(first)) = (pending, node.inputs.first()) {
                grads.insert(first.id, p);
            }
            for (input, ig) in node.inputs.iter().zip(input_grads) {
                let Some(ig) = ig else { continue };
                if !input.requires_grad {
                    continue;
                }
                let sum = match grads.remove(&input.id) {
                    None => ig,
                    Some(old) => (&old + &ig)?,
                };
                grads.insert(input.id, sum);
            }
        }
        Ok(())
    }
}

/// Every record that requires grad reachable from `root`, inputs before the values computed
/// from them (iterative depth-first post-order: deep graphs do not recurse).
fn topological_order<T: GradElement>(root: &Arc<Meta<T>>) -> Vec<Arc<Meta<T>>> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<(Arc<Meta<T>>, bool)> = vec![(Arc::clone(root), false)];
    while let Some((meta, expanded)) = stack.pop() {
        if expanded {
            order.push(meta);
            continue;
        }
        if !seen.insert(meta.id) {
            continue;
        }
        stack.push((Arc::clone(&meta), true));
        if let Some(node) = &meta.node {
            for input in &node.inputs {
                if input.requires_grad && !seen.contains(&input.id) {
                    stack.push((Arc::clone(input), false));
                }
            }
        }
    }
    order
}
