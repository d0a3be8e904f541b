//! What this process's dynamic loader holds, read from the loader itself rather than from
//! `/proc/self/maps`: the shared objects it has loaded (`dl_iterate_phdr`, the loader's own
//! list, which is what `dlopen` of a soname consults first) and the C library's version (which
//! decides whether the legacy hardware-capability subfolders are searched at all).
//!
//! `/proc/self/maps` is text the kernel generates on every read, one line per mapping: in a
//! process with the CUDA driver loaded that is hundreds of lines, and reading it was a large
//! part of finding NVRTC's file before a warm first call. The loader's list is in this
//! process's memory and is walked in microseconds.

use std::path::PathBuf;

/// One object on the loader's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoadedObject {
    /// The path it was loaded from, as the loader recorded it; `None` for the main program
    /// (the loader records no name for it: it is `/proc/self/exe`).
    pub(crate) path: Option<PathBuf>,
    /// The address ranges of its loadable segments, `[start, end)`.
    pub(crate) ranges: Vec<(usize, usize)>,
}

impl LoadedObject {
    /// Whether `addr` lies in one of its segments.
    pub(crate) fn contains(&self, addr: usize) -> bool {
        self.ranges.iter().any(|&(s, e)| s <= addr && addr < e)
    }

    /// Its file name (`None` for the main program).
    pub(crate) fn file_name(&self) -> Option<&str> {
        self.path.as_ref()?.file_name()?.to_str()
    }
}

/// The objects the dynamic loader has loaded into this process, in its order (the main program
/// first); `None` where this is not known (another OS or C library).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn loaded_objects() -> Option<Vec<LoadedObject>> {
    use std::ffi::{c_int, c_void, CStr, OsStr};
    use std::os::unix::ffi::OsStrExt;

    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the `&mut Vec<LoadedObject>` passed to `dl_iterate_phdr` below,
        // alive and not otherwise borrowed for the whole walk; the loader passes a valid
        // `info` for the duration of this call, whose `dlpi_name` is null or a NUL-terminated
        // string and whose `dlpi_phdr` points at `dlpi_phnum` program headers.
        unsafe {
            let out = &mut *(data as *mut Vec<LoadedObject>);
            let info = &*info;
            let path = if info.dlpi_name.is_null() {
                None
            } else {
                let name = CStr::from_ptr(info.dlpi_name).to_bytes();
                (!name.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(name)))
            };
            let mut ranges = Vec::new();
            if !info.dlpi_phdr.is_null() {
                for i in 0..usize::from(info.dlpi_phnum) {
                    let ph = &*info.dlpi_phdr.add(i);
                    if ph.p_type == libc::PT_LOAD {
                        let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
                        ranges.push((start, start.wrapping_add(ph.p_memsz as usize)));
                    }
                }
            }
            out.push(LoadedObject { path, ranges });
        }
        0 // go on
    }

    let mut out: Vec<LoadedObject> = Vec::new();
    // SAFETY: `visit` matches the callback type and only reads what the loader passes it;
    // `out` outlives the call, which runs the callback on this thread before returning.
    unsafe {
        libc::dl_iterate_phdr(Some(visit), (&mut out as *mut Vec<LoadedObject>).cast());
    }
    Some(out)
}

/// The objects the dynamic loader has loaded: not known on this platform.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn loaded_objects() -> Option<Vec<LoadedObject>> {
    None
}

/// Whether this process's loader searches the legacy hardware-capability subfolders (`tls`,
/// `haswell`, `x86_64`, …) below each folder: glibc before 2.37 does; 2.37 removed that search
/// and kept only `glibc-hwcaps/`. An unreadable version counts as "yes" (the cautious answer:
/// more folders are checked).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn searches_legacy_hwcap_dirs() -> bool {
    // SAFETY: glibc returns a pointer to a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    version
        .to_str()
        .ok()
        .and_then(glibc_version)
        .is_none_or(|v| v < (2, 37))
}

/// Whether this process's loader searches the legacy hardware-capability subfolders: not known
/// on this platform (the search is not reasoned about there).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn searches_legacy_hwcap_dirs() -> bool {
    true
}

/// `"2.36"` → `(2, 36)`; anything else (`"2.39.9000"` reads as `(2, 39)`) → `None`.
pub(crate) fn glibc_version(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_versions_are_read() {
        assert_eq!(glibc_version("2.36"), Some((2, 36)));
        assert_eq!(glibc_version("2.39.9000"), Some((2, 39)));
        assert_eq!(glibc_version("2"), None);
        assert_eq!(glibc_version("x.y"), None);
        assert!((2, 36) < (2, 37) && (3, 0) >= (2, 37));
    }

    #[test]
    fn the_loaders_list_holds_this_program_and_its_code() {
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert_eq!(loaded_objects(), None);
            return;
        }
        let objects = loaded_objects().expect("the loader's list");
        // The main program comes first, unnamed, and holds this function's code.
        assert_eq!(objects[0].path, None);
        let here = glibc_version as *const () as usize;
        let holder: Vec<&LoadedObject> = objects.iter().filter(|o| o.contains(here)).collect();
        assert_eq!(holder.len(), 1, "{objects:?}");
        assert_eq!(holder[0].path, None);
        // The C library is loaded under its file name.
        assert!(
            objects
                .iter()
                .any(|o| o.file_name().is_some_and(|n| n.starts_with("libc.so"))),
            "{objects:?}"
        );
    }
}
