//! One compilation: a source file for one target architecture.

use crate::arch::Arch;
use std::path::{Path, PathBuf};

/// What to compile.
pub(crate) struct Job<'a> {
    /// The source, as the compiler is given it.
    pub source: &'a Path,
    /// The source as messages name it (and NVRTC's program name).
    pub display: String,
    /// The file name without `.cu`: output files are named after it.
    pub stem: String,
    /// The virtual architecture of the PTX.
    pub arch: Arch,
    /// Options for the compiler (the build's and the file's own).
    pub options: &'a [String],
    /// Include folders: the source's own folder, then the build's.
    pub includes: &'a [PathBuf],
    /// The C++ standard, e.g. `c++17`.
    pub std: &'a str,
}

/// What a compilation produced.
pub(crate) struct Compiled {
    /// The PTX text.
    pub ptx: String,
    /// The compiler's log (warnings; empty when clean).
    pub log: String,
    /// The user headers the source includes (not the source itself).
    pub deps: Vec<PathBuf>,
}
