//! The compiler a cache key names, found without loading it.
//!
//! Every key names the NVRTC that produced (or would produce) the binary: the **identity** of its
//! library file (canonical path, size, modification time in nanoseconds, inode and device: what
//! `stat` says, as ccache identifies a compiler) and the **version** NVRTC reports. Choosing
//! the target also needs the architectures NVRTC supports. Version and architectures are what
//! NVRTC reports about one file, so the cache keeps them beside its entries in a small record
//! named by the identity's digest (`compiler-<64 hex digits>`, see [`encode_record`]), written
//! atomically and checksummed like the entries.
//!
//! A process's first lookup resolves the compiler once:
//! 1. the file NVRTC would be loaded from, predicted without loading it ([`super::locate`]),
//!    and its identity (one `stat`);
//! 2. that identity's record, in the folder of any cache this process made so far or the
//!    folder the environment names: found, the compiler is known, and **NVRTC is not loaded**
//!    (a warm hit then costs the search's `stat`s, a small read and the entry);
//! 3. otherwise (no record, a corrupt one, or a file that cannot be predicted) NVRTC is loaded
//!    and asked, and the identity is taken from the file actually loaded (checked against the
//!    inode mapped into this process); caches write the record into their folders.
//!
//! When a process that resolved the compiler from a record later loads NVRTC (to compile a
//! miss), it checks that the loaded library is the file and version its keys name; if not (the
//! file was replaced meanwhile, or the prediction was wrong) nothing more is written to disk
//! under those keys, with one warning.

use super::locate;
use sha2::{Digest, Sha256};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::UNIX_EPOCH;

/// A library file, named by its canonical path and what `stat` says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// Canonical path (symbolic links resolved).
    pub(crate) path: PathBuf,
    /// Size in bytes.
    pub(crate) len: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub(crate) mtime_ns: i128,
    /// Inode number (0 where there is none).
    pub(crate) ino: u64,
    /// Device number (0 where there is none).
    pub(crate) dev: u64,
}

impl Identity {
    /// The identity of the file `path` names (following links).
    pub(crate) fn of(path: &Path) -> io::Result<Identity> {
        let path = fs::canonicalize(path)?;
        let m = fs::metadata(&path)?;
        if !m.is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a file"));
        }
        let mtime_ns = match m.modified()?.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        };
        #[cfg(unix)]
        let (ino, dev) = {
            use std::os::unix::fs::MetadataExt;
            (m.ino(), m.dev())
        };
        #[cfg(not(unix))]
        let (ino, dev) = (0, 0);
        Ok(Identity {
            path,
            len: m.len(),
            mtime_ns,
            ino,
            dev,
        })
    }

    /// The SHA-256 digest naming it in keys and record names.
    pub(crate) fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        let mut field = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        field(b"cuda-stack-jit compiler identity");
        field(self.path.as_os_str().as_encoded_bytes());
        field(&self.len.to_le_bytes());
        field(&self.mtime_ns.to_le_bytes());
        field(&self.ino.to_le_bytes());
        field(&self.dev.to_le_bytes());
        h.finalize().into()
    }
}

/// What NVRTC reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reported {
    /// `nvrtcVersion`, when it said.
    pub(crate) version: Option<(i32, i32)>,
    /// `nvrtcGetSupportedArchs`, increasing.
    pub(crate) archs: Vec<u32>,
}

impl Reported {
    fn version_string(&self) -> String {
        match self.version {
            Some((a, b)) => format!("{a}.{b}"),
            None => "unknown".into(),
        }
    }
}

const RECORD_MAGIC: &[u8; 8] = b"CUJITNV1";
/// Bytes before the architectures.
const RECORD_HEAD: usize = 56;
const MAX_ARCHS: usize = 4096;

/// The file name of the record of the identity whose digest is `digest`.
pub(crate) fn record_name(digest: &[u8; 32]) -> String {
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("compiler-{hex}")
}

