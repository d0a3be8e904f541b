//! Which NVRTC library file this process would load, found **without loading it**.
//!
//! `cuda-stack-sys` loads NVRTC by trying, in order, the places of
//! [`Nvrtc::search`](cuda_stack_driver::cuda_stack_sys::Nvrtc::search): `$CUDA_NVRTC_PATH`
//! alone when it is set; otherwise the sonames `libnvrtc.so.13`, `.so.12`, `.so` through the
//! system loader, then the same names in `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64` and pip's
//! `nvidia/*/lib` folders. The first that opens wins. This module walks the same list and answers
//! only when it is sure:
//! - a candidate that is a path (it holds a `/`) is the file when it exists, and is skipped when
//!   it does not (the loader fails on it too);
//! - a bare soname is looked up the way glibc's loader looks it up, where that is certain:
//!   neither the executable nor the object that calls the loader names folders of its own
//!   (`DT_RPATH`, `DT_RUNPATH`: then the answer is `None`, the caller loads NVRTC) and no library
//!   of that stem is on the loader's list of loaded objects yet (read from the loader,
//!   [`super::dynamic_loader`]); then the first folder of `$LD_LIBRARY_PATH` (as
//!   the process started; as it is now, if that differs, the answer is `None`) that holds the
//!   file names it; else `/etc/ld.so.cache`'s entry for this machine's architecture (one
//!   existing file, or `None` when there are several); else the default system folders
//!   (`/lib`, `/usr/lib`, `/lib64`, `/usr/lib64`, the multiarch ones) when exactly one holds
//!   it. A copy in a hardware-capability subfolder (`glibc-hwcaps/…`; before glibc 2.37 also
//!   the legacy `tls`, `haswell`, …) of a folder searched, which the loader would prefer by
//!   rules this module does not emulate, makes the answer `None`; so does anything it cannot check (another OS or C library, an unreadable
//!   file, a `$` token in `$LD_LIBRARY_PATH`, an unknown cache layout that names the soname).
//!   A soname found nowhere is skipped (the loader fails on it too).
//!
//! A wrong answer would only make a warm process name another compiler than the one it would
//! load; the compiler module checks the answer whenever the process does load NVRTC, and writes
//! nothing to disk under a name it could not confirm.

use super::dynamic_loader;
use std::cell::OnceCell;
use std::ffi::OsString;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The NVRTC file [`Nvrtc::load`](cuda_stack_driver::cuda_stack_sys::Nvrtc::load) would open,
/// canonical, or `None` when only loading it could tell.
pub(crate) fn nvrtc_file() -> Option<PathBuf> {
    use cuda_stack_driver::cuda_stack_sys::{Nvrtc, NVRTC_PATH_VAR};
    let mut loader: Option<Option<SystemLoader>> = None;
    let mut resolve = |soname: &str| {
        loader
            .get_or_insert_with(SystemLoader::inspect)
            .as_ref()
            .map_or(Resolved::Unknown, |l| l.resolve(soname))
    };
    // Unless `$CUDA_NVRTC_PATH` names the file, the search starts with the sonames, in this
    // order; the folders after them (listing Python's site folders: most of a search's time,
    // which a warm process pays before its first call) are needed only when the system loader
    // finds none of them.
    let explicit = std::env::var_os(NVRTC_PATH_VAR).is_some_and(|p| !p.is_empty());
    if !explicit {
        let sonames: Vec<&Path> = SONAMES.iter().map(Path::new).collect();
        let mut all_absent = true;
        let found = predict(&sonames, &mut |s| {
            let r = resolve(s);
            all_absent &= r == Resolved::Absent;
            r
        });
        if found.is_some() || !all_absent {
            return found;
        }
    }
    let search = Nvrtc::search();
    let paths: Vec<&Path> = search
        .candidates()
        .iter()
        .map(|c| c.path.as_path())
        .collect();
    predict(&paths, &mut resolve)
}

/// The sonames `Nvrtc::search` puts first, in its order (a test checks they still are).
const SONAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// Where the system loader would find a soname.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// Nowhere: `dlopen` fails on it and the search goes on.
    Absent,
    /// This file.
    At(PathBuf),
    /// Only loading it could tell.
    Unknown,
}

/// Whether `dlopen` treats `p` as a path (it holds a `/`) rather than a soname to search for.
fn is_path(p: &Path) -> bool {
    p.parent().is_some_and(|d| !d.as_os_str().is_empty())
}

