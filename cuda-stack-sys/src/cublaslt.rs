//! cuBLASLt (`libcublasLt`), cuBLAS's lightweight matmul library, loaded at run time.

use crate::cublaslt_table::CublasLtTable;
use crate::loader::{self, LoadError, Search};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that names the cuBLASLt library file explicitly.
pub const CUBLASLT_PATH_VAR: &str = "CUDA_CUBLASLT_PATH";

/// The sonames searched: major version 13 only, as for cuBLAS (see [`crate::Cublas::search`]).
const CUBLASLT_SONAMES: &[&str] = &["libcublasLt.so.13"];
const CUBLASLT_LIBRARY: &str = "cuBLASLt (libcublasLt)";
const CUBLASLT_HINT: &str = "cuBLASLt comes with cuBLAS, in the CUDA toolkit or from PyPI: \
    `pip install nvidia-cublas` (CUDA 13); or set CUDA_CUBLASLT_PATH to the full path of \
    libcublasLt.so.13";

/// cuBLASLt: the loaded `libcublasLt` and its table of entry points.
///
/// Every entry point of `cublasLt.h` is a method of the same name that goes through the
/// checked-call stratum: a status other than `CUBLAS_STATUS_SUCCESS` comes back as
/// [`crate::CublasError::Call`] (cuBLASLt shares cuBLAS's `cublasStatus_t`), an entry point this
/// library lacks as [`crate::CublasError::MissingSymbol`].
pub struct CublasLt {
    pub(crate) table: CublasLtTable,
    path: PathBuf,
    version: Option<(i32, i32, i32)>,
    load_time: Duration,
    _lib: libloading::Library,
}

// SAFETY: cuBLASLt is thread-safe (NVIDIA's documentation: one handle may even be shared), the
// table is plain function pointers and `libloading::Library` is Send + Sync.
unsafe impl Send for CublasLt {}
// SAFETY: as above; `&CublasLt` only reads immutable fields.
unsafe impl Sync for CublasLt {}

impl std::fmt::Debug for CublasLt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CublasLt")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("entry_points", &self.table.resolved_count())
            .finish()
    }
}

static CUBLASLT: OnceLock<Result<CublasLt, LoadError>> = OnceLock::new();

impl CublasLt {
    /// The process-wide cuBLASLt, loaded on first use with [`CublasLt::load`] (thread-safe;
    /// later calls return the same result, success or failure).
    pub fn get() -> Result<&'static CublasLt, LoadError> {
        CUBLASLT
            .get_or_init(CublasLt::load)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The places [`CublasLt::load`] searches, in order: `$CUDA_CUBLASLT_PATH` if set (and then
    /// nothing else), otherwise `libcublasLt.so.13` through the system loader, then in
    /// `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`, and `nvidia/cu13/lib` and
    /// `nvidia/cublas/lib` under each Python site-packages directory found.
    pub fn search() -> Search {
        Self::search_with(&|k| std::env::var_os(k))
    }

    pub(crate) fn search_with(env: &dyn Fn(&str) -> Option<OsString>) -> Search {
        let dirs = loader::cuda_library_dirs(env, crate::cublas::CUBLAS_PIP_DIRS);
        Search::standard(
            CUBLASLT_LIBRARY,
            CUBLASLT_HINT,
            CUBLASLT_PATH_VAR,
            CUBLASLT_SONAMES,
            &dirs,
            env,
        )
    }

    /// Loads a new instance by searching the standard places (see [`CublasLt::search`]).
    /// Most programs want [`CublasLt::get`] instead.
    pub fn load() -> Result<CublasLt, LoadError> {
        Self::load_search(&Self::search())
    }

    /// Loads the library at `path` (a file path or a soname). A library that opens but is not
    /// libcublasLt still loads: each entry point it lacks returns
    /// [`crate::CublasError::MissingSymbol`] when called.
    pub fn load_from(path: impl AsRef<Path>) -> Result<CublasLt, LoadError> {
        Self::load_search(&Search::single(
            CUBLASLT_LIBRARY,
            CUBLASLT_HINT,
            path.as_ref(),
        ))
    }

    fn load_search(search: &Search) -> Result<CublasLt, LoadError> {
        let start = Instant::now();
        let (lib, path) = search.open()?;
        // SAFETY: the library was found as libcublasLt (or named explicitly by the user as
        // such); each symbol found is trusted to have the signature cublasLt.h declares.
        let table = unsafe { CublasLtTable::resolve(&lib) };
        // SAFETY: `cublasLtGetVersion` takes nothing and returns a number; it needs no GPU.
        let version = table
            .cublasLtGetVersion
            .map(|get| unsafe { get() })
            .map(|v| {
                let v = v as i32;
                (v / 10_000, (v / 100) % 100, v % 100)
            });
        Ok(CublasLt {
            table,
            path,
            version,
            load_time: start.elapsed(),
            _lib: lib,
        })
    }

    /// The raw table of entry points (bare function pointers, no checks).
    pub fn table(&self) -> &CublasLtTable {
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

    /// `cublasLtGetVersion` as `(major, minor, patch)`, read at load time, e.g. `(13, 1, 0)`;
    /// `None` if the library could not say.
    pub fn version(&self) -> Option<(i32, i32, i32)> {
        self.version
    }

    /// The version as text, e.g. `"cuBLASLt 13.1.0"`, or `"version unknown"`.
    pub fn version_string(&self) -> String {
        match self.version {
            Some((a, b, c)) => format!("cuBLASLt {a}.{b}.{c}"),
            None => "version unknown".to_string(),
        }
    }

    /// How long loading took (opening the library, resolving every entry point, reading the
    /// version).
    pub fn load_time(&self) -> Duration {
        self.load_time
    }
}