/// A record's bytes:
///
/// ```text
/// 0..8      magic  b"CUJITNV1"
/// 8..40     the identity digest it is about
/// 40        1 when a version follows, else 0
/// 41..44    zero
/// 44..52    major, minor (little-endian i32)
/// 52..56    number of architectures n (little-endian u32)
/// 56..      n architectures (little-endian u32)
/// then      SHA-256 of everything before
/// ```
pub(crate) fn encode_record(digest: &[u8; 32], r: &Reported) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_HEAD + 4 * r.archs.len() + 32);
    out.extend_from_slice(RECORD_MAGIC);
    out.extend_from_slice(digest);
    out.push(r.version.is_some() as u8);
    out.extend_from_slice(&[0; 3]);
    let (major, minor) = r.version.unwrap_or((0, 0));
    out.extend_from_slice(&major.to_le_bytes());
    out.extend_from_slice(&minor.to_le_bytes());
    out.extend_from_slice(&(r.archs.len() as u32).to_le_bytes());
    for a in &r.archs {
        out.extend_from_slice(&a.to_le_bytes());
    }
    let sum: [u8; 32] = Sha256::digest(&out).into();
    out.extend_from_slice(&sum);
    out
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// What a record written for `digest` says, or why `bytes` are not a valid one.
pub(crate) fn decode_record(bytes: &[u8], digest: &[u8; 32]) -> Result<Reported, String> {
    if bytes.len() < RECORD_HEAD + 32 {
        return Err(format!("{} bytes, shorter than a record", bytes.len()));
    }
    if &bytes[..8] != RECORD_MAGIC {
        return Err("not a compiler record of this format (bad magic)".into());
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    if Sha256::digest(body)[..] != *sum {
        return Err("checksum mismatch (torn or corrupted)".into());
    }
    if &body[8..40] != digest {
        return Err("written for another compiler".into());
    }
    let n = u32_at(body, 52).ok_or("no architecture count")? as usize;
    if n > MAX_ARCHS || body.len() != RECORD_HEAD + 4 * n {
        return Err(format!("{n} architectures do not fit {} bytes", body.len()));
    }
    let version = match body[40] {
        0 => None,
        1 => Some((
            u32_at(body, 44).ok_or("no major")? as i32,
            u32_at(body, 48).ok_or("no minor")? as i32,
        )),
        v => return Err(format!("bad version flag {v}")),
    };
    let archs = (0..n)
        .map(|i| u32_at(body, RECORD_HEAD + 4 * i).ok_or("short architectures"))
        .collect::<Result<Vec<u32>, _>>()?;
    Ok(Reported { version, archs })
}

/// What a folder holds for an identity.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RecordLookup {
    Hit(Reported),
    Miss,
    /// A record is there but invalid (why): a miss, to be replaced.
    Corrupt(String),
}

/// Reads the record of `digest` in `dir`.
pub(crate) fn read_record(dir: &Path, digest: &[u8; 32]) -> RecordLookup {
    match fs::read(dir.join(record_name(digest))) {
        // Missing, unreadable, or no folder: all misses.
        Err(_) => RecordLookup::Miss,
        Ok(b) => match decode_record(&b, digest) {
            Ok(r) => RecordLookup::Hit(r),
            Err(why) => RecordLookup::Corrupt(why),
        },
    }
}

/// What loading NVRTC told.
pub(crate) struct Loaded {
    /// Its version and architectures.
    pub(crate) reported: Result<Reported, cuda_stack_driver::Error>,
    /// The file actually loaded, when it can be told.
    pub(crate) identity: Option<Identity>,
}

/// The compiler this process's keys name.
#[derive(Debug)]
pub(crate) struct Compiler {
    identity: Option<Identity>,
    digest: Option<[u8; 32]>,
    reported: Result<Reported, cuda_stack_driver::Error>,
    /// The folder whose record told `reported` (NVRTC was not loaded for it).
    record_dir: Option<PathBuf>,
    key_part: Vec<u8>,
    /// Whether this process's NVRTC is the compiler named (known at once when NVRTC was
    /// loaded to resolve it; otherwise checked when a compile loads it).
    confirmed: OnceLock<bool>,
}