/// The file the first openable candidate of `candidates` names, given `resolve(soname)`: where
/// the system loader would find a bare soname. `None` when a soname whose resolution is
/// [`Resolved::Unknown`] comes first, or no candidate exists.
pub(crate) fn predict(
    candidates: &[&Path],
    resolve: &mut dyn FnMut(&str) -> Resolved,
) -> Option<PathBuf> {
    for p in candidates {
        if is_path(p) {
            if p.is_file() {
                return fs::canonicalize(p).ok();
            }
            continue; // missing or not a file: the loader fails on it and goes on
        }
        match resolve(p.to_str()?) {
            Resolved::Absent => {}
            Resolved::At(file) => return fs::canonicalize(file).ok(),
            Resolved::Unknown => return None,
        }
    }
    None
}

/// What the system loader would search for a soname, gathered once.
struct SystemLoader {
    /// File names of the objects the loader has loaded into this process.
    mapped: Vec<String>,
    /// `$LD_LIBRARY_PATH`'s folders, in order (as the process started).
    ld_path: Vec<PathBuf>,
    /// The default system folders.
    defaults: Vec<PathBuf>,
    /// `/etc/ld.so.cache`, read when a soname first gets that far (empty when there is none;
    /// `None` when it could not be read).
    ld_cache: OnceCell<Option<Vec<u8>>>,
    /// The `flags` of this machine's architecture in the cache's entries (`0x0300` for
    /// x86-64, `0x0a00` for AArch64; the low byte says the C library).
    arch_flags: u32,
    /// Whether the loader also searches the legacy hardware-capability subfolders (glibc
    /// before 2.37).
    legacy_hwcaps: bool,
}

/// Legacy hardware-capability subfolders (glibc before 2.37 searched them below each folder).
const LEGACY_HWCAP_DIRS: &[&str] = &[
    "tls", "haswell", "xeon_phi", "avx512_1", "x86_64", "aarch64", "atomics",
];

impl SystemLoader {
    /// `None` when the loader's search cannot be reasoned about here.
    fn inspect() -> Option<SystemLoader> {
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            return None;
        }
        let (multiarch, arch_flags) = match std::env::consts::ARCH {
            "x86_64" => ("x86_64-linux-gnu", 0x0300),
            "aarch64" => ("aarch64-linux-gnu", 0x0a00),
            _ => return None,
        };
        let objects = dynamic_loader::loaded_objects()?;
        let mapped: Vec<String> = objects
            .iter()
            .filter_map(|o| o.file_name().map(String::from))
            .collect();
        // Folders of the executable and of the object calling dlopen (libloading, linked where
        // cuda-stack-sys is: usually the executable itself) come first for a soname: refuse
        // to guess when either has any. The executable is read through `/proc/self/exe`.
        if has_own_search_path(Path::new("/proc/self/exe"))? {
            return None;
        }
        let load = cuda_stack_driver::cuda_stack_sys::Nvrtc::load as *const ();
        let caller = objects.iter().find(|o| o.contains(load as usize))?;
        if let Some(path) = &caller.path {
            // A relative name would be read against the working folder: refuse to guess.
            if !path.is_absolute() || has_own_search_path(path)? {
                return None;
            }
        }
        // The loader read the variable as the process started; a value changed since would be
        // what a library reading the environment sees, so the two must agree.
        let (at_start, now) = (
            startup_env("LD_LIBRARY_PATH"),
            std::env::var_os("LD_LIBRARY_PATH"),
        );
        if cfg!(unix) && at_start != now {
            return None;
        }
        let mut ld_path: Vec<PathBuf> = Vec::new();
        if let Some(value) = now {
            let value = value.into_string().ok()?;
            for d in value.split([':', ';']) {
                if d.contains('$') {
                    return None; // $ORIGIN, $LIB, $PLATFORM: expanded by the loader
                }
                ld_path.push(PathBuf::from(if d.is_empty() { "." } else { d }));
            }
        }
        let mut defaults: Vec<PathBuf> = ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
            .iter()
            .map(PathBuf::from)
            .collect();
        defaults.push(Path::new("/lib").join(multiarch));
        defaults.push(Path::new("/usr/lib").join(multiarch));
        Some(SystemLoader {
            mapped,
            ld_path,
            defaults,
            ld_cache: OnceCell::new(),
            arch_flags,
            legacy_hwcaps: dynamic_loader::searches_legacy_hwcap_dirs(),
        })
    }

    /// The loader's cache, read on first use (see [`SystemLoader::ld_cache`]).
    fn ld_cache(&self) -> Option<&[u8]> {
        self.ld_cache
            .get_or_init(|| match fs::read("/etc/ld.so.cache") {
                Ok(b) => Some(b),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Vec::new()),
                Err(_) => None,
            })
            .as_deref()
    }

    /// Where the loader would find `soname` (see the module docs for the order).
    fn resolve(&self, soname: &str) -> Resolved {
        let stem = soname.find(".so").map_or(soname, |i| &soname[..i + 3]);
        if self.mapped.iter().any(|m| m.starts_with(stem)) {
            return Resolved::Unknown;
        }
        // A copy in a hardware-capability subfolder would be preferred by rules not emulated.
        let depth = if self.legacy_hwcaps { 3 } else { 0 };
        let in_subfolder = |d: &Path| {
            let mut dirs = Vec::new();
            with_hwcap_dirs(d, depth, &mut dirs);
            dirs.iter().skip(1).any(|s| s.join(soname).exists())
        };
        for d in &self.ld_path {
            if in_subfolder(d) {
                return Resolved::Unknown;
            }
            if d.join(soname).is_file() {
                return Resolved::At(d.join(soname));
            }
        }
        let Some(ld_cache) = self.ld_cache() else {
            return Resolved::Unknown;
        };
        match ld_cache_lookup(ld_cache, soname.as_bytes(), self.arch_flags) {
            CacheLookup::Unknown => return Resolved::Unknown,
            CacheLookup::Paths(paths) => {
                let mut files: Vec<PathBuf> = paths
                    .iter()
                    .filter_map(|p| fs::canonicalize(p).ok())
                    .filter(|p| p.is_file())
                    .collect();
                files.dedup();
                match files.len() {
                    0 => {} // stale entries: the loader fails on them and goes on
                    1 => return Resolved::At(files.remove(0)),
                    _ => return Resolved::Unknown,
                }
            }
            CacheLookup::NotThere => {}
        }
        let mut found: Vec<PathBuf> = Vec::new();
        for d in &self.defaults {
            if in_subfolder(d) {
                return Resolved::Unknown;
            }
            if let Ok(f) = fs::canonicalize(d.join(soname)) {
                if f.is_file() && !found.contains(&f) {
                    found.push(f);
                }
            }
        }
        match found.len() {
            0 => Resolved::Absent,
            1 => Resolved::At(found.remove(0)),
            _ => Resolved::Unknown,
        }
    }
}

