//! Each build error, provoked, and its message checked; and a clean build.
//!
//! Three kinds of trials: those that need no compiler (no compiler found, an unknown
//! architecture, a declaration no handle can express); those that run a stand-in nvcc (a shell
//! script that answers like nvcc: a compile error, a refused architecture, a PTX ISA above the
//! floor, a header dependency); and those that run the real nvcc or NVRTC found here, reported
//! as ignored where there is none.

use cuda_stack_build::{Build, BuildError, Compiler};
use libtest_mimic::{Arguments, Failed, Trial};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

type TestResult = Result<(), Failed>;

fn main() {
    let args = Arguments::from_args();
    let nvcc = real(Compiler::Nvcc);
    let nvrtc = real(Compiler::Nvrtc);
    if let Some(why) = nvcc.as_ref().err() {
        eprintln!(
            "note: real-nvcc tests are ignored: {}",
            why.lines().next().unwrap_or("")
        );
    }
    if let Some(why) = nvrtc.as_ref().err() {
        eprintln!(
            "note: real-NVRTC tests are ignored: {}",
            why.lines().nth(1).unwrap_or("")
        );
    }
    // The search also looks in fixed install folders, which no environment can hide: on a
    // machine with a toolkit there, "no compiler anywhere" cannot be set up.
    let fixed_nvcc = ["/usr/local/cuda/bin/nvcc", "/opt/cuda/bin/nvcc"]
        .iter()
        .find(|p| std::path::Path::new(p).exists());
    if let Some(p) = fixed_nvcc {
        eprintln!("note: no_compiler_lists_every_place is ignored: {p} exists on this machine");
    }
    let mut trials = vec![
        Trial::test(
            "no_compiler_lists_every_place",
            no_compiler_lists_every_place,
        )
        .with_ignored_flag(fixed_nvcc.is_some()),
        Trial::test(
            "explicit_nvcc_is_authoritative",
            explicit_nvcc_is_authoritative,
        ),
        Trial::test("unknown_arch_is_refused_before_compiling", unknown_arch),
        Trial::test("untypable_declaration", untypable_declaration),
        Trial::test(
            "fake_nvcc_compile_error_has_file_and_line",
            fake_compile_error,
        ),
        Trial::test("fake_nvcc_refused_arch", fake_refused_arch),
        Trial::test("fake_nvcc_isa_above_floor", fake_isa_above_floor),
        Trial::test("fake_nvcc_builds_and_tracks_headers", fake_builds),
    ];
    for (kind, found) in [(Compiler::Nvcc, &nvcc), (Compiler::Nvrtc, &nvrtc)] {
        let ignored = found.is_err();
        let name = if kind == Compiler::Nvcc {
            "real_nvcc"
        } else {
            "real_nvrtc"
        };
        let version = found.as_ref().ok().and_then(|v| *v);
        trials.push(
            Trial::test(format!("{name}_compile_error"), move || {
                real_compile_error(kind)
            })
            .with_ignored_flag(ignored),
        );
        trials.push(
            Trial::test(format!("{name}_refused_arch"), move || {
                real_refused_arch(kind, version)
            })
            .with_ignored_flag(ignored),
        );
        trials.push(
            Trial::test(format!("{name}_isa_above_floor"), move || {
                real_isa_above_floor(kind)
            })
            .with_ignored_flag(ignored),
        );
        trials.push(
            Trial::test(format!("{name}_builds_handles"), move || {
                real_builds(kind, version)
            })
            .with_ignored_flag(ignored),
        );
    }
    libtest_mimic::run(&args, trials).exit();
}

/// Whether a real compiler of this kind is found here, with its version.
fn real(kind: Compiler) -> Result<Option<(u32, u32)>, String> {
    let dir = scratch("probe");
    let src = write(
        &dir,
        "probe.cu",
        "extern \"C\" __global__ void probe(int n) {}\n",
    );
    let r = Build::new()
        .file(&src)
        .compiler(kind)
        .out_dir(dir.join("out"))
        .ptx_isa_floor("99.0")
        .cargo_metadata(false)
        .compile();
    r.map(|o| o.compiler.version).map_err(|e| e.to_string())
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "cuda-stack-build-test-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn expect(e: &BuildError, parts: &[&str]) -> TestResult {
    let text = e.to_string();
    for p in parts {
        if !text.contains(p) {
            return Err(format!("the message lacks {p:?}:\n{text}").into());
        }
    }
    Ok(())
}

