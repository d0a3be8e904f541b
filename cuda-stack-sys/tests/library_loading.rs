//! cuBLAS, cuBLASLt and NCCL loading without the libraries: search lists, load errors, missing
//! symbols, error texts, and the preloading of libcublasLt beside libcublas.

use cuda_stack_sys::cublas_types::{cublasOperation_t, cublasStatus_t};
use cuda_stack_sys::nccl_types::ncclResult_t;
use cuda_stack_sys::{CandidateSource, Cublas, CublasError, CublasLt, Driver, Nccl, NcclError};
use std::path::{Path, PathBuf};
use std::ptr::null_mut;

fn paths(search: &cuda_stack_sys::Search) -> Vec<String> {
    search
        .candidates()
        .iter()
        .map(|c| c.path.display().to_string())
        .collect()
}

/// `libX.so.13` everywhere, then `libX.so.12` everywhere; never an unversioned `libX.so`.
fn thirteen_then_twelve(p: &[String], stem: &str) {
    let first12 = p
        .iter()
        .position(|x| x.ends_with(&format!("{stem}.so.12")))
        .unwrap_or_else(|| panic!("no {stem}.so.12 in {p:?}"));
    assert!(p[..first12].iter().all(|x| x.ends_with(".so.13")), "{p:?}");
    assert!(p[first12..].iter().all(|x| x.ends_with(".so.12")), "{p:?}");
    assert!(!p.iter().any(|x| x.ends_with(".so")), "{p:?}");
}

#[test]
fn the_cublas_search_tries_each_abi_soname_then_the_install_dirs() {
    // (In this test binary neither library is loaded before the searches, so 13 comes first.)
    let p = paths(&Cublas::search());
    if std::env::var_os("CUDA_CUBLAS_PATH").is_none() {
        assert_eq!(p[0], "libcublas.so.13");
        thirteen_then_twelve(&p, "libcublas");
        for m in [13, 12] {
            let so = format!("/usr/local/cuda/lib64/libcublas.so.{m}");
            assert!(p.contains(&so), "{p:?}");
        }
    }
    let p = paths(&CublasLt::search());
    if std::env::var_os("CUDA_CUBLASLT_PATH").is_none() {
        assert_eq!(p[0], "libcublasLt.so.13");
        thirteen_then_twelve(&p, "libcublasLt");
        assert!(
            p.contains(&"/usr/local/cuda/lib64/libcublasLt.so.12".into()),
            "{p:?}"
        );
    }
    let p = paths(&Cublas::search_major(12));
    assert_eq!(p[0], "libcublas.so.12");
    assert!(p.iter().all(|x| x.ends_with("libcublas.so.12")), "{p:?}");
    let p = paths(&Nccl::search());
    if std::env::var_os("CUDA_NCCL_PATH").is_none() {
        assert_eq!(&p[..2], ["libnccl.so.2", "libnccl.so"]);
        assert!(
            p.contains(&"/usr/local/cuda/lib64/libnccl.so.2".into()),
            "{p:?}"
        );
    }
}

#[test]
fn a_missing_library_lists_every_place_tried() {
    for (err, what) in [
        (Cublas::load().err(), "cuBLAS (libcublas)"),
        (CublasLt::load().err(), "cuBLASLt (libcublasLt)"),
        (Nccl::load().err(), "NCCL (libnccl)"),
    ] {
        // Where the library is installed there is no error to look at.
        let Some(err) = err else { continue };
        let text = err.to_string();
        assert!(text.contains(&format!("could not load {what}")), "{text}");
        assert_eq!(
            text.matches("\n  ").count(),
            err.attempts.len() + 1,
            "{text}"
        );
        for a in &err.attempts {
            assert!(
                text.contains(&a.candidate.path.display().to_string()),
                "{text}"
            );
            assert!(!a.error.is_empty());
        }
        assert!(
            text.contains("help:") && text.contains("pip install"),
            "{text}"
        );
    }
}

#[test]
fn load_from_a_nonexistent_path_says_so() {
    let err = Cublas::load_from("/no/such/dir/libcublas.so.13").unwrap_err();
    assert_eq!(err.attempts.len(), 1);
    assert_eq!(err.attempts[0].candidate.source, CandidateSource::Explicit);
    let text = err.to_string();
    assert!(text.contains("/no/such/dir/libcublas.so.13"), "{text}");
    assert!(text.contains("No such file or directory"), "{text}");
    let text = Nccl::load_from("/no/such/libnccl.so.2")
        .unwrap_err()
        .to_string();
    assert!(text.contains("could not load NCCL"), "{text}");
}

