//! The compile cache and the code generator, on the CPU: NVRTC needs no GPU, so these run
//! wherever `libnvrtc` loads (CI sets `CUDA_NVRTC_PATH`), and are ignored elsewhere. Two run
//! scenarios in new processes of this binary (a cold one, then a warm one on its folder) to
//! show that a warm disk hit loads no NVRTC; the one through a kernel's first call needs a GPU.

use cuda_stack_jit::cache::{CompileRequest, KernelCache, Origin, Target};
use cuda_stack_jit::{ElementwiseKernel, JitError, ReductionKernel};
use cuda_stack_runtime::DType;
use cuda_tests::{cpu, ensure, gpu, needs_nvrtc, TestResult};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const ALL: [DType; 6] = [
    DType::F32,
    DType::F64,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
];

fn tmp_dir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "cuda-stack-jit-test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn compile_check(name: &str, src: &str, arch: u32) -> TestResult {
    let opts = cuda_stack_driver::nvrtc::CompileOptions {
        extra: vec![format!("--gpu-architecture=sm_{arch}")],
        ..Default::default()
    };
    cuda_stack_driver::nvrtc::compile_cubin(name, src, &opts)
        .map(|_| ())
        .map_err(|e| format!("{e}\n--- source ---\n{src}").into())
}

fn req<'a>(src: &'a str, opts: &'a [String]) -> CompileRequest<'a> {
    CompileRequest {
        name: "t.cu",
        source: src,
        options: opts,
        target: Target::Cubin(80),
    }
}

const SRC_A: &str = "extern \"C\" __global__ void a(float* x) { x[threadIdx.x] = 1.0f; }";
const SRC_B: &str = "extern \"C\" __global__ void b(float* x) { x[threadIdx.x] = 2.0f; }";

/// A new process's view of the same folder: a fresh in-memory layer.
fn second_process(dir: &PathBuf) -> KernelCache {
    KernelCache::with_dir(dir, 1 << 30)
}

fn cold_then_warm_from_disk_without_compiling() -> TestResult {
    let dir = tmp_dir("warm");
    let first = KernelCache::with_dir(&dir, 1 << 30);
    let cold = first.get_or_compile(&req(SRC_A, &[]))?;
    ensure!(
        cold.origin == Origin::Compiled,
        "first lookup: {:?}",
        cold.origin
    );
    ensure!(first.stats().disk_writes == 1, "{:?}", first.stats());
    let again = first.get_or_compile(&req(SRC_A, &[]))?;
    ensure!(
        again.origin == Origin::Memory,
        "second lookup: {:?}",
        again.origin
    );
    let second = second_process(&dir);
    let warm = second.get_or_compile(&req(SRC_A, &[]))?;
    ensure!(
        warm.origin == Origin::Disk,
        "new cache, same folder: {:?}",
        warm.origin
    );
    ensure!(
        second.stats().compiles == 0,
        "compiled again: {:?}",
        second.stats()
    );
    ensure!(
        warm.binary.bytes == cold.binary.bytes,
        "different bytes from disk"
    );
    println!(
        "cold compile {:.1} ms, warm load from disk {:.3} ms",
        cold.took.as_secs_f64() * 1e3,
        warm.took.as_secs_f64() * 1e3
    );
    Ok(())
}

fn key_covers_source_options_and_target() -> TestResult {
    let base = KernelCache::key(&req(SRC_A, &[]));
    ensure!(
        base != KernelCache::key(&req(SRC_B, &[])),
        "source not in key"
    );
    let o = ["--use_fast_math".to_string()];
    ensure!(
        base != KernelCache::key(&req(SRC_A, &o)),
        "options not in key"
    );
    let mut r = req(SRC_A, &[]);
    r.target = Target::Cubin(90);
    ensure!(base != KernelCache::key(&r), "arch not in key");
    r.target = Target::Ptx(80);
    ensure!(base != KernelCache::key(&r), "output kind not in key");
    ensure!(base == KernelCache::key(&req(SRC_A, &[])), "key not stable");
    Ok(())
}