fn err_of(r: Result<cuda_stack_build::Output, BuildError>) -> Result<BuildError, Failed> {
    match r {
        Ok(o) => Err(format!("expected an error, the build succeeded with {}", o.compiler).into()),
        Err(e) => Ok(e),
    }
}

const GOOD: &str = "#include \"common.cuh\"\n\
extern \"C\" __global__ void scale(const float* x, float* y, float a, int n) {\n\
    int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
    if (i < n) y[i] = twice(a) * x[i];\n\
}\n";
const HEADER: &str = "__device__ inline float twice(float v) { return 2.0f * v; }\n";

/// An environment with nothing in it but what `vars` gives.
fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + Send + Sync + 'static {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| {
        vars.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| OsString::from(v))
    }
}

fn no_compiler_lists_every_place() -> TestResult {
    let dir = scratch("none");
    write(&dir, "common.cuh", HEADER);
    let src = write(&dir, "k.cu", GOOD);
    let e = err_of(
        Build::new()
            .file(&src)
            .out_dir(dir.join("out"))
            .environment(env(&[
                ("PATH", "/nonexistent/bin"),
                ("HOME", "/nonexistent"),
                ("CUDA_NVRTC_PATH", "/nonexistent/libnvrtc.so.12"),
            ]))
            .compile(),
    )?;
    if !matches!(e, BuildError::NoCompiler { .. }) {
        return Err(format!("expected NoCompiler, got {e:?}").into());
    }
    expect(
        &e,
        &[
            "no CUDA compiler found",
            "$NVCC: not set",
            "$CUDA_PATH/bin/nvcc: not set",
            "$CUDA_HOME/bin/nvcc: not set",
            "nvcc on $PATH: not on PATH",
            "/usr/local/cuda/bin/nvcc",
            "/nonexistent/libnvrtc.so.12 ($CUDA_NVRTC_PATH)",
            "help: install a CUDA toolkit",
            "pip install nvidia-cuda-nvrtc-cu12==12.4.127",
        ],
    )
}

fn explicit_nvcc_is_authoritative() -> TestResult {
    let dir = scratch("explicit");
    let src = write(&dir, "k.cu", "extern \"C\" __global__ void k(int n) {}\n");
    let e = err_of(
        Build::new()
            .file(&src)
            .out_dir(dir.join("out"))
            .environment(env(&[
                ("NVCC", "/nonexistent/nvcc"),
                ("PATH", "/nonexistent"),
            ]))
            .compile(),
    )?;
    expect(
        &e,
        &[
            "$NVCC /nonexistent/nvcc: no such file",
            "no other place was searched",
        ],
    )
}

fn unknown_arch() -> TestResult {
    let dir = scratch("arch");
    let src = write(&dir, "k.cu", "extern \"C\" __global__ void k(int n) {}\n");
    let e = err_of(
        Build::new()
            .file(&src)
            .arch("sm_42")
            .out_dir(dir.join("out"))
            .environment(env(&[]))
            .compile(),
    )?;
    expect(
        &e,
        &[
            "unsupported GPU architecture `sm_42`",
            "nvidia-smi --query-gpu=compute_cap",
            "known: 50, 52",
        ],
    )
}

fn untypable_declaration() -> TestResult {
    let dir = scratch("decl");
    let src = write(
        &dir,
        "k.cu",
        "\n\nextern \"C\" __global__ void k(void* p, int n) {}\n",
    );
    let e = err_of(
        Build::new()
            .file(&src)
            .out_dir(dir.join("out"))
            .environment(env(&[]))
            .compile(),
    )?;
    expect(&e, &["k.cu:3: kernel `k`", "void*", "write them out"])
}

/// A stand-in for nvcc: answers `--version` like nvcc 13.0 and, for `--ptx`, writes the PTX a
/// compile of `GOOD` would give (ISA from the source's `// FAKE_ISA x.y` line, default 8.4) and
/// a `-MF` dependency file; a source containing `FAKE_ERROR` gets nvcc's front-end error, and
/// `-arch=compute_70` nvcc 13's refusal.
const FAKE_NVCC: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0; fi
out=""; dep=""; arch=""; prev=""
for a in "$@"; do
  case "$prev" in -o) out="$a";; -MF) dep="$a";; esac
  case "$a" in -arch=*) arch="${a#-arch=}";; esac
  prev="$a"; src="$a"
