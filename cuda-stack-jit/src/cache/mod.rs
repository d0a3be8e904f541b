//! The compile cache: NVRTC output kept **in memory** (per process) and **on disk** (across
//! processes), keyed by everything that determines it.
//!
//! A lookup goes memory → disk → NVRTC; what NVRTC produces is written to both. Kernels keep
//! their loaded functions per dtype signature in front of all this, so a call that was made
//! before touches none of it (no hashing, no formatting).
//!
//! **The key** is a SHA-256 digest of: this generator's [`GENERATOR_VERSION`], the compiler
//! (the NVRTC version, and the identity of NVRTC's library file: canonical path, size,
//! modification time, inode and device), the target (`sm_90` cubin or `compute_90` PTX), the
//! options, and the complete source (the generated kernel with every helper inlined, so nothing
//! outside it can change what it compiles to). Another NVRTC, or the same file replaced or
//! touched, gives other keys. A source compiled with include paths (`-I`) reads files the key
//! cannot see, so it is cached in memory only.
//!
//! **A warm hit loads no compiler.** Naming the compiler and choosing the target (which needs
//! the architectures NVRTC supports) would load NVRTC, several milliseconds. Instead, the file
//! NVRTC would be loaded from is found the way `cuda-stack-sys` searches for it, without
//! loading it, and identified by `stat`; what NVRTC reported for that file (version and
//! architectures) is kept beside the entries in a checksummed record, `compiler-<digest>`. A
//! process whose compiler has a record, and whose kernels are all on disk, never loads NVRTC
//! ([`CacheStats::nvrtc_loaded`] says whether it did). NVRTC is loaded on a miss, when the
//! record is missing or invalid (then rewritten), and when the file cannot be told without
//! loading it: a soname the system loader might resolve (`libnvrtc.so.13` in
//! `/etc/ld.so.cache` or `$LD_LIBRARY_PATH`); a pip wheel's, `$CUDA_HOME`'s or
//! `$CUDA_NVRTC_PATH`'s file is found without loading ([`nvrtc_location`] says which).
//!
//! **Where**: `$CUDA_RS_KERNEL_CACHE_DIR` if set (`off` or empty: no disk cache), else
//! `$XDG_CACHE_HOME/cuda-rs/kernels`, else `~/.cache/cuda-rs/kernels` (on Windows
//! `%LOCALAPPDATA%\cuda-rs\kernels`). Size bound: `$CUDA_RS_KERNEL_CACHE_MAX_MB` (default 1024).
//!
//! What the disk layer does about the problems CuPy's users report with its cache folder:
//! - **Concurrent processes never read a half-written entry**: an entry is written to a
//!   temporary file of a unique name in the same folder and renamed over the final name
//!   (atomic on POSIX file systems): readers see the old file or the new one.
//! - **A torn or corrupted entry is detected** by the SHA-256 checksum in every entry, counted
//!   ([`CacheStats::corrupt_entries`]), recompiled and replaced; the driver never sees it.
//! - **Bounded size**: after each write, when the entries exceed the bound, the least recently
//!   used (by modification time, which a hit refreshes) are deleted down to 90 % of it.
//!   Temporary files left by killed processes are removed after an hour.
//! - **A read-only, full or missing folder is not an error**: the first failed write logs one
//!   warning (`log`) and the process goes on with the memory layer only
//!   ([`KernelCache::disk_status`] says why); reads still work, so a read-only cache filled by
//!   someone else is used.
//! - **Modes for a shared folder**: entries are created with the default mode (0666 minus the
//!   umask), never the private 0600 of `mkstemp`, so a group-shared folder (setgid, umask 002)
//!   works for the whole group; an entry this user cannot read is a miss, then replaced.
//! - **No global invalidation**: a key covers exactly one kernel's complete source, so editing
//!   one kernel, or a helper only some kernels inline, invalidates only those.

mod compiler;
mod disk;
mod dynamic_loader;
mod entry;
mod locate;

pub use disk::DiskStatus;
pub use entry::BinaryKind;

use crate::error::{JitError, Result};
use disk::{DiskCache, Lookup};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

/// The version of the code generator and of how sources are compiled; part of every key.
pub const GENERATOR_VERSION: &str = concat!("cuda-stack-jit ", env!("CARGO_PKG_VERSION"), " gen 1");

/// The environment variable naming the cache folder (`off`: no disk cache).
pub const DIR_ENV: &str = "CUDA_RS_KERNEL_CACHE_DIR";
/// The environment variable bounding the folder's size, in MiB.
pub const MAX_MB_ENV: &str = "CUDA_RS_KERNEL_CACHE_MAX_MB";
const DEFAULT_MAX_MB: u64 = 1024;

