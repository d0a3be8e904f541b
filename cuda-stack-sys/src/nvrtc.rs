//! NVRTC, the CUDA run-time compiler (`libnvrtc`), loaded at run time. It needs no GPU.

use crate::loader::{self, LoadError, Search};
use crate::nvrtc_table::NvrtcTable;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that names the NVRTC library file explicitly.
pub const NVRTC_PATH_VAR: &str = "CUDA_NVRTC_PATH";

const NVRTC_SONAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];
const NVRTC_LIBRARY: &str = "NVRTC, the CUDA run-time compiler (libnvrtc)";
const NVRTC_HINT: &str = "NVRTC comes with the CUDA toolkit, or from PyPI: \
    `pip install nvidia-cuda-nvrtc` (CUDA 13) or `pip install nvidia-cuda-nvrtc-cu12`; \
    or set CUDA_NVRTC_PATH to the full path of libnvrtc.so.*";

/// NVRTC: the loaded `libnvrtc` and its table of entry points.
///
/// Like [`crate::Driver`], every entry point of `nvrtc.h` is a method that goes through the
/// checked-call stratum and returns [`crate::NvrtcError`] on failure.
pub struct Nvrtc {
    pub(crate) table: NvrtcTable,
    path: PathBuf,
    version: Option<(i32, i32)>,
    load_time: Duration,
    _lib: libloading::Library,
    // Kept loaded so NVRTC's own dlopen of its builtins finds them (see `preload_builtins`).
    _builtins: Option<libloading::Library>,
}

// SAFETY: NVRTC is thread-safe for calls on distinct programs (NVIDIA's documentation), the
// table is plain function pointers and `libloading::Library` is Send + Sync.
unsafe impl Send for Nvrtc {}
// SAFETY: as above; `&Nvrtc` only reads immutable fields.
unsafe impl Sync for Nvrtc {}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("entry_points", &self.table.resolved_count())
            .finish()
    }
}

static NVRTC: OnceLock<Result<Nvrtc, LoadError>> = OnceLock::new();

impl Nvrtc {
    /// The process-wide NVRTC, loaded on first use (thread-safe).
    pub fn get() -> Result<&'static Nvrtc, LoadError> {
        NVRTC
            .get_or_init(Nvrtc::load)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Whether the process-wide NVRTC of [`Nvrtc::get`] has been loaded (successfully). Loads
    /// nothing; instances made by [`Nvrtc::load`] and its variants are not counted.
    pub fn is_loaded() -> bool {
        NVRTC.get().is_some_and(Result::is_ok)
    }

    /// The places [`Nvrtc::load`] searches, in order: `$CUDA_NVRTC_PATH` if set (and then
    /// nothing else), otherwise `libnvrtc.so.13`, `.so.12` and `.so` through the system loader,
    /// then in `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`, and `nvidia/cu13/lib` and
    /// `nvidia/cuda_nvrtc/lib` under each Python site-packages directory found.
    pub fn search() -> Search {
        Self::search_with(&|k| std::env::var_os(k))
    }

    /// [`Nvrtc::search`] with the environment read through `env` instead of the process's
    /// (build tools that record which variables they read, and tests, use it).
    pub fn search_with(env: &dyn Fn(&str) -> Option<OsString>) -> Search {
        // `$CUDA_NVRTC_PATH` alone is searched when set: skip listing the Python folders (most
        // of a search's time, which a warm `cuda-stack-jit` process pays before its first call).
        let explicit = env(NVRTC_PATH_VAR).is_some_and(|p| !p.is_empty());
        let dirs = if explicit {
            Vec::new()
        } else {
            loader::cuda_library_dirs(env, &["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"])
        };
        Search::standard(
            NVRTC_LIBRARY,
            NVRTC_HINT,
            NVRTC_PATH_VAR,
            NVRTC_SONAMES,
            &dirs,
            env,
        )
    }

    /// Loads a new instance by searching the standard places (see [`Nvrtc::search`]).
    pub fn load() -> Result<Nvrtc, LoadError> {
        Self::load_search(&Self::search())
    }

    /// Loads the library at `path` (a file path or a soname).
    pub fn load_from(path: impl AsRef<Path>) -> Result<Nvrtc, LoadError> {
        Self::load_search(&Search::single(NVRTC_LIBRARY, NVRTC_HINT, path.as_ref()))
    }

    /// Loads the first library of `search` that opens (see [`Nvrtc::search_with`]).
    pub fn load_search(search: &Search) -> Result<Nvrtc, LoadError> {
        let start = Instant::now();
        let (lib, path) = search.open()?;
        let builtins = preload_builtins(&path);
        // SAFETY: the library was found as libnvrtc (or named explicitly by the user as such).
        let table = unsafe { NvrtcTable::resolve(&lib) };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: `nvrtcVersion` writes two ints to valid pointers.
        let version = match table.nvrtcVersion {
            Some(f) => (unsafe { f(&mut major, &mut minor) } == crate::nvrtcResult::NVRTC_SUCCESS)
                .then_some((major, minor)),
            None => None,
        };
        Ok(Nvrtc {
            table,
            path,
            version,
            load_time: start.elapsed(),
            _lib: lib,
            _builtins: builtins,
        })
    }

    /// The raw table of entry points.
    pub fn table(&self) -> &NvrtcTable {
        &self.table
    }

    /// The file or soname the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The resolved path of the loaded file, when it can be found.
    pub fn resolved_path(&self) -> Option<PathBuf> {
        crate::loaded_path::find(&self.path)
    }

    /// `nvrtcVersion` as `(major, minor)`, read at load time.
    pub fn version(&self) -> Option<(i32, i32)> {
        self.version
    }

    /// The version as text, e.g. `"NVRTC 13.0"`, or `"version unknown"`.
    pub fn version_string(&self) -> String {
        match self.version {
            Some((a, b)) => format!("NVRTC {a}.{b}"),
            None => "version unknown".to_string(),
        }
    }

    /// How long loading took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }
}

/// NVRTC opens `libnvrtc-builtins.so.X.Y` by soname when it first compiles. When NVRTC itself was
/// found outside the loader's search path (a pip wheel's `nvidia/cu13/lib`, `$CUDA_NVRTC_PATH`),
/// that fails with "failed to open libnvrtc-builtins". Loading the builtins that sit beside the
/// NVRTC we opened makes the later lookup by soname find the library already loaded.
fn preload_builtins(nvrtc: &Path) -> Option<libloading::Library> {
    let file = crate::loaded_path::find(nvrtc)?;
    let dir = file.parent()?;
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc-builtins.so"))
        })
        .collect();
    names.sort();
    // SAFETY: the builtins library is NVRTC's own companion with no initialiser preconditions.
    names
        .iter()
        .find_map(|p| unsafe { libloading::Library::new(p) }.ok())
}
