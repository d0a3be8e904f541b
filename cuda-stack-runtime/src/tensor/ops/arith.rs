//! `&a + &b`, `&a - &b`, `&a * &b`, `&a / &b`: the std operators, returning
//! `Result<Tensor<T>>` (broadcasting can fail, and so can the GPU).

use crate::tensor::error::Result;
use crate::tensor::{Tensor, TensorElement};

macro_rules! binop {
    ($trait:ident, $method:ident, $doc:literal) => {
        impl<T: TensorElement> std::ops::$trait<&Tensor<T>> for &Tensor<T> {
            type Output = Result<Tensor<T>>;

            #[doc = $doc]
            fn $method(self, rhs: &Tensor<T>) -> Result<Tensor<T>> {
                Tensor::$method(self, rhs)
            }
        }
    };
}

binop!(
    Add,
    add,
    "[`Tensor::add`]: elementwise sum with broadcasting."
);
binop!(
    Sub,
    sub,
    "[`Tensor::sub`]: elementwise difference with broadcasting."
);
binop!(
    Mul,
    mul,
    "[`Tensor::mul`]: elementwise product with broadcasting."
);
binop!(
    Div,
    div,
    "[`Tensor::div`]: elementwise quotient with broadcasting."
);
