//! `error_handling`: seed 004, "Troubleshooting" and "Debugging Failed Tests", made runnable.
//!
//! Each failure the seed lists is provoked on purpose and shown as this project's typed error
//! (`cuda_stack_driver::Error`), with the seed's symptom, our error's message, and the fix:
//!
//! 1. `CUDA error: invalid configuration argument`: a block of 2048 threads →
//!    `Error::LaunchConfig`, naming the device's limit; checked before the launch is queued.
//! 2. `Expected all tensors to be on the same device`: a buffer allocated on device 1 passed to a
//!    launch on device 0 → `Error::DeviceMismatch`. Needs two GPUs; with one it is reported as
//!    skipped (never faked).
//! 3. Running out of GPU memory (the seed's "check GPU memory"): 4 × the device's memory →
//!    `Error::OutOfMemory` with free and total bytes; then an allocation succeeds again.
//! 4. `Unsupported gpu architecture` / `incompatible CUDA version`: PTX with `.version 9.9` →
//!    `Error::PtxTooNew` naming the PTX ISA and the driver's version.
//! 5. `undefined symbol: …` (a name the loader cannot find): asking a module for the seed's
//!    `fused_op_forward` → `Error::KernelNotFound` listing the kernels the module has.
//!
//! After each, the program applies the fix and checks that the work then succeeds (results
//! against the CPU reference). It exits 0 when every provoked error was the expected variant,
//! 1 otherwise.
//!
//! Run: `cargo run --release -p cuda-examples --bin error_handling`

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::trace_log::CallRecorder;
use cuda_stack_driver::{Context, Device, Error, LaunchConfig};
use cuda_stack_kernels::{reference, Kernels};
use serde_json::{json, Value};
use std::process::ExitCode;

/// Seed 004's troubleshooting cases, provoked and shown as typed errors.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("error_handling", || body(&args))
}

/// The variant's name (`Error::LaunchConfig { .. }` → `LaunchConfig`).
fn variant(e: &Error) -> String {
    let name: &'static str = e.into();
    name.to_string()
}

/// One case: what the seed shows, what we did, what came back, and the fix.
struct Case<'a> {
    title: &'a str,
    symptom: &'a str,
    provoked: String,
    expected: &'a str,
    fix: &'a str,
}