#[test]
fn a_library_that_is_not_cublas_loads_and_each_call_names_the_missing_symbol() {
    let blas = Cublas::load_from("libm.so.6").expect("libm loads");
    assert_eq!(blas.table().resolved_count(), 0);
    assert_eq!(blas.version(), None);
    let mut handle = null_mut();
    // SAFETY: the symbols are missing; nothing is called.
    let (create, gemm) = unsafe {
        let gemm = blas.cublasSgemm_v2(
            null_mut(),
            cublasOperation_t::CUBLAS_OP_N,
            cublasOperation_t::CUBLAS_OP_N,
            1,
            1,
            1,
            std::ptr::null(),
            std::ptr::null(),
            1,
            std::ptr::null(),
            1,
            std::ptr::null(),
            null_mut(),
            1,
        );
        (blas.cublasCreate_v2(&mut handle), gemm)
    };
    for (r, name) in [(create, "cublasCreate_v2"), (gemm, "cublasSgemm_v2")] {
        match r {
            Err(CublasError::MissingSymbol(m)) => {
                assert_eq!(m.symbol, name);
                let text = m.to_string();
                assert!(
                    text.contains("libm.so.6") && text.contains("cuBLAS"),
                    "{text}"
                );
                assert!(text.contains("version unknown"), "{text}");
            }
            other => panic!("{name}: expected MissingSymbol, got {other:?}"),
        }
    }
    // The error path itself works without cublasGetStatusName/String.
    let e = blas.error_for("cublasGemmEx", cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED);
    assert_eq!(e.code(), Some(cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED));
    assert_eq!(
        e.to_string(),
        "cublasGemmEx failed with CUBLAS_STATUS_NOT_SUPPORTED (15): \
         the functionality requested is not supported"
    );

    let lt = CublasLt::load_from("libm.so.6").expect("libm loads");
    // SAFETY: the symbol is missing; nothing is called.
    match unsafe { lt.cublasLtGetVersion() } {
        Err(m) => assert!(m.to_string().contains("cuBLASLt"), "{m}"),
        Ok(v) => panic!("libm has no cublasLtGetVersion, yet it returned {v}"),
    }
}

#[test]
fn a_library_that_is_not_nccl_loads_and_reports_missing_symbols() {
    let nccl = Nccl::load_from("libm.so.6").expect("libm loads");
    assert_eq!(nccl.version(), None);
    let mut v = 0;
    // SAFETY: the symbol is missing; nothing is called.
    match unsafe { nccl.ncclGetVersion(&mut v) } {
        Err(NcclError::MissingSymbol(m)) => {
            assert_eq!(m.symbol, "ncclGetVersion");
            assert!(m.to_string().contains("NCCL"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    let e = nccl.error_for("ncclAllReduce", ncclResult_t::ncclInvalidArgument);
    let text = e.to_string();
    assert!(
        text.starts_with("ncclAllReduce failed with ncclInvalidArgument (4)"),
        "{text}"
    );
}

#[test]
fn status_names_come_from_the_headers() {
    assert_eq!(
        cublasStatus_t::CUBLAS_STATUS_ARCH_MISMATCH.name(),
        Some("CUBLAS_STATUS_ARCH_MISMATCH")
    );
    assert_eq!(cublasStatus_t(4242).name(), None);
    assert_eq!(
        ncclResult_t::ncclSystemError.name(),
        Some("ncclSystemError")
    );
    assert_eq!(ncclResult_t::ncclSuccess.name(), Some("ncclSuccess"));
}

#[test]
fn the_library_types_share_the_drivers_stream_type() {
    // cudaStream_t of cuBLAS and NCCL is the driver's CUstream, not a look-alike.
    let s: cuda_stack_sys::CUstream = null_mut();
    let a: cuda_stack_sys::cublas_types::cudaStream_t = s;
    let b: cuda_stack_sys::nccl_types::cudaStream_t = a;
    assert!(b.is_null());
}

/// A fresh folder under the system temporary directory.
fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuda-stack-sys-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mapped(path: &Path) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().any(|l| l.ends_with(path.to_str().unwrap()))
}

#[test]
fn libcublaslt_beside_libcublas_is_loaded_first() {
    // Two copies of libm stand in for a pip wheel's folder: loading "libcublas.so.13" from it
    // must first load the "libcublasLt.so.13" beside it (with the same suffix).
    let libm = Driver::load_from("libm.so.6")
        .ok()
        .and_then(|d| d.resolved_path())
        .expect("libm's file");
    let dir = temp_dir("companion");
    let (blas, lt) = (dir.join("libcublas.so.13"), dir.join("libcublasLt.so.13"));
    std::fs::copy(&libm, &blas).unwrap();
    std::fs::copy(&libm, &lt).unwrap();
    assert!(!mapped(&lt));
    let loaded = Cublas::load_from(&blas).expect("the copy loads");
    assert!(mapped(&blas), "libcublas.so.13 copy not mapped");
    assert!(mapped(&lt), "libcublasLt.so.13 beside it was not preloaded");
    assert_eq!(
        loaded.resolved_path().as_deref(),
        Some(blas.canonicalize().unwrap().as_path())
    );
    drop(loaded);
    let _ = std::fs::remove_dir_all(&dir);
}
