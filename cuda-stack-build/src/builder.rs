//! [`Build`]: what a build script asks for, and [`Output`]: what it got.

use crate::arch::{sass_archs, Arch};
use crate::diagnostics::{self, Severity};
use crate::directives::{directives, parse_archs};
use crate::discover::{self, Compiler, CompilerInfo, Found};
use crate::env::Env;
use crate::error::BuildError;
use crate::handles::{self, HandleFile, HandleStyle, SassFile};
use crate::isa::{IsaVersion, DEFAULT_FLOOR};
use crate::job::{Compiled, Job};
use crate::parallel::run_parallel;
use crate::signature::{self, KernelDecl, RustType, TypeMap};
use crate::{includes, nvcc, nvrtc, ptx_entries};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Compiles a crate's `.cu` files to PTX (and optionally fatbins) in its build script, and
/// writes typed launch handles for their kernels. See the [crate docs](crate).
#[derive(Clone, Debug)]
pub struct Build {
    files: Vec<PathBuf>,
    includes: Vec<PathBuf>,
    options: Vec<String>,
    archs: Vec<String>,
    fatbin: Vec<String>,
    floor: Option<String>,
    compiler: Compiler,
    std: String,
    out_dir: Option<PathBuf>,
    handles: Option<String>,
    cargo_metadata: Option<bool>,
    warnings_as_errors: bool,
    display_root: Option<PathBuf>,
    types: TypeMap,
    env: Option<EnvFn>,
}

/// Reads one environment variable.
type Lookup = dyn Fn(&str) -> Option<OsString> + Send + Sync;

/// A replacement environment (tests).
#[derive(Clone)]
struct EnvFn(std::sync::Arc<Lookup>);

impl std::fmt::Debug for EnvFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvFn")
    }
}

/// One compiled PTX target.
#[derive(Clone, Debug)]
pub struct CompiledPtx {
    /// The virtual architecture.
    pub arch: Arch,
    /// The file written.
    pub path: PathBuf,
    /// Its `.version`.
    pub isa: IsaVersion,
    /// The PTX text.
    pub text: String,
}

/// One file's SASS for one real architecture (NVRTC's output for [`Build::fatbin`]).
#[derive(Clone, Debug)]
pub struct CompiledCubin {
    /// The real architecture (`sm_90`, or `sm_90a` for a file whose PTX is `compute_90a`).
    pub arch: Arch,
    /// The file written, `<stem>.sm_90.cubin`.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: usize,
}

/// One compiled source file.
#[derive(Clone, Debug)]
pub struct CompiledFile {
    /// The source as given to [`Build::file`].
    pub source: PathBuf,
    /// Its base name (`custom_kernels`), which names its outputs.
    pub stem: String,
    /// The options it was compiled with (the build's, then its own directives').
    pub options: Vec<String>,
    /// Its PTX, one per architecture, ascending.
    pub ptx: Vec<CompiledPtx>,
    /// Its fatbin, when one was asked for and nvcc made it.
    pub fatbin: Option<PathBuf>,
    /// Its SASS, one cubin per real architecture, when SASS was asked for and NVRTC compiled
    /// (ascending; see [`Build::fatbin`]).
    pub cubins: Vec<CompiledCubin>,
    /// Its `extern "C" __global__` kernels.
    pub kernels: Vec<KernelDecl>,
    /// The user headers it includes (directly or not).
    pub headers: Vec<PathBuf>,
}

/// What [`Build::compile`] did.
#[derive(Clone, Debug)]
pub struct Output {
    /// The compiler used.
    pub compiler: CompilerInfo,
    /// The ISA floor every PTX was checked against.
    pub floor: IsaVersion,
    /// Every file, in the order given.
    pub files: Vec<CompiledFile>,
    /// The handles file written, if any.
    pub handles: Option<PathBuf>,
    /// The files a change to which must rerun the build (sources and headers).
    pub rerun_if_changed: Vec<PathBuf>,
    /// The environment variables read.
    pub rerun_if_env_changed: Vec<String>,
    /// The compilers' warnings and cuda-stack-build's own.
    pub warnings: Vec<String>,
}

