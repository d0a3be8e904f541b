//! ZeRO-1: [`ShardedOptimizer`], data-parallel training with the optimizer state sharded
//! across ranks (DeepSpeed's ZeRO stage 1, the way llm.c trains GPT-2; PyTorch's
//! `ZeroRedundancyOptimizer` shards the same state).

use crate::error::{NnError, Result, ShardingError};
use crate::parallel::{DataParallel, DataParallelConfig, Exchange, Slot};
use crate::{Adam, AdamConfig, Optimizer, Sgd, SgdConfig, Var};
use cuda_stack_runtime::cuda_stack_driver::Stream;
use cuda_stack_runtime::cuda_stack_nccl::{Communicator, NcclType};
use cuda_stack_runtime::{use_stream, GradElement, Tensor};
use std::sync::RwLockWriteGuard;

/// The optimizers a [`ShardedOptimizer`] can shard: [`Sgd`] (with or without momentum,
/// dampening, Nesterov, weight decay) and [`Adam`] (Adam or AdamW), whose update rules are
/// element-wise, so a rank can apply them to any run of elements. Any other optimizer does not
/// convert into this type, so it cannot be passed; one that has already stepped is refused
/// ([`ShardingError::OptimizerHasState`]). It is an [`Optimizer`] itself (the one it holds,
/// unsharded), for programs that choose SGD or Adam at run time.
pub enum ShardableOptimizer<T: GradElement> {
    /// `torch.optim.SGD`: one momentum buffer per element when it has momentum.
    Sgd(Sgd<T>),
    /// `torch.optim.Adam` / `AdamW`: two moment estimates per element.
    Adam(Adam<T>),
}

impl<T: GradElement> From<Sgd<T>> for ShardableOptimizer<T> {
    fn from(o: Sgd<T>) -> Self {
        ShardableOptimizer::Sgd(o)
    }
}

impl<T: GradElement> From<Adam<T>> for ShardableOptimizer<T> {
    fn from(o: Adam<T>) -> Self {
        ShardableOptimizer::Adam(o)
    }
}

impl<T: GradElement> ShardableOptimizer<T> {
    /// Bytes of optimizer state on the device ([`Sgd::state_bytes`], [`Adam::state_bytes`]).
    pub fn state_bytes(&self) -> usize {
        match self {
            ShardableOptimizer::Sgd(o) => o.state_bytes(),
            ShardableOptimizer::Adam(o) => o.state_bytes(),
        }
    }
}

/// The optimizer it holds, unsharded: a program that picks SGD or Adam at run time can train
/// with it directly (plain or with [`crate::DataParallel`]) or hand it to a
/// [`ShardedOptimizer`].
impl<T: GradElement> Optimizer<T> for ShardableOptimizer<T> {
    fn step(&mut self) -> Result<()> {
        match self {
            ShardableOptimizer::Sgd(o) => o.step(),
            ShardableOptimizer::Adam(o) => o.step(),
        }
    }

    fn parameters(&self) -> &[Var<T>] {
        match self {
            ShardableOptimizer::Sgd(o) => o.parameters(),
            ShardableOptimizer::Adam(o) => o.parameters(),
        }
    }

    fn steps_taken(&self) -> u64 {
        match self {
            ShardableOptimizer::Sgd(o) => o.steps_taken(),
            ShardableOptimizer::Adam(o) => o.steps_taken(),
        }
    }

    fn state_addresses(&self) -> Vec<u64> {
        match self {
            ShardableOptimizer::Sgd(o) => o.state_addresses(),
            ShardableOptimizer::Adam(o) => o.state_addresses(),
        }
    }
}

/// One rank's memory for ZeRO-1 training, in bytes ([`ShardedOptimizer::memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardedMemory {
    /// The optimizer state this rank holds: its parts' momentum, or Adam's two moments and one
    /// step counter per bucket (0 before the first step, which makes it).
    pub optimizer_state: usize,
    /// The optimizer state one rank of plain data-parallel training holds for the same
    /// parameters (every element's, after the first step): `optimizer_state` is about 1/N of
    /// it.
    pub unsharded_optimizer_state: usize,
    /// The parameters: one flat buffer per bucket, padded, which the parameters' values are
    /// views of (plain training holds the same, less the padding).
    pub parameters: usize,
    /// The gradient buckets (whole, padded; plain data-parallel training has the same).
    pub gradient_buckets: usize,
}