/// `dir` (when it exists) and the hardware-capability subfolders below it that exist.
fn with_hwcap_dirs(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    if !dir.is_dir() || out.iter().any(|d| d == dir) {
        return;
    }
    out.push(dir.to_path_buf());
    if let Ok(rd) = fs::read_dir(dir.join("glibc-hwcaps")) {
        out.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    if depth > 0 {
        for sub in LEGACY_HWCAP_DIRS {
            with_hwcap_dirs(&dir.join(sub), depth - 1, out);
        }
    }
}

/// What the loader's cache says about a soname.
#[derive(Debug, PartialEq, Eq)]
enum CacheLookup {
    /// No entry.
    NotThere,
    /// The files of this architecture's entries for it (maybe none that exist).
    Paths(Vec<PathBuf>),
    /// A layout this module does not read that names it, or an entry of another architecture
    /// only.
    Unknown,
}

/// `soname`'s entries in the loader's cache (the bytes of `/etc/ld.so.cache`) whose flags are
/// of `arch_flags`' architecture: in glibc's format (`glibc-ld.so.cache1.1` at the start, as
/// ldconfig writes it since glibc 2.32) each entry's key and value (the file) are read; in any
/// other layout, a cache in which the name followed by its NUL occurs anywhere is
/// [`CacheLookup::Unknown`] (only "nowhere" is a sure no).
fn ld_cache_lookup(cache: &[u8], soname: &[u8], arch_flags: u32) -> CacheLookup {
    const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    const HEAD: usize = 48;
    const ENTRY: usize = 24;
    let u32_at = |at: usize| -> Option<usize> {
        let b = cache.get(at..at.checked_add(4)?)?;
        Some(u32::from_ne_bytes(b.try_into().ok()?) as usize)
    };
    let string_at = |at: usize| -> Option<&[u8]> {
        let tail = cache.get(at..)?;
        Some(&tail[..tail.iter().position(|&b| b == 0)?])
    };
    let entries = || -> Option<CacheLookup> {
        if !cache.starts_with(MAGIC) {
            return None;
        }
        let mut paths = Vec::new();
        let mut other_arch = false;
        for i in 0..u32_at(20)? {
            let at = HEAD.checked_add(i.checked_mul(ENTRY)?)?;
            if string_at(u32_at(at.checked_add(4)?)?)? != soname {
                continue;
            }
            let flags = u32_at(at)? as u32;
            if flags & 0xff00 != arch_flags {
                other_arch = true;
                continue;
            }
            let value = string_at(u32_at(at.checked_add(8)?)?)?;
            paths.push(PathBuf::from(std::str::from_utf8(value).ok()?));
        }
        Some(match (paths.is_empty(), other_arch) {
            (true, false) => CacheLookup::NotThere,
            (true, true) => CacheLookup::Unknown,
            (false, _) => CacheLookup::Paths(paths),
        })
    };
    entries().unwrap_or_else(|| {
        let mut needle = soname.to_vec();
        needle.push(0);
        if cache.windows(needle.len()).any(|w| w == needle) {
            CacheLookup::Unknown
        } else {
            CacheLookup::NotThere
        }
    })
}

/// A variable of the environment this process started with (`/proc/self/environ`), which is
/// what the loader read.
#[cfg(unix)]
fn startup_env(name: &str) -> Option<OsString> {
    use std::os::unix::ffi::OsStringExt;
    // One read into a buffer of the usual size (`fs::read` of a /proc file, which reports no
    // size, grows its buffer from 32 bytes, one read per doubling).
    let mut env = Vec::with_capacity(64 << 10);
    fs::File::open("/proc/self/environ")
        .and_then(|mut f| f.read_to_end(&mut env))
        .ok()?;
    let prefix = format!("{name}=");
    env.split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| OsString::from_vec(v.to_vec()))
}

