//! PyTorch's side: `tools/torch_attention.py` run on the same cases (`--torch-run`), or its JSON
//! read back (`--torch FILE`).

use super::cases::Case;
use serde_json::Value;
use std::collections::HashMap;
use std::error::Error;
use std::path::Path;
use std::process::{Command, Stdio};

/// PyTorch's figures for one case.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchTime {
    /// Seconds per eager call.
    pub s: f64,
    /// Seconds per call replayed from a CUDA graph (the attention cases; `None` where the script
    /// did not or could not capture the call): PyTorch's GPU time without its host side.
    pub graph_s: Option<f64>,
    /// The SDPA backend PyTorch used (attention cases).
    pub backend: Option<String>,
}

impl TorchTime {
    /// The faster of PyTorch's two times: what the targets compare with, so that neither a slow
    /// host nor PyTorch's eager dispatch can carry a case.
    pub fn best(&self) -> f64 {
        self.graph_s.map_or(self.s, |g| g.min(self.s))
    }
}

/// PyTorch's time per call and, for attention, the SDPA backend it used, by case id.
#[derive(Debug, Clone, Default)]
pub struct TorchSide {
    /// `torch.__version__`.
    pub version: String,
    /// The device name PyTorch reported.
    pub device: String,
    /// PyTorch's figures, by [`Case::id`].
    pub cases: HashMap<String, TorchTime>,
}

impl TorchSide {
    /// Parses the script's JSON output.
    pub fn parse(text: &str, what: &str) -> Result<TorchSide, Box<dyn Error>> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| format!("{what}: not the script's JSON: {e}"))?;
        let mut out = TorchSide {
            version: v["torch"].as_str().unwrap_or("?").to_string(),
            device: v["device"].as_str().unwrap_or("?").to_string(),
            cases: HashMap::new(),
        };
        let Some(cases) = v["cases"].as_object() else {
            return Err(format!("{what}: no \"cases\" object").into());
        };
        for (id, c) in cases {
            let s = c["s"]
                .as_f64()
                .ok_or_else(|| format!("{what}: case {id} has no time"))?;
            let backend = c["backend"].as_str().map(str::to_string);
            let graph_s = c["graph_s"].as_f64();
            out.cases.insert(
                id.clone(),
                TorchTime {
                    s,
                    graph_s,
                    backend,
                },
            );
        }
        Ok(out)
    }

    /// Reads `--torch FILE`.
    pub fn load(path: &Path) -> Result<TorchSide, Box<dyn Error>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading --torch {}: {e}", path.display()))?;
        TorchSide::parse(&text, &format!("--torch {}", path.display()))
    }

    /// Runs `python3 script cases.json` on `cases` (the JSON through a temporary file) and
    /// parses what it prints. Its progress lines go to this program's stderr.
    pub fn run(
        script: &Path,
        cases: &[Case],
        device: usize,
        quick: bool,
    ) -> Result<TorchSide, Box<dyn Error>> {
        if !script.exists() {
            return Err(format!(
                "--torch-run: {} does not exist (run from the repository root, or pass \
                 --torch-script PATH)",
                script.display()
            )
            .into());
        }
        let file =
            std::env::temp_dir().join(format!("attention_bench_{}.json", std::process::id()));
        let list: Vec<Value> = cases.iter().map(|c| c.to_json(device, quick)).collect();
        std::fs::write(&file, serde_json::to_string(&list)?)?;
        let out = Command::new("python3")
            .arg(script)
            .arg(&file)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output();
        let _ = std::fs::remove_file(&file);
        let out = out.map_err(|e| format!("--torch-run: could not start python3: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "--torch-run: python3 {} failed ({}; its message is above)",
                script.display(),
                out.status
            )
            .into());
        }
        TorchSide::parse(
            &String::from_utf8_lossy(&out.stdout),
            "--torch-run's output",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_scripts_output() {
        let t = TorchSide::parse(
            r#"{"torch": "2.11", "device": "H100", "cases": {"a": {"s": 1e-3, "backend": "flash",
               "graph_s": 8e-4}, "b": {"s": 2e-3, "backend": null}, "c": {"s": 1e-3,
               "graph_s": 3e-3, "backend": null}}}"#,
            "test",
        )
        .unwrap();
        let a = &t.cases["a"];
        assert_eq!(
            (a.s, a.graph_s, a.backend.as_deref()),
            (1e-3, Some(8e-4), Some("flash"))
        );
        assert_eq!(a.best(), 8e-4);
        let b = &t.cases["b"];
        assert_eq!((b.s, b.graph_s, b.backend.as_deref()), (2e-3, None, None));
        assert_eq!(b.best(), 2e-3);
        // A graph replay slower than the eager calls does not replace them.
        assert_eq!(t.cases["c"].best(), 1e-3);
        assert!(TorchSide::parse("{}", "test").is_err());
        assert!(TorchSide::parse(r#"{"cases": {"a": {}}}"#, "test").is_err());
    }
}
