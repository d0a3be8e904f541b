//! The on-disk layer of the kernel cache: one file per compiled kernel, named by its key's
//! digest, in one folder.
//!
//! What it does about the problems CuPy's users report with its `~/.cupy/kernel_cache`:
//! - **Concurrent processes never read a half-written entry**: an entry is written to a
//!   temporary file of a unique name (process id and a counter) in the same folder and renamed
//!   over the final name, which is atomic on POSIX file systems; readers see the old file or
//!   the new one.
//! - **A torn or corrupted entry is detected** by the checksum in every entry (see
//!   [`super::entry`]), counted, recompiled and replaced; it is never handed to the driver.
//! - **Bounded size**: after each write, when the folder's entries exceed the limit, the least
//!   recently used ones (by modification time, which a hit refreshes when it is more than an
//!   hour old) are deleted down to 90 % of it. Temporary files left by killed processes are removed after an hour.
//! - **A read-only, full or missing folder is not an error**: the first failed write logs one
//!   warning and the process goes on with the in-memory cache only (reads still work, so a
//!   read-only cache filled by someone else is used).
//! - **Modes for a shared folder**: files are created with the default mode (0666 minus the
//!   umask), never the private 0600 of `mkstemp`, so a group-shared folder (setgid, umask 002)
//!   works for everyone in the group; an entry this user cannot read is a miss, then replaced.
//! - **No global invalidation**: the key of an entry is its whole source (with every helper the
//!   generator inlines), options, target and compiler (NVRTC's library file and version), so
//!   changing one kernel, or a helper only some kernels use, invalidates only those.
//!
//! Besides entries (`<key>.cujit`) the folder holds one small record per compiler seen
//! (`compiler-<identity digest>`, see [`super::compiler`]), written the same way and never
//! evicted.

use super::entry::{self, BinaryKind};
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// File name suffix of entries.
const SUFFIX: &str = ".cujit";
/// Prefix of temporary files.
const TMP_PREFIX: &str = ".tmp-";

/// What a lookup found.
#[derive(Debug)]
pub(crate) enum Lookup {
    Hit(BinaryKind, Vec<u8>),
    Miss,
    /// The entry exists but is not valid (why): recompile and replace it.
    Corrupt(String),
}

/// Whether the disk cache is in use, for messages and programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskStatus {
    /// The folder (when one was configured).
    pub dir: Option<PathBuf>,
    /// Whether new entries are written.
    pub writable: bool,
    /// Why not, when it is not (or why there is no folder).
    pub problem: Option<String>,
    /// The size bound, bytes.
    pub max_bytes: u64,
}

struct State {
    writable: bool,
    dir_ready: bool,
    problem: Option<String>,
}

