//! cuBLAS (`libcublas`), loaded at run time.

use crate::cublas_majors::{self, Library, MAJORS, PIP_DIRS};
use crate::cublas_table::CublasTable;
use crate::cublas_types::libraryPropertyType;
use crate::loader::{self, LoadError, Search};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that names the cuBLAS library file explicitly.
pub const CUBLAS_PATH_VAR: &str = "CUDA_CUBLAS_PATH";

const CUBLAS_LIBRARY: &str = "cuBLAS (libcublas)";
const CUBLAS_HINT: &str = "cuBLAS comes with the CUDA toolkit, or from PyPI: \
    `pip install nvidia-cublas` (CUDA 13) or `pip install nvidia-cublas-cu12` (CUDA 12); or set \
    CUDA_CUBLAS_PATH to the full path of libcublas.so.13 or libcublas.so.12 (the libcublasLt of \
    the same version must sit beside it or be on the loader's path)";

/// cuBLAS: the loaded `libcublas` (major version 13 or 12, see [`Cublas::MAJORS`]) and its
/// table of entry points.
///
/// Every entry point of `cublas_v2.h` is a method of the same name: the exported symbol,
/// which for the classic API is the `_v2` one (`cublasCreate_v2`, `cublasSgemm_v2`), as the
/// header's macros map them. Each goes through the checked-call stratum: a status other than
/// `CUBLAS_STATUS_SUCCESS` comes back as [`crate::CublasError::Call`] with the call's name, the
/// status's name (`cublasGetStatusName`) and its description (`cublasGetStatusString`); an entry
/// point this library lacks as [`crate::CublasError::MissingSymbol`].
///
/// libcublas needs libcublasLt: when it is loaded from a folder (a pip wheel's, or
/// `$CUDA_CUBLAS_PATH`), the libcublasLt beside it is loaded first, so the dependency resolves
/// even where that folder is not on the system loader's path.
pub struct Cublas {
    pub(crate) table: CublasTable,
    path: PathBuf,
    version: Option<(i32, i32, i32)>,
    load_time: Duration,
    _lib: libloading::Library,
    // Kept loaded: libcublas's own lookup of libcublasLt by soname finds it (see `open_with_companions`).
    _companions: Vec<libloading::Library>,
}

// SAFETY: cuBLAS is thread-safe for calls on distinct handles (NVIDIA's documentation), the
// table is plain function pointers and `libloading::Library` is Send + Sync.
unsafe impl Send for Cublas {}
// SAFETY: as above; `&Cublas` only reads immutable fields.
unsafe impl Sync for Cublas {}

impl std::fmt::Debug for Cublas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cublas")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("entry_points", &self.table.resolved_count())
            .finish()
    }
}

static CUBLAS: OnceLock<Result<Cublas, LoadError>> = OnceLock::new();