/// Prints a case and records it; returns whether the error was the expected variant (and
/// `detail_ok`, a check of its fields).
fn report<T>(
    out: &Out,
    log: &mut Vec<Value>,
    case: Case<'_>,
    result: Result<T, Error>,
    detail_ok: impl Fn(&Error) -> bool,
) -> bool {
    let (message, got, ok) = match &result {
        Ok(_) => (
            "(no error: the call succeeded)".to_string(),
            "none".to_string(),
            false,
        ),
        Err(e) => (
            e.to_string(),
            variant(e),
            variant(e) == case.expected && detail_ok(e),
        ),
    };
    out.say(format!("[{}] {}", log.len() + 1, case.title));
    out.say(format!("    seed's symptom:  {}", case.symptom));
    out.say(format!("    provoked by:     {}", case.provoked));
    out.say(format!(
        "    our error:       {}",
        message.replace('\n', "\n                     ")
    ));
    out.say(format!(
        "    variant:         Error::{got} {}",
        if ok {
            "(as expected)".to_string()
        } else {
            format!(
                "(UNEXPECTED: wanted Error::{} with the details checked)",
                case.expected
            )
        }
    ));
    out.say(format!("    fix:             {}", case.fix));
    log.push(
        json!({"case": case.title, "expected": case.expected, "got": got,
                    "message": message, "ok": ok}),
    );
    ok
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    let ctx = Context::new(q.device)?;
    let dev = ctx.device();
    let lim = *ctx.limits();
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    out.say(format!(
        "error_handling on device {} ({})\n",
        dev.ordinal(),
        dev.name()?
    ));
    let mut log = Vec::new();
    let mut all_ok = true;
    let host: Vec<f32> = (0..2048).map(|i| (i as f32 - 1024.0) / 256.0).collect();
    let want = reference::relu(&host);
    let x = s.clone_htod(&host)?;
    let mut y = s.alloc_zeros::<f32>(host.len())?;
    let n = host.len() as u64;

    // 1. Invalid launch configuration.
    let bad = LaunchConfig::new(1, (64, 32));
    let rec = CallRecorder::start();
    // SAFETY: relu_f32 touches elements i < n only, and x and y both have n elements;
    // a bad configuration is refused by validation before anything is queued.
    let r = unsafe { k.relu_f32()?.launch(&s, &bad, &x, &mut y, n) };
    let calls = rec.take();
    drop(rec);
    let launched = calls.iter().any(|c| c.call.starts_with("cuLaunch"));
    let max = lim.max_threads_per_block;
    all_ok &= report(
        &out,
        &mut log,
        Case {
            title: "invalid launch configuration",
            symptom: "CUDA error: invalid configuration argument",
            provoked: "launching relu_f32 with block (64, 32) = 2048 threads".into(),
            expected: "LaunchConfig",
            fix: "keep blocks within the device's limit (ctx.limits().max_threads_per_block); \
                  nothing was queued, so the stream is still usable",
        },
        r,
        |e| {
            let m = e.to_string();
            m.contains("2048") && m.contains(&max.to_string())
        },
    );
    out.say(format!(
        "    driver calls:    {} during the rejected launch, {}",
        calls.len(),
        if launched {
            "INCLUDING a cuLaunch* call"
        } else {
            "no cuLaunch* call: the check ran before anything reached the GPU"
        }
    ));
    all_ok &= !launched;
    // SAFETY: relu_f32 touches elements i < n only, and x and y both have n elements;
    // a bad configuration is refused by validation before anything is queued.
    unsafe {
        k.relu_f32()?
            .launch(&s, &LaunchConfig::new(8, 256), &x, &mut y, n)
    }?;
    let fixed_ok = s.clone_dtoh(&y)? == want;
    out.say(format!(
        "    after the fix:   block 256 -> launched, output {} the CPU reference\n",
        if fixed_ok {
            "matches"
        } else {
            "DOES NOT match"
        }
    ));
    all_ok &= fixed_ok;

    // 2. Device mismatch (needs two GPUs).
    let count = Device::count()?;
    if count >= 2 {
        let other = if q.device == 0 { 1 } else { 0 };
        let ctx_b = Context::new(other)?;
        let s_b = ctx_b.new_stream()?;
        let x_b = s_b.clone_htod(&host)?;
        // SAFETY: relu_f32 touches elements i < n only, and x and y both have n elements;
        // a bad configuration is refused by validation before anything is queued.
        let r = unsafe {
            k.relu_f32()?
                .launch(&s, &LaunchConfig::new(8, 256), &x_b, &mut y, n)
        };
        let here = q.device as i32;
        all_ok &= report(
            &out,
            &mut log,
            Case {
                title: "buffer on another device",
                symptom: "RuntimeError: Expected all tensors to be on the same device",
                provoked: format!(
                    "a buffer allocated on device {other} passed to a launch on device {here}"
                ),
                expected: "DeviceMismatch",
                fix: "copy the data to the launch's device first (or launch on the buffer's \
                      device)",
            },
            r,
            |e| {
                matches!(e, Error::DeviceMismatch { expected, found, .. }
                         if *expected == here && *found == other as i32)
            },
        );
        let x_here = s.clone_htod(&s_b.clone_dtoh(&x_b)?)?;
        s.memset_zeros(&mut y)?;
        // SAFETY: relu_f32 touches elements i < n only, and x and y both have n elements;
        // a bad configuration is refused by validation before anything is queued.
        unsafe {
            k.relu_f32()?
                .launch(&s, &LaunchConfig::new(8, 256), &x_here, &mut y, n)
        }?;
        let fixed_ok = s.clone_dtoh(&y)? == want;
        out.say(format!(
            "    after the fix:   copied to device {here} -> launched, output {} the CPU \
             reference\n",
            if fixed_ok {
                "matches"
            } else {
                "DOES NOT match"
            }
        ));
        all_ok &= fixed_ok;
    } else {
        out.say(format!(
            "[{}] buffer on another device\n    SKIPPED: this case needs two GPUs and this \
             machine has {count}; it is not simulated.\n",
            log.len() + 1
        ));
        log.push(json!({"case": "buffer on another device", "skipped": true,
                        "reason": format!("needs 2 GPUs, found {count}")}));
    }

    // 3. Out of memory.
    let (free0, total) = ctx.mem_get_info()?;
    let ask = total.saturating_mul(4);
    let r = s.alloc_zeros::<u8>(ask);
    all_ok &= report(
        &out,
        &mut log,
        Case {
            title: "out of device memory",
            symptom: "Debugging Failed Tests, step 3: \"Check GPU memory: nvidia-smi\" \
                      (PyTorch: \"CUDA out of memory. Tried to allocate ...\")",
            provoked: format!(
                "allocating {:.1} GiB = 4 x the device's {:.1} GiB ({:.1} GiB free)",
                ask as f64 / (1u64 << 30) as f64,
                total as f64 / (1u64 << 30) as f64,
                free0 as f64 / (1u64 << 30) as f64
            ),
            expected: "OutOfMemory",
            fix: "allocate less (process in chunks) or free buffers first; the failed request \
                  changes nothing",
        },
        r,
        |e| {
            matches!(e, Error::OutOfMemory { requested, total: t, .. }
                     if *requested == ask && *t == total)
        },
    );
    let mib = 64usize << 20;
    let mut again = s.alloc_zeros::<u8>(mib)?;
    s.memset_bytes(&mut again, 0x5a)?;
    let fixed_ok = s.clone_dtoh(&again)?.iter().all(|&b| b == 0x5a);
    drop(again);
    out.say(format!(
        "    after the fix:   a 64 MiB allocation succeeded and holds what was written: {}\n",
        if fixed_ok { "yes" } else { "NO" }
    ));
    all_ok &= fixed_ok;

    // 4. PTX newer than the driver.
    let ptx = ".version 9.9\n.target sm_90\n.address_size 64\n\n\
               .visible .entry too_new()\n{\n    ret;\n}\n";
    let r = ctx.load_ptx(ptx);
    all_ok &= report(
        &out,
        &mut log,
        Case {
            title: "PTX too new for the driver",
            symptom: "nvcc fatal: Unsupported gpu architecture 'compute_XX' / \"incompatible \
                      CUDA version\": the toolkit and the driver (or PyTorch) disagree",
            provoked: "loading PTX that declares `.version 9.9`".into(),
            expected: "PtxTooNew",
            fix: "update the NVIDIA driver, or generate PTX with an NVRTC/nvcc no newer than the \
                  driver (this project's PTX is ISA 8.4, for drivers >= R550)",
        },
        r,
        |e| matches!(e, Error::PtxTooNew { ptx_isa, .. } if ptx_isa == "9.9"),
    );
    out.say("");

    // 5. Kernel not in the module.
    let cc = lim.compute_capability;
    let module = ctx.load_ptx(cuda_stack_kernels::ptx::ptx_for("vector_add", cc)?)?;
    let r = module.function("fused_op_forward");
    all_ok &= report(
        &out,
        &mut log,
        Case {
            title: "kernel not found",
            symptom: "undefined symbol: _ZN3c10... (the loader cannot find a name it was asked \
                      for)",
            provoked: "asking the library's `vector_add` module (seed 000's kernels) for \
                       `fused_op_forward`"
                .into(),
            expected: "KernelNotFound",
            fix: "use a name from the list; declare kernels `extern \"C\"` so the PTX name is \
                  not C++-mangled (`_Z16fused_op_forward...`)",
        },
        r,
        |e| {
            matches!(e, Error::KernelNotFound { name, available }
                     if name == "fused_op_forward" && !available.is_empty())
        },
    );
    let f = module.function("vector_add")?;
    out.say(format!(
        "    after the fix:   module.function(\"{}\") found it\n",
        f.name()
    ));

    let expected = log.iter().filter(|c| c.get("skipped").is_none()).count();
    let ok_count = log.iter().filter(|c| c["ok"] == json!(true)).count();
    out.say(format!(
        "{ok_count} of {expected} provoked errors were the expected variant{}; every fix worked: {}.",
        if count >= 2 { "" } else { " (1 case skipped: one GPU)" },
        if all_ok { "yes" } else { "no" }
    ));
    out.put("device", json!(dev.name()?));
    out.put("cases", Value::Array(log));
    out.put("all_ok", json!(all_ok));
    out.finish();
    if !all_ok {
        return Err("at least one case did not give the expected error, or its fix failed".into());
    }
    Ok(())
}
