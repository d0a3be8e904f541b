//! # cuda-stack-nn: PyTorch's Python layer, in Rust
//!
//! Seed 001's exercise 3 and seed 004's network end where a model is trained. `torch` does
//! that with three things this crate provides on top of `cuda-stack-runtime`'s `Tensor`:
//!
//! | PyTorch | here |
//! |---|---|
//! | a tensor with `requires_grad=True`, `nn.Parameter` | [`Var::parameter`] |
//! | ops on it record `grad_fn` | [`Var`]'s ops: `add sub mul div` (broadcasting), `matmul`, `relu`, `tanh`, `scale`, `sum_all`/`mean_all`/`sum`/`mean`, `softmax`, `log_softmax`, `bias_relu`, `linear`, `mlp_gelu` (a transformer's MLP as one op, GELU in cuBLASLt's epilogues for bf16/f16), `layer_norm`, `add_layer_norm` (a residual add and the LayerNorm of the sum in one kernel, the stream's gradient added in the LayerNorm's backward), `gelu`, `embedding`, `dropout`, `scaled_dot_product_attention`, `reshape`/`transpose`/`narrow`, `cross_entropy`, `fused_cross_entropy`, `linear_cross_entropy` (a classifier and its loss as one op: the logits' gradient written over them, no second `[N, V]` buffer) |
//! | `torch.autograd.Function` (seed 004's custom kernels with autograd) | [`Var::custom_op`] |
//! | `loss.backward()`, `x.grad` | [`Var::backward`], [`Var::grad`] |
//! | `with torch.no_grad():` | [`no_grad`] |
//! | `torch.autograd.gradcheck` | [`gradcheck()`] |
//! | `nn.Module`, `nn.Linear`, `nn.ReLU`, `nn.Sequential` | [`Module`], [`Linear`], [`Relu`], [`Sequential`] |
//! | `nn.LayerNorm`, `nn.Embedding`, `nn.GELU(approximate='tanh')`, `nn.Dropout`, `nn.MultiheadAttention` (fused QKV, causal) | [`LayerNorm`], [`Embedding`], [`Gelu`], [`Dropout`], [`MultiHeadAttention`] |
//! | `torch.nn.utils.clip_grad_norm_` | [`clip_grad_norm`] |
//! | `safetensors.torch.save_file(model.state_dict())`, `model.load_state_dict(load_file(f))` | [`checkpoint::save`], [`checkpoint::Checkpoint::load_into`] |
//! | seed 004's `FusedOpLayer` | [`FusedOpLayer`] |
//! | `optim.SGD`, `optim.Adam` / `AdamW`, `zero_grad(set_to_none=True)` | [`Sgd`], [`Adam`], [`Optimizer::zero_grad`] |
//! | `param_groups` with their own `weight_decay`; `param_group["lr"] = lr` | [`Adam::with_groups`] with [`ParamGroup`]s; [`Adam::set_lr`] |
//! | `nn.CrossEntropyLoss()(logits, y)` | [`Var::cross_entropy`] with [`class_targets`] |
//! | `torch.cuda.graph` over a whole training step | [`CapturedStep`] |
//! | `Tensor.register_post_accumulate_grad_hook` | [`Var::register_grad_ready_hook`] |
//! | `DistributedDataParallel` (NCCL, gradient buckets overlapped with the backward) | [`DataParallel`] |
//! | `ZeroRedundancyOptimizer` / ZeRO-1 (optimizer state sharded across ranks) | [`ShardedOptimizer`] |
//! | `torch.autocast` (f32 weights, bf16/f16 compute) | [`Var::cast`] of the parameters, then `Var<bf16>`/`Var<f16>` ops |
//! | `torch.amp.GradScaler` (dynamic loss scaling for f16) | [`GradScaler`] |
//!
//! ## How autograd works here
//! Every op computes its value with one or a few `Tensor` ops (queued on the GPU, nothing
//! waits) and, when grad mode is on and an input requires grad, records a node: the op's name,
//! its inputs, and a backward closure that owns the tensors it needs (PyTorch's saved tensors).
//! [`Var::backward`] walks the nodes reachable from the loss in reverse topological order,
//! sums the gradients each value receives, calls each node's backward once, and adds the
//! gradients that reach leaves into their `.grad`. Backward passes are `Tensor` ops too —
//! mostly the dedicated backward kernels of `cuda-stack-kernels` (`relu_bwd`, `row_softmax_bwd`,
//! `cross_entropy_bwd`, `bias_relu_bwd`), so a backward pass never waits for the host either.
//! After a backward the saved tensors are freed (a second backward is
//! [`NnError::GraphFreed`]) unless you ask to retain the graph — except by an op whose backward
//! overwrites what it saved ([`Var::linear_cross_entropy`]), which runs once
//! ([`NnError::SavedTensorConsumed`]).
//!
//! ## Dtypes
//! `Var<T>` exists for the dtypes with backward kernels ([`GradElement`]): **f32** to train,
//! **f64** for [`gradcheck()`] (finite differences need double precision), and **bf16**/**f16**
//! for mixed precision. The rule, as autocast's: parameters stay f32 (the master weights, and
//! the optimizer's state with them: the optimizer kernels are f32/f64 only); a forward casts
//! them with [`Var::cast`] and computes in bf16/f16 — matmuls on tensor cores with f32
//! accumulation, every other op computed in f32 and rounded once per result — and the
//! gradients come back to the f32 parameters, converted once. A graph holds one dtype; the cast
//! is where two meet, at a leaf. For f16, scale the loss with a [`GradScaler`].
//!
//! ## Errors
//! Nothing panics on bad input: shape and device mismatches come from the tensor layer as
//! [`NnError::Tensor`]; a backward of a non-scalar without a gradient, a second backward through
//! a freed graph, `grad()` of a tensor that does not require grad, an optimizer with no
//! parameters, invalid hyper-parameters or class labels: each its own [`NnError`] variant that
//! says what to do.
//!
//! ```no_run
//! use cuda_stack_nn::{class_targets, Linear, Module, Optimizer, Relu, Sequential, Sgd, SgdConfig, Var};
//! use cuda_stack_runtime::Tensor;
//! # fn main() -> Result<(), cuda_stack_nn::NnError> {
//! let model = Sequential::<f32>::new()
//!     .append(Linear::new(784, 512, 1)?)
//!     .append(Relu)
//!     .append(Linear::new(512, 10, 2)?);
//! let mut opt = Sgd::new(model.parameters(), SgdConfig::new(0.1))?;
//! let x = Var::constant(Tensor::randn(&[256, 784], 3)?);
//! let y = class_targets(&vec![3; 256], 10)?;
//! opt.zero_grad();
//! let loss = model.forward(&x)?.cross_entropy(&y)?;
//! loss.backward()?;
//! opt.step()?;
//! println!("loss {}", loss.value().item()?);
//! # Ok(()) }
//! ```
//!
//! ## Module map
//! Lower modules first; each uses only modules on the lines above it.
//!
//! ```text
//! error  grad_mode  lock                  leaves
//! record  init                            the autograd record; weight init  -> error, lock
//! var                                     Var                               -> record, grad_mode
//! graph  hook  ops  layers  optim         backward, hooks, ops, modules     -> var, record
//!   gradcheck  capture_targets  checkpoint  deferred_cast
//! capture  parallel                       CapturedStep, DataParallel        -> optim, hook, var
//! zero                                    ShardedOptimizer (ZeRO-1)         -> parallel, optim
//! ```

