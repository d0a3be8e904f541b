//! Parameter lists as CuPy writes them: `"float32 x, T y"`, `"raw T table"`, comma-separated,
//! each an optional `raw`, a type and a name.

use crate::error::{JitError, Result};
use crate::types::{is_identifier, parse_type, TypeSpec};

/// One declared parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// Its name in the body.
    pub name: String,
    /// Its type.
    pub ty: TypeSpec,
    /// `raw`: the whole tensor, indexed by the body (`x[j]`, `x.size()`), not broadcast.
    pub raw: bool,
    /// Whether it is an output.
    pub output: bool,
}

impl Param {
    /// `raw float32 x` / `T y`, as declared.
    pub fn declaration(&self) -> String {
        let ty = match &self.ty {
            TypeSpec::Concrete(d) => crate::types::numpy_name(*d).to_string(),
            TypeSpec::Placeholder(p) => p.clone(),
        };
        format!("{}{ty} {}", if self.raw { "raw " } else { "" }, self.name)
    }
}

/// Names the generated code uses itself.
fn reserved(name: &str, extra: &[&str]) -> bool {
    name == "i" || name == "n" || name.starts_with('_') || extra.contains(&name)
}

/// Parses `text` (`what` is `in_params` or `out_params`), rejecting `reserved_extra` names too.
pub(crate) fn parse(
    kernel: &str,
    what: &'static str,
    text: &str,
    output: bool,
    reserved_extra: &[&str],
) -> Result<Vec<Param>> {
    let err = |problem: String| JitError::Parse {
        kernel: kernel.to_string(),
        what,
        text: text.to_string(),
        problem,
    };
    let mut out = Vec::new();
    if text.trim().is_empty() {
        return Ok(out);
    }
    for part in text.split(',') {
        let words: Vec<&str> = part.split_whitespace().collect();
        let (raw, rest) = match words.first() {
            Some(&"raw") => (true, &words[1..]),
            _ => (false, &words[..]),
        };
        let [ty, name] = rest else {
            return Err(err(format!(
                "`{}` should be `[raw] TYPE NAME`, e.g. `float32 x` or `raw T y`",
                part.trim()
            )));
        };
        if !is_identifier(name) {
            return Err(err(format!("`{name}` is not a valid parameter name")));
        }
        if reserved(name, reserved_extra) {
            return Err(err(format!(
                "`{name}` is reserved: `i`, `n`, {}and names starting with `_` are used by the \
                 generated code",
                reserved_extra
                    .iter()
                    .map(|r| format!("`{r}`, "))
                    .collect::<String>()
            )));
        }
        let ty = parse_type(ty).map_err(err)?;
        out.push(Param {
            name: name.to_string(),
            ty,
            raw,
            output,
        });
    }
    Ok(out)
}

/// Checks that no name appears twice across `params`.
pub(crate) fn check_unique(kernel: &str, params: &[Param]) -> Result<()> {
    for (k, p) in params.iter().enumerate() {
        if params[..k].iter().any(|q| q.name == p.name) {
            return Err(JitError::Parse {
                kernel: kernel.to_string(),
                what: "parameter lists",
                text: p.name.clone(),
                problem: "the name is declared twice".into(),
            });
        }
    }
    Ok(())
}

/// `"float32 x, T y"` for messages.
pub(crate) fn list(params: &[Param]) -> String {
    params
        .iter()
        .map(Param::declaration)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_stack_runtime::DType;

    #[test]
    fn parses_cupy_lists() {
        let p = parse("k", "in_params", "float32 x, raw T y ,T z", false, &[]).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].ty, TypeSpec::Concrete(DType::F32));
        assert!(p[1].raw && p[1].ty == TypeSpec::Placeholder("T".into()));
        assert_eq!(list(&p), "float32 x, raw T y, T z");
        assert!(parse("k", "in_params", "", false, &[]).unwrap().is_empty());
    }

    #[test]
    fn rejects_bad_lists() {
        for bad in [
            "float32",
            "float32 x y",
            "float32 i",
            "T _x",
            "uint8 x",
            "T 1x",
            "T a",
        ] {
            let e = parse("k", "in_params", bad, false, &["a"]).unwrap_err();
            assert!(matches!(e, JitError::Parse { .. }), "{bad}: {e}");
        }
        let p = parse("k", "in_params", "T x, T x", false, &[]).unwrap();
        assert!(check_unique("k", &p).is_err());
    }
}
