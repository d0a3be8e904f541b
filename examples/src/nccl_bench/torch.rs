//! PyTorch's side: the JSON `tools/torch_nccl_bench.py` writes (`--torch FILE`), or the script
//! run by this program right after its own measurements (`--torch-run`) with the same sizes,
//! quickness and number of GPUs, so that one command gives both columns of the same session.

use super::{Plan, Res};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// PyTorch's run, from the script's JSON.
#[derive(Debug, Clone)]
pub struct TorchRun {
    /// Its number of ranks.
    pub world: usize,
    /// (op, bytes) -> (µs, bus GB/s).
    pub rows: HashMap<(String, usize), (f64, f64)>,
    /// Versions and device.
    pub meta: Value,
}

impl TorchRun {
    /// PyTorch's (µs, bus GB/s) for `op` at `bytes`.
    pub fn get(&self, op: &str, bytes: usize) -> Option<(f64, f64)> {
        self.rows.get(&(op.to_string(), bytes)).copied()
    }
}

/// The run in the script's JSON `text` (`what` names it in errors).
pub fn parse(text: &str, what: &str) -> Res<TorchRun> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| format!("{what}: not the JSON of tools/torch_nccl_bench.py: {e}"))?;
    let world = v["world_size"].as_u64().unwrap_or(0) as usize;
    let mut rows = HashMap::new();
    for r in v["rows"].as_array().into_iter().flatten() {
        if let (Some(op), Some(b), Some(t), Some(bw)) = (
            r["op"].as_str(),
            r["bytes"].as_u64(),
            r["time_us"].as_f64(),
            r["busbw_gbps"].as_f64(),
        ) {
            rows.insert((op.to_string(), b as usize), (t, bw));
        }
    }
    let meta = json!({"torch": v["torch"], "nccl": v["nccl"], "device": v["device"],
                      "nvls_enable": v["nvls_enable"]});
    Ok(TorchRun { world, rows, meta })
}

/// The run in the file `path` (`--torch FILE`).
pub fn load(path: &Path) -> Res<TorchRun> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading --torch {}: {e}", path.display()))?;
    parse(&text, &format!("--torch {}", path.display()))
}

/// Runs `python3 script` for `plan` on `n` GPUs (its JSON to a temporary file, read back and
/// removed), within `deadline`: past it the script is stopped (SIGTERM, then SIGKILL, to the
/// one process started here) and an error says so.
pub fn run_script(script: &Path, plan: &Plan, n: usize, deadline: Duration) -> Res<TorchRun> {
    if !script.exists() {
        return Err(format!(
            "--torch-run: {} does not exist (run from the repository root, or pass \
             --torch-script PATH)",
            script.display()
        )
        .into());
    }
    let out = std::env::temp_dir().join(format!("nccl_bench_torch_{}.json", std::process::id()));
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let mut cmd = Command::new("python3");
    cmd.arg(script)
        .arg("--out")
        .arg(&out)
        .args(["--gpus", &n.to_string()])
        .args(["--min-bytes", &plan.min.to_string()])
        .args(["--max-bytes", &plan.max.to_string()])
        .args(["--port", &port.to_string()])
        .env(cuda_stack_nccl::NVLS_VAR, "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if plan.quick {
        cmd.arg("--quick");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("--torch-run: could not start python3: {e}"))?;
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if start.elapsed() > deadline {
            terminate(&mut child);
            return Err(format!(
                "--torch-run: python3 {} did not finish within {:.0} s; stopped",
                script.display(),
                deadline.as_secs_f64()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if !status.success() {
        let _ = std::fs::remove_file(&out);
        return Err(format!(
            "--torch-run: python3 {} failed ({status}; its message is above)",
            script.display()
        )
        .into());
    }
    let text = std::fs::read_to_string(&out)
        .map_err(|e| format!("--torch-run: reading {}: {e}", out.display()));
    let _ = std::fs::remove_file(&out);
    parse(&text?, "--torch-run's JSON")
}

/// Stops `child` (the script this program started): SIGTERM, which lets Python end its
/// workers, then SIGKILL after 5 s.
fn terminate(child: &mut std::process::Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) on the id of a child this process started and has not reaped (so
        // the id is still its), with a valid signal; no memory is passed.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_scripts_json_and_ignores_other_rows() {
        let t = parse(
            r#"{"world_size": 2, "torch": "2.9", "nccl": "2.27.5", "device": "H200",
                "rows": [{"op": "broadcast", "bytes": 8, "time_us": 30.5, "busbw_gbps": 0.0},
                         {"op": "all_reduce", "bytes": 8}]}"#,
            "test",
        )
        .unwrap();
        assert_eq!(t.world, 2);
        assert_eq!(t.get("broadcast", 8), Some((30.5, 0.0)));
        assert_eq!(t.get("all_reduce", 8), None);
        assert!(parse("nope", "x").is_err());
    }
}
