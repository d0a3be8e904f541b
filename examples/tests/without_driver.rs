//! The programs fail clearly, without a panic, when the driver is missing or is not libcuda.

use std::path::PathBuf;
use std::process::Command;

/// The built program: cargo's path, or `.gpu/bin/NAME` when the test binary was packed for a GPU
/// machine by `gpu-pack` (which runs tests from the project root).
fn program(cargo_path: &str, name: &str) -> PathBuf {
    let p = PathBuf::from(cargo_path);
    if p.exists() {
        p
    } else {
        PathBuf::from(".gpu/bin").join(name)
    }
}

fn run_device_query(driver_path: &str) -> (i32, String) {
    let exe = program(env!("CARGO_BIN_EXE_device_query"), "device_query");
    let out = Command::new(&exe)
        .env("CUDA_DRIVER_PATH", driver_path)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", exe.display()));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn device_query_without_a_driver_lists_where_it_looked_and_exits_nonzero() {
    let (code, text) = run_device_query("/nonexistent/libcuda.so.1");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no CUDA driver found"), "{text}");
    assert!(
        text.contains("/nonexistent/libcuda.so.1 ($CUDA_DRIVER_PATH)"),
        "{text}"
    );
    assert!(
        !text.contains("panicked") && !text.contains("stack backtrace"),
        "{text}"
    );
}

#[test]
fn device_query_with_a_library_that_is_not_libcuda_reports_the_missing_symbol() {
    let (code, text) = run_device_query("libm.so.6");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("`cuInit` is not exported by libm.so.6"),
        "{text}"
    );
    assert!(!text.contains("panicked"), "{text}");
}