fn changing_one_kernel_keeps_the_others() -> TestResult {
    let dir = tmp_dir("unrelated");
    let c = KernelCache::with_dir(&dir, 1 << 30);
    c.get_or_compile(&req(SRC_A, &[]))?;
    c.get_or_compile(&req(SRC_B, &[]))?;
    // "Edit" kernel A (a new version of its source); B's entry is still valid.
    let a2 = SRC_A.replace("1.0f", "3.0f");
    let fresh = second_process(&dir);
    ensure!(
        fresh.get_or_compile(&req(&a2, &[]))?.origin == Origin::Compiled,
        "a2"
    );
    ensure!(
        fresh.get_or_compile(&req(SRC_B, &[]))?.origin == Origin::Disk,
        "b invalidated"
    );
    ensure!(fresh.stats().compiles == 1, "{:?}", fresh.stats());
    Ok(())
}

fn corrupt_entry_is_recompiled_and_replaced() -> TestResult {
    let dir = tmp_dir("corrupt");
    let c = KernelCache::with_dir(&dir, 1 << 30);
    let good = c.get_or_compile(&req(SRC_A, &[]))?;
    let entry = std::fs::read_dir(&dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "cujit"))
        .ok_or("no entry written")?;
    for damage in ["truncate", "flip"] {
        let mut bytes = std::fs::read(&entry)?;
        match damage {
            "truncate" => bytes.truncate(bytes.len() / 2),
            _ => {
                let k = bytes.len() - 10;
                bytes[k] ^= 0x40;
            }
        }
        std::fs::write(&entry, &bytes)?;
        let fresh = second_process(&dir);
        let got = fresh.get_or_compile(&req(SRC_A, &[]))?;
        let s = fresh.stats();
        ensure!(got.origin == Origin::Compiled, "{damage}: {:?}", got.origin);
        ensure!(
            s.corrupt_entries == 1 && s.compiles == 1 && s.disk_writes == 1,
            "{damage}: {s:?}"
        );
        ensure!(
            got.binary.bytes == good.binary.bytes,
            "{damage}: bytes differ"
        );
        // The entry was replaced: the next process loads it.
        let next = second_process(&dir);
        ensure!(
            next.get_or_compile(&req(SRC_A, &[]))?.origin == Origin::Disk,
            "{damage}: not replaced"
        );
    }
    Ok(())
}

fn unusable_folder_degrades_to_memory_only() -> TestResult {
    // A folder below a regular file cannot be created, whoever runs the test (root included).
    let base = tmp_dir("readonly");
    std::fs::create_dir_all(&base)?;
    std::fs::write(base.join("file"), b"")?;
    let c = KernelCache::with_dir(base.join("file").join("kernels"), 1 << 30);
    let got = c.get_or_compile(&req(SRC_A, &[]))?; // no error
    ensure!(got.origin == Origin::Compiled, "{:?}", got.origin);
    let st = c.disk_status();
    ensure!(!st.writable && st.problem.is_some(), "{st:?}");
    ensure!(
        c.get_or_compile(&req(SRC_A, &[]))?.origin == Origin::Memory,
        "memory layer"
    );
    ensure!(c.stats().disk_writes == 0, "{:?}", c.stats());
    Ok(())
}

/// The bytes of the folder's entries (what the bound covers; the compiler record is not one).
fn entry_bytes(dir: &Path) -> std::io::Result<u64> {
    Ok(std::fs::read_dir(dir)?
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "cujit"))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum())
}

fn size_bound_evicts_with_real_entries() -> TestResult {
    let dir = tmp_dir("bound");
    let probe = KernelCache::with_dir(&dir, 1 << 30);
    probe.get_or_compile(&req(SRC_A, &[]))?;
    let one = entry_bytes(&dir)?;
    std::fs::remove_dir_all(&dir)?;
    let c = KernelCache::with_dir(&dir, one * 3);
    for k in 0..8 {
        let src = SRC_A.replace("1.0f", &format!("{k}.0f"));
        c.get_or_compile(&req(&src, &[]))?;
        let total = entry_bytes(&dir)?;
        ensure!(
            total <= one * 3,
            "after {k}: {total} bytes > bound {}",
            one * 3
        );
    }
    ensure!(c.stats().evictions > 0, "{:?}", c.stats());
    Ok(())
}

fn include_paths_are_not_cached_on_disk() -> TestResult {
    let dir = tmp_dir("include");
    let c = KernelCache::with_dir(&dir, 1 << 30);
    let o = [format!("-I{}", std::env::temp_dir().display())];
    c.get_or_compile(&req(SRC_A, &o))?;
    ensure!(
        c.stats().uncacheable == 1 && c.stats().disk_writes == 0,
        "{:?}",
        c.stats()
    );
    Ok(())
}

