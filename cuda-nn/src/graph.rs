//! The recorded graph and the reverse-mode pass over it: [`Var::backward`], grad mode
//! ([`no_grad`], [`is_grad_enabled`]).
//!
//! Each op's result holds a [`Node`]: the op's name, handles to its inputs (which keep the
//! graph alive exactly as long as a result is reachable) and its backward closure, which owns
//! the tensors the backward needs (PyTorch's "saved tensors"). `backward` orders the nodes
//! reachable from the output so that every node runs after all its consumers (a depth-first
//! post-order, reversed), hands each node the sum of its consumers' gradients, and adds the
//! gradients reaching leaves into their `.grad`. Unless the graph is retained, each node's
//! closure is dropped once run, freeing its saved tensors; a second backward through it is
//! [`NnError::GraphFreed`].

use crate::error::{NnError, Result};
use crate::var::{lock, Var};
use cuda_runtime_lite::{GradElement, Tensor};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// A backward closure: the output's gradient in, one gradient per input out.
pub(crate) type BackwardFn<T> =
    Box<dyn Fn(&Tensor<T>) -> Result<Vec<Option<Tensor<T>>>> + Send + Sync>;

/// How a computed value was made.
pub(crate) struct Node<T: GradElement> {
    pub(crate) op: &'static str,
    inputs: Vec<Var<T>>,
    backward: Mutex<Option<BackwardFn<T>>>,
}

impl<T: GradElement> Node<T> {
    pub(crate) fn new(op: &'static str, inputs: Vec<Var<T>>, backward: BackwardFn<T>) -> Node<T> {
        Node {
            op,
            inputs,
            backward: Mutex::new(Some(backward)),
        }
    }
}

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread record the graph (`torch.is_grad_enabled()`).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Runs `f` with graph recording off on this thread (`with torch.no_grad():`): results of ops
/// are constants, nothing is saved for a backward. Restored afterwards, also on unwinding.
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            GRAD_ENABLED.with(|g| g.set(self.0));
        }
    }
    let _restore = Restore(GRAD_ENABLED.with(|g| g.replace(false)));
    f()
}

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

    fn run_backward(&self, seed: Option<Tensor<T>>, retain: bool) -> Result<()> {
        if !self.inner.requires_grad {
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
        let order = self.topological_order();
        let mut grads: HashMap<u64, Tensor<T>> = HashMap::new();
        grads.insert(self.inner.id, seed);
        for var in order.iter().rev() {
            let Some(g) = grads.remove(&var.inner.id) else {
                continue;
            };
            let Some(node) = &var.inner.node else {
                var.accumulate_grad(g)?;
                continue;
            };
            let input_grads = {
                let mut slot = lock(&node.backward);
                let f = slot.as_ref().ok_or(NnError::GraphFreed { op: node.op })?;
                let out = f(&g)?;
                if !retain {
                    *slot = None;
                }
                out
            };
            for (input, ig) in node.inputs.iter().zip(input_grads) {
                let Some(ig) = ig else { continue };
                if !input.inner.requires_grad {
                    continue;
                }
                let sum = match grads.remove(&input.inner.id) {
                    None => ig,
                    Some(old) => (&old + &ig)?,
                };
                grads.insert(input.inner.id, sum);
            }
        }
        Ok(())
    }

    /// Every variable that requires grad reachable from `self`, inputs before the values
    /// computed from them (iterative depth-first post-order: deep graphs do not recurse).
    fn topological_order(&self) -> Vec<Var<T>> {
        let mut order = Vec::new();
        let mut seen = HashSet::new();
        let mut stack: Vec<(Var<T>, bool)> = vec![(self.clone(), false)];
        while let Some((var, expanded)) = stack.pop() {
            if expanded {
                order.push(var);
                continue;
            }
            if !seen.insert(var.inner.id) {
                continue;
            }
            stack.push((var.clone(), true));
            if let Some(node) = &var.inner.node {
                for input in &node.inputs {
                    if input.inner.requires_grad && !seen.contains(&input.inner.id) {
                        stack.push((input.clone(), false));
                    }
                }
            }
        }
        order
    }
}