/// One cache folder.
pub(crate) struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
    state: Mutex<State>,
    counter: AtomicU64,
    /// Test hook: make the next writes fail with this error.
    #[cfg(test)]
    pub(crate) fail_writes: Mutex<Option<io::ErrorKind>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl DiskCache {
    pub(crate) fn new(dir: PathBuf, max_bytes: u64) -> DiskCache {
        DiskCache {
            dir,
            max_bytes,
            state: Mutex::new(State {
                writable: true,
                dir_ready: false,
                problem: None,
            }),
            counter: AtomicU64::new(0),
            #[cfg(test)]
            fail_writes: Mutex::new(None),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry file of `key`.
    pub(crate) fn path_for(&self, key: &[u8; 32]) -> PathBuf {
        self.dir.join(format!("{}{SUFFIX}", hex(key)))
    }

    pub(crate) fn status(&self) -> DiskStatus {
        let s = self.state();
        DiskStatus {
            dir: Some(self.dir.clone()),
            writable: s.writable,
            problem: s.problem.clone(),
            max_bytes: self.max_bytes,
        }
    }

    /// Reads the entry of `key`. A hit refreshes the entry's modification time (its place in
    /// the eviction order) only when that is older than [`REFRESH_AFTER`]: a warm process's
    /// first call then costs one open, one `stat` and one read, not also a second open and a
    /// metadata write per entry.
    pub(crate) fn load(&self, key: &[u8; 32]) -> Lookup {
        let path = self.path_for(key);
        let read = fs::File::open(&path).and_then(|mut f| {
            let modified = f.metadata().and_then(|m| m.modified()).ok();
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)?;
            Ok((bytes, modified))
        });
        let (bytes, modified) = match read {
            Ok(r) => r,
            // Missing, unreadable (another user's private file), or no folder: all misses.
            Err(_) => return Lookup::Miss,
        };
        match entry::decode(&bytes, key) {
            Ok((kind, payload)) => {
                let fresh = modified
                    .and_then(|m| SystemTime::now().duration_since(m).ok())
                    .is_some_and(|age| age < REFRESH_AFTER);
                if !fresh {
                    touch(&path);
                }
                Lookup::Hit(kind, payload)
            }
            Err(why) => Lookup::Corrupt(why),
        }
    }

    /// Stops writing for this process, with one warning.
    fn disable_writes(&self, why: String) {
        let mut s = self.state();
        if s.writable {
            s.writable = false;
            log::warn!(
                "cuda-stack-jit: the kernel cache folder {} cannot be written ({why}); compiled \
                 kernels are kept in memory only for the rest of this process",
                self.dir.display()
            );
            s.problem = Some(why);
        }
    }

    /// Writes the entry of `key` atomically; returns how many old entries were evicted, or
    /// `None` when nothing was written (writes disabled, or this write failed and disabled
    /// them).
    pub(crate) fn store(&self, key: &[u8; 32], kind: BinaryKind, payload: &[u8]) -> Option<usize> {
        if !self.ready_for_writes() {
            return None;
        }
        let bytes = entry::encode(key, kind, payload);
        if !self.write_atomic(&hex(key)[..16], &self.path_for(key), &bytes) {
            return None;
        }
        Some(self.evict())
    }

    /// Writes a file of the folder that is not an entry (a compiler record, see
    /// [`super::compiler`]) the way entries are written: atomically, with the default mode.
    /// A `name` that ends in the entries' suffix or starts with the temporary prefix (which
    /// eviction would delete) is refused. Returns whether it was written.
    pub(crate) fn store_side(&self, name: &str, bytes: &[u8]) -> bool {
        if name.ends_with(SUFFIX) || name.starts_with(TMP_PREFIX) || name.contains('/') {
            return false;
        }
        let tag: String = name.chars().take(24).collect();
        self.ready_for_writes() && self.write_atomic(&tag, &self.dir.join(name), bytes)
    }

    /// Whether writes are enabled, creating the folder on the first.
    fn ready_for_writes(&self) -> bool {
        let mut s = self.state();
        if !s.writable {
            return false;
        }
        if !s.dir_ready {
            if let Err(e) = fs::create_dir_all(&self.dir) {
                drop(s);
                self.disable_writes(format!("cannot create it: {e}"));
                return false;
            }
            s.dir_ready = true;
        }
        true
    }

    /// Writes `bytes` to a temporary file of a unique name (`tag`, process id, counter) in the
    /// folder and renames it over `dest`: readers see the old file or the new one, never part
    /// of one. A failure disables writes (one warning) and returns `false`.
    fn write_atomic(&self, tag: &str, dest: &Path, bytes: &[u8]) -> bool {
        let tmp = self.dir.join(format!(
            "{TMP_PREFIX}{tag}-{}-{}",
            std::process::id(),
            self.counter.fetch_add(1, Ordering::Relaxed)
        ));
        let written = self
            .write_new(&tmp, bytes)
            .and_then(|()| fs::rename(&tmp, dest));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            self.disable_writes(format!("writing {} failed: {e}", dest.display()));
            return false;
        }
        true
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        #[cfg(test)]
        if let Some(kind) = *self.fail_writes.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(io::Error::new(kind, "injected by a test"));
        }
        // Default mode (0666 & !umask): readable by whoever the folder is shared with.
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        f.write_all(bytes)?;
        Ok(())
    }

    /// Deletes least recently used entries while the folder holds more than the bound, down to
    /// 90 % of it, and temporary files older than an hour. Returns how many entries it deleted.
    pub(crate) fn evict(&self) -> usize {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let now = SystemTime::now();
        let mut entries = Vec::new();
        let mut total = 0u64;
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let Ok(meta) = e.metadata() else { continue };
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with(TMP_PREFIX) {
                if now.duration_since(mtime).unwrap_or_default() > Duration::from_secs(3600) {
                    let _ = fs::remove_file(e.path());
                }
                continue;
            }
            if name.ends_with(SUFFIX) && meta.is_file() {
                total += meta.len();
                entries.push((mtime, meta.len(), e.path()));
            }
        }
        if total <= self.max_bytes {
            return 0;
        }
        entries.sort();
        let target = self.max_bytes / 10 * 9;
        let mut removed = 0;
        for (_, len, path) in entries {
            if total <= target {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(len);
                removed += 1;
            }
        }
        removed
    }
}