/// Set in a process this test binary starts of itself: the scenario it runs instead of the
/// trials (see [`child_main`]).
const CHILD_ENV: &str = "CUDA_STACK_JIT_CACHE_TEST_CHILD";

/// Whether NVRTC is mapped into this process, whoever loaded it (read from `/proc/self/maps`;
/// `None` where that cannot be read).
fn nvrtc_mapped() -> Option<bool> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    Some(maps.lines().any(|l| l.contains("libnvrtc")))
}

/// The checks of a process that must not have loaded NVRTC.
fn ensure_no_nvrtc(stats: &cuda_stack_jit::CacheStats) -> TestResult {
    ensure!(!stats.nvrtc_loaded, "NVRTC was loaded: {stats:?}");
    ensure!(
        nvrtc_mapped() != Some(true),
        "libnvrtc is mapped into the process ({stats:?})"
    );
    Ok(())
}

/// One scenario of a child process; its verdict is the exit status (and stderr).
fn child_scenario(which: &str) -> TestResult {
    let dir = PathBuf::from(std::env::var_os(cuda_stack_jit::cache::DIR_ENV).ok_or("no folder")?);
    match which {
        // The compile cache alone (NVRTC, no GPU): the target and key need the compiler.
        "cache-cold" | "cache-warm" => {
            let cache = KernelCache::with_dir(&dir, 1 << 30);
            let target = Target::for_arch(80)?;
            let got = cache.get_or_compile(&CompileRequest {
                name: "t.cu",
                source: SRC_A,
                options: &[],
                target,
            })?;
            let s = cache.stats();
            println!(
                "{which}: {target}, {:?} in {:.3} ms, {s:?}",
                got.origin,
                got.took.as_secs_f64() * 1e3
            );
            if which == "cache-cold" {
                ensure!(
                    got.origin == Origin::Compiled && s.nvrtc_loaded,
                    "{:?} {s:?}",
                    got.origin
                );
            } else {
                ensure!(
                    got.origin == Origin::Disk && s.compiles == 0,
                    "{:?} {s:?}",
                    got.origin
                );
                ensure_no_nvrtc(&s)?;
            }
        }
        // A kernel's first call, through the process-wide cache the environment names.
        "kernel-cold" | "kernel-warm" => {
            let start = std::time::Instant::now();
            let x = cuda_stack_runtime::Tensor::<f32>::arange(0.0, 10.0, 1.0)?;
            let y = square().call1::<f32>(&[(&x).into()])?.to_vec()?;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            ensure!(y == [0., 1., 4., 9., 16., 25., 36., 49., 64., 81.], "{y:?}");
            let s = KernelCache::global().stats();
            println!("{which}: first call {ms:.2} ms (with the runtime's start), {s:?}");
            if which == "kernel-cold" {
                ensure!(s.compiles == 1, "{s:?}");
            } else {
                ensure!(s.disk_hits == 1 && s.compiles == 0, "{s:?}");
                ensure_no_nvrtc(&s)?;
            }
        }
        other => return Err(format!("no child scenario {other:?}").into()),
    }
    Ok(())
}

/// Runs in a child process: the scenario named by [`CHILD_ENV`]; returns the exit status.
fn child_main(which: &str) -> i32 {
    match child_scenario(which) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("child scenario {which} failed: {e}");
            1
        }
    }
}

/// Runs `scenario` in a new process of this binary on the cache folder `dir`, with
/// `CUDA_NVRTC_PATH` naming the NVRTC file this process loaded (so that the child finds it
/// without loading it, whatever the machine's loader setup). Fails when the child fails.
fn in_new_process(scenario: &str, dir: &Path) -> TestResult {
    let nvrtc = cuda_stack_driver::cuda_stack_sys::Nvrtc::get()?
        .resolved_path()
        .ok_or("cannot tell which NVRTC file was loaded")?;
    let out = std::process::Command::new(std::env::current_exe()?)
        .env(CHILD_ENV, scenario)
        .env(cuda_stack_jit::cache::DIR_ENV, dir)
        .env("CUDA_NVRTC_PATH", &nvrtc)
        .output()?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    ensure!(
        out.status.success(),
        "child {scenario} exited with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn warm_process_hits_disk_without_loading_nvrtc() -> TestResult {
    // What this machine's own setup gives (informational): without CUDA_NVRTC_PATH, is NVRTC's
    // file found without loading it?
    println!(
        "NVRTC found without loading it here: {:?}",
        cuda_stack_jit::cache::nvrtc_location()
    );
    let dir = tmp_dir("no-nvrtc");
    in_new_process("cache-cold", &dir)?;
    let records = std::fs::read_dir(&dir)?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("compiler-"))
        .count();
    ensure!(
        records == 1,
        "{records} compiler records in {}",
        dir.display()
    );
    in_new_process("cache-warm", &dir)
}

