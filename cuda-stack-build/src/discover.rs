//! Finding a CUDA compiler: nvcc through the `cc` crate's CUDA support and the usual places,
//! the pip wheel's nvcc, and NVRTC (found as `cuda-stack-sys` finds it at run time) when there is no
//! nvcc.

use crate::env::Env;
use crate::error::{BuildError, Place};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Which compiler to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compiler {
    /// nvcc if one is found, else NVRTC (the default). `CUDA_BUILD_COMPILER=nvcc|nvrtc|auto`
    /// overrides it.
    #[default]
    Auto,
    /// nvcc only: an error if none is found.
    Nvcc,
    /// NVRTC only (needs no nvcc, no host compiler; writes cubins, not fatbins).
    Nvrtc,
}

/// What compiled the files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompilerInfo {
    /// `"nvcc"` or `"NVRTC"`.
    pub kind: &'static str,
    /// The executable or library.
    pub path: PathBuf,
    /// `(major, minor)` of its CUDA release, when it could be read.
    pub version: Option<(u32, u32)>,
    /// How it was found, e.g. `"$CUDA_HOME/bin/nvcc"`.
    pub found_by: String,
}

impl std::fmt::Display for CompilerInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.version {
            Some((a, b)) => write!(f, "{} {a}.{b}", self.kind)?,
            None => write!(f, "{} (version unknown)", self.kind)?,
        }
        write!(
            f,
            " at {} (found by {})",
            self.path.display(),
            self.found_by
        )
    }
}

/// An nvcc that runs.
#[derive(Debug, Clone)]
pub(crate) struct Nvcc {
    pub info: CompilerInfo,
    /// Arguments every call gets (`-ccbin=…` from `cc`).
    pub args: Vec<OsString>,
    /// The toolkit folder (nvcc's `bin/..`): its headers are not reported as dependencies.
    pub root: Option<PathBuf>,
}

/// A found compiler.
pub(crate) enum Found {
    Nvcc(Nvcc),
    Nvrtc(cuda_stack_sys::Nvrtc, CompilerInfo),
}

impl Found {
    pub fn info(&self) -> &CompilerInfo {
        match self {
            Found::Nvcc(n) => &n.info,
            Found::Nvrtc(_, i) => i,
        }
    }
}

/// The candidates, in order, and where the search stops.
pub(crate) fn find(choice: Compiler, env: &Env, use_cc: bool) -> Result<Found, BuildError> {
    let choice = match env.get_str("CUDA_BUILD_COMPILER").as_deref() {
        Some("nvcc") => Compiler::Nvcc,
        Some("nvrtc") => Compiler::Nvrtc,
        Some("auto") | Some("") | None => choice,
        Some(other) => {
            return Err(BuildError::Config(format!(
                "CUDA_BUILD_COMPILER={other} is not one of nvcc, nvrtc, auto"
            )))
        }
    };
    let mut places = Vec::new();
    if choice != Compiler::Nvrtc {
        match find_nvcc(env, use_cc, &mut places) {
            NvccSearch::Found(n) => return Ok(Found::Nvcc(n)),
            NvccSearch::ExplicitMissing(note) => {
                return Err(BuildError::NoCompiler {
                    places,
                    nvrtc: "not tried: an explicit NVCC is authoritative".into(),
                    note: Some(note),
                })
            }
            NvccSearch::NotFound => {}
        }
        if choice == Compiler::Nvcc {
            return Err(BuildError::NoCompiler {
                places,
                nvrtc:
                    "not tried: nvcc was asked for (`Compiler::Nvcc` or CUDA_BUILD_COMPILER=nvcc)"
                        .into(),
                note: None,
            });
        }
    }
    let search = cuda_stack_sys::Nvrtc::search_with(&|k| env.get(k));
    match cuda_stack_sys::Nvrtc::load_search(&search) {
        Ok(lib) => {
            let version = lib.version().map(|(a, b)| (a as u32, b as u32));
            let path = lib
                .resolved_path()
                .unwrap_or_else(|| lib.path().to_path_buf());
            let info = CompilerInfo {
                kind: "NVRTC",
                path,
                version,
                found_by:
                    "cuda-stack-sys's NVRTC search (CUDA_NVRTC_PATH, sonames, CUDA_HOME, pip)"
                        .into(),
            };
            Ok(Found::Nvrtc(lib, info))
        }
        Err(e) => Err(BuildError::NoCompiler {
            places,
            nvrtc: e.to_string(),
            note: None,
        }),
    }
}

enum NvccSearch {
    Found(Nvcc),
    /// An explicitly named nvcc does not work; the note says so.
    ExplicitMissing(String),
    NotFound,
}

