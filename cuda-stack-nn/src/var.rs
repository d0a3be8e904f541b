//! [`Var`]: a tensor that autograd tracks (PyTorch's `Tensor` with `requires_grad`, `.grad` and
//! `.grad_fn`).

use crate::error::{NnError, Result};
use crate::grad_mode::is_grad_enabled;
use crate::lock::lock;
use crate::record::{BackwardFn, Meta, Node};
use cuda_stack_runtime::{GradElement, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockWriteGuard};

/// Every `Var` gets a distinct id (the backward pass keys gradients by it).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A value in the autograd graph: a [`Tensor`], whether it requires a gradient, the gradient
/// accumulated into it by [`Var::backward`] (leaves only), and for computed values the op that
/// made them (PyTorch's `grad_fn`) with the inputs and saved tensors its backward needs.
///
/// `Clone` gives another handle to the **same** variable (like a Python reference): a
/// parameter cloned into an optimizer is updated for the model too.
///
/// | PyTorch | here |
/// |---|---|
/// | `torch.tensor(.., requires_grad=True)` / `nn.Parameter(t)` | [`Var::parameter`] |
/// | a tensor without grad | [`Var::constant`] |
/// | `x.grad` | [`Var::grad`] (`Ok(None)` before a backward) |
/// | `x.detach()` | [`Var::detach`] |
/// | `x.is_leaf`, `x.grad_fn` | [`Var::is_leaf`], [`Var::op`] |
pub struct Var<T: GradElement> {
    pub(crate) inner: Arc<Inner<T>>,
}

/// What every handle of one variable shares: the value and the autograd record.
pub(crate) struct Inner<T: GradElement> {
    value: RwLock<Tensor<T>>,
    pub(crate) meta: Arc<Meta<T>>,
}

impl<T: GradElement> Clone for Var<T> {
    fn clone(&self) -> Self {
        Var {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: GradElement> std::fmt::Debug for Var<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Var")
            .field("shape", &self.shape())
            .field("requires_grad", &self.inner.meta.requires_grad)
            .field("op", &self.op())
            .finish()
    }
}

impl<T: GradElement> Var<T> {
    fn make(value: Tensor<T>, requires_grad: bool, node: Option<Node<T>>) -> Var<T> {
        let meta = Arc::new(Meta {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            requires_grad,
            grad: Mutex::new(None),
            node,
            hooks: Mutex::new(Vec::new()),
            sink: Mutex::new(None),
        });
        Var {
            inner: Arc::new(Inner {
                value: RwLock::new(value),
                meta,
            }),
        }
    }

    /// A leaf that requires grad: a parameter or an input to differentiate with respect to.
    pub fn parameter(value: Tensor<T>) -> Var<T> {
        Var::make(value, true, None)
    }

    /// A value autograd does not differentiate with respect to (data, targets, constants).
    pub fn constant(value: Tensor<T>) -> Var<T> {
        Var::make(value, false, None)
    }

    /// The result of op `op` on `inputs`. When grad mode is on and some input requires grad,
    /// the result records `backward` (given the result's gradient, one gradient per input,
    /// `None` where an input needs none); otherwise it is a constant and `backward` is dropped.
    pub(crate) fn from_op(
        value: Tensor<T>,
        op: &'static str,
        inputs: &[&Var<T>],
        backward: impl Fn(&Tensor<T>) -> Result<Vec<Option<Tensor<T>>>> + Send + Sync + 'static,
    ) -> Var<T> {
        Var::from_node(value, op, inputs, false, Box::new(move |g, _| backward(g)))
    }

    /// [`Var::from_op`] for an op whose backward adds the gradient already pending for its
    /// **first** input into that input's gradient itself (in its own kernel, saving an add):
    /// `backward(g, pending)` returns one gradient per input; where it takes the gradient out
    /// of `pending` (`Option::take`), its first gradient must include it. The pass hands over
    /// what has been summed for the first input so far (gradients arriving later are added as
    /// usual; one left in `pending` stays pending), so the result is the same sum either way.
    pub(crate) fn from_op_folding_first(
        value: Tensor<T>,
        op: &'static str,
        inputs: &[&Var<T>],
        backward: impl Fn(&Tensor<T>, &mut Option<Tensor<T>>) -> Result<Vec<Option<Tensor<T>>>>
            + Send
            + Sync
            + 'static,
    ) -> Var<T> {
        Var::from_node(value, op, inputs, true, Box::new(backward))
    }

    fn from_node(
        value: Tensor<T>,
        op: &'static str,
        inputs: &[&Var<T>],
        folds_first: bool,
        backward: BackwardFn<T>,
    ) -> Var<T> {
        let needs = is_grad_enabled() && inputs.iter().any(|v| v.inner.meta.requires_grad);
        if !needs {
            return Var::constant(value);
        }
        let edges = inputs.iter().map(|v| Arc::clone(&v.inner.meta)).collect();
        let node = Node::new(op, edges, folds_first, backward);
        Var::make(value, true, Some(node))
    }

