//! `cold_start`: what the first op of a fresh process costs, and why.
//!
//! A GPU runs machine code (SASS) for its own architecture. A kernel shipped only as PTX is
//! compiled to SASS by the driver's JIT when its module loads; the driver keeps the result in
//! its JIT cache (`~/.nv/ComputeCache`), so the *second* run on a machine is fast, but every
//! container with an ephemeral home, every CI job, every driver update and every machine with
//! the cache off (`CUDA_CACHE_DISABLE=1`) pays the JIT again. `cuda-stack-kernels` ships SASS for
//! sm_75, sm_80 and sm_90 beside the PTX and loads each kernel file on first use, so a first op
//! loads one small cubin; PyTorch ships SASS too.
//!
//! Each scenario runs in a fresh child process of this program (`--runs` times; the median is
//! shown): context creation (the first tensor) apart, then the first call of each op timed to
//! completion, module loads included.
//!
//! | scenario | environment |
//! |---|---|
//! | SASS, JIT cache off | `CUDA_CACHE_DISABLE=1` |
//! | PTX, JIT cache off | `CUDA_CACHE_DISABLE=1 CUDA_STACK_KERNELS_IMAGE=ptx` |
//! | PTX, JIT cache warm | `CUDA_STACK_KERNELS_IMAGE=ptx`, a private `CUDA_CACHE_PATH` filled by one run first |
//! | PyTorch, JIT cache off | `tools/torch_cold_start.py` with `CUDA_CACHE_DISABLE=1` (`--torch`) |
//!
//! Run: `cargo run --release -p cuda-examples --bin cold_start [-- --torch] [--runs N] [--quick]`

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_stack_kernels::Kernels;
use cuda_stack_runtime::tensor::{with_matmul_backend, MatmulBackend};
use cuda_stack_runtime::{self as rt, tensor::Tensor};
use serde_json::{json, Value};
use std::process::{Command, ExitCode};
use std::time::Instant;

#[derive(Parser)]
#[command(about = "The first op of a fresh process: SASS vs PTX JIT vs PyTorch")]
struct Args {
    /// Fresh processes per scenario (the median is shown).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Also run `tools/torch_cold_start.py` (PyTorch) in the same run.
    #[arg(long)]
    torch: bool,
    /// The PyTorch script.
    #[arg(long, default_value = "tools/torch_cold_start.py")]
    torch_script: String,
    /// Internal: run one measurement in this process and print it as JSON.
    #[arg(long, hide = true)]
    child: bool,
    #[command(flatten)]
    common: Common,
}

/// The ops timed, by JSON key and label.
const OPS: &[(&str, &str)] = &[
    ("context_ms", "first tensor (context)"),
    ("add_ms", "a + b"),
    ("sum_ms", "sum"),
    ("softmax_ms", "softmax"),
    ("matmul_kernels_ms", "matmul 64×64, our kernel"),
    ("matmul_ms", "matmul 64×64, cuBLAS (loads it)"),
    ("to_half_ms", "to f16"),
];

fn main() -> ExitCode {
    run("cold_start", body)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// One fresh-process measurement: each first op timed to completion.
fn child(device: usize) -> ProgramResult {
    let t = Instant::now();
    rt::set_device(device)?;
    let a = Tensor::from_vec(vec![1.0f32; 4096], &[4096])?;
    rt::synchronize()?;
    let context_ms = ms(t);
    let b = Tensor::from_vec(vec![2.0f32; 4096], &[4096])?;
    rt::synchronize()?;
    let t = Instant::now();
    let c = (&a + &b)?;
    rt::synchronize()?;
    let add_ms = ms(t);
    let t = Instant::now();
    let _s = c.sum_all()?;
    rt::synchronize()?;
    let sum_ms = ms(t);
    let m = Tensor::from_vec(vec![1.0f32; 64 * 64], &[64, 64])?;
    rt::synchronize()?;
    let t = Instant::now();
    let _p = m.softmax(1)?;
    rt::synchronize()?;
    let softmax_ms = ms(t);
    // The project's SGEMM first (a 330 KiB cubin), then cuBLAS, whose first call loads its
    // libraries (about 100 MB of them) as PyTorch's does.
    let t = Instant::now();
    let _mk = with_matmul_backend(MatmulBackend::Kernels, || m.matmul(&m))?;
    rt::synchronize()?;
    let matmul_kernels_ms = ms(t);
    let t = Instant::now();
    let _mm = m.matmul(&m)?;
    rt::synchronize()?;
    let matmul_ms = ms(t);
    let t = Instant::now();
    let _h = c.to_dtype::<cuda_stack_kernels::half::f16>()?;
    rt::synchronize()?;
    let to_half_ms = ms(t);
    if c.to_vec()?.iter().any(|&v| v != 3.0) {
        return Err("1 + 2 is not 3 on the GPU".into());
    }
    let ctx = rt::Runtime::current()?.context().clone();
    let loaded: Vec<String> = Kernels::get(&ctx)?
        .loaded_images()
        .iter()
        .map(|l| l.to_string())
        .collect();
    println!(
        "{}",
        json!({
            "context_ms": context_ms, "add_ms": add_ms, "sum_ms": sum_ms,
            "softmax_ms": softmax_ms, "matmul_ms": matmul_ms, "matmul_kernels_ms": matmul_kernels_ms, "to_half_ms": to_half_ms,
            "loaded": loaded,
        })
    );
    Ok(())
}

/// Runs `cmd` to completion and parses the last JSON line of its stdout; adds `process_ms`,
/// the wall time from spawn to exit.
fn measure(mut cmd: Command) -> Result<Value, Box<dyn std::error::Error>> {
    let t = Instant::now();
    let out = cmd.output()?;
    let process_ms = ms(t);
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("{cmd:?} printed no JSON: {text}"))?;
    let mut v: Value = serde_json::from_str(line)?;
    v["process_ms"] = json!(process_ms);
    Ok(v)
}

