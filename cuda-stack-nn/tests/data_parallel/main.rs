//! Grad-ready hooks and data-parallel training ([`DataParallel`]) on NCCL.
//!
//! On one GPU: a one-rank data-parallel run equals plain training step for step (the loss
//! curve and the final parameters); hooks fire once per leaf with the accumulated gradient.
//! On two or more GPUs: one thread per GPU, each training on its share of the same global
//! batch, gives the loss curve one GPU gives on the whole batch, within floating-point
//! tolerance.
//!
//! ZeRO-1 ([`ShardedOptimizer`]): at one rank and at N, with SGD + momentum and with AdamW,
//! the same loss curve and parameters as plain data-parallel training (1e-5), 1/N of the
//! optimizer state per rank, odd sizes whose parameters straddle two ranks' parts, and typed
//! errors.

use cuda_stack_nn::{
    class_targets, Adam, AdamConfig, DataParallel, DataParallelConfig, Linear, Module, NnError,
    Optimizer, ParamGroup, Relu, Sequential, Sgd, SgdConfig, ShardableOptimizer, ShardedOptimizer,
    ShardingError, Var,
};
use cuda_stack_runtime::cuda_stack_nccl::{CommConfig, CommGroup, Communicator, UniqueId};
use cuda_stack_runtime::{set_device, Tensor};
use cuda_tests::{ensure, gpu, gpu2_nccl, gpu_nccl, TestResult};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod ranks;
mod training;
mod zero;

use ranks::*;
use training::*;
use zero::*;

fn main() {
    // SAFETY: the first statement of main: no other thread exists yet.
    unsafe { cuda_stack_runtime::cuda_stack_nccl::disable_nvls_in_environment() };
    cuda_tests::run(vec![
        gpu(
            "grad_ready_hooks_fire_once_with_the_accumulated_gradient",
            hooks,
        ),
        gpu("set_grad_checks_shape", set_grad),
        gpu_nccl("one_rank_data_parallel_equals_plain_training", one_rank),
        gpu_nccl("a_parameter_without_gradient_is_named", missing_grad),
        gpu2_nccl("n_gpus_match_one_gpu_on_the_same_global_batch", n_ranks),
        gpu2_nccl(
            "a_rank_that_refuses_its_parameters_fails_every_rank_at_once",
            refusing_rank,
        ),
        gpu_nccl(
            "zero1_one_rank_matches_data_parallel_sgd_momentum_and_adamw",
            zero_one_rank,
        ),
        gpu_nccl("zero1_errors_are_typed", zero_errors),
        gpu2_nccl(
            "zero1_n_ranks_match_data_parallel_sgd_momentum_and_adamw",
            zero_n_ranks,
        ),
        gpu2_nccl(
            "zero1_optimizer_state_per_rank_is_ceil_total_over_n",
            zero_state_bytes,
        ),
        gpu2_nccl(
            "zero1_odd_sizes_and_split_parameters_match_data_parallel",
            zero_odd_sizes,
        ),
        gpu2_nccl(
            "zero1_ranks_with_different_parameters_fail_typed",
            zero_ranks_differ,
        ),
    ]);
}