fn find_nvcc(env: &Env, use_cc: bool, places: &mut Vec<Place>) -> NvccSearch {
    // 1. The `cc` crate's CUDA compiler: `NVCC` (or its target-prefixed forms), else `nvcc`
    //    on PATH; and the `-ccbin` that makes nvcc use the C++ compiler cc picked.
    let mut cc_args = Vec::new();
    let mut explicit: Option<(String, PathBuf)> = None;
    if use_cc {
        let mut b = cc::Build::new();
        b.cuda(true)
            .cpp(true)
            .cargo_metadata(false)
            .cargo_warnings(false);
        match b.try_get_compiler() {
            Ok(tool) => {
                cc_args = tool.args().to_vec();
                let p = tool.path().to_path_buf();
                if p.components().count() > 1 {
                    explicit = Some(("$NVCC (read by the cc crate)".into(), p));
                } else {
                    places.push(Place {
                        how: "$NVCC (read by the cc crate)".into(),
                        path: None,
                        outcome: "not set; cc would run `nvcc` from PATH".into(),
                    });
                }
            }
            Err(e) => places.push(Place {
                how: "the cc crate's CUDA compiler".into(),
                path: None,
                outcome: format!("cc could not say: {e}"),
            }),
        }
        for v in ["NVCC", "HOST_NVCC", "TARGET_NVCC", "CXX", "NVCC_CCBIN"] {
            env.note_read(v);
        }
        if let Some(t) = env.get_str("TARGET") {
            env.note_read(&format!("NVCC_{t}"));
            env.note_read(&format!("NVCC_{}", t.replace('-', "_")));
        }
    } else {
        match env.get("NVCC").filter(|v| !v.is_empty()) {
            Some(v) => explicit = Some(("$NVCC".into(), PathBuf::from(v))),
            None => places.push(Place {
                how: "$NVCC".into(),
                path: None,
                outcome: "not set".into(),
            }),
        }
    }
    if let Some((how, path)) = explicit {
        let path = if path.components().count() == 1 {
            which(env, path.as_os_str()).unwrap_or(path)
        } else {
            path
        };
        return match try_nvcc(&path, &how, &cc_args) {
            Ok(n) => NvccSearch::Found(n),
            Err(outcome) => {
                places.push(Place {
                    how: how.clone(),
                    path: Some(path),
                    outcome,
                });
                NvccSearch::ExplicitMissing(format!(
                    "{how} names an nvcc, so no other place was searched (an explicit choice is \
                     never silently replaced); fix or unset it"
                ))
            }
        };
    }
    // 2. The toolkit's usual variables, PATH, the usual install folder, and pip's wheel.
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        match env.get(var).filter(|v| !v.is_empty()) {
            Some(v) => candidates.push((
                format!("${var}/bin/nvcc"),
                PathBuf::from(v).join("bin/nvcc"),
            )),
            None => places.push(Place {
                how: format!("${var}/bin/nvcc"),
                path: None,
                outcome: "not set".into(),
            }),
        }
    }
    match which(env, "nvcc".as_ref()) {
        Some(p) => candidates.push(("nvcc on $PATH".into(), p)),
        None => places.push(Place {
            how: "nvcc on $PATH".into(),
            path: None,
            outcome: "not on PATH".into(),
        }),
    }
    for dir in ["/usr/local/cuda/bin/nvcc", "/opt/cuda/bin/nvcc"] {
        candidates.push(("the usual install folder".into(), PathBuf::from(dir)));
    }
    let sites = cuda_stack_sys::python_site_dirs(&|k| env.get(k));
    if sites.is_empty() {
        places.push(Place {
            how: "pip's nvidia-cuda-nvcc wheel".into(),
            path: None,
            outcome: "no Python site-packages folder found".into(),
        });
    }
    for site in sites {
        // `nvidia-cuda-nvcc` (CUDA 13) puts nvcc in nvidia/cu13/bin; the cu12 wheels ship only
        // ptxas, but a later one may add nvcc at nvidia/cuda_nvcc/bin.
        for rel in ["nvidia/cu13/bin/nvcc", "nvidia/cuda_nvcc/bin/nvcc"] {
            candidates.push(("pip's nvidia-cuda-nvcc wheel".into(), site.join(rel)));
        }
    }
    for (how, path) in candidates {
        match try_nvcc(&path, &how, &cc_args) {
            Ok(n) => return NvccSearch::Found(n),
            Err(outcome) => places.push(Place {
                how,
                path: Some(path),
                outcome,
            }),
        }
    }
    NvccSearch::NotFound
}

/// The first `name` in a `PATH` folder that is a file.
fn which(env: &Env, name: &std::ffi::OsStr) -> Option<PathBuf> {
    let path = env.get("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Checks that `path` is an nvcc that runs, and reads its version.
fn try_nvcc(path: &Path, how: &str, cc_args: &[OsString]) -> Result<Nvcc, String> {
    if !path.exists() {
        return Err("no such file".into());
    }
    if !path.is_file() {
        return Err("not a file".into());
    }
    let out = Command::new(path)
        .arg("--version")
        .output()
        .map_err(|e| format!("found, but it does not run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "found, but `nvcc --version` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let version = parse_nvcc_version(&text);
    let root = path
        .parent()
        .and_then(Path::parent)
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf()));
    Ok(Nvcc {
        info: CompilerInfo {
            kind: "nvcc",
            path: path.to_path_buf(),
            version,
            found_by: how.to_string(),
        },
        args: cc_args.to_vec(),
        root,
    })
}

/// `Cuda compilation tools, release 13.0, V13.0.88` → `(13, 0)`.
pub(crate) fn parse_nvcc_version(text: &str) -> Option<(u32, u32)> {
    let rest = &text[text.find("release ")? + "release ".len()..];
    let v: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nvcc_version() {
        let text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n";
        assert_eq!(parse_nvcc_version(text), Some((13, 0)));
        assert_eq!(parse_nvcc_version("garbage"), None);
    }
}
