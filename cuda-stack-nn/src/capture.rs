//! [`CapturedStep`]: a whole training step (forward, backward, optimizer) captured once into a
//! CUDA graph and replayed with one launch (`torch.cuda.graph` over a training step).
//!
//! Eager, every op of a step is a host round of checks, an allocation from the cache and a
//! `cuLaunchKernel`: for small models the host sets the pace. A graph replays the recorded
//! kernels with one call. What makes a step capturable here:
//! - **no host round trips**: a step never reads the device (the loss stays a tensor; Adam's
//!   step count is a device counter; the backward's seed is a fill kernel);
//! - **in-place updates**: parameters and optimizer state are rewritten at the same addresses
//!   (so the graph's reads and writes line up from one replay to the next) — checked after the
//!   capture: a parameter or state tensor that moved is an error;
//! - **memory the graph owns**: the step's temporaries and gradients are allocated during the
//!   capture (plain `cuMemAlloc`s at capture time, not graph nodes) and owned by the graph from
//!   then on, so the caching allocator never hands them to anyone else; they are freed with it.
//!   Within the capture, a temporary freed by the step is reused by the step's later
//!   allocations of its size class (the caching allocator's *graph-private pool*, see
//!   [`cuda_stack_runtime::caching`]): the capture is one chain of work on its stream, so in
//!   every replay the later user runs after the earlier one. A captured step so needs about the
//!   memory of an eager step's peak, not the sum of all its temporaries. (The eager warm-up's
//!   cached blocks belong to the eager stream; `cuda_stack_runtime::empty_cache` before the
//!   capture gives them back.)
//!
//! The inputs are static: the tensors the step read during the capture are the ones every replay
//! reads. Feed new data by writing into them in place ([`Var::copy_from_`]) between replays.
//! Warm the optimizer up with at least one eager step first, so its state exists before the
//! capture (as PyTorch's documentation asks).
//!
//! Host scalars are recorded too: Adam's learning rate can follow a schedule through
//! [`CapturedStep::set_lr`] (it rewrites the rate in the graph's update nodes), but a
//! [`crate::Dropout`] replays the mask it drew during the capture (its position advances on the
//! host), so capture steps without dropout (or with `p = 0`).
//!
//! ## Values stay values
//! A replay rewrites, in place, the parameters, their gradients and the `Var`s the step returned
//! (the loss): the step's *static* tensors. The tensor layer promises that a `Tensor` is a value
//! (an in-place write goes only through a handle nobody else shares), and replays keep that
//! promise: each replay first checks, under the variables' locks, that none of them is shared
//! with another handle (a `value()` or `grad()` kept since the capture) nor replaced, and is
//! refused with [`NnError::ReplayRefused`] naming it otherwise. Read them after a replay (the
//! handles you take are ordered after it), and drop those handles before the next one, or keep
//! a copy ([`cuda_stack_runtime::Tensor::deep_copy`]).
//!
//! What the step computes has no value before the first replay: a tensor made during the
//! capture and read before the graph has run is refused by the tensor layer
//! ([`cuda_stack_runtime::TensorError::NotYetComputed`]) instead of returning garbage.

use crate::capture_targets::{GuardedReplay, ReplayTargets};
use crate::error::{NnError, Result};
use crate::optim::Optimizer;
use crate::Var;
use cuda_stack_runtime::cuda_stack_driver::{GraphExec, Stream};
use cuda_stack_runtime::{adam_many_lr_param, use_stream, DType, GradElement, Runtime};

/// A training step captured into one CUDA graph; [`CapturedStep::replay`] runs it again.
///
/// ## Values stay values
/// A replay rewrites, in place, the parameters, their gradients and the `Var`s the step returned
/// (its [`StepOutputs`], e.g. the loss). Each replay first checks, under the variables' locks,
/// that none of them is shared with another `Tensor` handle (a `value()` or `grad()` kept since
/// the capture) nor replaced, and is refused with [`NnError::ReplayRefused`] naming it otherwise.
/// Read them after a replay through handles you drop before the next one, or keep a copy
/// ([`cuda_stack_runtime::Tensor::deep_copy`]). Before the first replay, what the capture
/// produced has no value, and the tensor layer refuses to read it
/// ([`cuda_stack_runtime::TensorError::NotYetComputed`]).
pub struct CapturedStep {
    exec: GraphExec,
    stream: Stream,
    /// The parameters, gradients and outputs a replay rewrites, checked before each one.
    targets: Box<dyn GuardedReplay>,
    /// Where the captured Adam updates take their learning rate ([`CapturedStep::set_lr`]).
    lr: LrNodes,
}

