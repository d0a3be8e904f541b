//! Data-parallel training: [`DataParallel`], PyTorch's `DistributedDataParallel` on NCCL.

use crate::error::{NnError, Result, ShardingError};
use crate::hook::{GradHookHandle, GradSinkHandle};
use crate::lock::lock;
use crate::var::Var;
use cuda_stack_runtime::cuda_stack_driver::{Stream, StreamKind};
use cuda_stack_runtime::cuda_stack_nccl::{Communicator, NcclType, ReduceOp};
use cuda_stack_runtime::{use_stream, GradElement, Tensor};
use std::sync::{Arc, Mutex};

/// [`DataParallel`]'s settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataParallelConfig {
    /// Target size of a gradient bucket in bytes (PyTorch's `bucket_cap_mb`, 25 MiB). A
    /// parameter larger than this gets a bucket of its own.
    pub bucket_bytes: usize,
    /// Average the gradients across ranks (`ncclAvg`), as DDP does; `false` sums them.
    pub average: bool,
    /// Copy rank 0's parameter values to every rank when the wrapper is made (as DDP does), so
    /// replicas start identical whatever their initialisation.
    pub broadcast_parameters: bool,
    /// Run the buckets' collectives on a stream of the device's highest priority (PyTorch's
    /// `ProcessGroupNCCL.Options.is_high_priority_stream`, off there by default; on here).
    /// While the backward pass fills the GPU with its GEMMs, the block scheduler hands each
    /// SM that frees up to a waiting block of the higher-priority stream first, so a bucket's
    /// reduction starts as soon as its gradient is ready instead of after the computing
    /// stream's queued blocks; the last bucket's reduction, which nothing overlaps, ends
    /// sooner.
    pub high_priority_stream: bool,
}

impl Default for DataParallelConfig {
    fn default() -> Self {
        DataParallelConfig {
            bucket_bytes: 25 << 20,
            average: true,
            broadcast_parameters: true,
            high_priority_stream: true,
        }
    }
}

/// How a complete bucket is exchanged across the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exchange {
    /// `all_reduce`: every rank gets the whole reduced bucket ([`DataParallel`]).
    AllReduce,
    /// `reduce_scatter`: rank `r` of `N` gets part `r` of the reduced bucket (ZeRO-1,
    /// [`crate::ShardedOptimizer`]); every bucket is padded to a multiple of `N` elements.
    ReduceScatter,
}

/// What went wrong across ranks or in the gradient exchange of a step; each wrapper reports it
/// its own way ([`DataParallel`]: [`NnError::Invalid`]; ZeRO-1: [`ShardingError`]).
enum Problem {
    LateGradient {
        index: usize,
    },
    MissingGradient {
        index: usize,
        shape: Vec<usize>,
    },
    RankRefused {
        rank: usize,
    },
    ParametersDiffer {
        rank: usize,
        theirs: [u64; 2],
        ours: [u64; 2],
        this_rank: usize,
    },
}

impl Exchange {
    fn report(self, p: Problem) -> NnError {
        if self == Exchange::ReduceScatter {
            return NnError::Sharding(match p {
                Problem::LateGradient { index } => ShardingError::LateGradient { index },
                Problem::MissingGradient { index, shape } => {
                    ShardingError::MissingGradient { index, shape }
                }
                Problem::RankRefused { rank } => ShardingError::RankRefused { rank },
                Problem::ParametersDiffer {
                    rank,
                    theirs,
                    ours,
                    this_rank,
                } => ShardingError::ParametersDiffer {
                    rank,
                    parameters: theirs[0],
                    elements: theirs[1],
                    this_rank,
                    this_parameters: ours[0],
                    this_elements: ours[1],
                },
            });
        }
        let (what, problem) = match p {
            Problem::LateGradient { index } => (
                "DataParallel",
                format!(
                    "parameter {index}'s gradient arrived after its bucket was reduced: a second \
                     backward before finish_gradients(); call finish_gradients() after each \
                     backward (accumulate micro-batches in the loss instead)"
                ),
            ),
            Problem::MissingGradient { index, shape } => (
                "DataParallel::finish_gradients",
                format!(
                    "parameter {index} (shape {shape:?}) received no gradient in this backward \
                     pass; every parameter must take part in the loss on every rank"
                ),
            ),
            Problem::RankRefused { rank } => (
                "DataParallel",
                format!(
                    "rank {rank} refused its parameter list (its own error says why), so no rank \
                     can train; fix that rank"
                ),
            ),
            Problem::ParametersDiffer {
                rank,
                theirs,
                ours,
                this_rank,
            } => (
                "DataParallel",
                format!(
                    "rank {rank} has {} parameters with {} elements in all, rank {this_rank} has \
                     {} with {}{}; every rank must wrap the same model, parameters in the same \
                     order",
                    theirs[0],
                    theirs[1],
                    ours[0],
                    ours[1],
                    if theirs == ours {
                        " (the same counts, but other shapes)"
                    } else {
                        ""
                    }
                ),
            ),
        };
        NnError::Invalid { what, problem }
    }
}

