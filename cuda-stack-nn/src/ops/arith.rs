//! `+ − × ÷` with broadcasting, and multiplication by a scalar.

use super::sum_to;
use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

impl<T: GradElement> Var<T> {
    /// `self + other` (broadcasting). Backward: the gradient, summed to each operand's shape.
    pub fn add(&self, other: &Var<T>) -> Result<Var<T>> {
        let value = (&self.value() + &other.value())?;
        let (sa, sb) = (self.shape(), other.shape());
        let (na, nb) = (self.requires_grad(), other.requires_grad());
        Ok(Var::from_op(value, "add", &[self, other], move |g| {
            Ok(vec![
                if na { Some(sum_to(g, &sa)?) } else { None },
                if nb { Some(sum_to(g, &sb)?) } else { None },
            ])
        }))
    }

    /// `self − other` (broadcasting). Backward: `g` and `−g`, summed to each operand's shape.
    pub fn sub(&self, other: &Var<T>) -> Result<Var<T>> {
        let value = (&self.value() - &other.value())?;
        let (sa, sb) = (self.shape(), other.shape());
        let (na, nb) = (self.requires_grad(), other.requires_grad());
        Ok(Var::from_op(value, "sub", &[self, other], move |g| {
            Ok(vec![
                if na { Some(sum_to(g, &sa)?) } else { None },
                if nb {
                    Some(sum_to(&g.scale(T::scalar_from_f64(-1.0))?, &sb)?)
                } else {
                    None
                },
            ])
        }))
    }

    /// `self · other` elementwise (broadcasting). Backward: `g·other` and `g·self`, summed to
    /// each operand's shape (both values are saved).
    pub fn mul(&self, other: &Var<T>) -> Result<Var<T>> {
        let (a, b) = (self.value(), other.value());
        let value = a.mul(&b)?;
        let (na, nb) = (self.requires_grad(), other.requires_grad());
        let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
        Ok(Var::from_op(value, "mul", &[self, other], move |g| {
            Ok(vec![
                if na {
                    Some(sum_to(&g.mul(&b)?, &sa)?)
                } else {
                    None
                },
                if nb {
                    Some(sum_to(&g.mul(&a)?, &sb)?)
                } else {
                    None
                },
            ])
        }))
    }

    /// `self / other` elementwise (broadcasting). Backward: `g / other` and
    /// `−g · self / other²`, summed to each operand's shape.
    pub fn div(&self, other: &Var<T>) -> Result<Var<T>> {
        let (a, b) = (self.value(), other.value());
        let value = (&a / &b)?;
        let (na, nb) = (self.requires_grad(), other.requires_grad());
        let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
        Ok(Var::from_op(value, "div", &[self, other], move |g| {
            let ga = (g / &b)?;
            let gb = if nb {
                let t = (&ga.mul(&a)? / &b)?.scale(T::scalar_from_f64(-1.0))?;
                Some(sum_to(&t, &sb)?)
            } else {
                None
            };
            Ok(vec![if na { Some(sum_to(&ga, &sa)?) } else { None }, gb])
        }))
    }

    /// `self · alpha`. Backward: `g · alpha`.
    pub fn scale(&self, alpha: f64) -> Result<Var<T>> {
        let a = T::scalar_from_f64(alpha);
        let value = self.value().scale(a)?;
        Ok(Var::from_op(value, "scale", &[self], move |g| {
            Ok(vec![Some(g.scale(a)?)])
        }))
    }
}

/// `&a + &b` etc. on variables, each a `Result` (shapes may not broadcast).
macro_rules! var_operator {
    ($trait:ident, $method:ident) => {
        impl<T: GradElement> std::ops::$trait<&Var<T>> for &Var<T> {
            type Output = Result<Var<T>>;
            fn $method(self, rhs: &Var<T>) -> Result<Var<T>> {
                Var::$method(self, rhs)
            }
        }
    };
}
var_operator!(Add, add);
var_operator!(Sub, sub);
var_operator!(Mul, mul);
var_operator!(Div, div);
