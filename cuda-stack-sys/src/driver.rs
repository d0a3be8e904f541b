//! The CUDA driver library (`libcuda`), loaded at run time.

use crate::driver_table::DriverTable;
use crate::loader::{LoadError, Search};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that names the driver library file explicitly.
pub const DRIVER_PATH_VAR: &str = "CUDA_DRIVER_PATH";

const DRIVER_SONAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];
const DRIVER_LIBRARY: &str = "the CUDA driver (libcuda)";
const DRIVER_HINT: &str = "the CUDA driver comes with the NVIDIA GPU driver: install it (then \
    `nvidia-smi` works), or set CUDA_DRIVER_PATH to the full path of libcuda.so.1";

/// The CUDA driver API: the loaded `libcuda` and its table of entry points.
///
/// Every entry point of `cuda.h` is a method of the same name (the versioned symbol the header
/// maps it to, e.g. `cuMemAlloc_v2`), which goes through the checked-call stratum: a non-success
/// `CUresult` comes back as [`crate::DriverError::Call`] with the call's name, the error's name and
/// its description, and an entry point this driver lacks as [`crate::DriverError::MissingSymbol`].
/// The bare function pointers are in [`Driver::table`] for whoever needs them.
///
/// ```no_run
/// let drv = cuda_stack_sys::Driver::get()?;
/// let mut count = 0;
/// // SAFETY: `count` is a valid out-pointer.
/// unsafe {
///     drv.cuInit(0)?;
///     drv.cuDeviceGetCount(&mut count)?;
/// }
/// println!("{count} device(s), driver {}", drv.version_string());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Driver {
    pub(crate) table: DriverTable,
    path: PathBuf,
    version: Option<i32>,
    load_time: Duration,
    // Dropped last: the table's pointers point into it.
    _lib: libloading::Library,
}

// SAFETY: the driver API is thread-safe (NVIDIA documents every entry point as callable from any
// thread), the table is plain function pointers, and `libloading::Library` is Send + Sync.
unsafe impl Send for Driver {}
// SAFETY: as above; `&Driver` only reads immutable fields.
unsafe impl Sync for Driver {}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("entry_points", &self.table.resolved_count())
            .finish()
    }
}

static DRIVER: OnceLock<Result<Driver, LoadError>> = OnceLock::new();

impl Driver {
    /// The process-wide driver, loaded on first use with [`Driver::load`] (thread-safe; later
    /// calls return the same result, success or failure).
    pub fn get() -> Result<&'static Driver, LoadError> {
        DRIVER
            .get_or_init(Driver::load)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The places [`Driver::load`] searches, in order: the file named by `$CUDA_DRIVER_PATH` if
    /// set (and then nothing else), otherwise `libcuda.so.1` and `libcuda.so` through the system
    /// loader, then the same names in `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`,
    /// `/usr/local/nvidia/lib64` and `/usr/lib/wsl/lib`.
    pub fn search() -> Search {
        Self::search_with(&|k| std::env::var_os(k))
    }

    pub(crate) fn search_with(env: &dyn Fn(&str) -> Option<OsString>) -> Search {
        let mut dirs = Vec::new();
        if let Some(home) = env("CUDA_HOME").filter(|h| !h.is_empty()) {
            dirs.push(PathBuf::from(home).join("lib64"));
        }
        dirs.extend(
            [
                "/usr/local/cuda/lib64",
                "/usr/local/nvidia/lib64",
                "/usr/lib/wsl/lib",
            ]
            .map(PathBuf::from),
        );
        Search::standard(
            DRIVER_LIBRARY,
            DRIVER_HINT,
            DRIVER_PATH_VAR,
            DRIVER_SONAMES,
            &dirs,
            env,
        )
    }

    /// Loads a new instance by searching the standard places (see [`Driver::search`]).
    /// Most programs want [`Driver::get`] instead.
    pub fn load() -> Result<Driver, LoadError> {
        Self::load_search(&Self::search())
    }

    /// Loads the library at `path` (a file path or a soname), for tests and unusual setups.
    ///
    /// A library that opens but is not libcuda still loads: each entry point it lacks returns
    /// [`crate::DriverError::MissingSymbol`] when called.
    pub fn load_from(path: impl AsRef<Path>) -> Result<Driver, LoadError> {
        Self::load_search(&Search::single(DRIVER_LIBRARY, DRIVER_HINT, path.as_ref()))
    }

    fn load_search(search: &Search) -> Result<Driver, LoadError> {
        let start = Instant::now();
        let (lib, path) = search.open()?;
        // SAFETY: the library was found as libcuda (or named explicitly by the user as such);
        // each symbol found is trusted to have the signature cuda.h declares.
        let table = unsafe { DriverTable::resolve(&lib) };
        let mut version = 0;
        // SAFETY: `cuDriverGetVersion` writes one int to a valid pointer; it needs no cuInit.
        let version = match table.cuDriverGetVersion {
            Some(f) => {
                (unsafe { f(&mut version) } == crate::CUresult::CUDA_SUCCESS).then_some(version)
            }
            None => None,
        };
        Ok(Driver {
            table,
            path,
            version,
            load_time: start.elapsed(),
            _lib: lib,
        })
    }

    /// The raw table of entry points (bare function pointers, no checks).
    pub fn table(&self) -> &DriverTable {
        &self.table
    }

    /// The file or soname the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The resolved path of the loaded file, as the OS loader reports it (`/proc/self/maps`),
    /// when it can be found; useful when the library was opened by soname.
    pub fn resolved_path(&self) -> Option<PathBuf> {
        crate::loaded_path::find(&self.path)
    }

    /// `cuDriverGetVersion` as read at load time, e.g. `13000` for CUDA 13.0; `None` if the
    /// library could not say.
    pub fn version(&self) -> Option<i32> {
        self.version
    }

    /// The version as text, e.g. `"CUDA 13.0"`, or `"version unknown"`.
    pub fn version_string(&self) -> String {
        match self.version {
            Some(v) => format!("CUDA {}.{}", v / 1000, (v % 1000) / 10),
            None => "version unknown".to_string(),
        }
    }

    /// How long loading took: opening the library, resolving every entry point and reading the
    /// version.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }
}
