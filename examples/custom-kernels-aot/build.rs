//! Seed 004's `setup.py` (`CUDAExtension(sources=['custom_kernels.cu'], extra_compile_args=
//! {'nvcc': ['-O3']})`), as a build script: nvcc (or NVRTC) compiles the kernels when the crate
//! is built, and `cuda-stack-build` writes their typed handles to `$OUT_DIR/kernels.rs`.

fn main() {
    let mut build = cuda_stack_build::Build::new();
    build
        .file("kernels/custom_kernels.cu")
        .include("kernels")
        .option("-O3");
    // Optional SASS in a fatbin for named GPUs (nvcc only), e.g. CUSTOM_KERNELS_SASS=sm_80,sm_90:
    // the handles then load the fatbin, and the driver JIT-compiles the PTX only on other GPUs.
    println!("cargo:rerun-if-env-changed=CUSTOM_KERNELS_SASS");
    if let Ok(list) = std::env::var("CUSTOM_KERNELS_SASS") {
        build.fatbin(list.split(',').map(str::trim).filter(|a| !a.is_empty()));
    }
    let out = build.compile_or_exit();
    // What built the kernels, for the crate's docs and tests.
    println!("cargo:rustc-env=CUSTOM_KERNELS_COMPILER={}", out.compiler);
    println!("cargo:rustc-env=CUSTOM_KERNELS_PTX_ISA_FLOOR={}", out.floor);
}