    /// A differentiable op of your own, like PyTorch's `torch.autograd.Function` (seed 004's
    /// custom kernels with autograd): `value` is the forward's result, computed from the values
    /// of `inputs` (with your kernels); `backward` gets the gradient of the result and returns
    /// one gradient per input, in order, each of that input's shape (`None` where an input
    /// needs none). It owns what it needs (the saved tensors). When grad mode is off or no input
    /// requires grad, the result is a constant and `backward` is dropped unused.
    pub fn custom_op(
        value: Tensor<T>,
        name: &'static str,
        inputs: &[&Var<T>],
        backward: impl Fn(&Tensor<T>) -> Result<Vec<Option<Tensor<T>>>> + Send + Sync + 'static,
    ) -> Var<T> {
        Var::from_op(value, name, inputs, backward)
    }

    /// The current value (a cheap handle; an optimizer step replaces a parameter's value, so
    /// read it again after one).
    pub fn value(&self) -> Tensor<T> {
        self.inner
            .value
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The value itself, locked for writing (multi-tensor updates hold several at once; the
    /// optimizers refuse a parameter listed twice, so no lock is taken twice).
    pub(crate) fn value_mut(&self) -> RwLockWriteGuard<'_, Tensor<T>> {
        self.inner.value.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The gradient slot, locked (a captured step's replay holds it while it checks that the
    /// gradient is not shared).
    pub(crate) fn grad_slot(&self) -> MutexGuard<'_, Option<Tensor<T>>> {
        lock(&self.inner.meta.grad)
    }

    /// Runs `f` on the value itself (optimizers' in-place updates; the shape stays the same).
    pub(crate) fn with_value_mut<R>(&self, f: impl FnOnce(&mut Tensor<T>) -> R) -> R {
        f(&mut self.inner.value.write().unwrap_or_else(|e| e.into_inner()))
    }

    /// The device address of the value's first element (to check that an update was in place).
    pub(crate) fn value_ptr(&self) -> u64 {
        self.value().data_ptr()
    }

    /// Copies `src` into this variable's value, in place when the value's storage is not shared
    /// with another tensor handle ([`Tensor::is_exclusive`]; otherwise the value becomes a new
    /// copy). This is how new data reaches a [`crate::CapturedStep`]'s static inputs.
    pub fn copy_from_(&self, src: &Tensor<T>) -> Result<()> {
        Ok(self.with_value_mut(|v| v.copy_from_(src))?)
    }

    /// The value's shape.
    pub fn shape(&self) -> Vec<usize> {
        self.value().shape().to_vec()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.value().numel()
    }

    /// Whether gradients flow to (or through) this variable.
    pub fn requires_grad(&self) -> bool {
        self.inner.meta.requires_grad
    }

    /// Whether this is a leaf (created by the user, not by an op).
    pub fn is_leaf(&self) -> bool {
        self.inner.meta.node.is_none()
    }

    /// The op that computed this value (`None` for leaves): PyTorch's `grad_fn` name.
    pub fn op(&self) -> Option<&'static str> {
        self.inner.meta.node.as_ref().map(|n| n.op)
    }

    /// The gradient accumulated by backward passes: `Ok(None)` before the first (or after
    /// [`Var::zero_grad`]); [`NnError::NotRequiringGrad`] if this variable does not require
    /// grad. Computed (non-leaf) values do not keep gradients, as in PyTorch.
    pub fn grad(&self) -> Result<Option<Tensor<T>>> {
        if !self.inner.meta.requires_grad {
            return Err(NnError::NotRequiringGrad {
                shape: self.shape(),
            });
        }
        Ok(lock(&self.inner.meta.grad).clone())
    }

    /// Drops the gradient (`zero_grad(set_to_none=True)`): the next backward writes a fresh one.
    pub fn zero_grad(&self) {
        *lock(&self.inner.meta.grad) = None;
    }

    /// Replaces the gradient (`p.grad = g` in PyTorch): `None` drops it. The gradient must have
    /// this variable's shape and live on its device; [`NnError::NotRequiringGrad`] for a
    /// variable that does not require grad. A backward adds to it; an optimizer steps with it.
    pub fn set_grad(&self, grad: Option<Tensor<T>>) -> Result<()> {
        if !self.inner.meta.requires_grad {
            return Err(NnError::NotRequiringGrad {
                shape: self.shape(),
            });
        }
        if let Some(g) = &grad {
            let value = self.value();
            if g.shape() != value.shape() || g.device() != value.device() {
                return Err(NnError::Invalid {
                    what: "Var::set_grad",
                    problem: format!(
                        "a gradient of shape {:?} on cuda:{} for a variable of shape {:?} on                          cuda:{}; they must match",
                        g.shape(),
                        g.device(),
                        value.shape(),
                        value.device()
                    ),
                });
            }
        }
        *lock(&self.inner.meta.grad) = grad;
        Ok(())
    }

    /// The same value, cut from the graph (a constant sharing the storage: no copy).
    pub fn detach(&self) -> Var<T> {
        Var::constant(self.value())
    }

    /// Whether `self` and `other` are the same variable.
    pub fn same_var(&self, other: &Var<T>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