impl Compiler {
    fn new(
        identity: Option<Identity>,
        reported: Result<Reported, cuda_stack_driver::Error>,
        record_dir: Option<PathBuf>,
    ) -> Compiler {
        let digest = identity.as_ref().map(Identity::digest);
        let version = reported
            .as_ref()
            .map_or_else(|_| "unknown".into(), Reported::version_string);
        let file = digest.map_or_else(
            || "unknown".to_string(),
            |d| d.iter().map(|b| format!("{b:02x}")).collect(),
        );
        let confirmed = OnceLock::new();
        if record_dir.is_none() {
            let _ = confirmed.set(true);
        }
        Compiler {
            identity,
            digest,
            reported,
            record_dir,
            key_part: format!("nvrtc {version}; file {file}").into_bytes(),
            confirmed,
        }
    }

    /// The bytes the key hashes for the compiler: its version and its file's identity digest.
    pub(crate) fn key_part(&self) -> &[u8] {
        &self.key_part
    }

    /// The architectures NVRTC supports (the error when it could not be loaded).
    pub(crate) fn archs(&self) -> Result<&[u32], cuda_stack_driver::Error> {
        self.reported
            .as_ref()
            .map(|r| r.archs.as_slice())
            .map_err(Clone::clone)
    }

    /// NVRTC's version, `"13.0"` (or `"unknown"`).
    pub(crate) fn version_string(&self) -> String {
        self.reported
            .as_ref()
            .map_or_else(|_| "unknown".into(), Reported::version_string)
    }

    /// Whether the version and architectures came from a record (NVRTC was not loaded).
    #[cfg(test)]
    pub(crate) fn is_from_record(&self) -> bool {
        self.record_dir.is_some()
    }

    /// The record to keep in `dir` (file name and bytes), unless there is none to keep (the
    /// file is unknown, NVRTC did not load) or it was read from there.
    pub(crate) fn record_for(&self, dir: &Path) -> Option<(String, Vec<u8>)> {
        let (digest, reported) = (self.digest.as_ref()?, self.reported.as_ref().ok()?);
        if self.record_dir.as_deref() == Some(dir) {
            return None;
        }
        if read_record(dir, digest) == RecordLookup::Hit(reported.clone()) {
            return None;
        }
        Some((record_name(digest), encode_record(digest, reported)))
    }

    /// After this process loaded NVRTC (a compile): whether it is the compiler the keys name.
    /// Checked once; a mismatch is logged once.
    pub(crate) fn confirmed(&self) -> bool {
        *self.confirmed.get_or_init(|| {
            let Ok(r) = &self.reported else { return false };
            let version = cuda_stack_driver::nvrtc::version().ok().flatten();
            let loaded = loaded_identity();
            let same = version == r.version && loaded == self.identity;
            if !same {
                log::warn!(
                    "cuda-stack-jit: the NVRTC loaded ({}, version {version:?}) is not the one \
                     the kernel cache's keys name ({}, version {:?}); kernels compiled by this \
                     process are not written to the disk cache",
                    loaded.map_or("file unknown".into(), |i| i.path.display().to_string()),
                    self.identity
                        .as_ref()
                        .map_or("file unknown".into(), |i| i.path.display().to_string()),
                    r.version
                );
            }
            same
        })
    }
}