#[cfg(not(unix))]
fn startup_env(_name: &str) -> Option<OsString> {
    None
}

/// One line of `/proc/self/maps`.
pub(crate) struct MapEntry<'a> {
    /// The file's inode (0 for anonymous memory).
    pub(crate) inode: u64,
    /// The file's path (may end in ` (deleted)`); empty for anonymous memory.
    pub(crate) path: &'a str,
}

/// The lines of a `/proc/self/maps` text that map a file.
pub(crate) fn map_entries(maps: &str) -> impl Iterator<Item = MapEntry<'_>> {
    maps.lines().filter_map(|line| {
        let mut rest = line;
        let mut fields = [""; 5];
        for f in &mut fields {
            rest = rest.trim_start();
            let end = rest.find(' ').unwrap_or(rest.len());
            *f = &rest[..end];
            rest = &rest[end..];
        }
        let path = rest.trim();
        fields[0].split_once('-')?; // an address range: a mapping line
        Some(MapEntry {
            inode: fields[4].parse().ok()?,
            path,
        })
        .filter(|e| e.path.starts_with('/'))
    })
}

fn le(b: &[u8], at: usize, n: usize) -> Option<u64> {
    let bytes = b.get(at..at.checked_add(n)?)?;
    Some(bytes.iter().rev().fold(0u64, |v, &x| (v << 8) | x as u64))
}