/// The update rule and its settings.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Sgd(SgdConfig),
    Adam(AdamConfig),
}

/// The optimizer state of this rank's parts, one tensor per bucket; made at the first step.
enum ShardState<T: GradElement> {
    None,
    Momentum(Vec<Tensor<T>>),
    Adam {
        m: Vec<Tensor<T>>,
        v: Vec<Tensor<T>>,
        /// One step counter per bucket (every bucket steps every time).
        steps: Tensor<i32>,
    },
}

/// A run of one parameter's elements inside this rank's part of its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    param: usize,
    bucket: usize,
    /// The run's first element in the parameter (row-major).
    src: usize,
    /// Its first element in the part.
    dst: usize,
    len: usize,
}

/// Data-parallel training with **ZeRO-1**: the optimizer state is sharded across the ranks.
///
/// [`crate::DataParallel`] keeps a whole optimizer on every rank: N copies of every momentum
/// buffer or Adam moment. Here each rank keeps the state of 1/N of the parameter elements:
///
/// 1. **Reduce-scatter the gradients.** The backward pass fills the same gradient buckets as
///    `DataParallel` (same grad-ready hooks, same order, on the same separate communication
///    stream, overlapped with the backward), but a complete bucket is *reduce-scattered*
///    instead of all-reduced: rank `r` receives the average over ranks (the sum without
///    [`DataParallelConfig::average`]) of part `r` of the bucket (half the traffic of an
///    all-reduce).
/// 2. **Update this rank's part.** [`Optimizer::step`] runs the wrapped optimizer's fused
///    kernel on part `r` of each bucket's parameters only, with the reduced gradient part and
///    the optimizer state of those elements (momentum; Adam's moments) — all the state this
///    rank ever holds.
/// 3. **All-gather the parameters.** The parameters live in one flat buffer per bucket (laid
///    out as the gradient bucket; [`ShardedOptimizer::new`] moves them there and makes each
///    parameter's value a view of its place). Each buffer is all-gathered **in place** on the
///    communication stream, the first layers' bucket first, so the next forward pass starts
///    while the later layers' buckets are still arriving. Every rank then holds the whole
///    updated model; nothing waits on the host, and a step allocates nothing but the
///    reduce-scattered gradient parts.
///
/// The update and the gather write the flat buffers in place when no other handle shares them
/// (the parameters' own values are let go of during the step); a parameter value kept across a
/// step (a `value()` held, a graph kept with `backward_retain_graph`) costs a copy of its
/// bucket first (copy-on-write), and keeps its old values.
///
/// ## Shards, buckets and padding
/// Bucket `b` (of [`ShardedOptimizer::bucket_elements`]`[b]` elements, parameters in reverse
/// order as in `DataParallel`) is **padded with zeros to a multiple of N elements**, so its N
/// parts are equal: rank `r` owns elements `r·S .. (r+1)·S` of it, `S` =
/// [`ShardedOptimizer::shard_elements`]`[b]`. A parameter may be split between two (or more)
/// ranks' parts; the padding (fewer than N elements per bucket, at its end) stays zero — its
/// gradient is zero and the update rules keep a zero parameter with zero gradient at zero. With
/// one bucket a rank's optimizer state is `ceil(total / N)` elements per state tensor; with B
/// buckets at most B elements more.
///
/// ## What differs from `DataParallel` + an optimizer
/// - The averaged gradient exists only in parts: after a step, each parameter's
///   [`Var::grad`] is still this rank's own gradient from the backward pass.
/// - The parameters' values are views of the flat buffers. A value replaced or written between
///   steps (a checkpoint loaded with [`Var::copy_from_`]) is taken into the buffer at the next
///   step (this rank's part of it; every rank must write the same values).
/// - Capturing a step into a CUDA graph ([`crate::CapturedStep`]) is not supported (the
///   collectives run on a stream of their own); keep the eager loop.
///
/// Every rank must make its wrapper with the same parameter shapes in the same order and call
/// `step` after each backward pass; each step, every parameter must receive a gradient on every
/// rank (a step with no gradient at all does nothing). Each rank's part of the parameters comes
/// from its own values: without [`DataParallelConfig::broadcast_parameters`] the replicas must
/// start equal.
///
/// ```no_run
/// use cuda_stack_nn::{Adam, AdamConfig, DataParallelConfig, Linear, Module, Optimizer, ShardedOptimizer, Var};
/// use cuda_stack_runtime::cuda_stack_nccl::{CommConfig, CommGroup};
/// use cuda_stack_runtime::{set_device, Tensor};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let comms = CommGroup::all(&CommConfig::default())?.into_comms();
/// let threads: Vec<_> = comms.into_iter().map(|comm| std::thread::spawn(move || -> cuda_stack_nn::Result<()> {
///     set_device(comm.device())?;
///     let model = Linear::<f32>::new(1024, 10, 7)?;
///     let adamw = Adam::new(model.parameters(), AdamConfig {
///         weight_decay: 0.01, decoupled_weight_decay: true, ..AdamConfig::new(1e-3) })?;
///     let mut opt = ShardedOptimizer::new(adamw, comm, DataParallelConfig::default())?;
///     let x = Var::constant(Tensor::randn(&[64, 1024], 1)?);   // this rank's share of a batch
///     opt.zero_grad();
///     model.forward(&x)?.sum_all()?.backward()?;   // buckets reduce-scattered as they fill
///     opt.step()?;                                 // this rank's part updated, all-gathered
///     println!("Adam state on this GPU: {} bytes", opt.memory().optimizer_state);
///     Ok(())
/// })).collect();
/// for t in threads { t.join().unwrap()?; }
/// # Ok(()) }
/// ```
pub struct ShardedOptimizer<T: GradElement + NcclType> {
    dp: DataParallel<T>,
    rule: Rule,
    /// The communication stream of `dp`: the all-gathers (and [`Self::mean_over_ranks`]) run
    /// on it, so every collective of the communicator is queued on one stream.
    stream: Stream,
    slots: Vec<Slot>,
    /// Each bucket's elements, padded.
    padded: Vec<usize>,
    /// Each bucket's part per rank.
    shard_len: Vec<usize>,
    /// This rank's index among the ranks.
    rank: usize,
    /// Where the parameters meet this rank's parts.
    pieces: Vec<Piece>,
    /// The parameters, one flat buffer per bucket (padded); their values are views of these.
    flat: Vec<Tensor<T>>,
    state: ShardState<T>,
    /// Per parameter: the address of the view it was given; a parameter whose value has
    /// another address was written since, and its elements are copied into the buffer.
    views: Vec<u64>,
    /// What a parameter's value is during a step, while the flat buffers are written (one
    /// element, never read).
    placeholder: Tensor<T>,
    steps_taken: u64,
}

