//! Reading compiler logs: the first error's file, line and message, the warnings, and whether
//! the compiler refused an architecture.

use std::path::PathBuf;

/// One diagnostic from a compiler log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Diagnostic {
    pub file: Option<PathBuf>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub severity: Severity,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Severity {
    Error,
    Warning,
}

/// Parses every diagnostic line of `log`: EDG's `file(12): error: …` (nvcc's front end and
/// NVRTC), GCC's `file:12:3: fatal error: …` (nvcc's host preprocessing), and `nvcc fatal : …` /
/// `nvrtc: error: …` (no file).
pub(crate) fn parse(log: &str) -> Vec<Diagnostic> {
    log.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Diagnostic> {
    let l = line.trim_end();
    if let Some(rest) = l.strip_prefix("nvcc fatal") {
        let msg = rest.trim_start().trim_start_matches(':').trim();
        return Some(no_file(Severity::Error, msg));
    }
    if let Some(rest) = l.strip_prefix("nvrtc: error:") {
        return Some(no_file(Severity::Error, rest.trim()));
    }
    if let Some(rest) = l.strip_prefix("nvrtc: warning:") {
        return Some(no_file(Severity::Warning, rest.trim()));
    }
    // EDG: `path(LINE): error: msg`, `path(LINE): warning #177-D: msg`,
    // `path(LINE): catastrophic error: msg`.
    if let Some(open) = l.find("): ") {
        if let Some(paren) = l[..open].rfind('(') {
            let (file, num) = (&l[..paren], &l[paren + 1..open]);
            if let Ok(n) = num.parse::<u32>() {
                let rest = &l[open + 3..];
                if let Some((sev, msg)) = severity(rest) {
                    return Some(Diagnostic {
                        file: Some(PathBuf::from(file)),
                        line: Some(n),
                        column: None,
                        severity: sev,
                        message: msg.to_string(),
                    });
                }
            }
        }
    }
    // GCC: `path:LINE:COL: fatal error: msg` or `path:LINE: error: msg`.
    let parts: Vec<&str> = l.splitn(4, ':').collect();
    if parts.len() >= 3 {
        if let Ok(line_no) = parts[1].trim().parse::<u32>() {
            let (col, rest) = match parts.get(2).and_then(|c| c.trim().parse::<u32>().ok()) {
                Some(c) if parts.len() == 4 => (Some(c), parts[3]),
                _ => (None, &l[parts[0].len() + parts[1].len() + 2..]),
            };
            if let Some((sev, msg)) = severity(rest.trim_start()) {
                return Some(Diagnostic {
                    file: Some(PathBuf::from(parts[0])),
                    line: Some(line_no),
                    column: col,
                    severity: sev,
                    message: msg.to_string(),
                });
            }
        }
    }
    None
}

fn no_file(severity: Severity, msg: &str) -> Diagnostic {
    Diagnostic {
        file: None,
        line: None,
        column: None,
        severity,
        message: msg.to_string(),
    }
}

/// `error: msg` → (Error, msg); `warning #177-D: msg` → (Warning, msg).
fn severity(rest: &str) -> Option<(Severity, &str)> {
    for (prefix, sev) in [
        ("catastrophic error", Severity::Error),
        ("fatal error", Severity::Error),
        ("error", Severity::Error),
        ("warning", Severity::Warning),
    ] {
        if let Some(r) = rest.strip_prefix(prefix) {
            // Skip an EDG number (`#177-D`) up to the colon.
            let colon = r.find(':')?;
            if r[..colon].trim().is_empty() || r[..colon].trim_start().starts_with('#') {
                return Some((sev, r[colon + 1..].trim()));
            }
        }
    }
    None
}

/// The architecture a compiler refused, if the log says it refused one: nvcc's
/// `Unsupported gpu architecture 'compute_100'`, NVRTC's
/// `invalid value for --gpu-architecture (-arch)`.
pub(crate) fn refused_arch(log: &str) -> Option<String> {
    for l in log.lines() {
        if let Some(i) = l.find("Unsupported gpu architecture") {
            return Some(l[i..].trim().to_string());
        }
        if l.contains("invalid value for --gpu-architecture") {
            return Some(
                l.trim()
                    .trim_start_matches("nvrtc: error:")
                    .trim()
                    .to_string(),
            );
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edg_gcc_and_driver_lines() {
        let log = "k.cu(6): error: this declaration has no storage class or type specifier\n  xx\n  ^\n\n\
                   k.cu(9): warning #177-D: variable \"y\" was declared but never referenced\n\
                   /a/b.cu:3:10: fatal error: nope.cuh: No such file or directory\n\
                   nvcc fatal   : Unsupported gpu architecture 'compute_42'\n\
                   h.cuh(2): catastrophic error: cannot open source file \"x.h\"\n";
        let d = parse(log);
        assert_eq!(d.len(), 5, "{d:?}");
        assert_eq!(d[0].file.as_deref(), Some(std::path::Path::new("k.cu")));
        assert_eq!(d[0].line, Some(6));
        assert_eq!(d[0].severity, Severity::Error);
        assert_eq!(
            d[0].message,
            "this declaration has no storage class or type specifier"
        );
        assert_eq!(d[1].severity, Severity::Warning);
        assert!(d[1].message.starts_with("variable"));
        assert_eq!(d[2].line, Some(3));
        assert_eq!(d[2].column, Some(10));
        assert_eq!(d[2].message, "nope.cuh: No such file or directory");
        assert_eq!(d[3].file, None);
        assert_eq!(d[4].line, Some(2));
        assert_eq!(
            refused_arch(log).as_deref(),
            Some("Unsupported gpu architecture 'compute_42'")
        );
        assert!(
            refused_arch("nvrtc: error: invalid value for --gpu-architecture (-arch)\n").is_some()
        );
    }
}