/// Where a parameter's gradient lives in the buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Its bucket.
    pub(crate) bucket: usize,
    /// Its first element's offset in the bucket's flat buffer.
    pub(crate) offset: usize,
    /// Its element count.
    pub(crate) numel: usize,
    /// Its shape.
    pub(crate) shape: Vec<usize>,
}

struct Bucket<T: GradElement> {
    flat: Tensor<T>,
    members: usize,
    ready: usize,
    /// This pass's reduction ran on its one member's own gradient, in place (see
    /// [`State::on_grad_sink`]): the parameter's gradient is already the result and `flat`
    /// was not used.
    in_place: bool,
    /// With [`Exchange::ReduceScatter`]: this rank's part of the reduced bucket, once queued.
    shard: Option<Tensor<T>>,
}

/// What the hooks and [`DataParallel::finish_gradients`] share.
struct State<T: GradElement> {
    slots: Vec<Slot>,
    buckets: Vec<Bucket<T>>,
    /// Which parameters got their gradient in this backward pass.
    seen: Vec<bool>,
    /// Buckets `0..launched` have had their all-reduce queued in this backward pass.
    launched: usize,
    comm: Communicator,
    stream: Stream,
    op: ReduceOp,
    exchange: Exchange,
    /// One rank, all-reduced: the average or sum over one rank is the gradient itself, so no
    /// gradient is copied into a bucket and nothing is exchanged (the gradients stay where the
    /// backward pass put them: one rank trains as fast as without `DataParallel`).
    single: bool,
}

impl<T: GradElement + NcclType> State<T> {
    fn reset(&mut self) {
        self.seen.iter_mut().for_each(|s| *s = false);
        self.buckets.iter_mut().for_each(|b| {
            b.ready = 0;
            b.shard = None;
            b.in_place = false;
        });
        self.launched = 0;
    }

    fn on_grad_ready(&mut self, i: usize, grad: &Tensor<T>) -> Result<()> {
        let r = self.take_grad(i, grad);
        if r.is_err() {
            self.reset();
        }
        r
    }

    /// The gradient sink of a parameter that fills a bucket alone (all-reduced buckets, more
    /// than one rank): when its bucket is the next to reduce, the reduction runs on the
    /// gradient itself, in place: no copy into the bucket's buffer and none back (the backward
    /// pass's fresh gradient is usually the only handle of its storage; when it is not, the
    /// in-place op makes a private copy first, and the values are the same). Otherwise (its
    /// bucket's turn has not come: the buckets are reduced in the same order on every rank)
    /// it goes the copying way of [`State::take_grad`].
    fn on_grad_sink(&mut self, i: usize, grad: &mut Tensor<T>) -> Result<()> {
        let b = self.slots[i].bucket;
        let r = if b == self.launched && !self.seen[i] && self.buckets[b].members == 1 {
            self.seen[i] = true;
            self.buckets[b].ready += 1;
            let reduced = {
                let _on_comm_stream = use_stream(&self.stream);
                grad.all_reduce_(&self.comm, self.op)
            };
            reduced.map_err(NnError::from).and_then(|()| {
                self.buckets[b].in_place = true;
                self.launched += 1;
                self.launch_complete()
            })
        } else {
            self.take_grad(i, grad)
        };
        if r.is_err() {
            self.reset();
        }
        r
    }

