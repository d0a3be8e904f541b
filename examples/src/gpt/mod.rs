//! A GPT-2 model on the crates' layers, and what issue 33's `train_gpt` needs to train it:
//! nanoGPT's architecture, parameter names and initialisation, so a checkpoint moves between
//! this model and nanoGPT's `GPT` in both directions ([`cuda_stack_nn::checkpoint`]).
//!
//! ```text
//! idx [B, T] ─ wte ─┐
//!        arange(T) ─ wpe ─ + ─ dropout ─ n_layer × block ─ ln_f ─ · wteᵀ (tied) ─ logits [B, T, V]
//! block:  x + c_proj(attn(ln_1(x)))  then  x + c_proj(gelu(c_fc(ln_2(x))))   (pre-LayerNorm)
//! ```
//!
//! Names (`named_parameters`) are nanoGPT's `state_dict` keys: `transformer.wte.weight`,
//! `transformer.wpe.weight`, `transformer.h.{i}.ln_1.{weight,bias}`,
//! `transformer.h.{i}.attn.c_attn.{weight,bias}` (the fused q|k|v projection, nanoGPT's column
//! order), `…attn.c_proj`, `…ln_2`, `…mlp.c_fc`, `…mlp.c_proj`, `transformer.ln_f.{weight,bias}`.
//! The classifier is tied to `wte` (nanoGPT's `lm_head.weight` is the same tensor, so it is not
//! listed twice). Initialisation as nanoGPT's `_init_weights`: every Linear and embedding weight
//! N(0, 0.02²), biases 0, LayerNorms 1 and 0, and each residual projection (`c_proj`)
//! N(0, (0.02/√(2·n_layer))²). The layers have biases (nanoGPT's `bias=True`, GPT-2's layout).
//!
//! The MLP `c_proj(gelu(c_fc(·)))` runs as one op, [`cuda_stack_nn::Var::mlp_gelu`]: in bf16 on
//! cuBLAS, GELU sits in `c_fc`'s GEMM epilogue and GELU's derivative in the epilogue of
//! `c_proj`'s `dY · W` GEMM (an H200: 32.87 ms a step against the chain's 33.41); in f32 it is
//! the chain's ops, bit for bit. [`Gpt::set_fused_mlp`]`(false)` (`train_gpt --mlp chain`)
//! runs the chain `linear → gelu → linear`, to compare.
//!
//! Training's loss ([`Gpt::loss_with`]) runs the tied classifier and the cross-entropy as one op,
//! [`cuda_stack_nn::Var::linear_cross_entropy`]: the logits never become a value of the graph,
//! and the backward writes their gradient over them (llm.c's in-place classifier), so the step's
//! largest tensor exists once, not twice — the same loss and gradients as
//! [`Gpt::forward_with`]'s logits through `fused_cross_entropy`, bit for bit.
//!
//! Mixed precision: the parameters are f32 (`Gpt<f32>`); [`Gpt::weights_as`] gives them in a
//! compute dtype (bf16: each cast once, its gradient returned to the f32 parameter), and
//! [`Gpt::forward_with`] / [`Gpt::loss_with`] run every op in that dtype.
//!
//! | module | what |
//! |---|---|
//! | `config` | [`GptConfig`]: shapes, parameter names and shapes |
//! | `model` | [`Gpt`]: the parameters and dropout layers, initialisation, names |
//! | `forward` | [`GptWeights`], the forward pass and losses, in any compute dtype |
//! | `kv_cache` | [`KvCache`], [`Gpt::forward_cached`]: prefill and one-position decode |
//! | `sample` | top-k sampling, [`Gpt::generate`] |
//! | `corpus` | [`Corpus`]: character vocabulary, 90/10 split, [`Batcher`]'s random windows |
//! | `schedule` | [`CosineSchedule`]: nanoGPT's `get_lr` |
//! | `train` | [`TrainConfig`], [`decays`], [`adamw`], [`Trainer`]: an iteration (data-parallel with [`Trainer::with_data_parallel`]), evaluation |
//! | [`parity`] | [`parity::compare_with_torch`]: step for step against `tools/torch_gpt.py`'s files |
//! | `budget` | [`MemoryEstimate`], [`flops_per_token`], [`bf16_dense_peak`] |
//! | [`torch_bench`] | PyTorch's figures (`tools/torch_gpt_bench.py`) beside ours, the issue's targets |

mod budget;
mod config;
mod corpus;
mod forward;
mod kv_cache;
mod model;
pub mod parity;
mod sample;
mod schedule;
pub mod torch_bench;
mod train;

pub use budget::{bf16_dense_peak, flops_per_token, MemoryEstimate};
pub use config::{GptConfig, LN_EPS};
pub use corpus::{Batcher, CharVocab, Corpus};
pub use forward::GptWeights;
pub use kv_cache::KvCache;
pub use model::Gpt;
pub use sample::{check_sample_config, sample_top_k, SampleConfig};
pub use schedule::CosineSchedule;
pub use train::{adamw, decays, StepStats, TrainConfig, Trainer};