/// Resolves the compiler: the record of `located`'s identity in one of `dirs`, else `load()`.
pub(crate) fn resolve(
    located: Option<&Path>,
    dirs: &[PathBuf],
    load: &dyn Fn() -> Loaded,
) -> Compiler {
    let predicted = located.and_then(|p| Identity::of(p).ok());
    if let Some(id) = &predicted {
        let digest = id.digest();
        for dir in dirs {
            match read_record(dir, &digest) {
                RecordLookup::Hit(r) => {
                    return Compiler::new(Some(id.clone()), Ok(r), Some(dir.clone()))
                }
                RecordLookup::Miss => {}
                RecordLookup::Corrupt(why) => log::warn!(
                    "cuda-stack-jit: compiler record {} is invalid ({why}); loading NVRTC and \
                     replacing it",
                    dir.join(record_name(&digest)).display()
                ),
            }
        }
    } else {
        log::debug!(
            "cuda-stack-jit: the NVRTC file cannot be told without loading it; loading NVRTC to \
             name the compiler in cache keys"
        );
    }
    let loaded = load();
    if let (Some(p), Some(l)) = (&predicted, &loaded.identity) {
        if p != l {
            log::warn!(
                "cuda-stack-jit: NVRTC was expected at {} but {} was loaded; cache keys name \
                 the loaded one",
                p.path.display(),
                l.path.display()
            );
        }
    }
    Compiler::new(loaded.identity, loaded.reported, None)
}

/// Loads NVRTC and asks it.
fn load_nvrtc() -> Loaded {
    let reported = cuda_stack_driver::nvrtc::version().and_then(|version| {
        Ok(Reported {
            version,
            archs: cuda_stack_driver::nvrtc::supported_archs()?,
        })
    });
    Loaded {
        reported,
        identity: loaded_identity(),
    }
}

/// The identity of the NVRTC file this process loaded, when it is known and is still the file
/// at its path (on Linux: the inode mapped into this process).
fn loaded_identity() -> Option<Identity> {
    let nv = cuda_stack_driver::cuda_stack_sys::Nvrtc::get().ok()?;
    let id = Identity::of(&nv.resolved_path()?).ok()?;
    if cfg!(target_os = "linux") {
        let maps = fs::read_to_string("/proc/self/maps").ok()?;
        let name = id.path.file_name()?;
        let mapped = locate::map_entries(&maps)
            .any(|e| e.inode == id.ino && Path::new(e.path).file_name() == Some(name));
        if !mapped {
            return None;
        }
    }
    Some(id)
}

static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Makes `dir` a place the compiler's record is looked for (every cache folder of the process).
pub(crate) fn register_dir(dir: &Path) {
    let mut d = DIRS.lock().unwrap_or_else(|p| p.into_inner());
    if !d.iter().any(|x| x == dir) {
        d.push(dir.to_path_buf());
    }
}

