//! What cuBLAS and cuBLASLt share when they are looked for: the major versions searched, pip's
//! folders, and the major version each process-wide library loaded as, so that the other one is
//! looked for as the same major version first (one release, not a cuBLAS 13 beside a
//! cuBLASLt 12).

use std::sync::atomic::{AtomicI32, Ordering};

/// The major versions searched, in this order unless the other library of the pair loaded as
/// the other one (see [`search_order`]): 13, whose headers the declarations were generated from,
/// then 12.
pub(crate) const MAJORS: [i32; 2] = [13, 12];

/// pip's folders for cuBLAS and cuBLASLt, under each site-packages: CUDA 13 wheels
/// (`nvidia-cublas`), then CUDA 12 wheels (`nvidia-cublas-cu12`, as PyTorch's CUDA 12 builds
/// install).
pub(crate) const PIP_DIRS: &[&str] = &["nvidia/cu13/lib", "nvidia/cublas/lib"];

/// One library of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Library {
    Cublas,
    CublasLt,
}

/// The major version each process-wide library loaded as (`[cuBLAS, cuBLASLt]`; 0: not loaded).
static LOADED: [AtomicI32; 2] = [AtomicI32::new(0), AtomicI32::new(0)];

fn slot(library: Library) -> &'static AtomicI32 {
    &LOADED[library as usize]
}

/// Records that the process-wide `library` loaded as `version`'s major version.
pub(crate) fn record(library: Library, version: Option<(i32, i32, i32)>) {
    if let Some((major, _, _)) = version {
        slot(library).store(major, Ordering::Relaxed);
    }
}

/// The major versions to search for `library`, in order: [`MAJORS`], with the other library's
/// major version first where the process-wide one is loaded already.
pub(crate) fn search_order(library: Library) -> Vec<i32> {
    let other = match library {
        Library::Cublas => Library::CublasLt,
        Library::CublasLt => Library::Cublas,
    };
    preferring(Some(slot(other).load(Ordering::Relaxed)))
}

/// [`MAJORS`], with `prefer` first when it is one of them.
fn preferring(prefer: Option<i32>) -> Vec<i32> {
    let mut majors = MAJORS.to_vec();
    if let Some(i) = prefer.and_then(|p| majors.iter().position(|&m| m == p)) {
        let m = majors.remove(i);
        majors.insert(0, m);
    }
    majors
}

/// `libstem.so.{major}` for each major version, one group per version (for
/// `Search::standard_by_version`).
pub(crate) fn sonames(stem: &str, majors: &[i32]) -> Vec<[String; 1]> {
    majors.iter().map(|m| [format!("{stem}.so.{m}")]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_major_is_searched_first() {
        assert_eq!(preferring(None), [13, 12]);
        assert_eq!(preferring(Some(0)), [13, 12]);
        assert_eq!(preferring(Some(13)), [13, 12]);
        assert_eq!(preferring(Some(12)), [12, 13]);
        assert_eq!(preferring(Some(11)), [13, 12]);
    }

    #[test]
    fn one_soname_group_per_major() {
        assert_eq!(
            sonames("libcublasLt", &[12, 13]),
            [
                ["libcublasLt.so.12".to_string()],
                ["libcublasLt.so.13".to_string()]
            ]
        );
    }
}