/// Whether the 64-bit little-endian ELF object at `path` has `DT_RPATH` or `DT_RUNPATH`; `None`
/// when it cannot be read as one.
pub(crate) fn has_own_search_path(path: &Path) -> Option<bool> {
    const PT_DYNAMIC: u64 = 2;
    const DT_RPATH: u64 = 15;
    const DT_RUNPATH: u64 = 29;
    let mut f = fs::File::open(path).ok()?;
    let mut h = [0u8; 64];
    f.read_exact(&mut h).ok()?;
    if h[..4] != *b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return None;
    }
    let phoff = le(&h, 0x20, 8)?;
    let phentsize = le(&h, 0x36, 2)? as usize;
    let phnum = le(&h, 0x38, 2)? as usize;
    if phentsize < 56 || phnum > 4096 {
        return None;
    }
    let mut ph = vec![0u8; phentsize * phnum];
    f.seek(SeekFrom::Start(phoff)).ok()?;
    f.read_exact(&mut ph).ok()?;
    for p in ph.chunks_exact(phentsize) {
        if le(p, 0, 4)? != PT_DYNAMIC {
            continue;
        }
        let (offset, size) = (le(p, 8, 8)?, le(p, 32, 8)?);
        if size > 1 << 20 {
            return None;
        }
        let mut dynamic = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(offset)).ok()?;
        f.read_exact(&mut dynamic).ok()?;
        for d in dynamic.chunks_exact(16) {
            match le(d, 0, 8)? {
                0 => break, // DT_NULL
                DT_RPATH | DT_RUNPATH => return Some(true),
                _ => {}
            }
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp_dir(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "cuda-stack-jit-locate-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_first_existing_file_after_sonames_the_loader_cannot_find() {
        let d = tmp_dir("predict");
        let lib = d.join("libnvrtc.so.13");
        fs::write(&lib, b"not really a library").unwrap();
        let missing = d.join("missing/libnvrtc.so.13");
        let cands = [
            Path::new("libnvrtc.so.13"),
            Path::new("libnvrtc.so"),
            missing.as_path(),
            lib.as_path(),
        ];
        let mut asked = Vec::new();
        let got = predict(&cands, &mut |s| {
            asked.push(s.to_string());
            Resolved::Absent
        });
        assert_eq!(got, Some(fs::canonicalize(&lib).unwrap()));
        assert_eq!(asked, ["libnvrtc.so.13", "libnvrtc.so"]);
        // A soname only loading could resolve comes first: `None`.
        let unknown = |s: &str| {
            if s == "libnvrtc.so" {
                Resolved::Unknown
            } else {
                Resolved::Absent
            }
        };
        assert_eq!(predict(&cands, &mut { unknown }), None);
        // A soname the loader resolves to a file names that file.
        let other = d.join("other.so");
        fs::write(&other, b"x").unwrap();
        let at = |s: &str| {
            if s == "libnvrtc.so.13" {
                Resolved::At(d.join("other.so"))
            } else {
                Resolved::Absent
            }
        };
        assert_eq!(
            predict(&cands, &mut { at }),
            Some(fs::canonicalize(&other).unwrap())
        );
        // No candidate found anywhere: nothing to name.
        let none = [Path::new("libnvrtc.so.13"), missing.as_path()];
        assert_eq!(predict(&none, &mut |_| Resolved::Absent), None);
        // An explicit path ($CUDA_NVRTC_PATH) alone.
        assert_eq!(predict(&[lib.as_path()], &mut |_| Resolved::Unknown), got);
    }

    #[test]
    fn the_search_starts_with_these_sonames() {
        let env = |k: &str| match k {
            "HOME" => Some(std::ffi::OsString::from("/nonexistent")),
            _ => None,
        };
        let search = cuda_stack_driver::cuda_stack_sys::Nvrtc::search_with(&env);
        let first: Vec<&Path> = search
            .candidates()
            .iter()
            .take(SONAMES.len())
            .map(|c| c.path.as_path())
            .collect();
        let want: Vec<&Path> = SONAMES.iter().map(Path::new).collect();
        assert_eq!(first, want);
    }

    #[test]
    fn maps_lines_are_parsed_with_spaces_in_paths() {
        let maps = "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/a b\n\
                    7ffd1000-7ffd2000 rw-p 00000000 00:00 0          [stack]\n\
                    7f00-7f10 r--p 00000000 00:00 0 \n";
        let e: Vec<_> = map_entries(maps).collect();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].inode, 173521);
        assert_eq!(e[0].path, "/usr/bin/a b");
    }

    #[test]
    fn elf_search_paths_are_read() {
        // This test binary: cargo sets no rpath by default.
        if cfg!(all(
            target_os = "linux",
            target_endian = "little",
            target_pointer_width = "64"
        )) {
            let exe = std::env::current_exe().unwrap();
            assert_eq!(has_own_search_path(&exe), Some(false));
        }
        let d = tmp_dir("elf");
        fs::write(d.join("x"), b"\x7fELF short").unwrap();
        assert_eq!(has_own_search_path(&d.join("x")), None);
        assert_eq!(has_own_search_path(&d.join("absent")), None);
    }

    #[test]
    fn the_loader_cache_is_read() {
        // glibc's layout: header, entries (flags, key, value, osversion, hwcap), strings.
        let strings = b"libfoo.so.1\0/usr/lib/libfoo.so.1\0";
        let mut c = b"glibc-ld.so.cache1.1".to_vec();
        c.extend_from_slice(&1u32.to_ne_bytes()); // nlibs
        c.extend_from_slice(&(strings.len() as u32).to_ne_bytes());
        c.resize(48, 0);
        let base = (48 + 24) as u32;
        for v in [0x0303u32, base, base + 12, 0] {
            c.extend_from_slice(&v.to_ne_bytes());
        }
        c.extend_from_slice(&0u64.to_ne_bytes());
        c.extend_from_slice(strings);
        let look = |c: &[u8], name: &[u8]| ld_cache_lookup(c, name, 0x0300);
        assert_eq!(
            look(&c, b"libfoo.so.1"),
            CacheLookup::Paths(vec![PathBuf::from("/usr/lib/libfoo.so.1")])
        );
        assert_eq!(look(&c, b"libnvrtc.so.13"), CacheLookup::NotThere);
        // The value (a path ending in another name) is not a key.
        assert_eq!(look(&c, b"lib/libfoo.so.1"), CacheLookup::NotThere);
        // An entry of another architecture only (AArch64 flags here): only loading can tell.
        assert_eq!(
            ld_cache_lookup(&c, b"libfoo.so.1", 0x0a00),
            CacheLookup::Unknown
        );
        // A layout it does not know: any occurrence is Unknown.
        let mut other = b"ld.so-1.7.0\0".to_vec();
        other.extend_from_slice(b"/x/libnvrtc.so.13\0");
        assert_eq!(look(&other, b"libnvrtc.so.13"), CacheLookup::Unknown);
        assert_eq!(look(&other, b"libnvrtc.so.12"), CacheLookup::NotThere);
        // A truncated file of the known layout: read as unknown, so any occurrence counts.
        assert_eq!(
            look(&c[..c.len() - 5], b"libfoo.so.1"),
            CacheLookup::Unknown
        );
        assert_eq!(look(&c[..50], b"libfoo.so.1"), CacheLookup::NotThere);
        // This machine's own cache names its C library, if it has one.
        if let Ok(real) = fs::read("/etc/ld.so.cache") {
            if cfg!(all(
                target_os = "linux",
                target_env = "gnu",
                target_arch = "x86_64"
            )) {
                assert!(matches!(
                    look(&real, b"libc.so.6"),
                    CacheLookup::Paths(p) if !p.is_empty()
                ));
            }
        }
    }

    #[test]
    fn hwcap_subfolders_are_searched() {
        let d = tmp_dir("hwcap");
        fs::create_dir_all(d.join("glibc-hwcaps/x86-64-v3")).unwrap();
        fs::create_dir_all(d.join("tls/haswell")).unwrap();
        let mut dirs = Vec::new();
        with_hwcap_dirs(&d, 3, &mut dirs);
        for sub in ["", "glibc-hwcaps/x86-64-v3", "tls", "tls/haswell"] {
            let want = if sub.is_empty() {
                d.clone()
            } else {
                d.join(sub)
            };
            assert!(dirs.contains(&want), "{sub}: {dirs:?}");
        }
        let l = SystemLoader {
            mapped: vec!["libc.so.6".into()],
            ld_path: vec![d.join("empty"), d.clone()],
            defaults: vec![],
            ld_cache: OnceCell::from(Some(
                b"ld.so-1.7.0\0libfoo.so.1\0/usr/lib/libfoo.so.1\0".to_vec(),
            )),
            arch_flags: 0x0300,
            legacy_hwcaps: true,
        };
        assert_eq!(l.resolve("libnvrtc.so.13"), Resolved::Absent);
        assert_eq!(
            l.resolve("libfoo.so.1"),
            Resolved::Unknown,
            "an unknown cache layout"
        );
        assert_eq!(l.resolve("libc.so.6"), Resolved::Unknown, "already mapped");
        fs::write(d.join("libnvrtc.so.13"), b"").unwrap();
        assert_eq!(
            l.resolve("libnvrtc.so.13"),
            Resolved::At(d.join("libnvrtc.so.13")),
            "the first $LD_LIBRARY_PATH folder that has it"
        );
        fs::write(d.join("tls/haswell/libnvrtc.so.13"), b"").unwrap();
        assert_eq!(
            l.resolve("libnvrtc.so.13"),
            Resolved::Unknown,
            "in a legacy hwcap folder"
        );
        // glibc 2.37 and later no longer search the legacy folders: the copy there is moot.
        let l = SystemLoader {
            legacy_hwcaps: false,
            ..l
        };
        assert_eq!(
            l.resolve("libnvrtc.so.13"),
            Resolved::At(d.join("libnvrtc.so.13")),
            "legacy folders unsearched"
        );
        fs::write(d.join("glibc-hwcaps/x86-64-v3/libnvrtc.so.13"), b"").unwrap();
        assert_eq!(
            l.resolve("libnvrtc.so.13"),
            Resolved::Unknown,
            "in a glibc-hwcaps folder"
        );
    }
}