/// The compiler of this process, resolved on first use (see the module docs).
pub(crate) fn current() -> &'static Compiler {
    static CURRENT: OnceLock<Compiler> = OnceLock::new();
    CURRENT.get_or_init(|| {
        let mut dirs = DIRS.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Ok(d) = super::default_dir() {
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        resolve(locate::nvrtc_file().as_deref(), &dirs, &load_nvrtc)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::disk::DiskCache;
    use crate::cache::{key_with, CompileRequest, Target};
    use std::cell::Cell;
    use std::time::{Duration, SystemTime};

    fn tmp_dir(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "cuda-stack-jit-compiler-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// A fake NVRTC library file.
    fn fake_lib(dir: &Path) -> PathBuf {
        let p = dir.join("libnvrtc.so.13.0.48");
        fs::write(&p, b"pretend this is NVRTC").unwrap();
        p
    }

    fn reported() -> Reported {
        Reported {
            version: Some((13, 0)),
            archs: vec![75, 80, 86, 89, 90, 100, 120],
        }
    }

    fn key_for(c: &Compiler) -> [u8; 32] {
        let src = "extern \"C\" __global__ void k() {}";
        key_with(
            c.key_part(),
            &CompileRequest {
                name: "k.cu",
                source: src,
                options: &[],
                target: Target::Cubin(90),
            },
        )
    }

    fn set_mtime(p: &Path, t: SystemTime) {
        fs::OpenOptions::new()
            .append(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn same_file_same_identity_and_a_link_names_its_target() {
        let d = tmp_dir("same");
        let lib = fake_lib(&d);
        let a = Identity::of(&lib).unwrap();
        assert_eq!(a, Identity::of(&lib).unwrap());
        assert_eq!(a.digest(), Identity::of(&lib).unwrap().digest());
        #[cfg(unix)]
        {
            let link = d.join("libnvrtc.so.13");
            std::os::unix::fs::symlink(&lib, &link).unwrap();
            assert_eq!(Identity::of(&link).unwrap(), a);
        }
        assert!(Identity::of(&d.join("absent")).is_err());
        assert!(Identity::of(&d).is_err(), "a folder is not a library");
    }

    #[test]
    fn touching_or_resizing_the_file_changes_identity_and_key() {
        let d = tmp_dir("change");
        let lib = fake_lib(&d);
        let t0 = SystemTime::now() - Duration::from_secs(100);
        set_mtime(&lib, t0);
        let id0 = Identity::of(&lib).unwrap();
        let key0 = key_for(&Compiler::new(Some(id0.clone()), Ok(reported()), None));
        // The same identity and version give the same key.
        assert_eq!(
            key0,
            key_for(&Compiler::new(Some(id0.clone()), Ok(reported()), None))
        );
        // Touched: a new modification time.
        set_mtime(&lib, t0 + Duration::from_nanos(1500));
        let id1 = Identity::of(&lib).unwrap();
        assert_ne!(id0.digest(), id1.digest());
        let key1 = key_for(&Compiler::new(Some(id1), Ok(reported()), None));
        assert_ne!(key0, key1);
        // Same time, another size.
        fs::write(&lib, b"pretend this is another NVRTC").unwrap();
        set_mtime(&lib, t0);
        let id2 = Identity::of(&lib).unwrap();
        assert_ne!(id0.digest(), id2.digest());
        let key2 = key_for(&Compiler::new(Some(id2), Ok(reported()), None));
        assert!(key2 != key0 && key2 != key1);
        // Another version of the same file, and an unknown file, are other keys too.
        let mut r = reported();
        r.version = Some((12, 9));
        assert_ne!(key0, key_for(&Compiler::new(Some(id0), Ok(r), None)));
        assert_ne!(key0, key_for(&Compiler::new(None, Ok(reported()), None)));
    }

    #[test]
    fn a_record_round_trips_through_a_cache_folder() {
        let d = tmp_dir("record");
        let digest = Identity::of(&fake_lib(&d)).unwrap().digest();
        let bytes = encode_record(&digest, &reported());
        assert_eq!(decode_record(&bytes, &digest), Ok(reported()));
        let no_version = Reported {
            version: None,
            archs: vec![],
        };
        assert_eq!(
            decode_record(&encode_record(&digest, &no_version), &digest),
            Ok(no_version)
        );
        let cache_dir = d.join("kernels");
        let disk = DiskCache::new(cache_dir.clone(), 1 << 20);
        assert_eq!(read_record(&cache_dir, &digest), RecordLookup::Miss);
        assert!(disk.store_side(&record_name(&digest), &bytes));
        assert_eq!(
            read_record(&cache_dir, &digest),
            RecordLookup::Hit(reported())
        );
        // Only the record is there: no temporary file left, and it is not an entry.
        let names: Vec<String> = fs::read_dir(&cache_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [record_name(&digest)]);
        assert_eq!(disk.evict(), 0);
        assert!(decode_record(&bytes, &[0; 32])
            .unwrap_err()
            .contains("another compiler"));
    }

    #[test]
    fn every_corruption_of_a_record_is_caught() {
        let digest = [3u8; 32];
        let bytes = encode_record(&digest, &reported());
        for cut in [0, 8, RECORD_HEAD, bytes.len() - 33, bytes.len() - 1] {
            assert!(
                decode_record(&bytes[..cut], &digest).is_err(),
                "cut at {cut}"
            );
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x04;
            assert!(decode_record(&b, &digest).is_err(), "flip at {i}");
        }
    }

    /// A loader that counts its calls and reports `reported()` for `identity`.
    fn counting_loader<'a>(
        calls: &'a Cell<u32>,
        identity: &'a Option<Identity>,
    ) -> impl Fn() -> Loaded + 'a {
        move || {
            calls.set(calls.get() + 1);
            Loaded {
                reported: Ok(reported()),
                identity: identity.clone(),
            }
        }
    }

    #[test]
    fn a_recorded_compiler_is_resolved_without_loading_and_a_corrupt_record_is_a_miss() {
        let d = tmp_dir("resolve");
        let lib = fake_lib(&d);
        let id = Some(Identity::of(&lib).unwrap());
        let (a, b) = (d.join("a"), d.join("b"));
        let calls = Cell::new(0);
        let load = counting_loader(&calls, &id);

        // Cold: no record anywhere, NVRTC is loaded; the caches then write the record.
        let cold = resolve(Some(&lib), &[a.clone(), b.clone()], &load);
        assert_eq!((calls.get(), cold.is_from_record()), (1, false));
        assert!(
            cold.confirmed(),
            "resolved by loading: it is the compiler named"
        );
        let (name, bytes) = cold.record_for(&b).expect("a record to write");
        assert!(DiskCache::new(b.clone(), 1 << 20).store_side(&name, &bytes));
        assert!(cold.record_for(&b).is_none(), "already there");

        // Warm: the record in b names the compiler; nothing is loaded, the key is the same.
        let warm = resolve(Some(&lib), &[a.clone(), b.clone()], &load);
        assert_eq!((calls.get(), warm.is_from_record()), (1, true));
        assert_eq!(warm.archs().unwrap(), reported().archs.as_slice());
        assert_eq!(warm.version_string(), "13.0");
        assert_eq!(key_for(&warm), key_for(&cold));
        // It copies the record into another cache's folder, but not back into b.
        assert!(warm.record_for(&b).is_none());
        assert!(warm.record_for(&a).is_some());

        // A corrupt record is a miss: NVRTC is loaded, and the record is to be replaced.
        let path = b.join(&name);
        let mut bad = fs::read(&path).unwrap();
        bad[45] ^= 1;
        fs::write(&path, &bad).unwrap();
        assert!(matches!(
            read_record(&b, &id.as_ref().unwrap().digest()),
            RecordLookup::Corrupt(_)
        ));
        let again = resolve(Some(&lib), std::slice::from_ref(&b), &load);
        assert_eq!((calls.get(), again.is_from_record()), (2, false));
        assert!(
            again.record_for(&b).is_some(),
            "the corrupt record is replaced"
        );

        // The library changed: its record no longer applies.
        fs::write(&path, &bytes).unwrap();
        set_mtime(&lib, SystemTime::now() - Duration::from_secs(5000));
        let changed_id = Some(Identity::of(&lib).unwrap());
        let load_changed = counting_loader(&calls, &changed_id);
        let changed = resolve(Some(&lib), std::slice::from_ref(&b), &load_changed);
        assert_eq!((calls.get(), changed.is_from_record()), (3, false));
        assert_ne!(key_for(&changed), key_for(&cold));

        // A file that cannot be told without loading: loaded, whatever the records say.
        let unlocated = resolve(None, std::slice::from_ref(&b), &load);
        assert_eq!((calls.get(), unlocated.is_from_record()), (4, false));
        assert_eq!(key_for(&unlocated), key_for(&cold));
    }

    #[test]
    fn the_loaded_file_is_named_when_the_prediction_was_wrong() {
        let d = tmp_dir("mismatch");
        let predicted = fake_lib(&d);
        let other = d.join("libnvrtc.so.12");
        fs::write(&other, b"another NVRTC").unwrap();
        let other_id = Some(Identity::of(&other).unwrap());
        let calls = Cell::new(0);
        let c = resolve(Some(&predicted), &[], &counting_loader(&calls, &other_id));
        assert_eq!(c.identity, other_id);
        // No file known at all: no record to write, the key still names the version.
        let none = resolve(None, &[], &counting_loader(&calls, &None));
        assert!(none.record_for(&d).is_none());
        assert_eq!(none.key_part(), b"nvrtc 13.0; file unknown");
    }
}