    fn take_grad(&mut self, i: usize, grad: &Tensor<T>) -> Result<()> {
        let (b, offset) = (self.slots[i].bucket, self.slots[i].offset);
        if b < self.launched {
            return Err(self.exchange.report(Problem::LateGradient { index: i }));
        }
        if !self.single {
            self.buckets[b].flat.copy_from_at_(offset, grad)?;
        }
        if !self.seen[i] {
            self.seen[i] = true;
            self.buckets[b].ready += 1;
        }
        self.launch_complete()
    }

    /// Queues the exchange of every complete bucket whose turn has come, in bucket order.
    fn launch_complete(&mut self) -> Result<()> {
        while self.launched < self.buckets.len()
            && self.buckets[self.launched].ready == self.buckets[self.launched].members
        {
            let _on_comm_stream = use_stream(&self.stream);
            let bucket = &mut self.buckets[self.launched];
            match self.exchange {
                Exchange::AllReduce if self.single => {}
                Exchange::AllReduce => bucket.flat.all_reduce_(&self.comm, self.op)?,
                Exchange::ReduceScatter => {
                    bucket.shard = Some(bucket.flat.reduce_scatter(&self.comm, self.op)?);
                }
            }
            self.launched += 1;
        }
        Ok(())
    }
}

/// Data-parallel training of one replica (one rank).
///
/// Every rank (one per GPU, in its own thread or its own process) holds a replica of the
/// model, runs the forward and backward passes on its share of the global batch, and before the
/// optimizer step the gradients are averaged across ranks, so every replica takes the same step
/// and stays identical. With an equal share of a batch per rank and a loss that is a mean over
/// the batch, the averaged gradient is the gradient of the whole batch: N GPUs train as one GPU
/// would on the global batch (up to floating-point rounding), faster.
///
/// ## Buckets, overlapped with the backward pass
/// The parameters are grouped into **buckets** of about [`DataParallelConfig::bucket_bytes`],
/// in reverse order (the backward pass finishes the last layers' gradients first). Each
/// parameter has a grad-ready hook ([`Var::register_grad_ready_hook`]): when the backward pass
/// has accumulated its gradient, the hook copies it into its place in the bucket's flat buffer
/// (on the computing stream), and when a bucket is complete its all-reduce is queued at once on
/// a **separate communication stream** — while the backward pass goes on computing the earlier
/// layers' gradients on the computing stream, so communication and computation overlap. The
/// communication stream waits for the copies into the bucket and nothing else (the
/// per-allocation tracking of `cuda-stack-driver` orders it). Buckets are reduced strictly in index
/// order on every rank, whatever order their gradients finish in, because NCCL needs every rank
/// to issue its collectives in the same order.
///
/// A parameter larger than a bucket fills one alone; its gradient is not copied at all: when its
/// bucket's turn has come as the gradient arrives (the usual case), the all-reduce runs on the
/// gradient itself, in place, before any other grad-ready hook sees it. (PyTorch's DDP copies
/// such a gradient into its bucket and back unless `gradient_as_bucket_view` is set.)
/// Optimizers step the last parameters first ([`Optimizer::step`](crate::Optimizer)), so the
/// updates of the parameters reduced early run while the first layer's bucket, whose gradient
/// comes last, is still being reduced.
///
/// [`DataParallel::finish_gradients`] (after `backward`, before the optimizer's `step`) makes
/// each parameter's gradient a view of its place in the reduced bucket (no copy back, as
/// PyTorch's `gradient_as_bucket_view`); the optimizer's kernels on the computing stream wait
/// for the reductions through the same tracking. No host synchronisation anywhere.
///
/// Each step, every parameter must receive a gradient on every rank (PyTorch's default,
/// `find_unused_parameters=False`): a parameter without one is an error that names it.
///
/// ```no_run
/// use cuda_stack_nn::{DataParallel, DataParallelConfig, Linear, Module, Optimizer, Sgd, SgdConfig, Var};
/// use cuda_stack_runtime::cuda_stack_nccl::{CommConfig, CommGroup};
/// use cuda_stack_runtime::{set_device, Tensor};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // One thread per GPU, each with its communicator.
/// let comms = CommGroup::all(&CommConfig::default())?.into_comms();
/// let threads: Vec<_> = comms.into_iter().map(|comm| std::thread::spawn(move || -> cuda_stack_nn::Result<()> {
///     set_device(comm.device())?;
///     let model = Linear::<f32>::new(1024, 10, 7)?;
///     let ddp = DataParallel::new(model.parameters(), comm, DataParallelConfig::default())?;
///     let mut opt = Sgd::new(model.parameters(), SgdConfig::new(0.1))?;
///     let x = Var::constant(Tensor::randn(&[64, 1024], 1)?);   // this rank's share of a batch
///     opt.zero_grad();
///     model.forward(&x)?.sum_all()?.backward()?;               // buckets reduced as they fill
///     ddp.finish_gradients()?;                                 // grads = averaged buckets
///     opt.step()
/// })).collect();
/// for t in threads { t.join().unwrap()?; }
/// # Ok(()) }
/// ```
pub struct DataParallel<T: GradElement + NcclType> {
    params: Vec<Var<T>>,
    comm: Communicator,
    state: Arc<Mutex<State<T>>>,
    _hooks: Vec<GradHookHandle<T>>,
    /// The gradient sinks of the parameters reduced in place, removed on drop.
    _sinks: Vec<GradSinkHandle<T>>,
}

