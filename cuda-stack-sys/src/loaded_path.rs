//! Where the OS loader actually found a library opened by soname.

use std::path::{Path, PathBuf};

/// For an absolute path, the path itself (symlinks resolved). For a soname such as
/// `libcuda.so.1`, the first file mapped into this process whose name starts with the soname's
/// stem (`libcuda.so`), read from `/proc/self/maps`. `None` when neither works.
pub(crate) fn find(opened: &Path) -> Option<PathBuf> {
    if opened.is_absolute() {
        return std::fs::canonicalize(opened).ok();
    }
    let name = opened.file_name()?.to_str()?;
    let stem = match name.find(".so") {
        Some(i) => &name[..i + 3],
        None => name,
    };
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(Path::new)
        .find(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(stem))
        })
        .map(Path::to_path_buf)
}