/// What to compile for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// SASS for `sm_XY` (`major * 10 + minor`): loads without JIT, on drivers of any minor
    /// version of NVRTC's major release.
    Cubin(u32),
    /// PTX for `compute_XY`, JIT-compiled by the driver at load (when NVRTC does not know the
    /// device's architecture).
    Ptx(u32),
}

impl Target {
    /// The `--gpu-architecture` option.
    pub fn arch_option(self) -> String {
        match self {
            Target::Cubin(a) => format!("--gpu-architecture=sm_{a}"),
            Target::Ptx(a) => format!("--gpu-architecture=compute_{a}"),
        }
    }

    /// The kind of binary it produces.
    pub fn kind(self) -> BinaryKind {
        match self {
            Target::Cubin(_) => BinaryKind::Cubin,
            Target::Ptx(_) => BinaryKind::Ptx,
        }
    }

    /// The target for a GPU of architecture `arch` (`major * 10 + minor`): its cubin when NVRTC
    /// supports it, else PTX for the newest architecture NVRTC supports below it. The
    /// architectures come from the compiler's record when there is one (NVRTC is not loaded;
    /// see the [module docs](self)).
    pub fn for_arch(arch: u32) -> Result<Target> {
        let c = compiler::current();
        let archs = c.archs()?;
        if archs.contains(&arch) {
            return Ok(Target::Cubin(arch));
        }
        match archs.iter().rev().find(|&&a| a < arch) {
            Some(&a) => Ok(Target::Ptx(a)),
            None => Err(JitError::Target {
                arch,
                nvrtc: c.version_string(),
                supported: archs.to_vec(),
            }),
        }
    }

    /// The target for `ctx`'s device.
    pub fn for_context(ctx: &cuda_stack_driver::Context) -> Result<Target> {
        let cc = ctx.limits().compute_capability;
        Self::for_arch(cc.major as u32 * 10 + cc.minor as u32)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Cubin(a) => write!(f, "sm_{a} cubin"),
            Target::Ptx(a) => write!(f, "compute_{a} PTX"),
        }
    }
}

/// The NVRTC library file this process would load, found without loading it (canonical), or
/// `None` when only loading it could tell (a soname the system loader might resolve comes
/// first in the search, or no file exists). Where it is `None`, every process loads NVRTC to
/// name the compiler in cache keys, warm or not; setting `CUDA_NVRTC_PATH` to the file avoids
/// that.
pub fn nvrtc_location() -> Option<PathBuf> {
    locate::nvrtc_file()
}

/// Where a binary came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This process's memory cache.
    Memory,
    /// A disk-cache entry (no compile).
    Disk,
    /// NVRTC, just now.
    Compiled,
}

/// A compiled kernel binary.
#[derive(Debug)]
pub struct Binary {
    /// What it targets.
    pub target: Target,
    /// Cubin bytes or PTX text.
    pub bytes: Vec<u8>,
}

/// The result of [`KernelCache::get_or_compile`].
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The binary.
    pub binary: Arc<Binary>,
    /// Where it came from.
    pub origin: Origin,
    /// How long getting it took (compile, or disk read and check).
    pub took: Duration,
}

/// Counters of one cache (see [`KernelCache::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// NVRTC compiles.
    pub compiles: u64,
    /// Lookups answered from memory.
    pub memory_hits: u64,
    /// Lookups answered from disk (no compile).
    pub disk_hits: u64,
    /// Entries written to disk.
    pub disk_writes: u64,
    /// Invalid entries found (torn, truncated, corrupted), recompiled and replaced.
    pub corrupt_entries: u64,
    /// Entries deleted to keep the folder under its bound.
    pub evictions: u64,
    /// Compiles not cached on disk because the source reads include paths, or because the
    /// NVRTC loaded is not the one the keys name (it was replaced while the process ran).
    pub uncacheable: u64,
    /// Whether this process has loaded NVRTC (by anyone, for any reason). A process whose
    /// lookups were all hits, memory or disk, normally has not: see the [module docs](self).
    pub nvrtc_loaded: bool,
}

#[derive(Default)]
struct Counters {
    compiles: AtomicU64,
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    disk_writes: AtomicU64,
    corrupt_entries: AtomicU64,
    evictions: AtomicU64,
    uncacheable: AtomicU64,
}

/// One compile request.
#[derive(Debug, Clone, Copy)]
pub struct CompileRequest<'a> {
    /// The program's file name in NVRTC's messages (`square_kernel.cu`).
    pub name: &'a str,
    /// The complete CUDA source.
    pub source: &'a str,
    /// NVRTC options besides the architecture.
    pub options: &'a [String],
    /// What to compile for.
    pub target: Target,
}