/// The kernel nodes of the multi-tensor Adam update in a captured step, and which of their
/// parameters is the learning rate.
struct LrNodes {
    nodes: Vec<usize>,
    param: usize,
    /// The rate is an `f64` (f64 parameters), else an `f32`.
    wide: bool,
}

/// What a captured step may return: values without tensors, and [`Var`]s of the step's element
/// type (alone, in a `Vec` or `Option`, or in tuples), which become the step's static outputs —
/// rewritten by every replay, and checked before each one like the parameters (see the
/// [`CapturedStep`] docs).
pub trait StepOutputs<T: GradElement> {
    /// Appends the `Var`s in `self` to `out`.
    fn static_vars(&self, out: &mut Vec<Var<T>>);
}

impl<T: GradElement> StepOutputs<T> for Var<T> {
    fn static_vars(&self, out: &mut Vec<Var<T>>) {
        out.push(self.clone());
    }
}

impl<T: GradElement, X: StepOutputs<T>> StepOutputs<T> for Vec<X> {
    fn static_vars(&self, out: &mut Vec<Var<T>>) {
        for x in self {
            x.static_vars(out);
        }
    }
}

impl<T: GradElement, X: StepOutputs<T>> StepOutputs<T> for Option<X> {
    fn static_vars(&self, out: &mut Vec<Var<T>>) {
        if let Some(x) = self {
            x.static_vars(out);
        }
    }
}

macro_rules! no_tensors {
    ($($t:ty),*) => {$(
        impl<T: GradElement> StepOutputs<T> for $t {
            fn static_vars(&self, _: &mut Vec<Var<T>>) {}
        }
    )*};
}
no_tensors!((), bool, u32, u64, usize, i32, i64, f32, f64);

macro_rules! tuple_outputs {
    ($($x:ident $i:tt),*) => {
        impl<T: GradElement, $($x: StepOutputs<T>),*> StepOutputs<T> for ($($x,)*) {
            fn static_vars(&self, out: &mut Vec<Var<T>>) {
                $(self.$i.static_vars(out);)*
            }
        }
    };
}
tuple_outputs!(A 0, B 1);
tuple_outputs!(A 0, B 1, C 2);
tuple_outputs!(A 0, B 1, C 2, D 3);

