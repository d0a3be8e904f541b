//! # cuda-stack-nccl
//!
//! NCCL — NVIDIA's collective communication library, the engine `torch.distributed`'s NCCL
//! backend uses — for this crate family: communicators, collectives and point-to-point
//! transfers on `cuda-stack-driver`'s [`DeviceSlice`](cuda_stack_driver::DeviceSlice)s, with the same
//! safety model as everything else here. libnccl is loaded at run time by `cuda-stack-sys`
//! ([`cuda_stack_sys::Nccl`]: `$CUDA_NCCL_PATH`, `libnccl.so.2`, the toolkit, pip's
//! `nvidia-nccl-cu13`); nothing is linked, and a machine without NCCL gets a
//! [`Error::Load`] listing every place tried.
//!
//! | NCCL / `torch.distributed` | here |
//! |---|---|
//! | `ncclGetUniqueId`, sharing it (`init_method="tcp://…"`) | [`UniqueId::new`], [`tcp::exchange_unique_id`] |
//! | `ncclCommInitRank` (one rank per process or thread) | [`Communicator::init_rank`] |
//! | `ncclCommInitAll` (several GPUs, one process) | [`CommGroup::new`] (non-blocking), [`CommGroup::init_all`] (NCCL's own call) |
//! | `ncclAllReduce`, `dist.all_reduce` | [`Communicator::all_reduce`], [`Communicator::all_reduce_in_place`] |
//! | `ncclBroadcast`, `ncclReduce` | [`Communicator::broadcast`], [`Communicator::reduce`] (+ `_in_place`) |
//! | `ncclAllGather`, `ncclReduceScatter` | [`Communicator::all_gather`], [`Communicator::reduce_scatter`] (+ `_in_place`) |
//! | `ncclSend`, `ncclRecv` | [`Communicator::send`], [`Communicator::recv`] |
//! | `ncclGroupStart` / `ncclGroupEnd` | [`Group`] (a guard) |
//! | `ncclCommGetAsyncError`, `ncclCommAbort`, PyTorch's NCCL watchdog and timeout | [`Communicator::check`], [`Communicator::abort`], [`CommConfig::timeout`] |
//! | `ncclDataType_t`, `ncclRedOp_t` | [`NcclType`] (`i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64`), [`ReduceOp`] |
//!
//! Tensors: `cuda-stack-runtime`'s `Tensor` has collectives built on this crate
//! (`Tensor::all_reduce_`, …), and `cuda-stack-nn`'s data-parallel training uses them.
//!
//! ## NVLink multicast stays off
//! NCCL can use NVLink SHARP (NVLS) through `cuMulticastCreate`; this project keeps it off. Every
//! call that may be NCCL's first in the process checks that `NCCL_NVLS_ENABLE` is `"0"` and
//! otherwise returns [`Error::NvlsNotDisabled`]; programs set it first thing in `main`
//! ([`disable_nvls_in_environment`], `unsafe`: setting the environment races with other
//! threads) or run with it in their environment. See [`mod@env`] for why the library checks
//! rather than sets. Nothing here calls `cuMulticastCreate`.
//!
//! ## Stream ordering
//! Operations are queued on a [`Stream`](cuda_stack_driver::Stream) of the communicator's device and
//! return without waiting. Their buffers are ordered exactly like a kernel's arguments
//! ([`cuda_stack_driver::Stream::enqueue_foreign`]): work queued earlier on the buffers on any stream
//! runs first, later work and frees wait for the NCCL work. In a [`Group`], whose work NCCL
//! queues only at its end, the guard keeps the borrows until then
//! ([`cuda_stack_driver::Stream::begin_foreign`]). Graph capture of NCCL work is refused (a replay
//! after an abort would use a freed communicator).
//!
//! ## Errors, timeouts and dead peers
//! Communicators are NCCL **non-blocking** communicators: no call blocks the host inside NCCL;
//! this crate waits by polling `ncclCommGetAsyncError`, bounded by [`CommConfig::timeout`]
//! (300 s unless set or `$CUDA_NCCL_TIMEOUT_SECS`). A watchdog thread ([`WATCHDOG_PERIOD`])
//! polls every communicator: an asynchronous error, or an operation unfinished on the GPU after
//! the timeout (a peer died in the middle of a collective), aborts it (`ncclCommAbort` makes the
//! waiting kernels exit), and from then on every call returns [`Error::Aborted`] with the
//! [`AbortReason`]. [`Communicator::synchronize`] waits for a stream and reports such an abort.
//! Drop finalizes and destroys off-thread, aborting instead when the other ranks do not finish
//! in time: it never blocks and never panics.
//!
//! **Blocking communicators, for latency** ([`CommConfig::blocking`], `$CUDA_NCCL_BLOCKING=1`,
//! PyTorch's mode): in non-blocking mode NCCL finishes each call's launch on a thread it starts
//! for that call, which costs about 48 µs per operation on an H200 (measured by `nccl_bench
//! --host-overhead`; this crate's own layer adds about 2 µs) — most of a small message's time,
//! and enough that the host cannot keep NVLink busy below 8 MiB. A blocking communicator
//! launches on the calling thread: latency and bus bandwidth then match or beat
//! `torch.distributed` at every size (`docs/results/nccl/`). What stays bounded by the timeout:
//! initialisation (it runs on a thread of its own) and every operation that hangs on the GPU
//! (the watchdog). What does not: a call that blocks inside NCCL on the host, which happens when
//! a transport to a peer is first connected (NCCL connects lazily) and that peer is dead. Hence
//! the default stays non-blocking.
//!
//! ## What cannot be checked
//! Every rank must issue the same collectives in the same order with the same counts and roots,
//! and each send must meet a receive of the same count: that is NCCL's (and MPI's) contract
//! between processes, and one rank cannot check another's arguments. A mismatch waits (until the
//! timeout aborts) or gives wrong values; NCCL sizes each rank's accesses to its own buffers by
//! that rank's arguments, which are checked here against the buffers.
//!
//! ```no_run
//! use cuda_stack_nccl::{CommConfig, Communicator, ReduceOp, UniqueId};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // One process per GPU: rank 0 makes the id and shares it (here: over TCP).
//! let (rank, nranks) = (0, 1);
//! let id = cuda_stack_nccl::tcp::exchange_unique_id("127.0.0.1:29500", rank, nranks,
//!                                             std::time::Duration::from_secs(60))?;
//! let comm = Communicator::init_rank(&id, rank, nranks, rank, &CommConfig::default())?;
//! let stream = comm.context().new_stream()?;
//! let mut grad = stream.clone_htod(&[1.0f32, 2.0, 3.0])?;
//! comm.all_reduce_in_place(&mut grad, ReduceOp::Sum, &stream)?;   // queued, ordered
//! comm.synchronize(&stream)?;                                     // waits; reports an abort
//! println!("{:?}", stream.clone_dtoh(&grad)?);
//! # Ok(()) }
//! ```
//!
//! ## Module map
//! Lower modules first; each uses only modules on the lines above it.
//!
//! ```text
//! error  config  dtype  raw_comm  backoff  watchdog   leaves
//! env  open_group                                    -> error
//! teardown                                           -> raw_comm, backoff
//! unique_id                                          -> env, open_group
//! comm  tcp                                          Communicator -> all of the above
//! ops  comm_group                                    -> comm
//! group                                              -> ops, comm
//! ```

#![warn(missing_docs)]

mod backoff;
mod comm;
mod comm_group;
mod config;
mod dtype;
pub mod env;
mod error;
mod group;
mod open_group;
mod ops;
mod raw_comm;
pub mod tcp;
mod teardown;
mod unique_id;
mod watchdog;

pub use comm::Communicator;
pub use comm_group::{enable_peer_access, CommGroup};
pub use config::{CommConfig, BLOCKING_VAR, TIMEOUT_VAR};
pub use dtype::{NcclType, ReduceOp};
pub use env::{check_nvls_disabled, disable_nvls_in_environment, NVLS_VAR};
pub use error::{AbortReason, Error, Result};
pub use group::Group;
pub use unique_id::{UniqueId, UNIQUE_ID_BYTES};
pub use watchdog::WATCHDOG_PERIOD;

/// Re-exported so users need not depend on it directly.
pub use cuda_stack_driver;

/// The loaded NCCL's version, e.g. `(2, 28, 9)`, or why NCCL cannot be loaded.
pub fn nccl_version() -> Result<Option<(i32, i32, i32)>> {
    Ok(cuda_stack_sys::Nccl::get()?.version())
}

/// The README's examples, compiled as doctests (so the first thing a reader copies builds).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