/// The median of `key` over `runs`, if every run has it.
fn med(runs: &[Value], key: &str) -> Option<f64> {
    let v: Vec<f64> = runs.iter().filter_map(|r| r[key].as_f64()).collect();
    (v.len() == runs.len() && !v.is_empty()).then(|| median(&v))
}

struct Scenario {
    name: &'static str,
    runs: Vec<Value>,
}

fn body() -> ProgramResult {
    let args = Args::parse();
    if args.child {
        return child(args.common.device);
    }
    // Without a driver, say so here (the children would each fail the same way).
    cuda_stack_sys::Driver::get()?;
    let runs = if args.common.quick {
        1
    } else {
        args.runs.max(1)
    };
    let exe = std::env::current_exe()?;
    let ours = |env: &[(&str, &str)]| {
        let mut c = Command::new(&exe);
        c.arg("--child")
            .arg("--device")
            .arg(args.common.device.to_string())
            .env_remove("CUDA_STACK_KERNELS_IMAGE")
            .env_remove("CUDA_CACHE_DISABLE")
            .envs(env.iter().copied());
        c
    };
    let cache_dir = std::env::temp_dir().join(format!("cold-start-jit-{}", std::process::id()));
    let cache = cache_dir.to_string_lossy().into_owned();
    let mut scenarios = Vec::new();
    let mut run_n = |name: &'static str, make: &dyn Fn() -> Command| -> ProgramResult {
        if !args.common.json {
            eprintln!("cold_start: {name} ({runs} fresh processes)");
        }
        let mut v = Vec::new();
        for _ in 0..runs {
            v.push(measure(make())?);
        }
        scenarios.push(Scenario { name, runs: v });
        Ok(())
    };
    run_n("SASS, JIT cache off", &|| {
        ours(&[("CUDA_CACHE_DISABLE", "1")])
    })?;
    run_n("PTX, JIT cache off", &|| {
        ours(&[
            ("CUDA_CACHE_DISABLE", "1"),
            ("CUDA_STACK_KERNELS_IMAGE", "ptx"),
        ])
    })?;
    // Fill a private JIT cache once, then measure warm runs against it.
    std::fs::create_dir_all(&cache_dir)?;
    let warm_env = [
        ("CUDA_STACK_KERNELS_IMAGE", "ptx"),
        ("CUDA_CACHE_PATH", cache.as_str()),
    ];
    measure(ours(&warm_env))?;
    run_n("PTX, JIT cache warm", &|| ours(&warm_env))?;
    let _ = std::fs::remove_dir_all(&cache_dir);
    let mut torch_note = None;
    if args.torch {
        let script = args.torch_script.clone();
        let device = args.common.device.to_string();
        let make = || {
            let mut c = Command::new("python3");
            c.arg(&script)
                .env("CUDA_CACHE_DISABLE", "1")
                .env("COLD_START_DEVICE", &device);
            c
        };
        match measure(make()) {
            Ok(first) => {
                let mut v = vec![first];
                for _ in 1..runs {
                    v.push(measure(make())?);
                }
                scenarios.push(Scenario {
                    name: "PyTorch, JIT cache off",
                    runs: v,
                });
            }
            Err(e) => torch_note = Some(format!("PyTorch not measured: {e}")),
        }
    }

    if args.common.json {
        let out: Vec<Value> = scenarios
            .iter()
            .map(|s| json!({"scenario": s.name, "runs": s.runs}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "scenarios": out }))?
        );
        return Ok(());
    }
    let mut headers = vec!["first call, ms (median)"];
    headers.extend(scenarios.iter().map(|s| s.name));
    let mut table = Table::new(&headers);
    let cell =
        |s: &Scenario, key: &str| med(&s.runs, key).map_or("-".into(), |v| format!("{v:.1}"));
    for (key, label) in OPS.iter().chain([("process_ms", "whole process")].iter()) {
        let mut row = vec![label.to_string()];
        row.extend(scenarios.iter().map(|s| cell(s, key)));
        table.row(&row);
    }
    println!("The first op of a fresh process ({runs} runs each; times include every module load)");
    table.print();
    if let Some(first) = scenarios[0].runs.first() {
        println!("\nWhat the SASS run loaded:");
        for l in first["loaded"].as_array().into_iter().flatten() {
            println!("  {}", l.as_str().unwrap_or_default());
        }
    }
    if let Some(torch) = scenarios.iter().find(|s| s.name.starts_with("PyTorch")) {
        if let (Some(ours), Some(theirs)) = (
            med(&scenarios[0].runs, "add_ms"),
            med(&torch.runs, "add_ms"),
        ) {
            println!(
                "\nfirst a + b with the JIT cache off: ours {ours:.1} ms, PyTorch {theirs:.1} ms ({:.2}×; target ≤ 50 ms)",
                ours / theirs
            );
        }
        if let (Some(ours), Some(theirs)) = (
            med(&scenarios[0].runs, "context_ms"),
            med(&torch.runs, "context_ms"),
        ) {
            println!("first tensor (context): ours {ours:.1} ms, PyTorch {theirs:.1} ms");
        }
        if let Some(import) = med(&torch.runs, "import_ms") {
            println!("(PyTorch's `import torch` took {import:.0} ms more, not counted above)");
        }
    }
    if let Some(n) = torch_note {
        println!("\n{n}");
    }
    Ok(())
}
