//! Sums and means, of everything or along one dimension.

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::{GradElement, Tensor};

/// `g` (the gradient of a reduction along `dim`, without the kept dimension unless
/// `keepdim`) broadcast back to `shape`.
fn spread<T: GradElement>(
    g: &Tensor<T>,
    shape: &[usize],
    dim: usize,
    keepdim: bool,
) -> Result<Tensor<T>> {
    let g = if keepdim {
        g.clone()
    } else {
        g.unsqueeze(dim as isize)?
    };
    Ok(g.expand(shape)?)
}

impl<T: GradElement> Var<T> {
    /// The sum of all elements (a 0-d value). Backward: `g` broadcast to the input's shape.
    pub fn sum_all(&self) -> Result<Var<T>> {
        let value = self.value().sum_all()?;
        let shape = self.shape();
        Ok(Var::from_op(value, "sum", &[self], move |g| {
            Ok(vec![Some(g.expand(&shape)?)])
        }))
    }

    /// The mean of all elements. Backward: `g / n` broadcast.
    pub fn mean_all(&self) -> Result<Var<T>> {
        let value = self.value().mean_all()?;
        let shape = self.shape();
        let inv = 1.0 / shape.iter().product::<usize>().max(1) as f64;
        Ok(Var::from_op(value, "mean", &[self], move |g| {
            Ok(vec![Some(
                g.scale(T::scalar_from_f64(inv))?.expand(&shape)?,
            )])
        }))
    }

    /// The sum along `dim` (negative counts from the end), keeping it as size 1 when
    /// `keepdim`. Backward: `g` broadcast along `dim`.
    pub fn sum(&self, dim: isize, keepdim: bool) -> Result<Var<T>> {
        let x = self.value();
        let d = x.layout().dim("sum", dim)?;
        let value = if keepdim {
            x.sum_keepdim(dim)?
        } else {
            x.sum(dim)?
        };
        let shape = x.shape().to_vec();
        Ok(Var::from_op(value, "sum", &[self], move |g| {
            Ok(vec![Some(spread(g, &shape, d, keepdim)?)])
        }))
    }

    /// The mean along `dim`. Backward: `g / shape[dim]` broadcast along `dim`.
    pub fn mean(&self, dim: isize, keepdim: bool) -> Result<Var<T>> {
        let x = self.value();
        let d = x.layout().dim("mean", dim)?;
        let value = if keepdim {
            x.mean_keepdim(dim)?
        } else {
            x.mean(dim)?
        };
        let shape = x.shape().to_vec();
        let inv = 1.0 / shape[d].max(1) as f64;
        Ok(Var::from_op(value, "mean", &[self], move |g| {
            let g = g.scale(T::scalar_from_f64(inv))?;
            Ok(vec![Some(spread(&g, &shape, d, keepdim)?)])
        }))
    }
}