done
if [ "$arch" = "compute_70" ]; then echo "nvcc fatal   : Unsupported gpu architecture 'compute_70'" >&2; exit 1; fi
if grep -q FAKE_ERROR "$src"; then
  echo "$src(4): error: identifier \"FAKE_ERROR\" is undefined" >&2
  echo "" >&2; echo "1 error detected in the compilation of \"$src\"." >&2; exit 2
fi
isa=$(sed -n 's|^// FAKE_ISA ||p' "$src"); isa=${isa:-8.4}
printf '//\n// Generated by a stand-in\n\n.version %s\n.target sm_75\n.address_size 64\n\n.visible .entry scale(\n\t.param .u64 scale_param_0,\n\t.param .u64 scale_param_1,\n\t.param .f32 scale_param_2,\n\t.param .u32 scale_param_3\n)\n{\n\tret;\n}\n' "$isa" > "$out"
[ -n "$dep" ] && printf '%s : %s \\\n    /usr/include/stdc-predef.h \\\n    %s\n' "$out" "$src" "$(dirname "$src")/common.cuh" > "$dep"
exit 0
"#;

fn fake_build(name: &str, src_text: &str) -> (PathBuf, Build) {
    let dir = scratch(name);
    // The stand-in's "toolkit" is its own folder: headers under it are not dependencies.
    let bin = scratch(&format!("{name}-toolkit")).join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let nvcc = write(&bin, "nvcc", FAKE_NVCC);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    write(&dir, "common.cuh", HEADER);
    let src = write(&dir, "k.cu", src_text);
    let mut b = Build::new();
    b.file(&src)
        .out_dir(dir.join("out"))
        .environment(env(&[("PATH", bin.to_str().unwrap())]))
        .display_root(&dir);
    (dir, b)
}

fn fake_compile_error() -> TestResult {
    let (_, b) = fake_build("fake-err", &format!("{GOOD}// FAKE_ERROR\n"));
    let e = err_of(b.compile())?;
    if !matches!(&e, BuildError::Compile { line: Some(4), .. }) {
        return Err(format!("expected a compile error at line 4, got {e:?}").into());
    }
    expect(
        &e,
        &[
            "k.cu:4: error: identifier \"FAKE_ERROR\" is undefined",
            "nvcc 13.0",
            "the compiler's log:",
            "help: a name is not declared",
        ],
    )
}

fn fake_refused_arch() -> TestResult {
    let (_, mut b) = fake_build("fake-arch", GOOD);
    let e = err_of(b.arch("70").compile())?;
    expect(
        &e,
        &[
            "unsupported GPU architecture `compute_70`",
            "nvcc 13.0",
            "Unsupported gpu architecture 'compute_70'",
            "CUDA 13 dropped",
        ],
    )
}

fn fake_isa_above_floor() -> TestResult {
    let (_, b) = fake_build("fake-isa", &format!("// FAKE_ISA 9.0\n{GOOD}"));
    let e = err_of(b.compile())?;
    if !matches!(&e, BuildError::PtxIsaAboveFloor { .. }) {
        return Err(format!("expected PtxIsaAboveFloor, got {e:?}").into());
    }
    expect(
        &e,
        &[
            "ISA 9.0",
            "above the floor 8.4",
            "R580",
            "R550",
            "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
            "CUDA_BUILD_PTX_ISA_FLOOR=9.0",
        ],
    )?;
    // Raising the floor lets the same PTX through.
    let (_, mut b) = fake_build("fake-isa-ok", &format!("// FAKE_ISA 9.0\n{GOOD}"));
    b.ptx_isa_floor("9.0")
        .compile()
        .map(|_| ())
        .map_err(|e| e.to_string().into())
}

fn fake_builds() -> TestResult {
    let (dir, b) = fake_build("fake-ok", GOOD);
    let out = b.compile().map_err(|e| e.to_string())?;
    let f = &out.files[0];
    if f.headers.len() != 1 || !f.headers[0].ends_with("common.cuh") {
        return Err(format!("headers: {:?} (stdc-predef.h must be left out)", f.headers).into());
    }
    if out.rerun_if_changed.len() != 2 {
        return Err(format!("rerun-if-changed: {:?}", out.rerun_if_changed).into());
    }
    if !out.rerun_if_env_changed.iter().any(|v| v == "PATH")
        || !out.rerun_if_env_changed.iter().any(|v| v == "CUDA_HOME")
    {
        return Err(format!("rerun-if-env-changed: {:?}", out.rerun_if_env_changed).into());
    }
    let handles = std::fs::read_to_string(dir.join("out/kernels.rs")).map_err(|e| e.to_string())?;
    for part in [
        "pub scale: ::cuda_stack_kernels::cuda_stack_driver::Kernel<(&'static ::cuda_stack_kernels::cuda_stack_driver::DeviceSlice<f32>, &'static mut ::cuda_stack_kernels::cuda_stack_driver::DeviceSlice<f32>, f32, i32)>",
        "include_str!(concat!(env!(\"OUT_DIR\"), \"/k.ptx\"))",
        "check_entry::<",
    ] {
        if !handles.contains(part) {
            return Err(format!("handles lack {part:?}:\n{handles}").into());
        }
    }
    Ok(())
}

