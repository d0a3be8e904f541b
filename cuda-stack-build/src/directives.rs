//! A source file's own build directives: `// cuda-stack-build: archs=…` and `options=…` lines.

use crate::arch::{Arch, DEFAULT_ARCH};
use crate::error::BuildError;
use std::path::Path;

/// The build's architecture list (`Build::arch`, a directive's `archs=`) parsed, sorted and
/// without repeats; empty: [`DEFAULT_ARCH`].
pub(crate) fn parse_archs(list: &[String]) -> Result<Vec<Arch>, BuildError> {
    if list.is_empty() {
        return Ok(vec![DEFAULT_ARCH]);
    }
    let mut v = list
        .iter()
        .map(|a| Arch::parse(a))
        .collect::<Result<Vec<_>, _>>()?;
    v.sort();
    v.dedup();
    Ok(v)
}

/// A file's own `// cuda-stack-build: archs=…` / `options=…` lines (`// gen-ptx:` is read too: the
/// name `cuda-stack-kernels`' files used first): its PTX targets (`None`: the build's) and its extra
/// options. `src` names the file in errors.
pub fn directives(src: &Path, text: &str) -> Result<(Option<Vec<Arch>>, Vec<String>), BuildError> {
    let mut archs = None;
    let mut opts = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        let Some(rest) = l.strip_prefix("//") else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(body) = rest
            .strip_prefix("cuda-stack-build:")
            .or_else(|| rest.strip_prefix("gen-ptx:"))
        else {
            continue;
        };
        let (key, val) = body.trim().split_once('=').ok_or_else(|| {
            BuildError::Config(format!(
                "{}: directive `{l}` is not `key=value`",
                src.display()
            ))
        })?;
        match key.trim() {
            "archs" => {
                let list: Vec<String> = val
                    .split(',')
                    .map(|a| a.trim().to_string())
                    .filter(|a| !a.is_empty())
                    .collect();
                archs = Some(parse_archs(&list)?);
            }
            "options" => opts.extend(val.split_whitespace().map(String::from)),
            other => {
                return Err(BuildError::Config(format!(
                    "{}: unknown directive `{other}` (known: archs, options)",
                    src.display()
                )))
            }
        }
    }
    Ok((archs, opts))
}
