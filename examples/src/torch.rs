//! PyTorch's figures from the same machine (`--torch FILE`, the output of
//! `anchors/torch_baseline.py`), for the programs that print them beside their own.

use crate::bench::parse_torch_baseline;
use std::collections::HashMap;
use std::error::Error;
use std::path::{Path, PathBuf};

/// The `--torch FILE` flag, for a program's arguments (`#[command(flatten)]`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TorchFlag {
    /// Output of `anchors/torch_baseline.py` from the same machine, to compare with.
    #[arg(long)]
    pub torch: Option<PathBuf>,
}

impl TorchFlag {
    /// The figures of the file the flag names ([`TorchBaseline::load`]).
    pub fn load(&self) -> Result<TorchBaseline, Box<dyn Error>> {
        TorchBaseline::load(self.torch.as_ref())
    }
}

/// The figures of `--torch FILE` by name (see [`parse_torch_baseline`] for the names); empty
/// when the flag was not given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TorchBaseline {
    figures: HashMap<String, f64>,
}

impl TorchBaseline {
    /// Reads and parses `path` (the `--torch` flag's value); no figures when `path` is `None`.
    /// An unreadable file is an error naming it.
    pub fn load<P: AsRef<Path>>(path: Option<P>) -> Result<TorchBaseline, Box<dyn Error>> {
        let Some(p) = path else {
            return Ok(TorchBaseline::default());
        };
        let p = p.as_ref();
        let text = std::fs::read_to_string(p)
            .map_err(|e| format!("reading --torch {}: {e}", p.display()))?;
        Ok(TorchBaseline::parse(&text))
    }

    /// The figures in `text` (the output of `anchors/torch_baseline.py`).
    pub fn parse(text: &str) -> TorchBaseline {
        TorchBaseline {
            figures: parse_torch_baseline(text),
        }
    }

    /// The figure `key`, if the file had it.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.figures.get(key).copied()
    }

    /// Whether there are no figures (no `--torch`, or nothing recognised in the file).
    pub fn is_empty(&self) -> bool {
        self.figures.is_empty()
    }

    /// Every figure by name (for a JSON summary).
    pub fn figures(&self) -> &HashMap<String, f64> {
        &self.figures
    }

    /// A table cell: `show(figure)`, or `-` when the figure is missing.
    pub fn cell(&self, key: &str, show: impl FnOnce(f64) -> String) -> String {
        self.get(key).map_or_else(|| "-".to_string(), show)
    }

    /// A table cell: the figure with `decimals` digits after the point, or `-` when missing.
    pub fn number(&self, key: &str, decimals: usize) -> String {
        self.cell(key, |v| format!("{v:.decimals$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_parse_and_cells() {
        let none = TorchBaseline::load(None::<&str>).unwrap();
        assert!(none.is_empty());
        assert_eq!(none.cell("d2d", |v| format!("{v}")), "-");
        let missing = TorchBaseline::load(Some("/nonexistent/torch.txt")).unwrap_err();
        assert!(missing
            .to_string()
            .starts_with("reading --torch /nonexistent/torch.txt: "));
        let t = TorchBaseline::parse("torch d2d copy 2^28 f32: 4258.1 GB/s\n");
        assert_eq!(t.get("d2d"), Some(4258.1));
        assert_eq!(t.get("add"), None);
        assert_eq!(t.number("d2d", 0), "4258");
        assert_eq!(t.number("add", 1), "-");
        assert_eq!(t.cell("d2d", |v| format!("{v:.1} GB/s")), "4258.1 GB/s");
        assert_eq!(t.figures().len(), 1);
    }
}