impl<T: GradElement + NcclType> ShardedOptimizer<T> {
    /// Takes over `optimizer` (an [`Sgd`] or an [`Adam`] that has taken no step yet: its
    /// parameters and settings; it keeps no state of its own) for ZeRO-1 training with the other
    /// ranks of `comm`, and moves the parameters into flat buffers (their values become views of
    /// them). `config` is [`crate::DataParallel`]'s: bucket size, averaging, and whether rank
    /// 0's parameter values are broadcast first. A collective: every rank must call it. An
    /// error on one rank (an optimizer that has stepped, an Adam whose parameter groups have
    /// different weight decays, a parameter on another GPU, a different parameter list) fails
    /// every rank at once.
    pub fn new(
        optimizer: impl Into<ShardableOptimizer<T>>,
        comm: Communicator,
        config: DataParallelConfig,
    ) -> Result<ShardedOptimizer<T>> {
        let (params, rule, name, steps, mixed_decay) = match optimizer.into() {
            ShardableOptimizer::Sgd(o) => {
                let (p, c, s) = o.into_parts();
                (p, Rule::Sgd(c), "SGD", s, false)
            }
            ShardableOptimizer::Adam(o) => {
                let (p, c, s, mixed) = o.into_parts();
                (p, Rule::Adam(c), "Adam", s, mixed)
            }
        };
        let precheck = if mixed_decay {
            Err(NnError::Invalid {
                what: "ShardedOptimizer",
                problem: "the Adam's parameter groups have different weight decays, which one \
                          update per bucket cannot apply; shard an Adam whose parameters share \
                          one weight decay"
                    .into(),
            })
        } else if steps == 0 {
            Ok(())
        } else {
            Err(NnError::from(ShardingError::OptimizerHasState {
                optimizer: name,
                steps,
            }))
        };
        let (rank, ranks) = (comm.rank(), comm.size());
        let dp =
            DataParallel::with_exchange(params, comm, config, Exchange::ReduceScatter, precheck)?;
        let slots = dp.slots();
        let padded = dp.bucket_elements();
        let shard_len: Vec<usize> = padded.iter().map(|&p| p / ranks).collect();
        let pieces = pieces(&slots, &shard_len, rank);
        let first = dp
            .parameters()
            .first()
            .map(Var::value)
            .ok_or(NnError::NoParameters {
                optimizer: "ShardedOptimizer",
            })?;
        // Zeros: the padding stays zero for good.
        let mut flat = padded
            .iter()
            .map(|&n| first.full_like(&[n], T::from_f64(0.0)))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for (p, s) in dp.parameters().iter().zip(&slots) {
            let value = p.value().contiguous()?.reshape(&[s.numel])?;
            one_mut(&mut flat, s.bucket)?.copy_from_at_(s.offset, &value)?;
        }
        let mut opt = ShardedOptimizer {
            stream: dp.comm_stream(),
            placeholder: first.full_like(&[1], T::from_f64(0.0))?,
            dp,
            rule,
            views: vec![0; slots.len()],
            slots,
            padded,
            shard_len,
            rank,
            pieces,
            flat,
            state: ShardState::None,
            steps_taken: 0,
        };
        let params = opt.dp.parameters().to_vec();
        let mut values: Vec<_> = params.iter().map(Var::value_mut).collect();
        opt.set_views(&mut values)?;
        Ok(opt)
    }