fn warm_first_kernel_call_loads_no_nvrtc() -> TestResult {
    let dir = tmp_dir("kernel-no-nvrtc");
    in_new_process("kernel-cold", &dir)?;
    in_new_process("kernel-warm", &dir)
}

fn square() -> ElementwiseKernel {
    // SAFETY: the body only reads x and writes y.
    unsafe { ElementwiseKernel::new("float32 x", "float32 y", "y = x * x;", "square_kernel") }
        .expect("parses")
}

fn elementwise_sources_compile_for_every_dtype_and_layout() -> TestResult {
    // SAFETY: the bodies touch their own elements, and raw parameters through `[]`.
    let k = unsafe {
        ElementwiseKernel::new(
            "T x, T y, raw T t, float64 s",
            "T z, raw T w",
            "z = (T)((double)x * s + (double)y - (double)t[i % t.size()]);\nif (i < w.size()) w[i] = z;",
            "mixed",
        )?
    };
    for d in ALL {
        for (strided, ndim) in [
            (vec![false, false], 0),
            (vec![true, false], 1),
            (vec![true, true], 3),
        ] {
            let src = cuda_stack_jit::testing::elementwise_source(
                &k,
                &[d, d, d, DType::F64],
                &strided,
                ndim,
            )?;
            compile_check("mixed.cu", &src, 80)?;
        }
    }
    compile_check(
        "square_kernel.cu",
        &square().source_for_dtypes(&[DType::F32])?,
        90,
    )?;
    // In-place with compound assignment on half types, as `call` and as `call_into` (which
    // loads the output packets first).
    // SAFETY: as above.
    let axpy = unsafe { ElementwiseKernel::new("T x, T a", "T y", "y += a * x;", "axpy")? };
    for d in ALL {
        compile_check(
            "axpy.cu",
            &cuda_stack_jit::testing::elementwise_source(&axpy, &[d, d], &[], 0)?,
            80,
        )?;
        let into = cuda_stack_jit::testing::elementwise_source_into(&axpy, &[d, d])?;
        ensure!(
            into.contains("_vload"),
            "call_into's packets load the output"
        );
        compile_check("axpy_into.cu", &into, 80)?;
    }
    // Mixed element sizes in one packet loop (2 elements: 4-byte f16 packets, 16-byte f64 ones).
    // SAFETY: as above.
    let mixed = unsafe {
        ElementwiseKernel::new(
            "float16 h, float64 d",
            "float32 z",
            "z = (float)h * d;",
            "mix",
        )?
    };
    let src = mixed.source_for_dtypes(&[DType::F16, DType::F64])?;
    ensure!(src.contains("_Vec<float16, 2>"), "mixed packets:\n{src}");
    compile_check("mix.cu", &src, 80)?;
    Ok(())
}

fn reduction_sources_compile() -> TestResult {
    // SAFETY: the expressions only combine values.
    let l2 = unsafe {
        ReductionKernel::new(
            "T x",
            "T y",
            "x * x",
            "a + b",
            "y = sqrt((double)a)",
            "0",
            "l2norm",
        )?
    };
    // SAFETY: as above.
    let mean = unsafe {
        ReductionKernel::with_options(
            "T x, T w",
            "float64 y",
            "(double)x * (double)w",
            "a + b",
            "y = a / (_in_ind.size() / _out_ind.size())",
            "0",
            "wmean",
            Some("float64"),
            Default::default(),
        )?
    };
    for d in ALL {
        for (nk, nr) in [(0, 1), (1, 1), (2, 3), (0, 2)] {
            compile_check(
                "l2norm.cu",
                &cuda_stack_jit::testing::reduction_source(&l2, &[d], &[false], nk, nr)?,
                80,
            )?;
            compile_check(
                "wmean.cu",
                &cuda_stack_jit::testing::reduction_source(&mean, &[d, d], &[false, true], nk, nr)?,
                80,
            )?;
        }
    }
    Ok(())
}

