//! Every example program, run with `--quick` on the GPU, must succeed: none of them rots.

use std::path::PathBuf;
use std::process::Command;

/// The programs, and where cargo built them (with `.gpu/bin/NAME` as the fallback on a GPU
/// machine, where `gpu-pack` put them).
macro_rules! programs {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), env!(concat!("CARGO_BIN_EXE_", stringify!($name))))),*]
    };
}

const PROGRAMS: &[(&str, &str)] = programs![
    tour,
    device_query,
    vector_add_layers,
    cpu_vs_gpu,
    custom_kernel,
    memory_stats,
    sync_pitfall,
    elementwise_timing,
    transfer_cost,
    small_kernels_pitfall,
    sync_in_loop_pitfall,
    batch_size_sweep,
    square_elementwise,
    elementwise_kernel,
    cupy_bench,
    attention_chain,
    attention_bench,
    memory_breakdown,
    thread_hierarchy,
    coalescing,
    tiled_matmul,
    tensor_cores,
    streams_overlap,
    tensor_strides,
    dtype_dispatch,
    fused_op,
    custom_relu,
    reduce_sum,
    launch_config,
    error_handling,
    driver_bench,
    kernels_bench,
    transformer_ops_bench,
    kernel_lab,
    soak,
    tiny_model_training,
    fused_layer_training,
    train_digits,
    train_bench,
    train_gpt,
    peer_bandwidth,
    nccl_bench,
    dp_train,
];

fn path(name: &str, cargo: &str) -> PathBuf {
    let p = PathBuf::from(cargo);
    if p.exists() {
        p
    } else {
        PathBuf::from(".gpu/bin").join(name)
    }
}

fn main() {
    // kernels_bench runs twice: its sections, and the shape sweep (every case checked against
    // the CPU reference at the swept shape before it is timed).
    let runs = PROGRAMS
        .iter()
        .map(|&(name, cargo)| (name, cargo, false))
        .chain(std::iter::once((
            "kernels_bench",
            env!("CARGO_BIN_EXE_kernels_bench"),
            true,
        )));
    let mut trials: Vec<libtest_mimic::Trial> = runs
        .map(|(name, cargo, sweep)| {
            let exe = path(name, cargo);
            let title = if sweep {
                format!("{name} --sweep --quick")
            } else {
                format!("{name} --quick")
            };
            libtest_mimic::Trial::test(title, move || {
                let mut cmd = Command::new(&exe);
                cmd.arg("--quick");
                if sweep {
                    cmd.arg("--sweep");
                }
                if name == "kernels_bench" || name == "train_gpt" {
                    // Keep their reports, charts and checkpoints out of the working tree.
                    cmd.arg("--out").arg(std::env::temp_dir().join(name));
                }
                let out = cmd
                    .output()
                    .map_err(|e| format!("running {}: {e}", exe.display()))?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{} exited with {}\nstdout:\n{}\nstderr:\n{}",
                        exe.display(),
                        out.status,
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    )
                    .into())
                }
            })
            .with_ignored_flag(cuda_tests::no_gpu_reason().is_some())
        })
        .collect();
    // train_gpt's data-parallel run (two processes, NCCL) on machines with two GPUs.
    let exe = path("train_gpt", env!("CARGO_BIN_EXE_train_gpt"));
    trials.push(
        libtest_mimic::Trial::test("train_gpt --config gpt2-124m --gpus 2 --quick", move || {
            let out = Command::new(&exe)
                .args(["--config", "gpt2-124m", "--gpus", "2", "--quick"])
                .output()
                .map_err(|e| format!("running {}: {e}", exe.display()))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{} exited with {}\nstdout:\n{}\nstderr:\n{}",
                    exe.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )
                .into())
            }
        })
        .with_ignored_flag(cuda_tests::gpu_count() < 2 || cuda_tests::no_nccl_reason().is_some()),
    );
    cuda_tests::run(trials);
}