impl Cublas {
    /// The process-wide cuBLAS, loaded on first use with [`Cublas::load`] (thread-safe; later
    /// calls return the same result, success or failure).
    pub fn get() -> Result<&'static Cublas, LoadError> {
        CUBLAS
            .get_or_init(|| {
                let loaded = Cublas::load();
                if let Ok(c) = &loaded {
                    cublas_majors::record(Library::Cublas, c.version);
                }
                loaded
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The major versions this crate searches for, preferred first: 13, whose headers the
    /// declarations were generated from, then 12. For every entry point and type the two share,
    /// cuBLAS 12 (12.0 through 12.9) declares the same signature, value and layout as 13; 13 adds
    /// entry points (floating-point emulation) that a cuBLAS 12 lacks, and calling one returns
    /// [`crate::CublasError::MissingSymbol`]. [`Cublas::version`] says which one loaded.
    pub const MAJORS: [i32; 2] = MAJORS;

    /// The places [`Cublas::load`] searches, in order: `$CUDA_CUBLAS_PATH` if set (and then
    /// nothing else); otherwise, for each major version of [`Cublas::MAJORS`] in turn, its soname
    /// (`libcublas.so.13`, then `libcublas.so.12`) through the system loader, then in
    /// `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`, and `nvidia/cu13/lib` and
    /// `nvidia/cublas/lib` under each Python site-packages directory found. Where the
    /// process-wide [`crate::CublasLt`] is loaded already, its major version is searched first,
    /// so the two come from one release. An unversioned `libcublas.so` is never searched.
    pub fn search() -> Search {
        Self::search_with(
            &|k| std::env::var_os(k),
            &cublas_majors::search_order(Library::Cublas),
        )
    }

    /// The standard places for one major version only (`libcublas.so.{major}`), without
    /// `$CUDA_CUBLAS_PATH`: to load a particular version with [`Cublas::load_from`] on a machine
    /// that has several, e.g. to test both.
    pub fn search_major(major: i32) -> Search {
        Self::search_with(
            &|k| {
                (k != CUBLAS_PATH_VAR)
                    .then(|| std::env::var_os(k))
                    .flatten()
            },
            &[major],
        )
    }

    pub(crate) fn search_with(env: &dyn Fn(&str) -> Option<OsString>, majors: &[i32]) -> Search {
        let dirs = loader::cuda_library_dirs(env, PIP_DIRS);
        let sonames = cublas_majors::sonames("libcublas", majors);
        let versions: Vec<[&str; 1]> = sonames.iter().map(|[s]| [s.as_str()]).collect();
        let versions: Vec<&[&str]> = versions.iter().map(|v| &v[..]).collect();
        Search::standard_by_version(
            CUBLAS_LIBRARY,
            CUBLAS_HINT,
            CUBLAS_PATH_VAR,
            &versions,
            &dirs,
            env,
        )
    }

    /// Loads a new instance by searching the standard places (see [`Cublas::search`]).
    /// Most programs want [`Cublas::get`] instead.
    pub fn load() -> Result<Cublas, LoadError> {
        Self::load_search(&Self::search())
    }

    /// Loads the library at `path` (a file path or a soname). A library that opens but is not
    /// libcublas still loads: each entry point it lacks returns
    /// [`crate::CublasError::MissingSymbol`] when called.
    pub fn load_from(path: impl AsRef<Path>) -> Result<Cublas, LoadError> {
        Self::load_search(&Search::single(CUBLAS_LIBRARY, CUBLAS_HINT, path.as_ref()))
    }

    fn load_search(search: &Search) -> Result<Cublas, LoadError> {
        let start = Instant::now();
        let (lib, path, companions) = search.open_with_companions(&["libcublasLt"])?;
        // SAFETY: the library was found as libcublas (or named explicitly by the user as such);
        // each symbol found is trusted to have the signature cublas_api.h declares.
        let table = unsafe { CublasTable::resolve(&lib) };
        let version = table.cublasGetProperty.and_then(|get| {
            let mut v = [0; 3];
            let props = [
                libraryPropertyType::MAJOR_VERSION,
                libraryPropertyType::MINOR_VERSION,
                libraryPropertyType::PATCH_LEVEL,
            ];
            for (slot, prop) in v.iter_mut().zip(props) {
                // SAFETY: `cublasGetProperty` writes one int; it needs no handle or GPU.
                let status = unsafe { get(prop, slot) };
                if status != crate::cublas_types::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                    return None;
                }
            }
            Some((v[0], v[1], v[2]))
        });
        Ok(Cublas {
            table,
            path,
            version,
            load_time: start.elapsed(),
            _lib: lib,
            _companions: companions,
        })
    }

    /// The raw table of entry points (bare function pointers, no checks).
    pub fn table(&self) -> &CublasTable {
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

    /// `cublasGetProperty` as `(major, minor, patch)`, read at load time, e.g. `(13, 1, 0)` or
    /// `(12, 9, 1)`; `None` if the library could not say.
    pub fn version(&self) -> Option<(i32, i32, i32)> {
        self.version
    }

    /// The version as text, e.g. `"cuBLAS 13.1.0"`, or `"version unknown"`.
    pub fn version_string(&self) -> String {
        match self.version {
            Some((a, b, c)) => format!("cuBLAS {a}.{b}.{c}"),
            None => "version unknown".to_string(),
        }
    }

    /// How long loading took (opening the library and its companion, resolving every entry
    /// point, reading the version).
    pub fn load_time(&self) -> Duration {
        self.load_time
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order_env_var_then_each_major_sonames_cuda_home_then_pip() {
        let site =
            std::env::temp_dir().join(format!("cuda-stack-sys-cublas-site-{}", std::process::id()));
        std::fs::create_dir_all(&site).unwrap();
        let s = site.clone();
        let env = move |k: &str| match k {
            "PYTHONPATH" => Some(s.clone().into_os_string()),
            "CUDA_HOME" => Some("/opt/cuda-x".into()),
            _ => None,
        };
        let paths = |majors: &[i32]| -> Vec<PathBuf> {
            Cublas::search_with(&env, majors)
                .candidates()
                .iter()
                .map(|c| c.path.clone())
                .collect()
        };
        let all = paths(&MAJORS);
        let _ = std::fs::remove_dir_all(&site);
        let places = |m: i32| -> Vec<PathBuf> {
            let so = format!("libcublas.so.{m}");
            vec![
                so.clone().into(),
                PathBuf::from("/opt/cuda-x/lib64").join(&so),
                PathBuf::from("/usr/local/cuda/lib64").join(&so),
                site.join("nvidia/cu13/lib").join(&so),
                site.join("nvidia/cublas/lib").join(&so),
            ]
        };
        // Other site-packages of this machine may follow each group; these come first, in
        // this order, and every place is tried for 13 before any for 12.
        let (p13, p12) = (places(13), places(12));
        assert_eq!(all[..p13.len()], p13[..], "{all:?}");
        let first12 = all
            .iter()
            .position(|p| p.ends_with("libcublas.so.12"))
            .unwrap();
        assert!(all[..first12]
            .iter()
            .all(|p| p.to_string_lossy().ends_with(".so.13")));
        assert_eq!(all[first12..first12 + p12.len()], p12[..], "{all:?}");
        assert!(!all.iter().any(|p| p.ends_with("libcublas.so")), "{all:?}");

        let env = |k: &str| (k == CUBLAS_PATH_VAR).then(|| "/x/libcublas.so.12".into());
        let only = Cublas::search_with(&env, &MAJORS);
        assert_eq!(only.candidates().len(), 1);
        let err = only.open().unwrap_err().to_string();
        assert!(
            err.contains("$CUDA_CUBLAS_PATH") && err.contains("no other place"),
            "{err}"
        );
    }

    #[test]
    fn search_major_ignores_the_env_var_and_other_majors() {
        let s = Cublas::search_major(12);
        assert_eq!(s.candidates()[0].path, PathBuf::from("libcublas.so.12"));
        assert!(s
            .candidates()
            .iter()
            .all(|c| c.path.ends_with("libcublas.so.12")));
    }
}