    /// The mean of `value` over all ranks (e.g. the loss, for a log of the global batch's
    /// loss): a new tensor; `value` is unchanged. Queued on the communication stream, after the
    /// last step's all-gathers.
    pub fn mean_over_ranks(&self, value: &Tensor<T>) -> Result<Tensor<T>> {
        let _on_comm = use_stream(&self.stream);
        self.dp.mean_over_ranks(value)
    }

    /// The communicator.
    pub fn comm(&self) -> &Communicator {
        self.dp.comm()
    }

    /// The number of elements of each bucket (of gradients, and of parameters), padded to a
    /// multiple of the number of ranks, in reduction order (the last parameters first).
    pub fn bucket_elements(&self) -> Vec<usize> {
        self.padded.clone()
    }

    /// The number of elements of each bucket that this rank updates (its part: the padded
    /// bucket over the number of ranks).
    pub fn shard_elements(&self) -> Vec<usize> {
        self.shard_len.clone()
    }

    /// Bytes of optimizer state on this rank (see [`ShardedMemory::optimizer_state`]).
    pub fn state_bytes(&self) -> usize {
        let e = std::mem::size_of::<T>();
        let sum = |v: &[Tensor<T>]| v.iter().map(|t| t.numel() * e).sum::<usize>();
        match &self.state {
            ShardState::None => 0,
            ShardState::Momentum(b) => sum(b),
            ShardState::Adam { m, v, steps } => {
                sum(m) + sum(v) + steps.numel() * std::mem::size_of::<i32>()
            }
        }
    }