mod capture;
mod capture_targets;
pub mod checkpoint;
mod deferred_cast;
mod error;
mod grad_mode;
pub mod gradcheck;
mod graph;
mod hook;
pub mod init;
mod layers;
mod lock;
mod ops;
mod optim;
mod parallel;
mod record;
mod var;
mod zero;

pub use capture::{CapturedStep, StepOutputs};
pub use cuda_stack_runtime::GradElement;
pub use error::{NnError, Result, ShardingError};
pub use grad_mode::{is_grad_enabled, no_grad};
pub use gradcheck::{gradcheck, GradcheckOptions, GradcheckReport};
pub use hook::GradHookHandle;
pub use layers::{
    Dropout, Embedding, FusedOpLayer, Gelu, LayerNorm, Linear, Module, MultiHeadAttention, Relu,
    Sequential,
};
pub use ops::{class_targets, token_ids};
pub use optim::{
    clip_grad_norm, clip_grad_scale, Adam, AdamConfig, GradScaler, GradScalerConfig, Optimizer,
    ParamGroup, Sgd, SgdConfig,
};
pub use parallel::{DataParallel, DataParallelConfig};
pub use var::Var;
pub use zero::{ShardableOptimizer, ShardedMemory, ShardedOptimizer};

/// The README's examples, compiled as doctests (so the first thing a reader copies builds).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
