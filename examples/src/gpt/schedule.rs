//! nanoGPT's learning-rate schedule (`train.py`'s `get_lr`): a linear warm-up, a cosine decay
//! to a floor, then the floor.

/// The schedule's settings (nanoGPT's names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CosineSchedule {
    /// The peak rate (`learning_rate`).
    pub lr: f64,
    /// The floor (`min_lr`).
    pub min_lr: f64,
    /// Warm-up iterations (`warmup_iters`).
    pub warmup_iters: usize,
    /// The iteration the decay reaches the floor (`lr_decay_iters`).
    pub lr_decay_iters: usize,
}

impl CosineSchedule {
    /// The rate of iteration `it` (counted from 0):
    /// - `it < warmup_iters`: `lr · (it + 1) / (warmup_iters + 1)`;
    /// - `it > lr_decay_iters`: `min_lr`;
    /// - between: `min_lr + ½(1 + cos(π·r))·(lr − min_lr)` with
    ///   `r = (it − warmup_iters) / (lr_decay_iters − warmup_iters)` (`min_lr` when the decay
    ///   has no length).
    pub fn lr_at(&self, it: usize) -> f64 {
        if it < self.warmup_iters {
            return self.lr * (it + 1) as f64 / (self.warmup_iters + 1) as f64;
        }
        if it > self.lr_decay_iters || self.lr_decay_iters <= self.warmup_iters {
            return self.min_lr;
        }
        let ratio =
            (it - self.warmup_iters) as f64 / (self.lr_decay_iters - self.warmup_iters) as f64;
        let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
        self.min_lr + coeff * (self.lr - self.min_lr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_nanogpt_get_lr() {
        // shakespeare_char's settings; the values are Python's get_lr(it) for them.
        let s = CosineSchedule {
            lr: 1e-3,
            min_lr: 1e-4,
            warmup_iters: 100,
            lr_decay_iters: 5000,
        };
        for (it, want) in [
            (0, 9.900990099009901e-06),
            (50, 0.000504950495049505),
            (99, 0.0009900990099009901),
            (100, 0.001),
            (1000, 0.0009271396472013282),
            (2550, 0.00055),
            (4999, 0.00010000009248900101),
            (5000, 0.0001),
            (5001, 0.0001),
            (9999, 0.0001),
        ] {
            let got = s.lr_at(it);
            assert!(
                (got - want).abs() <= 1e-15 * want,
                "iteration {it}: {got} vs {want}"
            );
        }
        // A decay of no length: the floor after the warm-up.
        let flat = CosineSchedule {
            lr_decay_iters: 100,
            ..s
        };
        assert_eq!(flat.lr_at(100), 1e-4);
        assert_eq!(flat.lr_at(99), s.lr_at(99));
    }
}