impl<T: GradElement + NcclType> DataParallel<T> {
    /// Wraps the parameters of this rank's replica (`model.parameters()`) for training with
    /// the other ranks of `comm`. The parameters must be leaves that require grad, listed once,
    /// on the communicator's GPU. Every rank must make its wrapper with the same parameter
    /// shapes in the same order. With [`DataParallelConfig::broadcast_parameters`], rank 0's
    /// values are copied to every rank here (a collective: every rank must call `new`).
    pub fn new(
        params: Vec<Var<T>>,
        comm: Communicator,
        config: DataParallelConfig,
    ) -> Result<DataParallel<T>> {
        DataParallel::with_exchange(params, comm, config, Exchange::AllReduce, Ok(()))
    }

    /// [`DataParallel::new`] with the buckets exchanged by `exchange`; `precheck` is the
    /// caller's own verdict on its arguments, agreed across ranks with the wrapper's checks (an
    /// error there fails every rank at once).
    pub(crate) fn with_exchange(
        params: Vec<Var<T>>,
        comm: Communicator,
        config: DataParallelConfig,
        exchange: Exchange,
        precheck: Result<()>,
    ) -> Result<DataParallel<T>> {
        const NAME: &str = "DataParallel";
        // Every rank checks its own list, then all ranks agree before any other collective: a
        // rank whose check failed (a replica on the wrong GPU, say) would otherwise leave the
        // others waiting in the broadcast until their communicator's timeout.
        let local = precheck.and_then(|()| check(&params, &comm, config));
        agree(&params, &comm, local.is_ok(), exchange)?;
        local?;
        if config.broadcast_parameters {
            for p in &params {
                p.with_value_mut(|v| v.broadcast_(&comm, 0))?;
            }
        }
        let (slots, members) = plan_buckets(&params, config.bucket_bytes);
        let first = params[0].value();
        let ranks = match exchange {
            Exchange::AllReduce => 1,
            Exchange::ReduceScatter => comm.size(),
        };
        let buckets = members
            .iter()
            .map(|&(elems, count)| {
                // Zeros: the padding of a reduce-scattered bucket stays zero for good.
                let padded = padded_len(elems, ranks).ok_or_else(|| NnError::Invalid {
                    what: NAME,
                    problem: format!(
                        "a bucket of {elems} elements padded for {ranks} ranks overflows"
                    ),
                })?;
                Ok(Bucket {
                    flat: first.full_like(&[padded], T::from_f64(0.0))?,
                    members: count,
                    ready: 0,
                    in_place: false,
                    shard: None,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let ctx = comm.context();
        let stream = if config.high_priority_stream {
            Stream::priority_range(ctx)
                .and_then(|(_, highest)| Stream::new(ctx, StreamKind::NonBlocking, highest))
        } else {
            ctx.new_stream()
        }
        .map_err(|e| NnError::Invalid {
            what: NAME,
            problem: format!("creating the communication stream: {e}"),
        })?;
        let state = Arc::new(Mutex::new(State {
            seen: vec![false; params.len()],
            slots,
            buckets,
            launched: 0,
            comm: comm.clone(),
            stream,
            op: if config.average {
                ReduceOp::Avg
            } else {
                ReduceOp::Sum
            },
            exchange,
            single: exchange == Exchange::AllReduce && comm.size() == 1,
        }));
        // A parameter that fills an all-reduced bucket alone is reduced in its own gradient
        // (a sink: no copies); the others are copied into their buckets (a hook).
        let (mut hooks, mut sinks) = (Vec::new(), Vec::new());
        {
            let st = lock(&state);
            for (i, p) in params.iter().enumerate() {
                let state = Arc::clone(&state);
                let alone = st.buckets[st.slots[i].bucket].members == 1;
                if exchange == Exchange::AllReduce && !st.single && alone {
                    sinks.push(p.set_grad_sink(move |g| lock(&state).on_grad_sink(i, g))?);
                } else {
                    hooks.push(
                        p.register_grad_ready_hook(move |g| lock(&state).on_grad_ready(i, g))?,
                    );
                }
            }
        }
        Ok(DataParallel {
            params,
            comm,
            state,
            _hooks: hooks,
            _sinks: sinks,
        })
    }

    /// Ends the gradient exchange of one backward pass: every parameter's gradient becomes
    /// the average (or sum) over all ranks — a view of its place in its reduced bucket (with
    /// one rank, the gradient the backward pass left: nothing is copied or exchanged). Call it
    /// after `backward` and before the optimizer's `step`. Queues nothing that waits: the
    /// optimizer's kernels wait for the reductions on the GPU.
    ///
    /// Fails, naming it, when a parameter received no gradient in this backward pass (the
    /// ranks would then disagree on which buckets to reduce).
    pub fn finish_gradients(&self) -> Result<()> {
        let mut st = lock(&self.state);
        let result = self.publish(&st);
        st.reset();
        result
    }

    /// Checks that every parameter received its gradient and every bucket was exchanged.
    fn check_complete(st: &State<T>) -> Result<()> {
        if let Some(i) = st.seen.iter().position(|s| !s) {
            return Err(st.exchange.report(Problem::MissingGradient {
                index: i,
                shape: st.slots[i].shape.clone(),
            }));
        }
        if st.launched != st.buckets.len() {
            return Err(NnError::Invalid {
                what: "DataParallel::finish_gradients",
                problem: "internal error: a complete bucket was not reduced".into(),
            });
        }
        Ok(())
    }

    fn publish(&self, st: &State<T>) -> Result<()> {
        if st.exchange != Exchange::AllReduce {
            return Err(NnError::Invalid {
                what: "DataParallel::finish_gradients",
                problem: "internal error: the buckets of a sharded optimizer are \
                          reduce-scattered; its step finishes them"
                    .into(),
            });
        }
        Self::check_complete(st)?;
        if st.single {
            return Ok(()); // each gradient is already its own mean over the one rank
        }
        for (p, s) in self.params.iter().zip(&st.slots) {
            if st.buckets[s.bucket].in_place {
                continue; // the gradient itself was reduced
            }
            let view = st.buckets[s.bucket]
                .flat
                .narrow(0, s.offset, s.numel)?
                .reshape(&s.shape)?;
            p.set_grad(Some(view))?;
        }
        Ok(())
    }

    /// Ends the gradient exchange of one backward pass of a wrapper made with
    /// [`Exchange::ReduceScatter`]: this rank's part of every reduced bucket, in bucket order,
    /// or `None` when no parameter received a gradient (no backward since the last call).
    pub(crate) fn take_shards(&self) -> Result<Option<Vec<Tensor<T>>>> {
        let mut st = lock(&self.state);
        let result = Self::shards(&mut st);
        st.reset();
        result
    }

    fn shards(st: &mut State<T>) -> Result<Option<Vec<Tensor<T>>>> {
        if st.seen.iter().all(|s| !s) {
            return Ok(None);
        }
        Self::check_complete(st)?;
        st.buckets
            .iter_mut()
            .map(|b| {
                b.shard.take().ok_or_else(|| NnError::Invalid {
                    what: "ShardedOptimizer::step",
                    problem: "internal error: a reduced bucket has no shard".into(),
                })
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// Where each parameter's gradient lives in the buckets, in parameter order.
    pub(crate) fn slots(&self) -> Vec<Slot> {
        lock(&self.state).slots.clone()
    }

    /// The communication stream (the buckets' collectives run on it).
    pub(crate) fn comm_stream(&self) -> Stream {
        lock(&self.state).stream.clone()
    }

    /// The mean of `value` over all ranks (e.g. the loss, for a log of the global batch's loss):
    /// a new tensor; `value` is unchanged.
    pub fn mean_over_ranks(&self, value: &Tensor<T>) -> Result<Tensor<T>> {
        let mut t = value.clone();
        t.all_reduce_(&self.comm, ReduceOp::Avg)?;
        Ok(t)
    }

    /// The communicator.
    pub fn comm(&self) -> &Communicator {
        &self.comm
    }

    /// The parameters, as given.
    pub fn parameters(&self) -> &[Var<T>] {
        &self.params
    }

    /// The number of elements of each bucket, in reduction order (the last parameters first).
    /// A sharded optimizer's buckets include their padding (see [`crate::ShardedOptimizer`]).
    pub fn bucket_elements(&self) -> Vec<usize> {
        lock(&self.state)
            .buckets
            .iter()
            .map(|b| b.flat.numel())
            .collect()
    }
}

fn check<T: GradElement + NcclType>(
    params: &[Var<T>],
    comm: &Communicator,
    config: DataParallelConfig,
) -> Result<()> {
    const NAME: &str = "DataParallel";
    if params.is_empty() {
        return Err(NnError::NoParameters { optimizer: NAME });
    }
    if config.bucket_bytes == 0 {
        return Err(NnError::Invalid {
            what: NAME,
            problem: "bucket_bytes = 0: a bucket must hold at least one byte".into(),
        });
    }
    for (i, p) in params.iter().enumerate() {
        if let Some(j) = params[..i].iter().position(|q| q.same_var(p)) {
            return Err(NnError::Invalid {
                what: NAME,
                problem: format!("parameters {j} and {i} are the same variable; list each once"),
            });
        }
        if !p.requires_grad() || !p.is_leaf() {
            return Err(NnError::Invalid {
                what: NAME,
                problem: format!("parameter {i} is not a leaf that requires grad"),
            });
        }
        let device = p.value().device();
        if device != comm.device() {
            return Err(NnError::Invalid {
                what: NAME,
                problem: format!(
                    "parameter {i} is on cuda:{device}, the communicator (rank {}) on cuda:{}",
                    comm.rank(),
                    comm.device()
                ),
            });
        }
    }
    Ok(())
}

/// What a rank tells the others before the first collective: whether its own checks passed,
/// its parameter count, total elements and a hash of the shapes in order.
fn record<T: GradElement>(params: &[Var<T>], ok: bool) -> [u64; 4] {
    // FNV-1a over every dimension, with a separator per parameter.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut total: u64 = 0;
    for p in params {
        let shape = p.shape();
        total = total.wrapping_add(shape.iter().product::<usize>() as u64);
        for d in shape.iter().map(|&d| d as u64).chain([u64::MAX]) {
            hash = (hash ^ d).wrapping_mul(0x0100_0000_01b3);
        }
    }
    [ok as u64, params.len() as u64, total, hash]
}

/// All-gathers every rank's [`record`] on the communicator's GPU and fails, on every rank at
/// once, when one rank's own checks failed or the ranks' parameter lists differ (PyTorch's DDP
/// verifies the shapes across ranks the same way). A rank whose own check failed returns that
/// error (its caller sees it right after this).
fn agree<T: GradElement>(
    params: &[Var<T>],
    comm: &Communicator,
    ok: bool,
    exchange: Exchange,
) -> Result<()> {
    let mine = record(params, ok);
    let n = comm.size();
    let stream = comm.context().new_stream()?;
    let send = stream.clone_htod(&mine)?;
    let mut recv = stream.alloc_zeros::<u64>(4 * n)?;
    comm.all_gather(&send, &mut recv, &stream)
        .map_err(cuda_stack_runtime::TensorError::from)?;
    let all = stream.clone_dtoh(&recv)?;
    comm.check()
        .map_err(cuda_stack_runtime::TensorError::from)?;
    let records: Vec<&[u64]> = all.chunks(4).collect();
    if !ok {
        return Ok(()); // this rank's own error says why
    }
    if let Some(r) = records.iter().position(|rec| rec[0] == 0) {
        return Err(exchange.report(Problem::RankRefused { rank: r }));
    }
    if let Some(r) = records.iter().position(|rec| rec[1..] != mine[1..]) {
        let rec = records[r];
        return Err(exchange.report(Problem::ParametersDiffer {
            rank: r,
            theirs: [rec[1], rec[2]],
            ours: [mine[1], mine[2]],
            this_rank: comm.rank(),
        }));
    }
    Ok(())
}

/// The buckets: parameters in reverse order, filled up to `bucket_bytes`; returns each
/// parameter's slot and each bucket's (elements, members).
fn plan_buckets<T: GradElement>(
    params: &[Var<T>],
    bucket_bytes: usize,
) -> (Vec<Slot>, Vec<(usize, usize)>) {
    let sizes: Vec<(usize, Vec<usize>)> = params.iter().map(|p| (p.numel(), p.shape())).collect();
    let (places, buckets) = plan(
        &sizes.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        std::mem::size_of::<T>(),
        bucket_bytes,
    );
    let slots = places
        .into_iter()
        .zip(sizes)
        .map(|((bucket, offset), (numel, shape))| Slot {
            bucket,
            offset,
            numel,
            shape,
        })
        .collect();
    (slots, buckets)
}

/// `elems` rounded up to a multiple of `ranks` (`None` on overflow or for zero ranks).
pub(crate) fn padded_len(elems: usize, ranks: usize) -> Option<usize> {
    elems.checked_next_multiple_of(ranks)
}

/// A parameter's (bucket, offset).
type Place = (usize, usize);
/// A bucket's (elements, members).
type BucketSize = (usize, usize);

/// For element counts `numels` of `elem` bytes: each one's (bucket, offset), and each
/// bucket's (elements, members). Parameters are taken last first; a bucket closes once it
/// holds at least `bucket_bytes`.
pub(crate) fn plan(
    numels: &[usize],
    elem: usize,
    bucket_bytes: usize,
) -> (Vec<Place>, Vec<BucketSize>) {
    let mut places = vec![(0, 0); numels.len()];
    let mut buckets: Vec<(usize, usize)> = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    for i in (0..numels.len()).rev() {
        let (elems, members) = open.get_or_insert((0, 0));
        places[i] = (buckets.len(), *elems);
        *elems += numels[i];
        *members += 1;
        if elems.saturating_mul(elem) >= bucket_bytes {
            buckets.extend(open.take());
        }
    }
    buckets.extend(open);
    (places, buckets)
}

#[cfg(test)]
mod tests {
    use super::{padded_len, plan};

    #[test]
    fn padding_rounds_up_to_a_multiple_of_the_ranks() {
        assert_eq!(padded_len(27, 2), Some(28));
        assert_eq!(padded_len(28, 2), Some(28));
        assert_eq!(padded_len(5, 1), Some(5));
        assert_eq!(padded_len(1, 8), Some(8));
        assert_eq!(padded_len(usize::MAX, 2), None);
        assert_eq!(padded_len(3, 0), None);
    }

    #[test]
    fn buckets_fill_in_reverse_and_close_at_the_cap() {
        // 4-byte elements, 40-byte buckets: params (last first) 5, 3, 20 | 1, 1 | 12.
        let (places, buckets) = plan(&[12, 1, 1, 20, 3, 5], 4, 40);
        assert_eq!(buckets, vec![(28, 3), (14, 3)]);
        assert_eq!(places, vec![(1, 2), (1, 1), (1, 0), (0, 8), (0, 5), (0, 0)]);
        // A parameter over the cap closes its bucket alone.
        let (places, buckets) = plan(&[100, 2], 4, 40);
        assert_eq!(buckets, vec![(102, 2)]);
        assert_eq!(places, vec![(0, 2), (0, 0)]);
        let (_, buckets) = plan(&[2, 100], 4, 40);
        assert_eq!(buckets, vec![(100, 1), (2, 1)]);
    }

    #[test]
    fn one_bucket_when_everything_fits() {
        let (places, buckets) = plan(&[2, 3], 4, 1 << 20);
        assert_eq!(buckets, vec![(5, 2)]);
        assert_eq!(places, vec![(0, 3), (0, 0)]);
    }
}