/// How old an entry's modification time must be before a hit refreshes it: eviction orders
/// entries by that time, so entries used within the last hour count as equally recent.
const REFRESH_AFTER: Duration = Duration::from_secs(3600);

/// Marks an entry as recently used (best effort: a shared read-only entry keeps its time).
fn touch(path: &Path) {
    if let Ok(f) = fs::OpenOptions::new().append(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp_dir(tag: &str) -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "cuda-stack-jit-disk-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn key(k: u8) -> [u8; 32] {
        [k; 32]
    }

    #[test]
    fn store_then_load_and_missing_folder_is_created() {
        let d = tmp_dir("basic").join("nested/kernels");
        let c = DiskCache::new(d.clone(), 1 << 20);
        assert!(matches!(c.load(&key(1)), Lookup::Miss));
        assert_eq!(c.store(&key(1), BinaryKind::Cubin, b"abc"), Some(0));
        match c.load(&key(1)) {
            Lookup::Hit(BinaryKind::Cubin, p) => assert_eq!(p, b"abc"),
            other => panic!("{other:?}"),
        }
        // No temporary file is left behind.
        let names: Vec<String> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [format!("{}{SUFFIX}", hex(&key(1)))]);
    }

    #[test]
    fn side_files_are_written_atomically_and_never_evicted() {
        let d = tmp_dir("side");
        let c = DiskCache::new(d.clone(), 1); // every entry is over this bound
        assert!(c.store_side("compiler-x", b"record"));
        assert_eq!(fs::read(d.join("compiler-x")).unwrap(), b"record");
        assert_eq!(c.store(&key(7), BinaryKind::Cubin, b"entry"), Some(1));
        assert!(d.join("compiler-x").exists(), "a side file is not an entry");
        *c.fail_writes.lock().unwrap() = Some(io::ErrorKind::PermissionDenied);
        assert!(!c.store_side("compiler-y", b"r"));
        *c.fail_writes.lock().unwrap() = None;
        assert!(!c.store_side("compiler-y", b"r"), "writes stay disabled");
        let names: Vec<String> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["compiler-x"]);
    }

    #[test]
    fn torn_and_corrupt_entries_are_detected_and_replaced() {
        let d = tmp_dir("corrupt");
        let c = DiskCache::new(d, 1 << 20);
        c.store(&key(2), BinaryKind::Ptx, b"payload bytes");
        let path = c.path_for(&key(2));
        let full = fs::read(&path).unwrap();
        // Torn: only part of the file made it.
        fs::write(&path, &full[..full.len() - 3]).unwrap();
        assert!(matches!(c.load(&key(2)), Lookup::Corrupt(w) if w.contains("torn")));
        // Flipped bits.
        let mut bad = full.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        fs::write(&path, &bad).unwrap();
        assert!(matches!(c.load(&key(2)), Lookup::Corrupt(w) if w.contains("checksum")));
        // Replacing it makes it valid again.
        c.store(&key(2), BinaryKind::Ptx, b"payload bytes");
        assert!(matches!(c.load(&key(2)), Lookup::Hit(..)));
    }

    #[test]
    fn failed_writes_degrade_to_memory_only_once() {
        for kind in [io::ErrorKind::PermissionDenied, io::ErrorKind::Other] {
            let c = DiskCache::new(tmp_dir("fail"), 1 << 20);
            *c.fail_writes.lock().unwrap() = Some(kind);
            assert_eq!(c.store(&key(3), BinaryKind::Cubin, b"x"), None);
            let st = c.status();
            assert!(!st.writable && st.problem.unwrap().contains("injected"));
            // Later writes are skipped without trying; reads still work.
            *c.fail_writes.lock().unwrap() = None;
            assert_eq!(c.store(&key(3), BinaryKind::Cubin, b"x"), None);
            assert!(matches!(c.load(&key(3)), Lookup::Miss));
        }
    }

    #[test]
    fn a_folder_that_cannot_exist_degrades_without_error() {
        // A path under a regular file cannot be created, even by root (ENOTDIR).
        let d = tmp_dir("notdir");
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("file"), b"").unwrap();
        let c = DiskCache::new(d.join("file").join("kernels"), 1 << 20);
        assert_eq!(c.store(&key(4), BinaryKind::Cubin, b"x"), None);
        assert!(c.status().problem.unwrap().contains("cannot create"));
        assert!(matches!(c.load(&key(4)), Lookup::Miss));
    }

    #[test]
    fn size_is_bounded_least_recently_used_first() {
        let d = tmp_dir("evict");
        let entry_len = (entry::HEADER + 1000) as u64;
        let c = DiskCache::new(d, entry_len * 4); // room for 4 entries
                                                  // Two hours ago: older than REFRESH_AFTER, so a hit refreshes it.
        let old = SystemTime::now() - Duration::from_secs(7200);
        for k in 0..4u8 {
            assert_eq!(c.store(&key(k), BinaryKind::Cubin, &[k; 1000]), Some(0));
            // Entry k was used k seconds after the oldest.
            let f = fs::OpenOptions::new()
                .append(true)
                .open(c.path_for(&key(k)))
                .unwrap();
            f.set_modified(old + Duration::from_secs(k as u64)).unwrap();
        }
        // Using entry 0 makes it the most recent.
        assert!(matches!(c.load(&key(0)), Lookup::Hit(..)));
        let mtime = |k: u8| {
            fs::metadata(c.path_for(&key(k)))
                .unwrap()
                .modified()
                .unwrap()
        };
        let refreshed = mtime(0);
        assert!(refreshed > old + Duration::from_secs(3600));
        // A hit on an entry refreshed less than an hour ago leaves its time alone.
        std::thread::sleep(Duration::from_millis(20));
        assert!(matches!(c.load(&key(0)), Lookup::Hit(..)));
        assert_eq!(mtime(0), refreshed);
        // A fifth entry exceeds the bound: evict down to 90 % (3 entries): 1 and 2 go.
        assert_eq!(c.store(&key(9), BinaryKind::Cubin, &[9; 1000]), Some(2));
        for (k, present) in [(0, true), (1, false), (2, false), (3, true), (9, true)] {
            assert_eq!(c.path_for(&key(k)).exists(), present, "entry {k}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn entries_get_the_default_mode_not_a_private_one() {
        use std::os::unix::fs::PermissionsExt;
        let d = tmp_dir("mode");
        let c = DiskCache::new(d.clone(), 1 << 20);
        c.store(&key(5), BinaryKind::Cubin, b"x");
        // A file created the ordinary way in the same folder shows what the umask allows.
        let plain = d.join("plain");
        fs::File::create(&plain).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&c.path_for(&key(5))), mode(&plain));
    }

    #[test]
    fn concurrent_writers_and_readers_never_see_a_partial_entry() {
        let d = tmp_dir("race");
        let c = std::sync::Arc::new(DiskCache::new(d, 1 << 30));
        let payload = vec![0xabu8; 256 << 10];
        let mut handles = Vec::new();
        for t in 0..4 {
            let c = c.clone();
            let p = payload.clone();
            handles.push(std::thread::spawn(move || {
                for _ in 0..20 {
                    if t % 2 == 0 {
                        c.store(&key(6), BinaryKind::Cubin, &p);
                    } else {
                        match c.load(&key(6)) {
                            Lookup::Hit(_, got) => assert_eq!(got.len(), p.len()),
                            Lookup::Miss => {}
                            Lookup::Corrupt(w) => panic!("a reader saw a partial entry: {w}"),
                        }
                    }
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
    }
}