fn syntax_error_reports_the_users_line() -> TestResult {
    // SAFETY: never runs (it does not compile).
    let k = unsafe {
        ElementwiseKernel::new(
            "float32 x",
            "float32 y",
            "float t = x * 2;\ny = t * undefined_name;",
            "bad_kernel",
        )?
    };
    let src = k.source_for_dtypes(&[DType::F32])?;
    let cache = KernelCache::memory_only();
    let err = cache
        .get_or_compile(&CompileRequest {
            name: "bad_kernel.cu",
            source: &src,
            options: &[],
            target: Target::Cubin(80),
        })
        .expect_err("must not compile");
    let cuda_stack_driver::Error::Compile { log, .. } = err else {
        return Err(format!("not a compile error: {err}").into());
    };
    ensure!(log.contains("bad_kernel.cu("), "raw log: {log}");
    // The mapping the kernels apply (checked end to end on a GPU in jit_kernels): here, the
    // generated line named in the log must be the body's second line.
    let line: usize = log
        .split("bad_kernel.cu(")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|n| n.parse().ok())
        .ok_or("no line in the log")?;
    ensure!(
        src.lines().nth(line - 1) == Some("y = t * undefined_name;"),
        "line {line} is {:?}",
        src.lines().nth(line - 1)
    );
    Ok(())
}

fn definition_errors_are_typed() -> TestResult {
    // SAFETY: none of these get far enough to run.
    unsafe {
        for (i, o, name) in [
            ("float32 x", "float32 y z", "k"),
            ("uint8 x", "float32 y", "k"),
            ("float32 i", "float32 y", "k"),
            ("float32 x", "float32 x", "k"),
            ("float32 x", "", "k"),
            ("float32 x", "float32 y", "2k"),
        ] {
            match ElementwiseKernel::new(i, o, "y = x;", name) {
                Err(JitError::Parse { .. }) => {}
                other => return Err(format!("{i} / {o} / {name}: {other:?}").into()),
            }
        }
        match ReductionKernel::new("float32 a", "float32 y", "a", "a + b", "y = a", "0", "r") {
            Err(JitError::Parse { .. }) => {}
            other => return Err(format!("`a` is reserved in reductions: {other:?}").into()),
        }
    }
    match square().source_for_dtypes(&[DType::F64]) {
        Err(JitError::DTypeMismatch { param, .. }) if param == "x" => {}
        other => return Err(format!("dtype mismatch: {other:?}").into()),
    }
    match square().source_for_dtypes(&[DType::F32, DType::F32]) {
        Err(JitError::ArgCount {
            expected: 1,
            found: 2,
            ..
        }) => {}
        other => return Err(format!("arg count: {other:?}").into()),
    }
    Ok(())
}

fn main() {
    if let Ok(which) = std::env::var(CHILD_ENV) {
        std::process::exit(child_main(&which));
    }
    let trials = vec![
        cpu("definition errors are typed", definition_errors_are_typed),
        needs_nvrtc(
            "cache: a new process's disk hit loads no NVRTC (compiler record)",
            warm_process_hits_disk_without_loading_nvrtc,
        ),
        gpu(
            "cache: a warm first kernel call in a new process loads no NVRTC",
            warm_first_kernel_call_loads_no_nvrtc,
        ),
        needs_nvrtc(
            "cache: cold compile, then warm load from disk without compiling",
            cold_then_warm_from_disk_without_compiling,
        ),
        needs_nvrtc(
            "cache: key covers source, options and target",
            key_covers_source_options_and_target,
        ),
        needs_nvrtc(
            "cache: changing one kernel keeps the others",
            changing_one_kernel_keeps_the_others,
        ),
        needs_nvrtc(
            "cache: a torn or corrupted entry is recompiled and replaced",
            corrupt_entry_is_recompiled_and_replaced,
        ),
        needs_nvrtc(
            "cache: an unusable folder degrades to memory only",
            unusable_folder_degrades_to_memory_only,
        ),
        needs_nvrtc(
            "cache: the folder stays under its size bound",
            size_bound_evicts_with_real_entries,
        ),
        needs_nvrtc(
            "cache: sources reading include paths stay in memory",
            include_paths_are_not_cached_on_disk,
        ),
        needs_nvrtc(
            "codegen: elementwise sources compile for every dtype and layout",
            elementwise_sources_compile_for_every_dtype_and_layout,
        ),
        needs_nvrtc(
            "codegen: reduction sources compile",
            reduction_sources_compile,
        ),
        needs_nvrtc(
            "codegen: a syntax error points at the body's line",
            syntax_error_reports_the_users_line,
        ),
    ];
    cuda_tests::run(trials);
}