    /// This rank's memory for the training, by kind: the optimizer state (sharded) beside what
    /// plain data-parallel training would hold, the parameters and the gradient buckets.
    pub fn memory(&self) -> ShardedMemory {
        let e = std::mem::size_of::<T>();
        let total: usize = self.slots.iter().map(|s| s.numel).sum();
        let unsharded = match self.rule {
            Rule::Sgd(c) if c.momentum == 0.0 => 0,
            Rule::Sgd(_) => total * e,
            Rule::Adam(_) => 2 * total * e + self.slots.len() * std::mem::size_of::<i32>(),
        };
        let buckets = self.padded.iter().sum::<usize>() * e;
        ShardedMemory {
            optimizer_state: self.state_bytes(),
            unsharded_optimizer_state: unsharded,
            parameters: buckets,
            gradient_buckets: buckets,
        }
    }

    /// Makes each parameter's value (`values`, locked, in parameter order) the view of its
    /// place in its flat buffer.
    fn set_views(&mut self, values: &mut [RwLockWriteGuard<'_, Tensor<T>>]) -> Result<()> {
        for ((value, s), addr) in values.iter_mut().zip(&self.slots).zip(&mut self.views) {
            let view = one(&self.flat, s.bucket)?
                .narrow(0, s.offset, s.numel)?
                .reshape(&s.shape)?;
            *addr = view.data_ptr();
            **value = view;
        }
        Ok(())
    }

    /// Copies this rank's elements of the parameters written since the last step
    /// (`written[i]`: parameter `i`'s new value) into the flat buffers.
    fn take_in(&mut self, written: &[Option<Tensor<T>>]) -> Result<()> {
        let mut flat_values: Vec<Option<Tensor<T>>> = vec![None; written.len()];
        for pc in &self.pieces {
            let (Some(Some(value)), Some(slot), Some(flat_value)) = (
                written.get(pc.param),
                self.slots.get(pc.param),
                flat_values.get_mut(pc.param),
            ) else {
                continue; // not written
            };
            if flat_value.is_none() {
                *flat_value = Some(value.contiguous()?.reshape(&[slot.numel])?);
            }
            let Some(fv) = flat_value.as_ref() else {
                return Err(internal("a parameter value that was just read"));
            };
            let part = fv.narrow(0, pc.src, pc.len)?;
            let at = self.rank * one(&self.shard_len, pc.bucket)? + pc.dst;
            one_mut(&mut self.flat, pc.bucket)?.copy_from_at_(at, &part)?;
        }
        Ok(())
    }

    /// Makes the optimizer state of this rank's parts (zeros) if it does not exist yet; returns
    /// whether it was made now (the first step).
    fn ensure_state(&mut self) -> Result<bool> {
        if !matches!(self.state, ShardState::None) {
            return Ok(false);
        }
        let proto = self.placeholder.clone();
        let zeros =
            |n: &usize| -> Result<Tensor<T>> { Ok(proto.full_like(&[*n], T::from_f64(0.0))?) };
        self.state = match self.rule {
            Rule::Sgd(c) if c.momentum == 0.0 => return Ok(true),
            Rule::Sgd(_) => {
                ShardState::Momentum(self.shard_len.iter().map(zeros).collect::<Result<_>>()?)
            }
            Rule::Adam(_) => {
                let counters = vec![0i32; self.shard_len.len()];
                ShardState::Adam {
                    m: self.shard_len.iter().map(zeros).collect::<Result<_>>()?,
                    v: self.shard_len.iter().map(zeros).collect::<Result<_>>()?,
                    steps: Tensor::from_slice_on(proto.device(), &counters, &[counters.len()])?,
                }
            }
        };
        Ok(true)
    }

    /// The optimizer's update of this rank's part of every bucket (`grads[b]`: the reduced
    /// gradient part), one launch per bucket.
    fn update(&mut self, grads: &[Tensor<T>]) -> Result<()> {
        let first = self.ensure_state()?;
        let parts = self.shard_len.iter().map(|&s| self.rank * s);
        match (self.rule, &mut self.state) {
            (Rule::Sgd(c), ShardState::None) => {
                for ((p, g), at) in self.flat.iter_mut().zip(grads).zip(parts) {
                    p.sgd_at_(at, g, c.lr, c.weight_decay)?;
                }
            }
            (Rule::Sgd(c), ShardState::Momentum(bufs)) => {
                let hyper = c.kernel_params();
                for (((p, g), b), at) in self.flat.iter_mut().zip(grads).zip(bufs).zip(parts) {
                    p.sgd_momentum_at_(at, g, b, hyper, first)?;
                }
            }
            (Rule::Adam(c), ShardState::Adam { m, v, steps }) => {
                let hyper = c.kernel_params();
                steps.increment_()?;
                let steps: &Tensor<i32> = steps;
                let state = m.iter_mut().zip(v.iter_mut());
                for (b, (((p, g), (m, v)), at)) in self
                    .flat
                    .iter_mut()
                    .zip(grads)
                    .zip(state)
                    .zip(parts)
                    .enumerate()
                {
                    p.adam_at_(at, g, m, v, steps, b, hyper)?;
                }
            }
            _ => return Err(internal("optimizer state of another rule")),
        }
        Ok(())
    }

    /// All-gathers every flat buffer in place on the communication stream, the first
    /// parameters' bucket (the last one) first.
    fn gather(&mut self) -> Result<()> {
        let _on_comm = use_stream(&self.stream);
        let comm = self.dp.comm();
        for flat in self.flat.iter_mut().rev() {
            flat.all_gather_in_place_(comm)?;
        }
        Ok(())
    }
}

impl<T: GradElement + NcclType> Optimizer<T> for ShardedOptimizer<T> {
    /// Ends the gradient exchange of the backward pass (this rank's reduced part of every
    /// bucket), updates this rank's part of the parameters and its optimizer state, and
    /// all-gathers the parameters. Nothing waits on the host. A step after which no parameter
    /// received a gradient does nothing; one where only some did fails with
    /// [`ShardingError::MissingGradient`].
    fn step(&mut self) -> Result<()> {
        self.steps_taken += 1;
        let Some(grads) = self.dp.take_shards()? else {
            return Ok(());
        };
        // The parameters' values let go of the flat buffers while they are written (so the
        // writes are in place), under the values' locks; a value written since the last step
        // is kept, to be taken in.
        let params = self.dp.parameters().to_vec();
        let mut values: Vec<_> = params.iter().map(Var::value_mut).collect();
        let written: Vec<Option<Tensor<T>>> = values
            .iter_mut()
            .zip(&self.views)
            .map(|(v, &addr)| {
                let old = std::mem::replace(&mut **v, self.placeholder.clone());
                (old.data_ptr() != addr).then_some(old)
            })
            .collect();
        let result = self
            .take_in(&written)
            .and_then(|()| self.update(&grads))
            .and_then(|()| self.gather());
        // Views again, whatever happened.
        let restored = self.set_views(&mut values);
        result.and(restored)
    }

