//! `kernel_lab`: the tuning bench behind the fast kernels. It compiles candidate variants
//! (`kernels/tuning/*.cu`, and the SGEMM with other tile depths or a grouped block order) with
//! NVRTC at run time, checks each against the library kernel's output (or, for the SGEMM plans,
//! exactly against `reference::sgemm_dot`), and times them beside the library kernel, the
//! device-to-device copy, PyTorch (`--torch FILE`) and cuBLAS (`--torch-sweep FILE`), all taken
//! in the same run. Its findings are in `kernels/TUNING.md`; the winners live in `kernels/cuda/`.
//!
//! Groups (`--only a,b`; all by default): `vector-add`, `transpose` (16384²), `softmax`,
//! `sgemm` (4096³) — rounds 1–2 —; `sgemm-odd`, `transpose-small`, `transpose-odd` — issue 9,
//! round 4. On the GPU machine, with cuBLAS's times for the SGEMM cases:
//!
//! ```text
//! .gpu/bin/kernel_lab --lab-cases > lab_cases.json
//! python3 tools/torch_sweep.py lab_cases.json > torch_lab.json
//! .gpu/bin/kernel_lab --only sgemm-odd,transpose-small,transpose-odd --torch-sweep torch_lab.json
//! ```

#[path = "../kernel_lab/mod.rs"]
mod lab;

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::torch::TorchBaseline;
use lab::common::{load_sweep, Lab};
use std::path::PathBuf;
use std::process::ExitCode;

/// Every group, in run order.
const GROUPS: &[&str] = &[
    "vector-add",
    "transpose",
    "softmax",
    "sgemm",
    "sgemm-odd",
    "transpose-small",
    "transpose-odd",
];

#[derive(Parser)]
#[command(about = "Candidate kernel variants, checked and timed against the library and PyTorch")]
struct Args {
    /// `anchors/torch_baseline.py` output from the same run.
    #[arg(long)]
    torch: Option<String>,
    /// `tools/torch_sweep.py` output (on `--lab-cases`) from the same run: cuBLAS per SGEMM case.
    #[arg(long)]
    torch_sweep: Option<PathBuf>,
    /// Only these groups (comma-separated): vector-add, transpose, softmax, sgemm, sgemm-odd,
    /// transpose-small, transpose-odd.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Print the SGEMM cases as `tools/torch_sweep.py` reads them, and exit.
    #[arg(long)]
    lab_cases: bool,
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    run("kernel_lab", body)
}

fn body() -> ProgramResult {
    let args = Args::parse();
    let quick = args.common.quick;
    if args.lab_cases {
        let v = lab::sgemm_odd::cases_json(quick);
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for g in &args.only {
        if !GROUPS.contains(&g.as_str()) {
            return Err(format!(
                "--only: unknown group {g:?} (groups: {})",
                GROUPS.join(", ")
            )
            .into());
        }
    }
    let want = |g: &str| args.only.is_empty() || args.only.iter().any(|o| o == g);
    let torch = TorchBaseline::load(args.torch.as_ref())?;
    let sweep = load_sweep(args.torch_sweep.as_deref())?;
    let mut lab = Lab::new(args.common.device, quick, torch, sweep)?;
    // A failing group still prints what the others measured.
    if let Err(e) = groups(&mut lab, &want) {
        lab.print();
        return Err(e);
    }
    println!(
        "x ref: multiple of the D2D copy (memory-bound rows: of the same bytes in the issue 9 groups) \
         or of cuBLAS (sgemm rows: via PyTorch, TF32 off; time ratio in the issue 9 groups)"
    );
    lab.print();
    Ok(())
}

/// Runs the groups `want` selects, in order.
fn groups(lab: &mut Lab, want: &dyn Fn(&str) -> bool) -> lab::common::Res<()> {
    if ["vector-add", "transpose", "softmax"]
        .iter()
        .any(|g| want(g))
    {
        let d2d = lab::rounds::d2d_reference(lab)?;
        if want("vector-add") {
            lab::rounds::vector_add(lab, d2d)?;
        }
        if want("transpose") {
            lab::rounds::transpose_square(lab, d2d)?;
        }
        if want("softmax") {
            lab::rounds::softmax(lab, d2d)?;
        }
    }
    if want("sgemm") {
        lab::rounds::sgemm_square(lab)?;
    }
    if want("sgemm-odd") {
        lab::sgemm_odd::run(lab)?;
    }
    if want("transpose-small") {
        lab::transposes::small(lab)?;
    }
    if want("transpose-odd") {
        lab::transposes::odd(lab)?;
    }
    Ok(())
}
