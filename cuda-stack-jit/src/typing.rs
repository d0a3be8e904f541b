//! Binding a call's arguments to a definition's types: concrete types are checked, placeholders
//! take the dtype of the first tensor bound to them (then of given outputs, then of scalars), as
//! in CuPy.

use crate::args::{Arg, OutArg};
use crate::error::{JitError, Result};
use crate::params::Param;
use crate::types::{numpy_name, TypeSpec};
use cuda_stack_runtime::DType;

/// The placeholders of `params`, in order of first appearance.
pub(crate) fn placeholders<'a>(params: impl Iterator<Item = &'a Param>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in params {
        if let TypeSpec::Placeholder(name) = &p.ty {
            if !out.contains(name) {
                out.push(name.clone());
            }
        }
    }
    out
}

/// Resolved types of one call.
pub(crate) struct Typed {
    /// The dtype of each placeholder (in the definition's order).
    pub(crate) placeholders: Vec<DType>,
    /// The dtype of each parameter, inputs then outputs.
    pub(crate) params: Vec<DType>,
}

/// Binds `args` (one per input) and `outs` (one per output, when given) to the types of
/// `inputs` and `outputs`.
pub(crate) fn resolve(
    kernel: &str,
    names: &[String],
    inputs: &[Param],
    outputs: &[Param],
    args: &[Arg<'_>],
    outs: Option<&[OutArg<'_>]>,
) -> Result<Typed> {
    // Each placeholder's dtype and the parameter that bound it (no allocation per call).
    let mut bound: Vec<Option<(DType, &str)>> = vec![None; names.len()];
    // Tensors first, then given outputs; scalars only bind what nothing else did.
    for (p, a) in inputs.iter().zip(args) {
        if let Arg::Tensor(t) = a {
            bind(kernel, names, p, t.dtype(), &mut bound)?;
        }
    }
    if let Some(outs) = outs {
        for (p, o) in outputs.iter().zip(outs) {
            bind(kernel, names, p, o.dtype(), &mut bound)?;
        }
    }
    for (p, a) in inputs.iter().zip(args) {
        if let (Arg::Scalar(s), TypeSpec::Placeholder(n)) = (a, &p.ty) {
            let k = slot(names, n);
            if bound[k].is_none() {
                bound[k] = Some((s.dtype(), &p.name));
            }
        }
    }
    let mut params = Vec::with_capacity(inputs.len() + outputs.len());
    for p in inputs.iter().chain(outputs) {
        params.push(match &p.ty {
            TypeSpec::Concrete(c) => *c,
            TypeSpec::Placeholder(n) => match bound[slot(names, n)] {
                Some((d, _)) => d,
                None => {
                    return Err(JitError::UnresolvedType {
                        kernel: kernel.to_string(),
                        placeholder: n.clone(),
                        param: p.name.clone(),
                    })
                }
            },
        });
    }
    Ok(Typed {
        placeholders: bound
            .iter()
            .map(|b| b.map_or(DType::F32, |(d, _)| d))
            .collect(),
        params,
    })
}

fn slot(names: &[String], n: &str) -> usize {
    names.iter().position(|x| x == n).unwrap_or(0)
}

/// Checks `d` against `p`'s concrete type, or binds / checks its placeholder.
fn bind<'a>(
    kernel: &str,
    names: &[String],
    p: &'a Param,
    d: DType,
    bound: &mut [Option<(DType, &'a str)>],
) -> Result<()> {
    match &p.ty {
        TypeSpec::Concrete(c) if *c != d => Err(JitError::DTypeMismatch {
            kernel: kernel.to_string(),
            param: p.name.clone(),
            expected: numpy_name(*c).to_string(),
            found: d,
            why: String::new(),
        }),
        TypeSpec::Concrete(_) => Ok(()),
        TypeSpec::Placeholder(t) => match bound[slot(names, t)] {
            Some((b, from)) if b != d => Err(JitError::DTypeMismatch {
                kernel: kernel.to_string(),
                param: p.name.clone(),
                expected: format!("{t} = {} (bound by `{from}`)", numpy_name(b)),
                found: d,
                why: ": every parameter of one placeholder type must have the same dtype".into(),
            }),
            Some(_) => Ok(()),
            None => {
                bound[slot(names, t)] = Some((d, &p.name));
                Ok(())
            }
        },
    }
}

/// [`resolve`] for inputs of `dtypes` (as tensors of those dtypes would bind), without tensors:
/// for showing and testing generated sources on a machine without a GPU.
pub(crate) fn resolve_dtypes(
    kernel: &str,
    names: &[String],
    inputs: &[Param],
    outputs: &[Param],
    dtypes: &[DType],
) -> Result<Typed> {
    let mut bound: Vec<Option<DType>> = vec![None; names.len()];
    for (p, &d) in inputs.iter().zip(dtypes) {
        match &p.ty {
            TypeSpec::Concrete(c) if *c != d => {
                return Err(JitError::DTypeMismatch {
                    kernel: kernel.to_string(),
                    param: p.name.clone(),
                    expected: numpy_name(*c).to_string(),
                    found: d,
                    why: String::new(),
                })
            }
            TypeSpec::Placeholder(t) => {
                bound[slot(names, t)].get_or_insert(d);
            }
            TypeSpec::Concrete(_) => {}
        }
    }
    let mut params = Vec::new();
    for p in inputs.iter().chain(outputs) {
        params.push(match &p.ty {
            TypeSpec::Concrete(c) => *c,
            TypeSpec::Placeholder(n) => {
                bound[slot(names, n)].ok_or_else(|| JitError::UnresolvedType {
                    kernel: kernel.to_string(),
                    placeholder: n.clone(),
                    param: p.name.clone(),
                })?
            }
        });
    }
    Ok(Typed {
        placeholders: bound.iter().map(|d| d.unwrap_or(DType::F32)).collect(),
        params,
    })
}
