//! NCCL (`libnccl`), NVIDIA's collective communications library, loaded at run time.

use crate::loader::{self, LoadError, Search};
use crate::nccl_table::NcclTable;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that names the NCCL library file explicitly.
pub const NCCL_PATH_VAR: &str = "CUDA_NCCL_PATH";

/// The sonames searched: NCCL's ABI has been `libnccl.so.2` for every 2.x release (new entry
/// points are added, none removed), and `libnccl.so` is the development link to it.
const NCCL_SONAMES: &[&str] = &["libnccl.so.2", "libnccl.so"];
/// pip's folders for NCCL, under each site-packages (`nvidia-nccl-cu13` and `-cu12` both use
/// `nvidia/nccl/lib`).
const NCCL_PIP_DIRS: &[&str] = &["nvidia/nccl/lib", "nvidia/cu13/lib"];
const NCCL_LIBRARY: &str = "NCCL (libnccl)";
const NCCL_HINT: &str = "NCCL comes from PyPI (`pip install nvidia-nccl-cu13`), from NVIDIA's \
    packages (libnccl2) or with PyTorch; or set CUDA_NCCL_PATH to the full path of libnccl.so.2";

/// NCCL: the loaded `libnccl` and its table of entry points.
///
/// Every entry point of `nccl.h` is a method of the same name that goes through the checked-call
/// stratum: a result other than `ncclSuccess` comes back as [`crate::NcclError::Call`] with the
/// call's name, the result's name and its description (`ncclGetErrorString`); an entry point
/// this library lacks (an older NCCL) as [`crate::NcclError::MissingSymbol`]. This crate only
/// declares and loads NCCL; communicators and collectives are `cuda-stack-nccl`'s.
pub struct Nccl {
    pub(crate) table: NcclTable,
    path: PathBuf,
    version: Option<(i32, i32, i32)>,
    load_time: Duration,
    _lib: libloading::Library,
}

// SAFETY: the table is plain function pointers and `libloading::Library` is Send + Sync; which
// NCCL calls may run concurrently is a contract of each (unsafe) call, not of this handle.
unsafe impl Send for Nccl {}
// SAFETY: as above; `&Nccl` only reads immutable fields.
unsafe impl Sync for Nccl {}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("entry_points", &self.table.resolved_count())
            .finish()
    }
}

static NCCL: OnceLock<Result<Nccl, LoadError>> = OnceLock::new();

impl Nccl {
    /// The process-wide NCCL, loaded on first use with [`Nccl::load`] (thread-safe;
    /// later calls return the same result, success or failure).
    pub fn get() -> Result<&'static Nccl, LoadError> {
        NCCL.get_or_init(Nccl::load).as_ref().map_err(Clone::clone)
    }

    /// The places [`Nccl::load`] searches, in order: `$CUDA_NCCL_PATH` if set (and then
    /// nothing else), otherwise `libnccl.so.2` and `libnccl.so` through the system loader, then
    /// in `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`, and `nvidia/nccl/lib` and
    /// `nvidia/cu13/lib` under each Python site-packages directory found.
    pub fn search() -> Search {
        Self::search_with(&|k| std::env::var_os(k))
    }

    pub(crate) fn search_with(env: &dyn Fn(&str) -> Option<OsString>) -> Search {
        let dirs = loader::cuda_library_dirs(env, NCCL_PIP_DIRS);
        Search::standard(
            NCCL_LIBRARY,
            NCCL_HINT,
            NCCL_PATH_VAR,
            NCCL_SONAMES,
            &dirs,
            env,
        )
    }

    /// Loads a new instance by searching the standard places (see [`Nccl::search`]).
    /// Most programs want [`Nccl::get`] instead.
    pub fn load() -> Result<Nccl, LoadError> {
        Self::load_search(&Self::search())
    }

    /// Loads the library at `path` (a file path or a soname). A library that opens but is not
    /// libnccl still loads: each entry point it lacks returns
    /// [`crate::NcclError::MissingSymbol`] when called.
    pub fn load_from(path: impl AsRef<Path>) -> Result<Nccl, LoadError> {
        Self::load_search(&Search::single(NCCL_LIBRARY, NCCL_HINT, path.as_ref()))
    }

    fn load_search(search: &Search) -> Result<Nccl, LoadError> {
        let start = Instant::now();
        let (lib, path) = search.open()?;
        // SAFETY: the library was found as libnccl (or named explicitly by the user as such);
        // each symbol found is trusted to have the signature nccl.h declares.
        let table = unsafe { NcclTable::resolve(&lib) };
        let version = table.ncclGetVersion.and_then(|get| {
            let mut code = 0;
            // SAFETY: `ncclGetVersion` writes one int; it needs no GPU or communicator.
            let ok = unsafe { get(&mut code) } == crate::nccl_types::ncclResult_t::ncclSuccess;
            ok.then(|| nccl_version(code))
        });
        Ok(Nccl {
            table,
            path,
            version,
            load_time: start.elapsed(),
            _lib: lib,
        })
    }

    /// The raw table of entry points (bare function pointers, no checks).
    pub fn table(&self) -> &NcclTable {
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

    /// `ncclGetVersion` as `(major, minor, patch)`, read at load time, e.g. `(2, 28, 9)`;
    /// `None` if the library could not say.
    pub fn version(&self) -> Option<(i32, i32, i32)> {
        self.version
    }

    /// The version as text, e.g. `"NCCL 2.28.9"`, or `"version unknown"`.
    pub fn version_string(&self) -> String {
        match self.version {
            Some((a, b, c)) => format!("NCCL {a}.{b}.{c}"),
            None => "version unknown".to_string(),
        }
    }

    /// How long loading took (opening the library, resolving every entry point, reading the
    /// version).
    pub fn load_time(&self) -> Duration {
        self.load_time
    }
}

/// Decodes `ncclGetVersion`'s number: `major*10000 + minor*100 + patch` since NCCL 2.9, and
/// `major*1000 + minor*100 + patch` before (as `NCCL_VERSION` in `nccl.h` encodes it).
pub(crate) fn nccl_version(code: i32) -> (i32, i32, i32) {
    if code >= 10_000 {
        (code / 10_000, (code / 100) % 100, code % 100)
    } else {
        (code / 1000, (code / 100) % 10, code % 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_numbers_decode_both_encodings() {
        assert_eq!(nccl_version(22809), (2, 28, 9));
        assert_eq!(nccl_version(21903), (2, 19, 3));
        assert_eq!(nccl_version(2804), (2, 8, 4));
    }

    #[test]
    fn pip_folders_of_every_site_packages_are_searched() {
        let site =
            std::env::temp_dir().join(format!("cuda-stack-sys-nccl-site-{}", std::process::id()));
        std::fs::create_dir_all(&site).unwrap();
        let s = site.clone();
        let env = move |k: &str| (k == "PYTHONPATH").then(|| s.clone().into_os_string());
        let paths: Vec<PathBuf> = Nccl::search_with(&env)
            .candidates()
            .iter()
            .map(|c| c.path.clone())
            .collect();
        let _ = std::fs::remove_dir_all(&site);
        let a = site.join("nvidia/nccl/lib/libnccl.so.2");
        let b = site.join("nvidia/cu13/lib/libnccl.so.2");
        let (ia, ib) = (
            paths.iter().position(|p| *p == a),
            paths.iter().position(|p| *p == b),
        );
        assert!(ia.is_some() && ib.is_some() && ia < ib, "{paths:?}");
    }
}
