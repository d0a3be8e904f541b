//! cuBLASLt (`libcublasLt`), cuBLAS's lightweight matmul library, loaded at run time.

use crate::cublas_majors::{self, Library, PIP_DIRS};
use crate::cublaslt_table::CublasLtTable;
use crate::loader::{self, LoadError, Search};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that names the cuBLASLt library file explicitly.
pub const CUBLASLT_PATH_VAR: &str = "CUDA_CUBLASLT_PATH";

const CUBLASLT_LIBRARY: &str = "cuBLASLt (libcublasLt)";
const CUBLASLT_HINT: &str = "cuBLASLt comes with cuBLAS, in the CUDA toolkit or from PyPI: \
    `pip install nvidia-cublas` (CUDA 13) or `pip install nvidia-cublas-cu12` (CUDA 12); or set \
    CUDA_CUBLASLT_PATH to the full path of libcublasLt.so.13 or libcublasLt.so.12";

/// cuBLASLt: the loaded `libcublasLt` (major version 13 or 12, see [`CublasLt::MAJORS`]) and its
/// table of entry points.
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
            .get_or_init(|| {
                let loaded = CublasLt::load();
                if let Ok(lt) = &loaded {
                    cublas_majors::record(Library::CublasLt, lt.version);
                }
                loaded
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The major versions searched, preferred first: the same as [`crate::Cublas::MAJORS`].
    pub const MAJORS: [i32; 2] = cublas_majors::MAJORS;

    /// The places [`CublasLt::load`] searches, in order: `$CUDA_CUBLASLT_PATH` if set (and then
    /// nothing else); otherwise, for each major version of [`CublasLt::MAJORS`] in turn, its
    /// soname (`libcublasLt.so.13`, then `libcublasLt.so.12`) through the system loader, then in
    /// `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`, and `nvidia/cu13/lib` and
    /// `nvidia/cublas/lib` under each Python site-packages directory found. Where the
    /// process-wide [`crate::Cublas`] is loaded already, its major version is searched first:
    /// its own libcublasLt is then in the process, and the system loader returns that one for
    /// the soname, so the two come from one release.
    pub fn search() -> Search {
        Self::search_with(
            &|k| std::env::var_os(k),
            &cublas_majors::search_order(Library::CublasLt),
        )
    }

    /// The standard places for one major version only (`libcublasLt.so.{major}`), without
    /// `$CUDA_CUBLASLT_PATH` (see [`crate::Cublas::search_major`]).
    pub fn search_major(major: i32) -> Search {
        Self::search_with(
            &|k| {
                (k != CUBLASLT_PATH_VAR)
                    .then(|| std::env::var_os(k))
                    .flatten()
            },
            &[major],
        )
    }

    pub(crate) fn search_with(env: &dyn Fn(&str) -> Option<OsString>, majors: &[i32]) -> Search {
        let dirs = loader::cuda_library_dirs(env, PIP_DIRS);
        let sonames = cublas_majors::sonames("libcublasLt", majors);
        let versions: Vec<[&str; 1]> = sonames.iter().map(|[s]| [s.as_str()]).collect();
        let versions: Vec<&[&str]> = versions.iter().map(|v| &v[..]).collect();
        Search::standard_by_version(
            CUBLASLT_LIBRARY,
            CUBLASLT_HINT,
            CUBLASLT_PATH_VAR,
            &versions,
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

    /// `cublasLtGetVersion` as `(major, minor, patch)`, read at load time, e.g. `(13, 1, 0)` or
    /// `(12, 9, 1)` (cuBLAS 12 and 13 both encode it as `major·10000 + minor·100 + patch`);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_major_is_searched_everywhere_in_turn() {
        let env = |k: &str| (k == "CUDA_HOME").then(|| "/opt/cuda-x".into());
        let paths: Vec<PathBuf> = CublasLt::search_with(&env, &[12, 13])
            .candidates()
            .iter()
            .map(|c| c.path.clone())
            .collect();
        assert_eq!(
            paths[..3],
            [
                PathBuf::from("libcublasLt.so.12"),
                "/opt/cuda-x/lib64/libcublasLt.so.12".into(),
                "/usr/local/cuda/lib64/libcublasLt.so.12".into(),
            ],
            "{paths:?}"
        );
        let first13 = paths
            .iter()
            .position(|p| p.ends_with("libcublasLt.so.13"))
            .unwrap();
        assert!(paths[..first13]
            .iter()
            .all(|p| p.to_string_lossy().ends_with(".so.12")));
        let env = |k: &str| (k == CUBLASLT_PATH_VAR).then(|| "/x/libcublasLt.so.12".into());
        assert_eq!(CublasLt::search_with(&env, &[13, 12]).candidates().len(), 1);
    }
}
