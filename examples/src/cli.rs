//! Flags every program accepts.

/// `--quick` (small sizes, few repetitions: the GPU smoke test runs every program this way),
/// `--device N` and `--json`.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Small sizes and few repetitions (seconds, for smoke tests).
    #[arg(long)]
    pub quick: bool,
    /// Which GPU to use (ordinal).
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

impl Common {
    /// `quick` if `--quick`, else `full`.
    pub fn pick<T>(&self, quick: T, full: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}
