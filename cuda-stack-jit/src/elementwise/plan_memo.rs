//! The last call's plan, kept so that the next call with the same signature skips binding.
//!
//! Binding a call (checking counts and devices, resolving placeholder dtypes, broadcasting,
//! classifying layouts, merging dimensions, finding the compiled specialization) depends only
//! on each argument's kind, device, dtype, shape and strides, never on the data or on a view's
//! offset (the pointer, offset included, is pushed at launch). A loop calling a kernel on
//! same-shaped tensors therefore binds once: each later call compares its signature with the
//! remembered one, without allocating, and reuses the plan. Calls with given outputs, an
//! explicit size, or contiguous copies of inputs are not remembered.

use super::Bound;
use crate::args::{Arg, TensorRef};
use crate::loaded::Loaded;
use cuda_stack_runtime::DType;
use std::sync::{Arc, Mutex};

/// A bound call and the specialization it launches.
pub(super) struct Plan {
    pub(super) bound: Bound,
    pub(super) loaded: Arc<Loaded>,
}

/// One argument of a signature; a tensor's shape and strides follow in [`Signature`]'s lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Tensor {
        device: usize,
        dtype: DType,
        rank: usize,
    },
    Scalar(DType),
}

/// What binding depends on, for every argument of a call.
#[derive(Debug, Default)]
pub(super) struct Signature {
    items: Vec<Item>,
    shapes: Vec<usize>,
    strides: Vec<isize>,
}

fn tensor_parts<'a>(t: &TensorRef<'a>) -> (Item, &'a [usize], &'a [isize]) {
    let (shape, strides) = crate::args::with_tensor!(t, |t| (t.shape(), t.strides()));
    (
        Item::Tensor {
            device: t.device(),
            dtype: t.dtype(),
            rank: shape.len(),
        },
        shape,
        strides,
    )
}

impl Signature {
    /// The signature of `args`.
    pub(super) fn of(args: &[Arg<'_>]) -> Signature {
        let mut s = Signature::default();
        for a in args {
            match a {
                Arg::Scalar(v) => s.items.push(Item::Scalar(v.dtype())),
                Arg::Tensor(t) => {
                    let (item, shape, strides) = tensor_parts(t);
                    s.items.push(item);
                    s.shapes.extend_from_slice(shape);
                    s.strides.extend_from_slice(strides);
                }
            }
        }
        s
    }

    /// Whether `args` have this signature (no allocation).
    fn matches(&self, args: &[Arg<'_>]) -> bool {
        if args.len() != self.items.len() {
            return false;
        }
        let mut at = 0;
        for (a, &item) in args.iter().zip(&self.items) {
            match a {
                Arg::Scalar(v) => {
                    if item != Item::Scalar(v.dtype()) {
                        return false;
                    }
                }
                Arg::Tensor(t) => {
                    let (got, shape, strides) = tensor_parts(t);
                    let end = at + shape.len();
                    if got != item
                        || self.shapes.get(at..end) != Some(shape)
                        || self.strides.get(at..end) != Some(strides)
                    {
                        return false;
                    }
                    at = end;
                }
            }
        }
        true
    }
}

/// The plan of the last remembered call of one kernel definition.
#[derive(Default)]
pub(super) struct PlanMemo {
    last: Mutex<Option<(Signature, Arc<Plan>)>>,
}

impl PlanMemo {
    /// The remembered plan, if `args` have its signature.
    pub(super) fn get(&self, args: &[Arg<'_>]) -> Option<Arc<Plan>> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match &*last {
            Some((sig, plan)) if sig.matches(args) => Some(plan.clone()),
            _ => None,
        }
    }

    /// Remembers `plan` for calls with the signature `sig` (replacing the previous one).
    pub(super) fn put(&self, sig: Signature, plan: Arc<Plan>) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some((sig, plan));
    }
}
