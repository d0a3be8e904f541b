//! The error helpers of [`ElementwiseKernel`]: argument counts, shape descriptions and the
//! kernel's name in dtype errors.

use super::ElementwiseKernel;
use crate::args::{Arg, OutArg};
use crate::broadcast;
use crate::error::{JitError, Result};
use crate::params;

impl ElementwiseKernel {
    pub(super) fn named(&self, e: JitError) -> JitError {
        match e {
            JitError::DTypeMismatch {
                param,
                expected,
                found,
                why,
                ..
            } => JitError::DTypeMismatch {
                kernel: self.def.name.clone(),
                param,
                expected,
                found,
                why,
            },
            e => e,
        }
    }

    pub(super) fn check_count(
        &self,
        what: &'static str,
        expected: usize,
        found: usize,
    ) -> Result<()> {
        if expected == found {
            return Ok(());
        }
        let list = if what == "inputs" {
            &self.def.inputs
        } else {
            &self.def.outputs
        };
        Err(JitError::ArgCount {
            kernel: self.def.name.clone(),
            what,
            expected,
            found,
            params: params::list(list),
        })
    }

    pub(super) fn describe_shapes(&self, args: &[Arg<'_>], outs: Option<&[OutArg<'_>]>) -> String {
        let mut v: Vec<(&str, &[usize])> = Vec::new();
        for (p, a) in self.def.inputs.iter().zip(args) {
            if let Arg::Tensor(t) = a {
                v.push((&p.name, t.shape()));
            }
        }
        for (p, o) in self.def.outputs.iter().zip(outs.into_iter().flatten()) {
            v.push((&p.name, o.shape()));
        }
        broadcast::describe(v.into_iter())
    }

    pub(super) fn shape_error(
        &self,
        problem: String,
        args: &[Arg<'_>],
        outs: Option<&[OutArg<'_>]>,
    ) -> JitError {
        JitError::Shape {
            kernel: self.def.name.clone(),
            problem: format!("the arguments do not broadcast: {problem}"),
            shapes: self.describe_shapes(args, outs),
        }
    }
}
