//! `nn.Dropout`, with a training flag.

use super::Module;
use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::GradElement;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Inverted dropout as a layer (`nn.Dropout(p)`). In training mode (the default) each
/// forward draws a fresh Philox mask: the layer's `seed` and a position that advances by the
/// input's size (rounded up to a Philox block of 4) on every call, so masks are reproducible
/// from the seed and the call sequence; in evaluation mode it is the identity. The layers of
/// this crate have no global train/eval switch, so the mode is this layer's own flag
/// ([`Dropout::set_training`]). The position advances on the host: a captured CUDA graph
/// replays the mask it recorded.
#[derive(Debug)]
pub struct Dropout {
    p: f64,
    seed: u64,
    offset: AtomicU64,
    training: AtomicBool,
}

impl Dropout {
    /// A dropout layer with drop probability `p` in `[0, 1]` and mask seed `seed`.
    pub fn new(p: f64, seed: u64) -> Result<Dropout> {
        if !(0.0..=1.0).contains(&p) {
            return Err(NnError::Invalid {
                what: "Dropout",
                problem: format!("p = {p}: the drop probability must be in [0, 1]"),
            });
        }
        Ok(Dropout {
            p,
            seed,
            offset: AtomicU64::new(0),
            training: AtomicBool::new(true),
        })
    }

    /// Training mode (masks drawn) or evaluation mode (identity): `model.train()`/`.eval()`.
    pub fn set_training(&self, training: bool) {
        self.training.store(training, Ordering::Relaxed);
    }

    /// Whether the layer is in training mode.
    pub fn is_training(&self) -> bool {
        self.training.load(Ordering::Relaxed)
    }

    /// The Philox position the next forward's mask starts at.
    pub fn offset(&self) -> u64 {
        self.offset.load(Ordering::Relaxed)
    }
}

impl<T: GradElement> Module<T> for Dropout {
    fn forward(&self, x: &Var<T>) -> Result<Var<T>> {
        if !self.is_training() || self.p == 0.0 {
            return Ok(x.clone());
        }
        let n = x.numel() as u64;
        let offset = self.offset.fetch_add(n.div_ceil(4) * 4, Ordering::Relaxed);
        x.dropout(self.p, self.seed, offset)
    }

    fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        Vec::new()
    }

    fn describe(&self) -> String {
        format!("Dropout(p={}, inplace=False)", self.p)
    }
}