/// A compile cache: an in-memory map in front of an optional cache folder. Kernels use
/// [`KernelCache::global`] unless given another (tests and benchmarks use their own folders).
pub struct KernelCache {
    memory: Mutex<HashMap<[u8; 32], Arc<Binary>>>,
    disk: Option<DiskCache>,
    no_disk_reason: Option<String>,
    counters: Counters,
    /// Whether the compiler's record was checked (and written if missing) in the folder.
    record_kept: Once,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCache")
            .field("disk", &self.disk_status())
            .field("stats", &self.stats())
            .finish()
    }
}

/// The cache folder the environment asks for, or why there is none.
pub fn default_dir() -> std::result::Result<PathBuf, String> {
    if let Some(v) = std::env::var_os(DIR_ENV) {
        if v.is_empty() || v == "off" {
            return Err(format!("disabled by {DIR_ENV}={}", v.to_string_lossy()));
        }
        return Ok(PathBuf::from(v));
    }
    let abs = |v: std::ffi::OsString| {
        let p = PathBuf::from(v);
        p.is_absolute().then_some(p)
    };
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").and_then(abs) {
        return Ok(p.join("cuda-rs").join("kernels"));
    }
    if cfg!(windows) {
        if let Some(p) = std::env::var_os("LOCALAPPDATA").and_then(abs) {
            return Ok(p.join("cuda-rs").join("kernels"));
        }
    }
    if let Some(p) = std::env::var_os("HOME").and_then(abs) {
        return Ok(p.join(".cache").join("cuda-rs").join("kernels"));
    }
    Err("neither XDG_CACHE_HOME nor HOME is set".into())
}

fn default_max_bytes() -> u64 {
    std::env::var(MAX_MB_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_MAX_MB)
        .saturating_mul(1 << 20)
}

impl KernelCache {
    /// A cache in `dir` (created when first written) holding at most `max_bytes` there.
    pub fn with_dir(dir: impl Into<PathBuf>, max_bytes: u64) -> KernelCache {
        let dir = dir.into();
        // Its compiler record can name the compiler for every kernel of the process.
        compiler::register_dir(&dir);
        KernelCache {
            memory: Mutex::new(HashMap::new()),
            disk: Some(DiskCache::new(dir, max_bytes)),
            no_disk_reason: None,
            counters: Counters::default(),
            record_kept: Once::new(),
        }
    }

    /// A cache in memory only.
    pub fn memory_only() -> KernelCache {
        KernelCache {
            memory: Mutex::new(HashMap::new()),
            disk: None,
            no_disk_reason: Some("memory-only cache".into()),
            counters: Counters::default(),
            record_kept: Once::new(),
        }
    }

    /// The cache the environment describes (see the [module docs](self)); without a usable
    /// folder it is memory-only, with one warning.
    pub fn from_env() -> KernelCache {
        match default_dir() {
            Ok(dir) => Self::with_dir(dir, default_max_bytes()),
            Err(why) => {
                if !why.starts_with("disabled") {
                    log::warn!("cuda-stack-jit: no kernel cache folder ({why}); kernels are cached in memory only");
                }
                let mut c = Self::memory_only();
                c.no_disk_reason = Some(why);
                c
            }
        }
    }