/// A build with the real compiler of `kind`, in a fresh folder.
fn real_build(kind: Compiler, name: &str, src_text: &str) -> (PathBuf, Build) {
    let dir = scratch(name);
    write(&dir, "common.cuh", HEADER);
    let src = write(&dir, "k.cu", src_text);
    let mut b = Build::new();
    b.file(&src)
        .compiler(kind)
        .out_dir(dir.join("out"))
        .cargo_metadata(false)
        .display_root(&dir);
    (dir, b)
}

/// The ISA this compiler emits, for builds that must pass the floor check.
fn floor_for(version: Option<(u32, u32)>) -> &'static str {
    match version {
        Some(v) if v <= (12, 4) => "8.4",
        Some((13, 0)) => "9.0",
        _ => "99.0",
    }
}

fn real_compile_error(kind: Compiler) -> TestResult {
    let (_, mut b) = real_build(
        kind,
        &format!("real-err-{kind:?}"),
        "extern \"C\" __global__ void k(int n) {\n    int x = undefined_name;\n}\n",
    );
    let e = err_of(b.ptx_isa_floor("99.0").compile())?;
    if !matches!(&e, BuildError::Compile { line: Some(2), .. }) {
        return Err(format!("expected a compile error at line 2, got {e:?}").into());
    }
    expect(&e, &["k.cu:2: error:", "undefined_name", "is undefined"])
}

fn real_refused_arch(kind: Compiler, version: Option<(u32, u32)>) -> TestResult {
    // CUDA 13 dropped sm_70; CUDA 12.x before 12.8 does not know sm_100.
    let arch = if version.is_some_and(|v| v >= (13, 0)) {
        "70"
    } else {
        "100"
    };
    let (_, mut b) = real_build(
        kind,
        &format!("real-arch-{kind:?}"),
        "extern \"C\" __global__ void k(int n) {}\n",
    );
    let e = err_of(b.arch(arch).ptx_isa_floor("99.0").compile())?;
    expect(
        &e,
        &[
            &format!("unsupported GPU architecture `compute_{arch}`"),
            "the compiler refused it",
        ],
    )
}

fn real_isa_above_floor(kind: Compiler) -> TestResult {
    let (_, mut b) = real_build(kind, &format!("real-isa-{kind:?}"), GOOD);
    let e = err_of(b.ptx_isa_floor("7.0").compile())?;
    expect(
        &e,
        &["above the floor 7.0", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"],
    )
}

fn real_builds(kind: Compiler, version: Option<(u32, u32)>) -> TestResult {
    let (dir, mut b) = real_build(kind, &format!("real-ok-{kind:?}"), GOOD);
    b.arch("75").arch("80").option("-O3");
    let out = b
        .ptx_isa_floor(floor_for(version))
        .compile()
        .map_err(|e| e.to_string())?;
    let f = &out.files[0];
    if f.ptx.len() != 2 || f.ptx.iter().any(|t| t.isa > out.floor) {
        return Err(format!(
            "PTX targets: {:?}",
            f.ptx.iter().map(|t| (t.arch, t.isa)).collect::<Vec<_>>()
        )
        .into());
    }
    if !f.headers.iter().any(|h| h.ends_with("common.cuh")) {
        return Err(format!("the header was not found as a dependency: {:?}", f.headers).into());
    }
    for name in ["k.ptx", "k.sm80.ptx", "kernels.rs"] {
        if !dir.join("out").join(name).is_file() {
            return Err(format!("{name} was not written").into());
        }
    }
    println!("{}: {} ISA {}", kind_name(kind), out.compiler, f.ptx[0].isa);
    Ok(())
}

fn kind_name(k: Compiler) -> &'static str {
    match k {
        Compiler::Nvcc => "nvcc",
        _ => "NVRTC",
    }
}
