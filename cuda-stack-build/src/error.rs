//! [`BuildError`]: every way a build can fail, each saying what to do about it.

use crate::isa::IsaVersion;
use std::fmt;
use std::path::PathBuf;

/// One place a compiler was looked for, and what was found there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// How the place was arrived at, e.g. `"$CUDA_HOME/bin/nvcc"` or `"nvcc on $PATH"`.
    pub how: String,
    /// The path tried, when there was one.
    pub path: Option<PathBuf>,
    /// What happened, e.g. `"not set"`, `"no such file"`.
    pub outcome: String,
}

/// Why a build failed. The `Display` text says what was asked, what went wrong and what to do;
/// [`crate::Build::compile_or_exit`] prints it for `cargo` and exits.
#[derive(thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum BuildError {
    /// Neither nvcc nor NVRTC was found.
    #[error("{}", no_compiler(.places, .nvrtc, .note))]
    NoCompiler {
        /// Every place an nvcc was looked for, in order.
        places: Vec<Place>,
        /// Why NVRTC could not be loaded: `cuda-stack-sys`'s message listing every place it tried.
        nvrtc: String,
        /// A note on what was not searched and why (an explicit `NVCC` that is wrong).
        note: Option<String>,
    },

    /// An architecture that does not exist, or that this compiler does not know.
    #[error(
        "unsupported GPU architecture `{arch}`: {message}{}\n  \
         help: name an architecture your GPUs have, as `75`, `sm_80` or `compute_90a` \
         (known: {}); find a GPU's with `nvidia-smi --query-gpu=compute_cap --format=csv` \
         (\"8.6\" means sm_86). Each compiler knows a range: CUDA 13 dropped everything below \
         sm_75, CUDA 12.4 stops at sm_90a.",
        .compiler.as_ref().map(|c| format!(" ({c})")).unwrap_or_default(),
        crate::known_archs::known_list()
    )]
    UnsupportedArch {
        /// The architecture as written.
        arch: String,
        /// The compiler that refused it, when it was the compiler (not the name) that did.
        compiler: Option<String>,
        /// What was wrong.
        message: String,
    },

    /// The compiler reported an error in the CUDA source.
    #[error(
        "{}: error: {message}\n  compiler: {compiler}\n  command: {command}\n  \
         the compiler's log:\n{}{}",
        location(.file, .line, .column),
        indent(.log),
        hint(.message)
    )]
    Compile {
        /// The file the first error is in (the source or one of its headers).
        file: PathBuf,
        /// Its line, when the log gave one.
        line: Option<u32>,
        /// Its column, when the log gave one.
        column: Option<u32>,
        /// The first error's message.
        message: String,
        /// The whole log.
        log: String,
        /// Which compiler, e.g. `"nvcc 13.0 (/usr/local/cuda/bin/nvcc)"`.
        compiler: String,
        /// The command or the NVRTC options used.
        command: String,
    },

    /// The compiler emitted a newer PTX ISA than the floor allows.
    #[error(
        "{}: the PTX for {arch} is ISA {found} ({}), above the floor {floor} ({})\n  \
         compiler: {compiler}\n  \
         A driver older than the one for ISA {found} refuses such PTX with \
         CUDA_ERROR_UNSUPPORTED_PTX_VERSION, so this binary would not load on every driver the \
         floor promises.\n  \
         help: compile with a CUDA release whose PTX is ISA {floor} or older (for 8.4: NVRTC 12.4, \
         `pip install nvidia-cuda-nvrtc-cu12==12.4.127` and set CUDA_NVRTC_PATH to its \
         libnvrtc.so.12, with `.compiler(Compiler::Nvrtc)` or CUDA_BUILD_COMPILER=nvrtc), or, if \
         every driver you target is new enough, raise the floor with \
         `.ptx_isa_floor(\"{found}\")` or CUDA_BUILD_PTX_ISA_FLOOR={found}.",
        .file.display(), found.drivers(), floor.drivers()
    )]
    PtxIsaAboveFloor {
        /// The source file.
        file: PathBuf,
        /// The target, e.g. `compute_75`.
        arch: String,
        /// The ISA in the PTX.
        found: IsaVersion,
        /// The floor asked for.
        floor: IsaVersion,
        /// Which compiler.
        compiler: String,
    },

    /// The compiler could not be run, or failed without a diagnostic that names a source line.
    #[error("{compiler} failed: {problem}\n  command: {command}\n{}", indent(.log))]
    CompilerFailed {
        /// Which compiler.
        compiler: String,
        /// The command or the NVRTC options used.
        command: String,
        /// What happened.
        problem: String,
        /// What the compiler printed.
        log: String,
    },

    /// A kernel's declaration cannot be turned into a typed handle.
    #[error(
        "{}:{line}: kernel `{kernel}`: {problem}\n  help: kernels get typed handles when every \
         parameter is a pointer to, or a value of, a type with a fixed Rust equivalent (float, \
         double, int, unsigned int, long long, unsigned long long, short, char, the <stdint.h> \
         types, __half, __nv_bfloat16), or a type registered with `.struct_param(..)` / \
         `.pointee(..)`; write them out (no macros) in the `extern \"C\" __global__` declaration.",
        .file.display()
    )]
    Signature {
        /// The source file.
        file: PathBuf,
        /// The declaration's line.
        line: usize,
        /// The kernel.
        kernel: String,
        /// What could not be mapped.
        problem: String,
    },

    /// The compiled PTX does not agree with the declarations parsed from the source.
    #[error(
        "{}: {problem}\n  help: the typed handles are generated from the `extern \"C\" __global__` \
         declarations; a declaration hidden behind a macro or an `#if` cannot be read. Write each \
         kernel's declaration out in full.",
        .file.display()
    )]
    PtxMismatch {
        /// The PTX (or source) file.
        file: PathBuf,
        /// What disagrees.
        problem: String,
    },

    /// The build was set up wrongly (no files, a fatbin asked of NVRTC, no `OUT_DIR`, …).
    #[error("cuda-stack-build: {0}")]
    Config(String),

    /// A file could not be read or written.
    #[error("cuda-stack-build: cannot {what} {}: {source}", .path.display())]
    Io {
        /// What was being done, e.g. `"read"`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl BuildError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BuildError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

fn no_compiler(places: &[Place], nvrtc: &str, note: &Option<String>) -> String {
    let mut s = String::from(
        "no CUDA compiler found: no nvcc, and NVRTC could not be loaded.\n  nvcc was looked for in:\n",
    );
    for (i, p) in places.iter().enumerate() {
        let path = p
            .path
            .as_ref()
            .map(|p| format!(" {}", p.display()))
            .unwrap_or_default();
        s += &format!("  {:>3}. {}{}: {}\n", i + 1, p.how, path, p.outcome);
    }
    if let Some(n) = note {
        s += &format!("  note: {n}\n");
    }
    s += "  NVRTC: ";
    s += &nvrtc.replace('\n', "\n  ");
    s += "\n  help: install a CUDA toolkit and set CUDA_HOME (or put its bin/ on PATH, or set \
          NVCC to the nvcc to use); or `pip install nvidia-cuda-nvcc nvidia-cuda-runtime \
          nvidia-cuda-crt nvidia-nvvm` (CUDA 13: note its PTX is ISA 9.0, above the default \
          floor); or, with no nvcc at all, NVRTC: `pip install nvidia-cuda-nvrtc-cu12==12.4.127` \
          (PTX ISA 8.4) and set CUDA_NVRTC_PATH to its nvidia/cuda_nvrtc/lib/libnvrtc.so.12.";
    s
}

fn location(file: &std::path::Path, line: &Option<u32>, col: &Option<u32>) -> String {
    match (line, col) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}", file.display()),
        (Some(l), None) => format!("{}:{l}", file.display()),
        _ => file.display().to_string(),
    }
}

fn indent(log: &str) -> String {
    log.trim_end()
        .lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What to do for the errors the seed's troubleshooting table lists.
fn hint(message: &str) -> String {
    let m = message.to_ascii_lowercase();
    if m.contains("cuda_runtime.h") || m.contains("crt/host_config.h") {
        "\n  help: nvcc cannot find the CUDA runtime headers. With nvcc from pip, install its \
         companions into the same site-packages: `pip install nvidia-cuda-runtime nvidia-cuda-crt \
         nvidia-nvvm` (matching nvcc's version)."
            .into()
    } else if m.contains("cannot open source file") || m.contains("no such file or directory") {
        "\n  help: a header was not found: add its folder with `.include(\"dir\")` (files named \
         `#include \"x.cuh\"` are also looked for beside the including file)."
            .into()
    } else if m.contains("is undefined") || m.contains("identifier") {
        "\n  help: a name is not declared: is a header missing, or a device function declared \
         after its first use?"
            .into()
    } else {
        String::new()
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.how)?;
        if let Some(p) = &self.path {
            write!(f, " {}", p.display())?;
        }
        write!(f, ": {}", self.outcome)
    }
}

cuda_stack_sys::debug_as_display!(enum BuildError);
