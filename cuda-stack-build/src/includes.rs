//! Which headers a source depends on: nvcc's `-MD` file, or (for NVRTC, which writes none) a
//! scan of `#include` lines. Every one becomes a `cargo:rerun-if-changed` line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The files `source` includes, directly or not, that exist: `#include "x"` is looked for
/// beside the including file and then in `include_dirs`; `#include <x>` in `include_dirs` only
/// (anything else is a system or toolkit header). A conditional include is counted whether or
/// not its condition holds, which can only cause an extra rebuild.
pub(crate) fn scan(source: &Path, include_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![source.to_path_buf()];
    while let Some(file) = stack.pop() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let here = file.parent().map(Path::to_path_buf).unwrap_or_default();
        for (name, quoted) in include_names(&text) {
            let mut dirs: Vec<&Path> = Vec::new();
            if quoted {
                dirs.push(&here);
            }
            dirs.extend(include_dirs.iter().map(PathBuf::as_path));
            if let Some(found) = dirs.iter().map(|d| d.join(&name)).find(|p| p.is_file()) {
                let found = normalize(&found);
                if found != normalize(source) && seen.insert(found.clone()) {
                    stack.push(found);
                }
            }
        }
    }
    seen.into_iter().collect()
}

/// `(name, quoted)` for each `#include "name"` / `#include <name>` line.
fn include_names(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim_start();
        let Some(rest) = l.strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("include") else {
            continue;
        };
        let rest = rest.trim_start();
        let (open, close, quoted) = match rest.chars().next() {
            Some('"') => ('"', '"', true),
            Some('<') => ('<', '>', false),
            _ => continue,
        };
        let body = &rest[open.len_utf8()..];
        if let Some(end) = body.find(close) {
            out.push((body[..end].to_string(), quoted));
        }
    }
    out
}

/// The prerequisites of a make rule as nvcc's `-MD -MF` writes it
/// (`out.ptx : a.cu \` / `    /usr/include/x.h \` / `    h.cuh`), spaces escaped as `\ `.
pub(crate) fn parse_make_deps(text: &str) -> Vec<PathBuf> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut out = Vec::new();
    for rule in joined.lines() {
        let Some(colon) = find_rule_colon(rule) else {
            continue;
        };
        let mut cur = String::new();
        let mut chars = rule[colon + 1..].chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    cur.push(' ');
                    chars.next();
                }
                ' ' | '\t' => {
                    if !cur.is_empty() {
                        out.push(PathBuf::from(std::mem::take(&mut cur)));
                    }
                }
                _ => cur.push(c),
            }
        }
        if !cur.is_empty() {
            out.push(PathBuf::from(cur));
        }
    }
    out
}

/// The `:` that separates targets from prerequisites (not a drive letter's `C:`).
fn find_rule_colon(rule: &str) -> Option<usize> {
    rule.char_indices()
        .find(|&(i, c)| c == ':' && rule[i + 1..].starts_with([' ', '\t', '\0']))
        .map(|(i, _)| i)
        .or_else(|| rule.trim_end().strip_suffix(':').map(|s| s.len()))
}

/// Whether `dep` is one of the user's files rather than a system or toolkit header.
pub(crate) fn is_user_file(dep: &Path, toolkit_root: Option<&Path>) -> bool {
    let abs = normalize(dep);
    if let Some(root) = toolkit_root {
        if abs.starts_with(root) {
            return false;
        }
    }
    !["/usr/include", "/usr/lib", "/usr/local/cuda", "/opt/cuda"]
        .iter()
        .any(|sys| abs.starts_with(sys))
}

/// An absolute, `..`-free path when the file exists, else the path as given.
pub(crate) fn normalize(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_make_rules() {
        let d = "k.ptx : k.cu \\\n    /usr/include/stdc-predef.h \\\n    /x/my\\ dir/h.cuh \\\n    h.cuh\n";
        let deps = parse_make_deps(d);
        let names: Vec<_> = deps
            .iter()
            .map(|p| p.to_string_lossy().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "k.cu",
                "/usr/include/stdc-predef.h",
                "/x/my dir/h.cuh",
                "h.cuh"
            ]
        );
        assert!(!is_user_file(Path::new("/usr/include/stdc-predef.h"), None));
        assert!(!is_user_file(
            Path::new("/opt/nv/cu13/include/crt/host_config.h"),
            Some(Path::new("/opt/nv/cu13"))
        ));
        assert!(is_user_file(Path::new("/x/my dir/h.cuh"), None));
    }

    #[test]
    fn scans_includes_recursively() {
        let dir =
            std::env::temp_dir().join(format!("cuda-stack-build-scan-{}", std::process::id()));
        let inc = dir.join("inc");
        std::fs::create_dir_all(&inc).unwrap();
        std::fs::write(
            dir.join("a.cu"),
            "#include \"b.cuh\"\n  #  include <c.cuh>\n#include <cuda_fp16.h>\n",
        )
        .unwrap();
        std::fs::write(dir.join("b.cuh"), "#include \"inc/d.cuh\"\n").unwrap();
        std::fs::write(inc.join("c.cuh"), "").unwrap();
        std::fs::write(inc.join("d.cuh"), "#include \"../b.cuh\"\n").unwrap();
        let found = scan(&dir.join("a.cu"), std::slice::from_ref(&inc));
        let names: Vec<_> = found
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
            .collect();
        assert_eq!(found.len(), 3, "{found:?}");
        for n in ["b.cuh", "c.cuh", "d.cuh"] {
            assert!(names.contains(&n.to_string()), "{names:?}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