impl CapturedStep {
    /// Captures `step` (which runs the forward, the backward and the step of the optimizer it is
    /// handed, and returns whatever it wants to keep, e.g. the loss `Var`) into a graph.
    /// Nothing runs during the capture: the work is recorded, and each
    /// [`CapturedStep::replay`] performs one step.
    ///
    /// Fails if `step` does something a graph cannot hold (a host copy, reading a value), or if
    /// a parameter or an optimizer state tensor was not updated in place (its value was shared
    /// with another handle, or the optimizer had not taken a step yet).
    pub fn capture<T: GradElement, O: Optimizer<T> + ?Sized, R: StepOutputs<T>>(
        optimizer: &mut O,
        step: impl FnOnce(&mut O) -> Result<R>,
    ) -> Result<(CapturedStep, R)> {
        let params = optimizer.parameters().to_vec();
        let first = params.first().ok_or(NnError::NoParameters {
            optimizer: "CapturedStep::capture",
        })?;
        let rt = Runtime::get(first.value().device())?;
        let state_before = optimizer.state_addresses();
        if optimizer.steps_taken() == 0 {
            return Err(NnError::Invalid {
                what: "CapturedStep::capture",
                problem: "the optimizer has no state yet: take one eager step first, so the \
                          capture does not record the state's creation"
                    .into(),
            });
        }
        let params_before: Vec<u64> = params.iter().map(Var::value_ptr).collect();
        let capture = rt.context().begin_capture()?;
        let stream = capture.stream().clone();
        let out = {
            let _on_capture = use_stream(&stream);
            step(optimizer)
        };
        let graph = capture.end();
        let out = out?;
        let exec = graph?.instantiate()?;
        let moved = params
            .iter()
            .zip(&params_before)
            .position(|(p, &before)| p.value_ptr() != before);
        if let Some(i) = moved {
            return Err(NnError::Invalid {
                what: "CapturedStep::capture",
                problem: format!(
                    "parameter {i} was not updated in place (another handle shares its value, \
                     e.g. a clone of `value()` kept alive), so a replay would not see its update"
                ),
            });
        }
        if optimizer.state_addresses() != state_before {
            return Err(NnError::Invalid {
                what: "CapturedStep::capture",
                problem: "the optimizer's state tensors moved during the capture".into(),
            });
        }
        let mut outputs = Vec::new();
        out.static_vars(&mut outputs);
        let targets = Box::new(ReplayTargets::record(&params, &outputs));
        // The multi-tensor Adam kernel's nodes, if `T` has one (f32, f64): their rate can follow
        // a schedule.
        let lr = match adam_many_lr_param::<T>(rt.ordinal()) {
            Ok((f, param)) => LrNodes {
                nodes: exec.kernel_nodes_launching(&f)?,
                param,
                wide: T::DTYPE == DType::F64,
            },
            Err(_) => LrNodes {
                nodes: Vec::new(),
                param: 0,
                wide: false,
            },
        };
        Ok((
            CapturedStep {
                exec,
                stream,
                targets,
                lr,
            },
            out,
        ))
    }

    /// Runs the captured step once more (one `cuGraphLaunch`, asynchronous). Refused with
    /// [`NnError::ReplayRefused`], before anything is queued, when a parameter, its gradient or
    /// an output of the step is shared with another `Tensor` handle or was replaced since the
    /// capture (see "Values stay values" on [`CapturedStep`]).
    pub fn replay(&self) -> Result<()> {
        self.targets.with_targets_exclusive(&mut || {
            self.exec.launch(&self.stream)?;
            Ok(())
        })
    }

    /// Sets the learning rate of the Adam / AdamW updates ([`crate::Adam`]) the step captured,
    /// for the replays queued from now on (a schedule's `param_group["lr"] = lr`); replays
    /// already queued keep theirs. The rate is an argument of the update kernels, recorded at
    /// the capture: this rewrites it in the graph's copy of those nodes (a few driver calls, no
    /// new capture). Call the optimizer's own `set_lr` too if it also takes eager steps.
    ///
    /// An error when `lr` is negative or not finite, or when the step launched no multi-tensor
    /// Adam update (SGD's rate stays the one it was captured with).
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        if !(lr.is_finite() && lr >= 0.0) {
            return Err(NnError::Invalid {
                what: "CapturedStep::set_lr",
                problem: format!("lr = {lr}: must be finite and non-negative"),
            });
        }
        if self.lr.nodes.is_empty() {
            return Err(NnError::Invalid {
                what: "CapturedStep::set_lr",
                problem: "the captured step launches no Adam update whose rate could be changed \
                          (only Adam / AdamW's rate can follow a schedule in a captured step)"
                    .into(),
            });
        }
        for &node in &self.lr.nodes {
            // SAFETY: parameter `param` of these nodes' kernel (`adam_many_lr_param`) is the
            // learning rate, of this width: a factor of the update, on which no memory access
            // depends, so the kernel stays within its buffers whatever the value.
            unsafe {
                if self.lr.wide {
                    self.exec.set_kernel_param(node, self.lr.param, lr)?;
                } else {
                    self.exec.set_kernel_param(node, self.lr.param, lr as f32)?;
                }
            }
        }
        Ok(())
    }

    /// The number of kernels one replay launches.
    pub fn kernel_count(&self) -> Result<usize> {
        Ok(self.exec.kernel_node_count()?)
    }

    /// Waits until every replay queued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize()?;
        Ok(())
    }
}
