//! The real cuBLAS, cuBLASLt and NCCL, where they are installed (no GPU needed): versions read at
//! load, entry points resolved, status strings from the libraries themselves, libcublasLt loaded
//! with libcublas. Ignored where a library is absent.

use cuda_stack_sys::cublas_types::cublasStatus_t;
use cuda_stack_sys::nccl_types::ncclResult_t;
use cuda_stack_sys::{Cublas, CublasLt, Nccl};
use cuda_tests::{ensure, needs_cublas, needs_nccl, run, TestResult};

fn cublas_loads_with_version_and_entry_points() -> TestResult {
    let blas = Cublas::get()?;
    eprintln!(
        "{} from {} ({:?}): {} of {} entry points, loaded in {:?}",
        blas.version_string(),
        blas.path().display(),
        blas.resolved_path(),
        blas.table().resolved_count(),
        cuda_stack_sys::cublas_table::CublasTable::SYMBOLS.len(),
        blas.load_time()
    );
    let (major, _, _) = blas.version().ok_or("cublasGetProperty failed")?;
    ensure!(
        Cublas::MAJORS.contains(&major),
        "cuBLAS major version {major}, expected one of {:?}",
        Cublas::MAJORS
    );
    let table = blas.table();
    ensure!(
        table.cublasCreate_v2.is_some() && table.cublasGemmEx.is_some(),
        "cublasCreate_v2 / cublasGemmEx not resolved"
    );
    ensure!(
        table.cublasGemmStridedBatchedEx.is_some(),
        "cublasGemmStridedBatchedEx not resolved"
    );
    // The library's own status name and description, not the header fallback.
    let e = blas.error_for("cublasGemmEx", cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED);
    let text = e.to_string();
    ensure!(text.contains("CUBLAS_STATUS_NOT_SUPPORTED"), "{text}");
    eprintln!("{text}");
    // libcublas's dependency is in the process (loaded beside it, or by the system loader).
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let lt = format!("libcublasLt.so.{major}");
    ensure!(maps.contains(&lt), "{lt} not mapped");
    Ok(())
}

fn cublaslt_loads_and_makes_a_descriptor_without_a_gpu() -> TestResult {
    let lt = CublasLt::get()?;
    eprintln!("{} from {}", lt.version_string(), lt.path().display());
    let (major, _, _) = lt.version().ok_or("cublasLtGetVersion missing")?;
    ensure!(
        CublasLt::MAJORS.contains(&major),
        "cuBLASLt major version {major}, expected one of {:?}",
        CublasLt::MAJORS
    );
    let mut desc = std::ptr::null_mut();
    // SAFETY: a descriptor is host memory; created and destroyed here.
    unsafe {
        lt.cublasLtMatmulDescCreate(
            &mut desc,
            cuda_stack_sys::cublas_types::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cuda_stack_sys::cublas_types::cudaDataType_t::CUDA_R_32F,
        )?;
        lt.cublasLtMatmulDescDestroy(desc)?;
    }
    Ok(())
}

fn nccl_loads_with_version_and_error_strings() -> TestResult {
    let nccl = Nccl::get()?;
    eprintln!(
        "{} from {} ({} entry points)",
        nccl.version_string(),
        nccl.path().display(),
        nccl.table().resolved_count()
    );
    let (major, minor, _) = nccl.version().ok_or("ncclGetVersion failed")?;
    ensure!(major == 2, "NCCL major version {major}, expected 2");
    let mut code = 0;
    // SAFETY: one int out-pointer.
    unsafe { nccl.ncclGetVersion(&mut code)? };
    ensure!(
        code / 100 % 100 == minor,
        "ncclGetVersion {code} vs {minor}"
    );
    let text = nccl
        .error_for("ncclAllReduce", ncclResult_t::ncclInvalidArgument)
        .to_string();
    ensure!(
        !text.contains("ncclGetErrorString is unavailable"),
        "no description from the library: {text}"
    );
    eprintln!("{text}");
    Ok(())
}

fn main() {
    run(vec![
        needs_cublas(
            "cublas_loads_with_version_and_entry_points",
            cublas_loads_with_version_and_entry_points,
        ),
        needs_cublas(
            "cublaslt_loads_and_makes_a_descriptor_without_a_gpu",
            cublaslt_loads_and_makes_a_descriptor_without_a_gpu,
        ),
        needs_nccl(
            "nccl_loads_with_version_and_error_strings",
            nccl_loads_with_version_and_error_strings,
        ),
    ])
}
