//! The autograd record: what every variable carries ([`Meta`]: its id, whether it requires
//! grad, its accumulated gradient, its grad-ready hooks) and, for a computed value, the [`Node`]
//! that made it: the op's name, edges to its inputs' records (not their values: an
//! intermediate value is freed as soon as nothing needs it) and its backward closure, which
//! owns the tensors the backward needs (PyTorch's "saved tensors"). The variables above hold
//! records; the backward pass walks them.

use crate::error::Result;
use crate::lock::lock;
use cuda_stack_runtime::{GradElement, Tensor};
use std::sync::{Arc, Mutex};

/// The autograd record of a variable. Graph edges point at this, **not** at the value: a
/// computed value is freed as soon as no handle and no backward closure needs it (as in
/// PyTorch, where the graph keeps only saved tensors), so the forward's intermediates do not
/// pile up until the backward.
pub(crate) struct Meta<T: GradElement> {
    pub(crate) id: u64,
    pub(crate) requires_grad: bool,
    pub(crate) grad: Mutex<Option<Tensor<T>>>,
    pub(crate) node: Option<Node<T>>,
    /// The grad-ready hooks, by id: called after a backward pass has accumulated this leaf's
    /// gradient.
    pub(crate) hooks: Mutex<Vec<(u64, GradHookFn<T>)>>,
    /// A crate-internal hook that runs before the grad-ready hooks and may rewrite the
    /// accumulated gradient in place: it gets the gradient out of [`Meta::grad`] (so that,
    /// when nothing else holds it, its handle is the only one and an in-place op writes its
    /// storage instead of a copy), and the gradient goes back afterwards, error or not.
    /// [`crate::DataParallel`] all-reduces a parameter that fills a bucket alone this way.
    pub(crate) sink: Mutex<Option<(u64, GradSinkFn<T>)>>,
}

impl<T: GradElement> Meta<T> {
    /// Adds `g` to the accumulated gradient (leaves).
    pub(crate) fn accumulate_grad(&self, g: Tensor<T>) -> Result<()> {
        let mut slot = lock(&self.grad);
        let sum = match slot.take() {
            None => g.contiguous()?,
            Some(old) => (&old + &g)?,
        };
        *slot = Some(sum);
        Ok(())
    }
}

/// A backward closure: the output's gradient in, one gradient per input out. For a node that
/// folds (see [`Node::folds_first`]) the second argument holds the gradient already pending
/// for its first input: a closure that takes it (`Option::take`) returns it inside its first
/// gradient; one left in place stays pending and the first gradient is added to it as usual.
pub(crate) type BackwardFn<T> =
    Box<dyn Fn(&Tensor<T>, &mut Option<Tensor<T>>) -> Result<Vec<Option<Tensor<T>>>> + Send + Sync>;

/// How a computed value was made.
pub(crate) struct Node<T: GradElement> {
    pub(crate) op: &'static str,
    pub(crate) inputs: Vec<Arc<Meta<T>>>,
    /// Whether the backward takes the gradient pending for its first input and returns it
    /// with its own added (LayerNorm: the residual stream's gradient added in its `dx` kernel,
    /// instead of a separate add). The backward pass hands it over; for other nodes it stays
    /// in the pass and the node's gradient is added to it.
    pub(crate) folds_first: bool,
    /// Dropped once run unless the graph is retained, which frees the saved tensors.
    pub(crate) backward: Mutex<Option<BackwardFn<T>>>,
}

impl<T: GradElement> Node<T> {
    pub(crate) fn new(
        op: &'static str,
        inputs: Vec<Arc<Meta<T>>>,
        folds_first: bool,
        backward: BackwardFn<T>,
    ) -> Node<T> {
        Node {
            op,
            inputs,
            folds_first,
            backward: Mutex::new(Some(backward)),
        }
    }
}

/// A grad-ready hook: called with the leaf's accumulated gradient.
pub(crate) type GradHookFn<T> = Arc<dyn Fn(&Tensor<T>) -> Result<()> + Send + Sync>;

/// A gradient sink (see [`Meta::sink`]).
pub(crate) type GradSinkFn<T> = Arc<dyn Fn(&mut Tensor<T>) -> Result<()> + Send + Sync>;
