//! gen-kernels: `cuda-stack-kernels`' committed PTX, manifest and typed handles, made by `cuda-stack-build`.
//!
//! ```text
//! gen-kernels ptx [--check]       compile kernels/cuda/*.cu with NVRTC 12.4 (CUDA_NVRTC_PATH),
//!                                 write kernels/ptx/*.ptx and kernels/kernels.json
//! gen-kernels handles [--check]   write kernels/src/generated/handles.rs from the sources,
//!                                 checked against the committed PTX (no compiler needed)
//! ```
//! With `--check` nothing is written; the exit status is 1, naming each stale file, when the
//! committed output differs. Run through `kernels/tools/gen-ptx` and `kernels/tools/gen-handles`,
//! which install the pinned NVRTC first.

mod json;

use cuda_stack_build::handles::{HandleFile, HandleStyle, SassFile};
use cuda_stack_build::{Arch, Build, Compiler, KernelDecl, ParamKind, RustType, DEFAULT_ARCH};
use json::{obj, s, Json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The NVRTC release the committed PTX comes from (its ISA, 8.4, is the project's floor).
const NVRTC_VERSION: (u32, u32) = (12, 4);
const NVRTC_WHEEL: &str = "nvidia-cuda-nvrtc-cu12==12.4.127";
/// The real architectures every file gets SASS for (where one of its PTX targets runs there;
/// `sm_90a` for the `compute_90a` file): Turing (T4), Ampere (A100; its SASS also runs on
/// 8.6 and 8.9: A10, L4, RTX 30xx/40xx) and Hopper (H100, H200). NVRTC 12.4 knows no newer
/// GPU; Blackwell JIT-compiles the PTX. About 1.7-2.4 MB per architecture.
const SASS_ARCHS: &[&str] = &["75", "80", "90"];
/// Files whose `sm_90a` PTX also gets a cubin from CUDA 13.0's ptxas
/// (`sass/<file>.sm_90a.cuda13.cubin`), loaded on drivers from CUDA 13.0 (R580) in place of NVRTC
/// 12.4's: the same PTX, a newer assembler. Listed only where it was measured faster on an H200
/// (kernels/TUNING.md): the wgmma attention forward, +4 to +14% on every case of
/// `attention_bench`'s sweep (2026-11-28). The wgmma backward measured the same or slower.
const CUDA13_SASS: &[&str] = &["attention_wgmma"];
/// The ptxas that assembles [`CUDA13_SASS`] (from the PyPI wheel `nvidia-cuda-nvcc==13.0.88`,
/// which `tools/install-nvcc-wheel` installs; `kernels/tools/gen-ptx` passes its path in
/// `PTXAS_CUDA13`).
const PTXAS_CUDA13_VERSION: &str = "V13.0.88";
/// The driver version ([`cuda_stack_build::handles::SassFile::min_driver`]) a CUDA 13 cubin needs.
const CUDA13_DRIVER: u32 = 13000;

/// Options every file is compiled with. No --use_fast_math: tests compare against exact IEEE
/// CPU references.
const BASE_OPTIONS: &[&str] = &["-std=c++17"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    let kernels_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let kernels_dir = kernels_dir.canonicalize().unwrap_or(kernels_dir);
    let result = match args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(String::as_str)
    {
        Some("ptx") => ptx(&kernels_dir, check),
        Some("handles") => handles(&kernels_dir, check),
        _ => Err("usage: gen-kernels ptx|handles [--check]".into()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gen-kernels: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The sources, sorted by name.
fn sources(kernels_dir: &Path) -> Res<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(kernels_dir.join("cuda"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    v.sort();
    if v.is_empty() {
        return Err("no .cu files in kernels/cuda".into());
    }
    Ok(v)
}

/// The kernels' own types: f16/bf16 bit patterns, the strided-copy layout and the strided
/// binary ops' layout.
fn configure(b: &mut Build) {
    b.pointee("f16_t", RustType::F16)
        .pointee("bf16_t", RustType::Bf16)
        .pointee("unsigned short", RustType::Prim("u16"))
        .struct_param("StridedLayout", "StridedLayout", 144, 8)
        .struct_param("BinaryStrides", "crate::BinaryStrides", 232, 8)
        .struct_param("TensorMap", "cuda_stack_driver::TensorMap", 128, 64)
        .struct_param("MtTable1", "crate::MtTable1", 3848, 8)
        .struct_param("MtTable2", "crate::MtTable2", 3816, 8)
        .struct_param("MtAdamTable", "crate::MtAdamTable", 3600, 8);
}

fn type_map() -> cuda_stack_build::TypeMap {
    let mut t = cuda_stack_build::TypeMap::default();
    t.pointee("f16_t", RustType::F16)
        .pointee("bf16_t", RustType::Bf16)
        .value_struct("StridedLayout", "StridedLayout", 144, 8)
        .value_struct("BinaryStrides", "crate::BinaryStrides", 232, 8)
        .value_struct("TensorMap", "cuda_stack_driver::TensorMap", 128, 64)
        .value_struct("MtTable1", "crate::MtTable1", 3848, 8)
        .value_struct("MtTable2", "crate::MtTable2", 3816, 8)
        .value_struct("MtAdamTable", "crate::MtAdamTable", 3600, 8);
    t
}

fn ptx(kernels_dir: &Path, check: bool) -> Res<ExitCode> {
    let tmp = std::env::temp_dir().join(format!("gen-kernels-{}", std::process::id()));
    let ptx_tmp = tmp.join("ptx");
    std::fs::create_dir_all(&ptx_tmp)?;
    let result = (|| -> Res<ExitCode> {
        let mut b = Build::new();
        configure(&mut b);
        b.files(sources(kernels_dir)?)
            .compiler(Compiler::Nvrtc)
            .fatbin(SASS_ARCHS)
            .out_dir(&ptx_tmp)
            .handles(None)
            .cargo_metadata(false)
            .warnings_as_errors(true)
            .display_root(kernels_dir);
        let out = b.compile()?;
        if out.compiler.version != Some(NVRTC_VERSION) {
            return Err(format!(
                "{} is not NVRTC {}.{} (a newer NVRTC emits a PTX ISA that older drivers reject)",
                out.compiler, NVRTC_VERSION.0, NVRTC_VERSION.1
            )
            .into());
        }
        if let Some(w) = out.warnings.first() {
            return Err(format!("warnings are errors here: {w}").into());
        }
        std::fs::write(tmp.join("kernels.json"), manifest(&out)?.dump() + "\n")?;
        std::fs::create_dir_all(tmp.join("sass"))?;
        for f in &out.files {
            for c in &f.cubins {
                let name = c
                    .path
                    .file_name()
                    .ok_or("a cubin path without a file name")?;
                std::fs::rename(&c.path, tmp.join("sass").join(name))?;
            }
        }
        cuda13_sass(&out, &tmp.join("sass"))?;
        let new = outputs(&tmp)?;
        if check {
            let old = outputs(kernels_dir)?;
            let mut stale: Vec<&String> = new
                .iter()
                .chain(old.iter().filter(|o| !new.contains(o)))
                .filter(|n| {
                    std::fs::read(kernels_dir.join(n)).ok() != std::fs::read(tmp.join(n)).ok()
                })
                .collect();
            stale.sort();
            if !stale.is_empty() {
                eprintln!("gen-ptx --check: stale or missing generated files (run kernels/tools/gen-ptx):");
                for n in stale {
                    eprintln!("  kernels/{n}");
                }
                return Ok(ExitCode::FAILURE);
            }
            println!(
                "gen-ptx --check: {} generated files up to date ({})",
                new.len(),
                out.compiler
            );
            return Ok(ExitCode::SUCCESS);
        }
        for old in outputs(kernels_dir)? {
            if (old.starts_with("ptx/") || old.starts_with("sass/")) && !new.contains(&old) {
                std::fs::remove_file(kernels_dir.join(&old))?;
            }
        }
        std::fs::create_dir_all(kernels_dir.join("ptx"))?;
        std::fs::create_dir_all(kernels_dir.join("sass"))?;
        for n in &new {
            let data = std::fs::read(tmp.join(n))?;
            if std::fs::read(kernels_dir.join(n)).ok().as_deref() != Some(&data[..]) {
                std::fs::write(kernels_dir.join(n), data)?;
            }
        }
        println!(
            "gen-ptx: wrote {} files under {} ({})",
            new.len(),
            kernels_dir.display(),
            out.compiler
        );
        Ok(ExitCode::SUCCESS)
    })();
    std::fs::remove_dir_all(&tmp).ok();
    result
}

/// Assembles each [`CUDA13_SASS`] file's `sm_90a` PTX with CUDA 13.0's ptxas into
/// `sass_dir/<file>.sm_90a.cuda13.cubin` (ptxas's default optimisation, as NVRTC's own cubins).
fn cuda13_sass(out: &cuda_stack_build::Output, sass_dir: &Path) -> Res<()> {
    let ptxas = std::env::var("PTXAS_CUDA13").map_err(|_| {
        "PTXAS_CUDA13 is not set (run through kernels/tools/gen-ptx, which installs CUDA 13.0's ptxas)"
    })?;
    let version = std::process::Command::new(&ptxas)
        .arg("--version")
        .output()
        .map_err(|e| format!("{ptxas}: {e}"))?;
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    if !version.contains(PTXAS_CUDA13_VERSION) {
        return Err(format!("{ptxas} is not ptxas {PTXAS_CUDA13_VERSION}: {version}").into());
    }
    for stem in CUDA13_SASS {
        let f = out
            .files
            .iter()
            .find(|f| f.stem == *stem)
            .ok_or_else(|| format!("CUDA13_SASS names {stem}, which is not a kernel file"))?;
        let ptx = f
            .ptx
            .iter()
            .find(|p| p.arch.real_name() == "sm_90a")
            .ok_or_else(|| format!("{stem} has no compute_90a PTX for CUDA13_SASS"))?;
        let cubin = sass_dir.join(format!("{stem}.sm_90a.cuda13.cubin"));
        let run = std::process::Command::new(&ptxas)
            .arg("-arch=sm_90a")
            .arg(&ptx.path)
            .arg("-o")
            .arg(&cubin)
            .output()
            .map_err(|e| format!("{ptxas}: {e}"))?;
        if !run.status.success() || !run.stderr.is_empty() {
            return Err(format!(
                "ptxas {PTXAS_CUDA13_VERSION} on {stem}'s sm_90a PTX: {}{}",
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr)
            )
            .into());
        }
    }
    Ok(())
}

/// `kernels.json`, `ptx/*.ptx` and `sass/*.cubin` under `root`.
fn outputs(root: &Path) -> Res<Vec<String>> {
    let mut names = vec!["kernels.json".to_string()];
    for (dir, ext) in [("ptx", ".ptx"), ("sass", ".cubin")] {
        if let Ok(rd) = std::fs::read_dir(root.join(dir)) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.ends_with(ext) {
                    names.push(format!("{dir}/{n}"));
                }
            }
        }
    }
    names.sort();
    Ok(names)
}

/// The committed SASS of the file `stem`: each `sass/<stem>.sm_XY.cubin` (NVRTC 12.4's: every
/// CUDA 12 driver loads it) and `sass/<stem>.sm_XY.cuda13.cubin` (CUDA 13.0's ptxas), with its
/// architecture and the driver it needs.
fn committed_sass(kernels_dir: &Path, stem: &str) -> Res<Vec<SassFile>> {
    let mut v = Vec::new();
    let prefix = format!("{stem}.");
    for name in outputs(kernels_dir)? {
        let Some(rest) = name
            .strip_prefix("sass/")
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|n| n.strip_suffix(".cubin"))
        else {
            continue;
        };
        let (arch, min_driver) = match rest.strip_suffix(".cuda13") {
            Some(arch) => (arch, CUDA13_DRIVER),
            None => (rest, NVRTC_VERSION.0 * 1000),
        };
        if !arch.starts_with("sm_") || arch.contains('.') {
            continue;
        }
        v.push(SassFile {
            arch: Arch::parse(arch)?,
            min_driver,
            path: name,
        });
    }
    v.sort();
    Ok(v)
}

fn source_name(p: &Path) -> String {
    format!(
        "cuda/{}",
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    )
}

/// The manifest, as the first (Python) gen-ptx wrote it.
fn manifest(out: &cuda_stack_build::Output) -> Res<Json> {
    let mut files = Vec::new();
    let mut kernels: Vec<(String, String, Json)> = Vec::new();
    for f in &out.files {
        let source = source_name(&f.source);
        let ptx_map = Json::Obj(
            f.ptx
                .iter()
                .map(|t| {
                    (
                        t.arch.virtual_name(),
                        s(&format!("ptx/{}{}", f.stem, t.arch.ptx_suffix())),
                    )
                })
                .collect(),
        );
        let mut options: Vec<Json> = BASE_OPTIONS.iter().map(|o| s(o)).collect();
        options.extend(f.options.iter().map(|o| s(o)));
        let sass_map = Json::Obj(
            f.cubins
                .iter()
                .map(|c| {
                    (
                        c.arch.real_name(),
                        s(&format!("sass/{}.{}.cubin", f.stem, c.arch.real_name())),
                    )
                })
                .collect(),
        );
        let mut entry = vec![
            ("source", s(&source)),
            ("ptx", copy(&ptx_map)),
            ("sass", sass_map),
            ("options", Json::Arr(options)),
        ];
        if CUDA13_SASS.contains(&f.stem.as_str()) {
            entry.push((
                "sass_cuda13",
                obj(vec![
                    ("sm_90a", s(&format!("sass/{}.sm_90a.cuda13.cubin", f.stem))),
                    ("ptxas", s(PTXAS_CUDA13_VERSION)),
                    ("min_driver", Json::Int(i64::from(CUDA13_DRIVER))),
                ]),
            ));
        }
        // A file without the portable target loads lazily, only where one of its targets runs.
        if !f.ptx.iter().any(|t| t.arch == DEFAULT_ARCH) {
            entry.push(("optional", Json::Bool(true)));
        }
        files.push(obj(entry));
        for k in &f.kernels {
            let params = k
                .params
                .iter()
                .map(|p| {
                    obj(vec![
                        ("name", s(&p.name)),
                        ("type", s(&p.c_type)),
                        ("size", Json::Int(p.size as i64)),
                        ("align", Json::Int(p.align as i64)),
                        ("written", Json::Bool(p.written())),
                    ])
                })
                .collect();
            kernels.push((
                source.clone(),
                k.name.clone(),
                obj(vec![
                    ("name", s(&k.name)),
                    ("source", s(&source)),
                    ("ptx", copy(&ptx_map)),
                    ("params", Json::Arr(params)),
                ]),
            ));
        }
    }
    kernels.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let strided = obj(vec![
        ("size", Json::Int(144)),
        ("align", Json::Int(8)),
        ("c", s("struct StridedLayout { int rank; long long shape[8]; long long strides[8]; long long offset; };")),
        (
            "fields",
            Json::Arr(
                [("rank", "int", 0, 4), ("(padding)", "", 4, 4), ("shape", "long long[8]", 8, 64), ("strides", "long long[8]", 72, 64), ("offset", "long long", 136, 8)]
                    .iter()
                    .map(|(n, t, o, z)| obj(vec![("name", s(n)), ("type", s(t)), ("offset", Json::Int(*o)), ("size", Json::Int(*z))]))
                    .collect(),
            ),
        ),
    ]);
    Ok(obj(vec![
        (
            "comment",
            s("Generated by kernels/tools/gen-ptx; do not edit. Paths are relative to kernels/. Each file's SASS (sass/*.cubin) is compiled by the same NVRTC from the same source and options as its PTX; a file's sass_cuda13 cubin is its sm_90a PTX assembled by CUDA 13.0's ptxas, for drivers from CUDA 13.0. A pointer parameter with written=false is only read by the kernel. Scalar and struct parameters are passed by value."),
        ),
        ("nvrtc", s(&format!("{}.{}", NVRTC_VERSION.0, NVRTC_VERSION.1))),
        ("nvrtc_wheel", s(NVRTC_WHEEL)),
        ("ptx_isa", s(&out.floor.to_string())),
        (
            "typedefs",
            obj(vec![
                ("f16_t", s("unsigned short holding IEEE 754 binary16 bits (Rust: half::f16)")),
                ("bf16_t", s("unsigned short holding bfloat16 bits (Rust: half::bf16)")),
            ]),
        ),
        (
            "structs",
            obj(vec![
                ("TensorMap", obj(vec![
                    ("size", Json::Int(128)),
                    ("align", Json::Int(64)),
                    ("c", s("struct alignas(64) TensorMap { unsigned long long bits[16]; };  // CUtensorMap, by value as a __grid_constant__ parameter")),
                    ("fields", Json::Arr(vec![obj(vec![("name", s("bits")), ("type", s("unsigned long long[16]")), ("offset", Json::Int(0)), ("size", Json::Int(128))])])),
                ])),
                ("StridedLayout", strided),
                ("BinaryStrides", binary_strides()),
                ("MtTable1", table(3848, "struct MtTable1 { unsigned long long addr[192]; unsigned long long len[192]; unsigned int block_start[193]; unsigned int count; };  // multi_tensor.cu, by value as a __grid_constant__ parameter")),
                ("MtTable2", table(3816, "struct MtTable2 { unsigned long long src[136]; unsigned long long dst[136]; unsigned long long len[136]; unsigned int block_start[137]; unsigned int count; };  // multi_tensor.cu")),
                ("MtAdamTable", table(3600, "struct MtAdamTable { unsigned long long p[64], g[64], m[64], v[64], len[64]; double wd[64]; unsigned long long scale; unsigned int block_start[65]; int step[64]; unsigned int count; };  // multi_tensor.cu")),
            ]),
        ),
        ("files", Json::Arr(files)),
        ("kernels", Json::Arr(kernels.into_iter().map(|k| k.2).collect())),
    ]))
}

/// `struct BinaryStrides` (binary_strided.cu) for the manifest.
fn binary_strides() -> Json {
    let fields = [
        ("rank", "int", 0, 4),
        ("flags", "int", 4, 4),
        ("shape", "long long[6]", 8, 48),
        ("a_strides", "long long[6]", 56, 48),
        ("b_strides", "long long[6]", 104, 48),
        ("a_offset", "long long", 152, 8),
        ("b_offset", "long long", 160, 8),
        ("magic", "unsigned int[6]", 168, 24),
        ("shift", "unsigned int[6]", 192, 24),
        ("units", "unsigned long long", 216, 8),
        ("vec", "int", 224, 4),
        ("narrow", "int", 228, 4),
    ];
    obj(vec![
        ("size", Json::Int(232)),
        ("align", Json::Int(8)),
        ("c", s("struct BinaryStrides { int rank; int flags; long long shape[6]; long long a_strides[6]; long long b_strides[6]; long long a_offset; long long b_offset; unsigned int magic[6]; unsigned int shift[6]; unsigned long long units; int vec; int narrow; };")),
        (
            "fields",
            Json::Arr(
                fields
                    .iter()
                    .map(|(n, t, o, z)| obj(vec![("name", s(n)), ("type", s(t)), ("offset", Json::Int(*o)), ("size", Json::Int(*z))]))
                    .collect(),
            ),
        ),
    ])
}

/// A multi-tensor table's manifest entry (its fields are in the C declaration).
fn table(size: i64, c: &str) -> Json {
    obj(vec![
        ("size", Json::Int(size)),
        ("align", Json::Int(8)),
        ("c", Json::Str(c.to_string())),
    ])
}

fn copy(j: &Json) -> Json {
    match j {
        Json::Str(x) => Json::Str(x.clone()),
        Json::Int(i) => Json::Int(*i),
        Json::Bool(b) => Json::Bool(*b),
        Json::Arr(v) => Json::Arr(v.iter().map(copy).collect()),
        Json::Obj(v) => Json::Obj(v.iter().map(|(k, x)| (k.clone(), copy(x))).collect()),
    }
}

fn handles(kernels_dir: &Path, check: bool) -> Res<ExitCode> {
    let types = type_map();
    let mut files = Vec::new();
    for src in sources(kernels_dir)? {
        let text = std::fs::read_to_string(&src)?;
        let source = source_name(&src);
        let (archs, _) = cuda_stack_build::directives(&src, &text)?;
        let archs: Vec<Arch> = archs.unwrap_or_else(|| vec![DEFAULT_ARCH]);
        let stem = src
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut kernels: Vec<KernelDecl> =
            cuda_stack_build::parse_kernels(Path::new(&source), &text, &types)?;
        kernels.sort_by(|a, b| a.name.cmp(&b.name));
        let mut targets = Vec::new();
        for a in &archs {
            let rel = format!("ptx/{stem}{}", a.ptx_suffix());
            let ptx = std::fs::read_to_string(kernels_dir.join(&rel))
                .map_err(|e| format!("kernels/{rel}: {e} (run kernels/tools/gen-ptx first)"))?;
            let entries = cuda_stack_build::ptx_entries::entries(&ptx)
                .ok_or_else(|| format!("kernels/{rel}: unreadable .entry parameters"))?;
            for k in &kernels {
                if entries.get(&k.name) != Some(&k.sizes()) {
                    return Err(format!(
                        "kernels/{rel}: `{}` has parameters {:?} in the PTX but {:?} in {source}; run kernels/tools/gen-ptx",
                        k.name,
                        entries.get(&k.name),
                        k.sizes()
                    )
                    .into());
                }
            }
            targets.push((*a, rel));
        }
        for k in &kernels {
            for p in &k.params {
                if let ParamKind::Pointer {
                    elem: RustType::Prim("void"),
                    ..
                } = p.kind
                {
                    return Err(format!("{source}: {}: void* has no typed handle", k.name).into());
                }
            }
        }
        let sass = committed_sass(kernels_dir, &stem)?;
        files.push(HandleFile {
            ident: stem,
            source,
            targets,
            fatbin: None,
            sass,
            kernels,
        });
    }
    let text = cuda_stack_build::handles::generate(&HandleStyle::CudaKernelsCrate, &files);
    let path = kernels_dir.join("src/generated/handles.rs");
    let n: usize = files.iter().map(|f| f.kernels.len()).sum();
    if check {
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            eprintln!("gen-handles: kernels/src/generated/handles.rs is stale; run kernels/tools/gen-handles");
            return Ok(ExitCode::FAILURE);
        }
        println!("gen-handles: handles.rs is up to date ({n} kernels)");
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::write(&path, text)?;
    println!("gen-handles: wrote kernels/src/generated/handles.rs ({n} kernels)");
    Ok(ExitCode::SUCCESS)
}