impl Default for Build {
    fn default() -> Self {
        Build::new()
    }
}

impl Build {
    /// A build with the defaults: PTX for `compute_75` at ISA floor 8.4, nvcc if found else
    /// NVRTC, `-std=c++17`, handles written to `$OUT_DIR/kernels.rs`.
    pub fn new() -> Build {
        Build {
            files: Vec::new(),
            includes: Vec::new(),
            options: Vec::new(),
            archs: Vec::new(),
            fatbin: Vec::new(),
            floor: None,
            compiler: Compiler::Auto,
            std: "c++17".into(),
            out_dir: None,
            handles: Some("kernels.rs".into()),
            cargo_metadata: None,
            warnings_as_errors: false,
            display_root: None,
            types: TypeMap::default(),
            env: None,
        }
    }

    /// Adds a `.cu` file. Its own options can be given in comment lines:
    /// `// cuda-stack-build: archs=75,80,90a` (its PTX targets, instead of the build's) and
    /// `// cuda-stack-build: options=--use_fast_math` (appended to the build's options).
    pub fn file(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.files.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds several files.
    pub fn files<P: AsRef<Path>>(&mut self, paths: impl IntoIterator<Item = P>) -> &mut Build {
        for p in paths {
            self.file(p);
        }
        self
    }

    /// Adds an include folder (`-I`). A file's own folder is always searched first.
    pub fn include(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.includes.push(dir.as_ref().to_path_buf());
        self
    }

    /// Adds a compiler option, given to nvcc and NVRTC alike: `--use_fast_math`, `-lineinfo`,
    /// `-DNAME=1`, `-O3` (for nvcc; NVRTC optimises device code fully anyway and is not given
    /// `-O*`).
    pub fn option(&mut self, opt: impl Into<String>) -> &mut Build {
        self.options.push(opt.into());
        self
    }

    /// `-DNAME` or `-DNAME=VALUE`.
    pub fn define(&mut self, name: &str, value: Option<&str>) -> &mut Build {
        match value {
            Some(v) => self.option(format!("-D{name}={v}")),
            None => self.option(format!("-D{name}")),
        }
    }

    /// `--use_fast_math` (fast approximate `expf`, `__fdividef`, flush-to-zero …).
    pub fn fast_math(&mut self) -> &mut Build {
        self.option("--use_fast_math")
    }

    /// Adds a PTX target architecture (`75`, `sm_80`, `compute_90a`); the default is `75` only.
    /// The driver JIT-compiles PTX for any newer GPU; at load the newest target the device can
    /// run is picked (an `a` target only on exactly its GPU).
    pub fn arch(&mut self, arch: &str) -> &mut Build {
        self.archs.push(arch.to_string());
        self
    }

    /// Also compiles SASS (machine code, which loads without the driver's JIT) for each of
    /// `archs`: with nvcc a fatbin per file holding that SASS plus the PTX of the first target
    /// as the fallback; with NVRTC, which writes no fatbins, one cubin per file and
    /// architecture (`<stem>.sm_90.cubin`). A file gets SASS only for the architectures one of
    /// its PTX targets runs on (a `compute_80` file none for `75`), as `sm_90a` where its PTX
    /// is `compute_90a`. The handles load the SASS that fits the device (the same rule as the
    /// driver's: same major version, minor not above the device's) and the PTX elsewhere.
    pub fn fatbin<S: AsRef<str>>(&mut self, archs: impl IntoIterator<Item = S>) -> &mut Build {
        self.fatbin
            .extend(archs.into_iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// The highest PTX ISA the output may have (default `8.4`, the project's floor);
    /// `CUDA_BUILD_PTX_ISA_FLOOR` overrides it.
    pub fn ptx_isa_floor(&mut self, floor: &str) -> &mut Build {
        self.floor = Some(floor.to_string());
        self
    }

    /// Which compiler to use (default [`Compiler::Auto`]); `CUDA_BUILD_COMPILER` overrides it.
    pub fn compiler(&mut self, compiler: Compiler) -> &mut Build {
        self.compiler = compiler;
        self
    }

    /// The C++ standard (default `c++17`).
    pub fn std(&mut self, std: &str) -> &mut Build {
        self.std = std.to_string();
        self
    }

    /// Where outputs go (default `$OUT_DIR`).
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The name of the handles file in the output folder (default `kernels.rs`), or `None`
    /// for no handles.
    pub fn handles(&mut self, file: Option<&str>) -> &mut Build {
        self.handles = file.map(String::from);
        self
    }

    /// Whether to print `cargo:` lines (default: when run by cargo as a build script).
    pub fn cargo_metadata(&mut self, on: bool) -> &mut Build {
        self.cargo_metadata = Some(on);
        self
    }

    /// Treats any compiler diagnostic, warnings included, as an error.
    pub fn warnings_as_errors(&mut self, on: bool) -> &mut Build {
        self.warnings_as_errors = on;
        self
    }

    /// The folder source paths are shown relative to (default `$CARGO_MANIFEST_DIR`).
    pub fn display_root(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.display_root = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Maps pointers to the C typedef `c_name` to `&DeviceSlice<rust>`, e.g. a
    /// `typedef unsigned short f16_t;` holding f16 bits to [`RustType::F16`].
    pub fn pointee(&mut self, c_name: &str, rust: RustType) -> &mut Build {
        self.types.pointee(c_name, rust);
        self
    }

    /// Maps a by-value struct parameter: `c_name` is `size` bytes aligned to `align`, and
    /// `rust_path` names a `#[repr(C)]` `bytemuck::Pod` type with the same layout.
    pub fn struct_param(
        &mut self,
        c_name: &str,
        rust_path: &str,
        size: usize,
        align: usize,
    ) -> &mut Build {
        self.types.value_struct(c_name, rust_path, size, align);
        self
    }

    /// Reads environment variables through `f` instead of the process environment (tests). The
    /// `cc` crate is then not asked, since it reads the process environment itself.
    pub fn environment(
        &mut self,
        f: impl Fn(&str) -> Option<OsString> + Send + Sync + 'static,
    ) -> &mut Build {
        self.env = Some(EnvFn(std::sync::Arc::new(f)));
        self
    }

    /// Compiles, checks and writes everything; prints `cargo:` lines when run by cargo.
    pub fn compile(&self) -> Result<Output, BuildError> {
        let env = match &self.env {
            Some(f) => {
                let f = f.0.clone();
                Env::from_fn(move |k| f(k))
            }
            None => Env::process(),
        };
        let in_build_script =
            env.is_process() && env.get("OUT_DIR").is_some() && env.get("TARGET").is_some();
        let emit = self.cargo_metadata.unwrap_or(in_build_script);
        let result = self.compile_in(&env, in_build_script);
        if emit {
            let mut vars = env.vars_read();
            vars.retain(|v| !SET_BY_CARGO.contains(&v.as_str()));
            match &result {
                Ok(out) => {
                    for f in &out.rerun_if_changed {
                        println!("cargo:rerun-if-changed={}", f.display());
                    }
                    for w in &out.warnings {
                        for line in w.lines() {
                            println!("cargo:warning={line}");
                        }
                    }
                }
                Err(_) => {
                    for f in &self.files {
                        println!("cargo:rerun-if-changed={}", f.display());
                    }
                }
            }
            for v in vars {
                println!("cargo:rerun-if-env-changed={v}");
            }
        }
        result
    }

    /// [`Build::compile`], and on failure prints the error and exits the build script with
    /// status 1 (cargo shows it under "--- stderr").
    pub fn compile_or_exit(&self) -> Output {
        match self.compile() {
            Ok(out) => out,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }

    fn compile_in(&self, env: &Env, in_build_script: bool) -> Result<Output, BuildError> {
        if self.files.is_empty() {
            return Err(BuildError::Config(
                "no .cu files: add some with `.file(path)`".into(),
            ));
        }
        let out_dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => env.get("OUT_DIR").map(PathBuf::from).ok_or_else(|| {
                BuildError::Config(
                    "OUT_DIR is not set: run from a build script, or call `.out_dir(dir)`".into(),
                )
            })?,
        };
        std::fs::create_dir_all(&out_dir).map_err(|e| BuildError::io("create", &out_dir, e))?;
        let floor_text = env
            .get_str("CUDA_BUILD_PTX_ISA_FLOOR")
            .filter(|s| !s.is_empty())
            .or_else(|| self.floor.clone());
        let floor = match floor_text {
            Some(t) => IsaVersion::parse(&t).ok_or_else(|| {
                BuildError::Config(format!("PTX ISA floor `{t}` is not a version like 8.4"))
            })?,
            None => DEFAULT_FLOOR,
        };
        let archs = parse_archs(&self.archs)?;
        let sass = self
            .fatbin
            .iter()
            .map(|a| Arch::parse(a))
            .collect::<Result<Vec<_>, _>>()?;
        let root = self
            .display_root
            .clone()
            .or_else(|| env.get("CARGO_MANIFEST_DIR").map(PathBuf::from));
        // Read and parse every source first: a declaration no handle can express is reported
        // before any compiler is looked for.
        let mut plans = Vec::new();
        for src in &self.files {
            let text = std::fs::read_to_string(src).map_err(|e| BuildError::io("read", src, e))?;
            let display = display_path(src, root.as_deref());
            let (file_archs, file_opts) = directives(src, &text)?;
            let stem = src
                .file_stem()
                .map(|s| {
                    s.to_string_lossy()
                        .replace(|c: char| !c.is_alphanumeric() && c != '_', "_")
                })
                .unwrap_or_default();
            if plans.iter().any(|p: &Plan| p.stem == stem) {
                return Err(BuildError::Config(format!(
                    "two files are named `{stem}`: outputs are named after the file, so rename one"
                )));
            }
            let kernels = signature::parse_kernels(Path::new(&display), &text, &self.types)?;
            let mut options = self.options.clone();
            options.extend(file_opts);
            let mut includes = vec![src
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf()];
            includes.extend(self.includes.iter().cloned());
            plans.push(Plan {
                source: src.clone(),
                display,
                stem,
                archs: file_archs.unwrap_or_else(|| archs.clone()),
                options,
                includes,
                kernels,
            });
        }
        let mut seen = std::collections::BTreeMap::new();
        for p in &plans {
            for k in &p.kernels {
                if let Some(other) = seen.insert(k.name.clone(), p.display.clone()) {
                    return Err(BuildError::Config(format!(
                        "kernel `{}` is defined in both {other} and {}: the handles need unique names",
                        k.name, p.display
                    )));
                }
            }
        }
        let found = discover::find(self.compiler, env, env.is_process() && in_build_script)?;
        let info = found.info().clone();
        let mut warnings = Vec::new();
        let scratch = out_dir.join("cuda-stack-build-scratch");
        std::fs::create_dir_all(&scratch).map_err(|e| BuildError::io("create", &scratch, e))?;
        let jobs_wanted = env
            .get_str("NUM_JOBS")
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1)
            });
        // Every (file, target) compile, and each file's fatbin or cubins, in parallel: PTX
        // first in file order (NVRTC numbers call sequences in the PTX it prints with a
        // counter that a thread's earlier SASS compiles advance, so SASS first would change
        // the committed PTX), then the SASS, biggest sources first so the threads finish
        // together.
        let mut work: Vec<(usize, Work)> = Vec::new();
        for (i, p) in plans.iter().enumerate() {
            work.extend(p.archs.iter().map(|a| (i, Work::Ptx(*a))));
            match &found {
                Found::Nvcc(_) if !sass.is_empty() => work.push((i, Work::Fatbin)),
                Found::Nvcc(_) => {}
                Found::Nvrtc(..) => work.extend(
                    sass_archs(&p.archs, &sass)
                        .into_iter()
                        .map(|a| (i, Work::Cubin(a))),
                ),
            }
        }
        let mut order: Vec<usize> = (0..work.len()).collect();
        order.sort_by_key(|&w| {
            let (i, kind) = work[w];
            match kind {
                Work::Ptx(_) => (0, 0, w),
                _ => {
                    let size = std::fs::metadata(&plans[i].source).map_or(0, |m| m.len());
                    (1, u64::MAX - size, w)
                }
            }
        });
        let ordered: Vec<(usize, Work)> = order.iter().map(|&w| work[w]).collect();
        let mut results: Vec<Option<Result<Done, BuildError>>> =
            (0..work.len()).map(|_| None).collect();
        let done = run_parallel(&ordered, jobs_wanted, |&(i, kind)| {
            let p = &plans[i];
            let job = Job {
                source: &p.source,
                display: p.display.clone(),
                stem: p.stem.clone(),
                arch: match kind {
                    Work::Ptx(a) => a,
                    _ => p.archs[0],
                },
                options: &p.options,
                includes: &p.includes,
                std: &self.std,
            };
            match (&found, kind) {
                (Found::Nvcc(n), Work::Ptx(_)) => nvcc::ptx(n, &job, &scratch).map(Done::Ptx),
                (Found::Nvrtc(lib, info), Work::Ptx(_)) => {
                    nvrtc::ptx(lib, info, &job).map(Done::Ptx)
                }
                (Found::Nvcc(n), Work::Fatbin) => {
                    nvcc::fatbin(n, &job, &sass, &scratch).map(|(b, l)| Done::Binary(b, l))
                }
                (Found::Nvrtc(lib, info), Work::Cubin(a)) => {
                    nvrtc::cubin(lib, info, &job, &a).map(|(b, l)| Done::Binary(b, l))
                }
                _ => Err(BuildError::Config(
                    "internal: a binary was scheduled for the wrong compiler".into(),
                )),
            }
        });
        if done.len() != order.len() {
            return Err(BuildError::Config(
                "internal: a compile thread stopped without a result".into(),
            ));
        }
        for (&w, r) in order.iter().zip(done) {
            results[w] = Some(r);
        }
        let mut files = Vec::new();
        let mut rerun = Vec::new();
        let mut results = work.iter().zip(results).peekable();
        for (pi, p) in plans.iter().enumerate() {
            let mut cf = CompiledFile {
                source: p.source.clone(),
                stem: p.stem.clone(),
                options: p.options.clone(),
                ptx: Vec::new(),
                fatbin: None,
                cubins: Vec::new(),
                kernels: p.kernels.clone(),
                headers: Vec::new(),
            };
            while let Some((&(i, kind), done)) = results.next_if(|((i, _), _)| *i == pi) {
                let done = done.ok_or_else(|| {
                    BuildError::Config(format!("internal: compile result {i} is missing"))
                })??;
                match (done, kind) {
                    (Done::Ptx(c), Work::Ptx(a)) => {
                        self.check_log(&info, p, &c.log, &mut warnings)?;
                        let ptx = check_ptx(p, a, &c, floor, &info, &mut warnings)?;
                        let path = out_dir.join(format!("{}{}", p.stem, a.ptx_suffix()));
                        write_if_changed(&path, c.ptx.as_bytes())?;
                        if cf.headers.is_empty() {
                            cf.headers = c
                                .deps
                                .into_iter()
                                .filter(|d| *d != includes::normalize(&p.source))
                                .collect();
                        }
                        cf.ptx.push(CompiledPtx {
                            arch: a,
                            path,
                            isa: ptx,
                            text: c.ptx,
                        });
                    }
                    (Done::Binary(bytes, log), Work::Fatbin) => {
                        self.check_log(&info, p, &log, &mut warnings)?;
                        let path = out_dir.join(format!("{}.fatbin", p.stem));
                        write_if_changed(&path, &bytes)?;
                        cf.fatbin = Some(path);
                    }
                    (Done::Binary(bytes, log), Work::Cubin(a)) => {
                        self.check_log(&info, p, &log, &mut warnings)?;
                        let path = out_dir.join(format!("{}.{}.cubin", p.stem, a.real_name()));
                        write_if_changed(&path, &bytes)?;
                        cf.cubins.push(CompiledCubin {
                            arch: a,
                            path,
                            bytes: bytes.len(),
                        });
                    }
                    _ => {
                        return Err(BuildError::Config(
                            "internal: compile results out of order".into(),
                        ))
                    }
                }
            }
            cf.ptx.sort_by_key(|t| t.arch);
            cf.cubins.sort_by_key(|t| t.arch);
            rerun.push(p.source.clone());
            rerun.extend(cf.headers.iter().cloned());
            files.push(cf);
        }
        let handles = match &self.handles {
            Some(name) => {
                let hf: Vec<HandleFile> = files
                    .iter()
                    .zip(&plans)
                    .map(|(f, p)| HandleFile {
                        ident: f.stem.clone(),
                        source: p.display.clone(),
                        targets: f.ptx.iter().map(|t| (t.arch, file_name(&t.path))).collect(),
                        fatbin: f.fatbin.as_ref().map(|p| file_name(p)),
                        sass: f
                            .cubins
                            .iter()
                            .map(|c| SassFile {
                                arch: c.arch,
                                min_driver: info.version.map_or(0, |(major, _)| major * 1000),
                                path: file_name(&c.path),
                            })
                            .collect(),
                        kernels: f.kernels.clone(),
                    })
                    .collect();
                let text = handles::generate(&HandleStyle::OutDir, &hf);
                let path = out_dir.join(name);
                write_if_changed(&path, text.as_bytes())?;
                Some(path)
            }
            None => None,
        };
        rerun.sort();
        rerun.dedup();
        let mut vars = env.vars_read();
        vars.retain(|v| !SET_BY_CARGO.contains(&v.as_str()));
        Ok(Output {
            compiler: info,
            floor,
            files,
            handles,
            rerun_if_changed: rerun,
            rerun_if_env_changed: vars,
            warnings,
        })
    }

    /// Turns a successful compile's diagnostics into warnings (or, with
    /// [`Build::warnings_as_errors`], an error).
    fn check_log(
        &self,
        info: &CompilerInfo,
        p: &Plan,
        log: &str,
        warnings: &mut Vec<String>,
    ) -> Result<(), BuildError> {
        let log = log.trim();
        if log.is_empty() {
            return Ok(());
        }
        let diags = diagnostics::parse(log);
        if self.warnings_as_errors {
            let first = diags.first();
            return Err(BuildError::Compile {
                file: first
                    .and_then(|d| d.file.clone())
                    .unwrap_or_else(|| PathBuf::from(&p.display)),
                line: first.and_then(|d| d.line),
                column: first.and_then(|d| d.column),
                message: format!(
                    "{} (warnings are errors in this build)",
                    first
                        .map(|d| d.message.clone())
                        .unwrap_or_else(|| "the compiler printed diagnostics".into())
                ),
                log: log.to_string(),
                compiler: info.to_string(),
                command: String::new(),
            });
        }
        for d in diags.iter().filter(|d| d.severity == Severity::Warning) {
            let at = match (&d.file, d.line) {
                (Some(f), Some(l)) => format!("{}:{l}: ", f.display()),
                _ => String::new(),
            };
            warnings.push(format!("{at}warning: {}", d.message));
        }
        Ok(())
    }
}

/// Variables cargo sets for a build script: never worth a rerun of their own.
const SET_BY_CARGO: &[&str] = &[
    "OUT_DIR",
    "TARGET",
    "HOST",
    "CARGO_MANIFEST_DIR",
    "NUM_JOBS",
];

/// What the build knows about one file before compiling it.
struct Plan {
    source: PathBuf,
    display: String,
    stem: String,
    archs: Vec<Arch>,
    options: Vec<String>,
    includes: Vec<PathBuf>,
    kernels: Vec<KernelDecl>,
}

/// One compile of a file.
#[derive(Clone, Copy, Debug)]
enum Work {
    /// PTX for a virtual architecture.
    Ptx(Arch),
    /// nvcc's fatbin (every SASS architecture plus the PTX fallback).
    Fatbin,
    /// NVRTC's cubin for one real architecture.
    Cubin(Arch),
}

enum Done {
    Ptx(Compiled),
    /// A fatbin or cubin, and the compiler's log.
    Binary(Vec<u8>, String),
}

/// Checks a compiled PTX: its ISA against the floor, and its `.entry` parameters against the
/// declarations. Returns its ISA.
fn check_ptx(
    p: &Plan,
    arch: Arch,
    c: &Compiled,
    floor: IsaVersion,
    info: &CompilerInfo,
    warnings: &mut Vec<String>,
) -> Result<IsaVersion, BuildError> {
    let file = PathBuf::from(&p.display);
    let isa = IsaVersion::of_ptx(&c.ptx).ok_or_else(|| BuildError::PtxMismatch {
        file: file.clone(),
        problem: format!("the {arch} PTX has no `.version` line"),
    })?;
    if isa > floor {
        return Err(BuildError::PtxIsaAboveFloor {
            file,
            arch: arch.virtual_name(),
            found: isa,
            floor,
            compiler: info.to_string(),
        });
    }
    let entries = ptx_entries::entries(&c.ptx).ok_or_else(|| BuildError::PtxMismatch {
        file: file.clone(),
        problem: format!("cannot read the parameters of the {arch} PTX's entries"),
    })?;
    for k in &p.kernels {
        match entries.get(&k.name) {
            None => {
                return Err(BuildError::PtxMismatch {
                    file,
                    problem: format!("kernel `{}` (line {}) is not in the {arch} PTX", k.name, k.line),
                })
            }
            Some(sizes) if *sizes != k.sizes() => {
                return Err(BuildError::PtxMismatch {
                    file,
                    problem: format!(
                        "kernel `{}`: the {arch} PTX's parameters are {sizes:?} bytes, the declaration's {:?}",
                        k.name,
                        k.sizes()
                    ),
                })
            }
            Some(_) => {}
        }
    }
    for name in entries.keys() {
        if p.kernels.iter().any(|k| &k.name == name) {
            continue;
        }
        if name.starts_with("_Z") {
            let w = format!(
                "{}: kernel `{name}` has a C++ (mangled) name, so it gets no typed handle: declare it \
                 `extern \"C\" __global__` (templates: instantiate through an `extern \"C\"` wrapper)",
                p.display
            );
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        } else {
            return Err(BuildError::PtxMismatch {
                file,
                problem: format!("the {arch} PTX has kernel `{name}`, which no `extern \"C\" __global__` declaration names"),
            });
        }
    }
    Ok(isa)
}

fn display_path(src: &Path, root: Option<&Path>) -> String {
    let abs = includes::normalize(src);
    if let Some(root) = root {
        if let Ok(rel) = abs.strip_prefix(includes::normalize(root)) {
            return rel.display().to_string();
        }
    }
    src.display().to_string()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes `bytes` unless the file already holds them (so its time stamp moves only on change).
pub(crate) fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), BuildError> {
    if std::fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(|e| BuildError::io("write", path, e))
}