    /// The process-wide cache (made from the environment on first use).
    pub fn global() -> Arc<KernelCache> {
        static GLOBAL: OnceLock<Arc<KernelCache>> = OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(Self::from_env())).clone()
    }

    /// Whether the disk layer is in use, where, and why not.
    pub fn disk_status(&self) -> DiskStatus {
        match &self.disk {
            Some(d) => d.status(),
            None => DiskStatus {
                dir: None,
                writable: false,
                problem: self.no_disk_reason.clone(),
                max_bytes: 0,
            },
        }
    }

    /// The folder, if any.
    pub fn dir(&self) -> Option<PathBuf> {
        self.disk.as_ref().map(|d| d.dir().to_path_buf())
    }

    /// The counters so far.
    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            compiles: g(&c.compiles),
            memory_hits: g(&c.memory_hits),
            disk_hits: g(&c.disk_hits),
            disk_writes: g(&c.disk_writes),
            corrupt_entries: g(&c.corrupt_entries),
            evictions: g(&c.evictions),
            uncacheable: g(&c.uncacheable),
            nvrtc_loaded: cuda_stack_driver::cuda_stack_sys::Nvrtc::is_loaded(),
        }
    }

    /// Forgets the in-memory layer (the next lookups go to disk; for tests and benchmarks).
    pub fn clear_memory(&self) {
        self.memory
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The key digest of a request (see the [module docs](self)). Naming the compiler loads
    /// NVRTC only when its record is not found.
    pub fn key(req: &CompileRequest<'_>) -> [u8; 32] {
        key_with(compiler::current().key_part(), req)
    }

    /// The binary for `req`: from memory, else from disk (checked), else compiled with NVRTC
    /// and stored in both. A compile error is NVRTC's log ([`cuda_stack_driver::Error::Compile`]).
    pub fn get_or_compile(
        &self,
        req: &CompileRequest<'_>,
    ) -> Result<Fetched, cuda_stack_driver::Error> {
        let start = Instant::now();
        let key = Self::key(req);
        if let Some(b) = self
            .memory
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            self.counters.memory_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Fetched {
                binary: b.clone(),
                origin: Origin::Memory,
                took: start.elapsed(),
            });
        }
        let reads_files = req
            .options
            .iter()
            .any(|o| o.starts_with("-I") || o.starts_with("--include-path"));
        let disk = if reads_files {
            None
        } else {
            self.disk.as_ref()
        };
        if let Some(d) = disk {
            self.keep_compiler_record(d);
            match d.load(&key) {
                Lookup::Hit(kind, bytes) if kind == req.target.kind() => {
                    self.counters.disk_hits.fetch_add(1, Ordering::Relaxed);
                    let binary = Arc::new(Binary {
                        target: req.target,
                        bytes,
                    });
                    self.remember(key, &binary);
                    return Ok(Fetched {
                        binary,
                        origin: Origin::Disk,
                        took: start.elapsed(),
                    });
                }
                Lookup::Hit(..) | Lookup::Miss => {}
                Lookup::Corrupt(why) => {
                    self.counters
                        .corrupt_entries
                        .fetch_add(1, Ordering::Relaxed);
                    log::warn!(
                        "cuda-stack-jit: cache entry {} is invalid ({why}); recompiling and replacing it",
                        d.path_for(&key).display()
                    );
                }
            }
        }
        let mut options = Vec::with_capacity(req.options.len() + 1);
        options.push(req.target.arch_option());
        options.extend(req.options.iter().cloned());
        let nv_opts = cuda_stack_driver::nvrtc::CompileOptions {
            extra: options,
            ..Default::default()
        };
        self.counters.compiles.fetch_add(1, Ordering::Relaxed);
        let bytes = match req.target {
            Target::Cubin(_) => {
                cuda_stack_driver::nvrtc::compile_cubin(req.name, req.source, &nv_opts)?
            }
            Target::Ptx(_) => {
                cuda_stack_driver::nvrtc::compile_ptx(req.name, req.source, &nv_opts)?.into_bytes()
            }
        };
        // A process that named the compiler from its record checks, now that NVRTC is loaded,
        // that it is that compiler; entries are written only under keys naming the real one.
        if reads_files || (disk.is_some() && !compiler::current().confirmed()) {
            self.counters.uncacheable.fetch_add(1, Ordering::Relaxed);
        } else if let Some(d) = disk {
            if let Some(evicted) = d.store(&key, req.target.kind(), &bytes) {
                self.counters.disk_writes.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .evictions
                    .fetch_add(evicted as u64, Ordering::Relaxed);
            }
        }
        let binary = Arc::new(Binary {
            target: req.target,
            bytes,
        });
        self.remember(key, &binary);
        Ok(Fetched {
            binary,
            origin: Origin::Compiled,
            took: start.elapsed(),
        })
    }

    /// Once per cache: writes the compiler's record into the folder unless it holds it, so the
    /// next process finds it there (a copy when it was read from another folder).
    fn keep_compiler_record(&self, d: &DiskCache) {
        self.record_kept.call_once(|| {
            if let Some((name, bytes)) = compiler::current().record_for(d.dir()) {
                d.store_side(&name, &bytes);
            }
        });
    }

    fn remember(&self, key: [u8; 32], b: &Arc<Binary>) {
        self.memory
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, b.clone());
    }
}

/// The key digest of `req` for the compiler named by `compiler` (its key part).
pub(crate) fn key_with(compiler: &[u8], req: &CompileRequest<'_>) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut field = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    field(b"cuda-stack-jit cache key");
    field(GENERATOR_VERSION.as_bytes());
    field(compiler);
    field(req.target.arch_option().as_bytes());
    field(&(req.options.len() as u64).to_le_bytes());
    for o in req.options {
        field(o.as_bytes());
    }
    field(req.source.as_bytes());
    h.finalize().into()
}