    fn parameters(&self) -> &[Var<T>] {
        self.dp.parameters()
    }

    fn steps_taken(&self) -> u64 {
        self.steps_taken
    }

    fn state_addresses(&self) -> Vec<u64> {
        match &self.state {
            ShardState::None => Vec::new(),
            ShardState::Momentum(b) => b.iter().map(Tensor::data_ptr).collect(),
            ShardState::Adam { m, v, steps } => m
                .iter()
                .chain(v)
                .map(Tensor::data_ptr)
                .chain([steps.data_ptr()])
                .collect(),
        }
    }
}

/// Where each parameter (`slots`, in parameter order) meets rank `rank`'s part of its bucket
/// (part `rank` of `shard_len[bucket]` elements), in parameter order.
fn pieces(slots: &[Slot], shard_len: &[usize], rank: usize) -> Vec<Piece> {
    let mut out = Vec::new();
    for (param, s) in slots.iter().enumerate() {
        let Some(&len) = shard_len.get(s.bucket) else {
            continue;
        };
        let (lo, hi) = (rank * len, (rank + 1) * len);
        let start = s.offset.max(lo);
        let end = (s.offset + s.numel).min(hi);
        if start < end {
            out.push(Piece {
                param,
                bucket: s.bucket,
                src: start - s.offset,
                dst: start - lo,
                len: end - start,
            });
        }
    }
    out
}

fn internal(what: &str) -> NnError {
    NnError::Invalid {
        what: "ShardedOptimizer",
        problem: format!("internal error: {what}"),
    }
}

fn one<X>(v: &[X], i: usize) -> Result<&X> {
    v.get(i).ok_or_else(|| internal("a bucket past the last"))
}

fn one_mut<X>(v: &mut [X], i: usize) -> Result<&mut X> {
    v.get_mut(i)
        .ok_or_else(|| internal("a bucket past the last"))
}

#[cfg(test)]
mod tests {
    use super::{pieces, Piece};
    use crate::parallel::{padded_len, plan, Slot};

