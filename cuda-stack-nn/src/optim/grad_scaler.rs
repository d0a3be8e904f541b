//! Dynamic loss scaling for f16 training (`torch.amp.GradScaler`): the loss is multiplied by a
//! large scale before the backward pass so small f16 gradients do not flush to zero; before the
//! optimizer step the gradients are divided by it again and checked — a step whose gradients
//! hold an inf or a NaN (the scale made something overflow) is skipped and the scale backed
//! off; after `growth_interval` good steps in a row the scale grows.
//!
//! PyTorch's behaviour, step for step — growth ×2 every 2000 good steps, back-off ×0.5 on an
//! overflow, the step skipped (the gradients are left unscaled in place for the caller to zero,
//! as `scaler.step` leaves them), one host read per step (whether any gradient was non-finite)
//! — with one difference: the scale starts at, and never grows past, 2¹⁵ (`max_scale`), not
//! PyTorch's 2¹⁶. Here an f16 graph is f16 down to its loss, so the backward pass starts from
//! the scale itself as an f16 value, and 2¹⁶ is past f16's largest finite value (65504): every
//! step would overflow. (PyTorch's autocast keeps the loss in f32, where 2¹⁶ fits.)

use super::Optimizer;
use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::{GradElement, Tensor};

/// [`GradScaler`]'s settings (PyTorch's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradScalerConfig {
    /// The first scale (2¹⁵).
    pub init_scale: f64,
    /// The largest scale growth reaches (2¹⁵: the largest power of two an f16 gradient holds).
    pub max_scale: f64,
    /// The factor the scale grows by after `growth_interval` good steps (2).
    pub growth_factor: f64,
    /// The factor the scale shrinks by after an overflow (0.5).
    pub backoff_factor: f64,
    /// Good steps in a row before the scale grows (2000).
    pub growth_interval: u32,
}

impl Default for GradScalerConfig {
    fn default() -> Self {
        GradScalerConfig {
            init_scale: 32768.0,
            max_scale: 32768.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
        }
    }
}

/// Dynamic loss scaling; see the module documentation.
#[derive(Debug, Clone)]
pub struct GradScaler {
    config: GradScalerConfig,
    scale: f64,
    good_steps: u32,
    skipped: u64,
}

impl GradScaler {
    /// A scaler with `config`, checked: a finite initial scale > 0, growth > 1,
    /// 0 < back-off < 1, an interval of at least 1.
    pub fn new(config: GradScalerConfig) -> Result<GradScaler> {
        let c = config;
        let ok = c.init_scale.is_finite()
            && c.init_scale > 0.0
            && c.max_scale.is_finite()
            && c.init_scale <= c.max_scale
            && c.growth_factor.is_finite()
            && c.growth_factor > 1.0
            && c.backoff_factor > 0.0
            && c.backoff_factor < 1.0
            && c.growth_interval >= 1;
        if !ok {
            return Err(NnError::Invalid {
                what: "GradScaler",
                problem: format!(
                    "{c:?}: the initial scale must be finite, > 0 and at most max_scale (itself \
                     finite), the growth factor > 1, the back-off factor in (0, 1) and the \
                     growth interval at least 1"
                ),
            });
        }
        Ok(GradScaler {
            config,
            scale: c.init_scale,
            good_steps: 0,
            skipped: 0,
        })
    }

    /// The current scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Steps skipped so far because a gradient was not finite.
    pub fn skipped_steps(&self) -> u64 {
        self.skipped
    }

    /// `loss · scale`, to call `backward` on (`scaler.scale(loss)`).
    pub fn scale_loss<U: GradElement>(&self, loss: &Var<U>) -> Result<Var<U>> {
        loss.scale(self.scale)
    }

    /// Divides every gradient of `optimizer`'s parameters by the scale; then, if every one is
    /// finite, runs the optimizer's step, otherwise skips it. Updates the scale either way.
    /// Returns whether the step ran (`scaler.step(optimizer); scaler.update()`).
    pub fn step<T: GradElement, O: Optimizer<T> + ?Sized>(
        &mut self,
        optimizer: &mut O,
    ) -> Result<bool> {
        let inv = T::scalar_from_f64(1.0 / self.scale);
        let zero = T::scalar_from_f64(0.0);
        // Σ (g · 0) over every gradient is NaN exactly when some element is inf or NaN: one
        // device value, read once.
        let mut flag: Option<Tensor<T>> = None;
        for p in optimizer.parameters() {
            let Some(g) = p.grad()? else { continue };
            let g = g.scale(inv)?;
            let probe = g.scale(zero)?.sum_all()?;
            flag = Some(match flag {
                None => probe,
                Some(f) => (&f + &probe)?,
            });
            p.set_grad(Some(g))?;
        }
        let finite = match flag {
            None => true,
            Some(f) => cuda_stack_runtime::TensorElement::to_f64(f.item()?).is_finite(),
        };
        if finite {
            optimizer.step()?;
            self.good_steps += 1;
            if self.good_steps >= self.config.growth_interval {
                self.scale = (self.scale * self.config.growth_factor).min(self.config.max_scale);
                self.good_steps = 0;
            }
        } else {
            self.skipped += 1;
            self.scale *= self.config.backoff_factor;
            self.good_steps = 0;
        }
        Ok(finite)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused() {
        assert!(GradScaler::new(GradScalerConfig::default()).is_ok());
        for c in [
            GradScalerConfig {
                init_scale: 0.0,
                ..Default::default()
            },
            GradScalerConfig {
                growth_factor: 1.0,
                ..Default::default()
            },
            GradScalerConfig {
                backoff_factor: 1.0,
                ..Default::default()
            },
            GradScalerConfig {
                growth_interval: 0,
                ..Default::default()
            },
            GradScalerConfig {
                init_scale: f64::INFINITY,
                ..Default::default()
            },
            GradScalerConfig {
                init_scale: 65536.0,
                ..Default::default()
            },
        ] {
            assert!(GradScaler::new(c).is_err(), "{c:?}");
        }
    }
}
