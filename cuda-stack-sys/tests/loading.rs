//! Loading without a GPU: missing libraries, a library that is not libcuda, error names.

use cuda_stack_sys::{CUresult, CandidateSource, Driver, DriverError, Nvrtc, NvrtcError};
use std::ptr::null_mut;

#[test]
fn load_from_a_nonexistent_path_lists_the_path_tried() {
    let err = Driver::load_from("/no/such/dir/libcuda.so.1").unwrap_err();
    assert_eq!(err.attempts.len(), 1);
    assert_eq!(err.attempts[0].candidate.source, CandidateSource::Explicit);
    let text = err.to_string();
    assert!(
        text.contains("could not load the CUDA driver (libcuda)"),
        "{text}"
    );
    assert!(text.contains("/no/such/dir/libcuda.so.1"), "{text}");
    assert!(text.contains("No such file or directory"), "{text}");
    assert!(text.contains("help:"), "{text}");
}

#[test]
fn the_standard_search_lists_every_place_in_order() {
    let search = Driver::search();
    let paths: Vec<String> = search
        .candidates()
        .iter()
        .map(|c| c.path.display().to_string())
        .collect();
    if std::env::var_os("CUDA_DRIVER_PATH").is_none() {
        assert_eq!(paths[0], "libcuda.so.1");
        assert_eq!(paths[1], "libcuda.so");
        assert!(
            paths.contains(&"/usr/local/cuda/lib64/libcuda.so.1".to_string()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"/usr/local/nvidia/lib64/libcuda.so.1".to_string()),
            "{paths:?}"
        );
    }
    // Where no driver is installed, the error names every one of them.
    if let Err(err) = Driver::load() {
        let text = err.to_string();
        for p in &paths {
            assert!(text.contains(p.as_str()), "{p} missing from:\n{text}");
        }
    }
}

#[test]
fn a_library_that_is_not_libcuda_loads_and_every_call_reports_the_missing_symbol() {
    let drv = Driver::load_from("libm.so.6").expect("libm loads");
    assert_eq!(
        drv.table().resolved_count(),
        0,
        "libm exports no cu* symbol"
    );
    assert_eq!(drv.version(), None);
    eprintln!("Driver::load_from(libm.so.6) took {:?}", drv.load_time());
    let mut count = 0;
    let mut ptr = 0;
    // SAFETY: none of these reach a library: the symbols are missing.
    let results = unsafe {
        [
            drv.cuInit(0),
            drv.cuDeviceGetCount(&mut count),
            drv.cuMemAlloc_v2(&mut ptr, 1024),
            drv.cuLaunchKernel(
                null_mut(),
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                null_mut(),
                null_mut(),
                null_mut(),
            ),
        ]
    };
    let names = [
        "cuInit",
        "cuDeviceGetCount",
        "cuMemAlloc_v2",
        "cuLaunchKernel",
    ];
    for (r, name) in results.into_iter().zip(names) {
        match r {
            Err(DriverError::MissingSymbol(m)) => {
                assert_eq!(m.symbol, name);
                let text = m.to_string();
                assert!(text.contains(name) && text.contains("libm.so.6"), "{text}");
                assert!(text.contains("version unknown"), "{text}");
            }
            other => panic!("{name}: expected MissingSymbol, got {other:?}"),
        }
    }
    // The error path itself must not need the missing cuGetErrorName.
    let e = drv.error_for("cuMemAlloc_v2", CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    assert!(
        e.to_string().contains("CUDA_ERROR_OUT_OF_MEMORY (2)"),
        "{e}"
    );
}

#[test]
fn nvrtc_from_a_library_that_is_not_nvrtc_reports_missing_symbols() {
    let nv = Nvrtc::load_from("libm.so.6").expect("libm loads");
    let (mut a, mut b) = (0, 0);
    // SAFETY: the symbol is missing; nothing is called.
    match unsafe { nv.nvrtcVersion(&mut a, &mut b) } {
        Err(NvrtcError::MissingSymbol(m)) => assert_eq!(m.symbol, "nvrtcVersion"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn get_is_loaded_once_and_shared_across_threads() {
    let addrs: Vec<Option<usize>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| s.spawn(|| Driver::get().ok().map(|d| d as *const Driver as usize)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(addrs.windows(2).all(|w| w[0] == w[1]), "{addrs:?}");
}

#[test]
fn error_names_come_from_the_header() {
    let invalid = CUresult::CUDA_ERROR_INVALID_VALUE;
    assert_eq!(invalid.name(), Some("CUDA_ERROR_INVALID_VALUE"));
    let ptx = CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    assert_eq!(ptx.name(), Some("CUDA_ERROR_UNSUPPORTED_PTX_VERSION"));
    assert_eq!(CUresult(999).name(), Some("CUDA_ERROR_UNKNOWN"));
    assert_eq!(CUresult(424_242).name(), None);
}