    /// The slots `plan` gives `numels` (4-byte elements, `bucket_bytes` buckets).
    fn slots(numels: &[usize], bucket_bytes: usize) -> (Vec<Slot>, Vec<usize>) {
        let (places, buckets) = plan(numels, 4, bucket_bytes);
        let slots = places
            .iter()
            .zip(numels)
            .map(|(&(bucket, offset), &numel)| Slot {
                bucket,
                offset,
                numel,
                shape: vec![numel],
            })
            .collect();
        (slots, buckets.iter().map(|b| b.0).collect())
    }

    /// Every element of every parameter lands in exactly one rank's part, at the place its
    /// bucket offset says.
    fn covers_once(numels: &[usize], bucket_bytes: usize, ranks: usize) {
        let (slots, elems) = slots(numels, bucket_bytes);
        let shard: Vec<usize> = elems
            .iter()
            .map(|&e| padded_len(e, ranks).unwrap() / ranks)
            .collect();
        let mut seen: Vec<Vec<u32>> = numels.iter().map(|&n| vec![0; n]).collect();
        for r in 0..ranks {
            for p in pieces(&slots, &shard, r) {
                let s = &slots[p.param];
                assert_eq!(p.bucket, s.bucket);
                assert!(p.dst + p.len <= shard[p.bucket], "{p:?} past the part");
                // The element's place in the bucket is the same seen from both sides.
                assert_eq!(s.offset + p.src, r * shard[p.bucket] + p.dst);
                for c in &mut seen[p.param][p.src..p.src + p.len] {
                    *c += 1;
                }
            }
        }
        assert!(
            seen.iter().flatten().all(|&c| c == 1),
            "{numels:?}, {bucket_bytes} B, {ranks} ranks: {seen:?}"
        );
    }

    #[test]
    fn every_element_is_in_exactly_one_part() {
        for ranks in 1..=5 {
            for bucket_bytes in [4, 40, 100, 1 << 20] {
                covers_once(&[12, 3, 9, 3], bucket_bytes, ranks);
                covers_once(&[1, 1, 1], bucket_bytes, ranks);
                covers_once(&[7, 0, 13, 2, 31], bucket_bytes, ranks);
            }
        }
    }

    #[test]
    fn a_parameter_split_between_two_ranks() {
        // Params 12, 3, 9, 3 (27 elements, one bucket, reverse order): 3 | 9 | 3 | 12 at
        // offsets 0, 3, 12, 15; padded to 28, parts of 14: parameter 1 (offsets 12..15) is
        // split, 2 elements on rank 0 and 1 on rank 1.
        let (slots, elems) = slots(&[12, 3, 9, 3], 1 << 20);
        assert_eq!(elems, vec![27]);
        let r0 = pieces(&slots, &[14], 0);
        let r1 = pieces(&slots, &[14], 1);
        let piece = |param, src, dst, len| Piece {
            param,
            bucket: 0,
            src,
            dst,
            len,
        };
        assert_eq!(
            r0,
            vec![piece(1, 0, 12, 2), piece(2, 0, 3, 9), piece(3, 0, 0, 3)]
        );
        assert_eq!(r1, vec![piece(0, 0, 1, 12), piece(1, 2, 0, 1)]);
    }
}
