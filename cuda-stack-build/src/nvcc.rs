//! Compiling with nvcc: PTX (`--ptx`), fatbins (`--fatbin`), dependencies (`-MD`).

use crate::arch::Arch;
use crate::diagnostics::{self, Severity};
use crate::discover::Nvcc;
use crate::error::BuildError;
use crate::includes;
use crate::job::{Compiled, Job};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `job` to PTX for `job.arch`, writing nothing but `scratch/*`.
pub(crate) fn ptx(nvcc: &Nvcc, job: &Job<'_>, scratch: &Path) -> Result<Compiled, BuildError> {
    let out = scratch.join(format!("{}.{}.ptx", job.stem, job.arch.number()));
    let deps = scratch.join(format!("{}.{}.d", job.stem, job.arch.number()));
    let mut args: Vec<OsString> = vec![
        "--ptx".into(),
        format!("-arch={}", job.arch.virtual_name()).into(),
    ];
    args.extend(common(job));
    args.extend(["-MD".into(), "-MF".into(), deps.clone().into_os_string()]);
    args.extend([
        "-o".into(),
        out.clone().into_os_string(),
        job.source.as_os_str().to_owned(),
    ]);
    let log = run(nvcc, job, &args)?;
    let ptx = std::fs::read_to_string(&out).map_err(|e| BuildError::io("read", &out, e))?;
    let dep_text = std::fs::read_to_string(&deps).unwrap_or_default();
    let deps = includes::parse_make_deps(&dep_text)
        .into_iter()
        .map(|d| {
            if d.is_relative() {
                std::env::current_dir().map(|c| c.join(&d)).unwrap_or(d)
            } else {
                d
            }
        })
        .filter(|d| includes::is_user_file(d, nvcc.root.as_deref()))
        .map(|d| includes::normalize(&d))
        .collect();
    Ok(Compiled { ptx, log, deps })
}

/// Compiles `job` to a fatbin with SASS for each of `sass` and PTX for `job.arch` (the
/// fallback the driver JIT-compiles on GPUs none of the SASS fits). Returns the fatbin's bytes
/// and the log.
pub(crate) fn fatbin(
    nvcc: &Nvcc,
    job: &Job<'_>,
    sass: &[Arch],
    scratch: &Path,
) -> Result<(Vec<u8>, String), BuildError> {
    let out = scratch.join(format!("{}.fatbin", job.stem));
    let mut args: Vec<OsString> = vec!["--fatbin".into()];
    for a in sass {
        args.push("-gencode".into());
        args.push(format!("arch={},code={}", a.virtual_name(), a.real_name()).into());
    }
    args.push("-gencode".into());
    args.push(format!("arch={0},code={0}", job.arch.virtual_name()).into());
    args.extend(common(job));
    args.extend([
        "-o".into(),
        out.clone().into_os_string(),
        job.source.as_os_str().to_owned(),
    ]);
    let log = run(nvcc, job, &args)?;
    let bytes = std::fs::read(&out).map_err(|e| BuildError::io("read", &out, e))?;
    Ok((bytes, log))
}

/// `-std`, the user's options, and the include folders (the source's own first).
fn common(job: &Job<'_>) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![format!("-std={}", job.std).into()];
    v.extend(job.options.iter().map(OsString::from));
    for inc in job.includes {
        v.push(format!("-I{}", inc.display()).into());
    }
    v
}

/// Runs nvcc; on failure turns its log into the matching [`BuildError`].
fn run(nvcc: &Nvcc, job: &Job<'_>, args: &[OsString]) -> Result<String, BuildError> {
    let mut cmd = Command::new(&nvcc.info.path);
    cmd.args(&nvcc.args).args(args);
    let shown = format!(
        "{} {}",
        nvcc.info.path.display(),
        nvcc.args
            .iter()
            .chain(args)
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = cmd.output().map_err(|e| BuildError::CompilerFailed {
        compiler: nvcc.info.to_string(),
        command: shown.clone(),
        problem: format!("could not run it: {e}"),
        log: String::new(),
    })?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    if out.status.success() {
        return Ok(log);
    }
    Err(failure(
        &nvcc.info.to_string(),
        job,
        &shown,
        &log,
        &format!("exit status {}", out.status),
    ))
}

/// The error a failed compile's log describes.
pub(crate) fn failure(
    compiler: &str,
    job: &Job<'_>,
    command: &str,
    log: &str,
    status: &str,
) -> BuildError {
    if let Some(msg) = diagnostics::refused_arch(log) {
        return BuildError::UnsupportedArch {
            arch: job.arch.virtual_name(),
            compiler: Some(compiler.to_string()),
            message: format!("the compiler refused it: {msg}"),
        };
    }
    let diags = diagnostics::parse(log);
    if let Some(d) = diags.iter().find(|d| d.severity == Severity::Error) {
        return BuildError::Compile {
            file: d
                .file
                .clone()
                .unwrap_or_else(|| PathBuf::from(&job.display)),
            line: d.line,
            column: d.column,
            message: d.message.clone(),
            log: log.to_string(),
            compiler: compiler.to_string(),
            command: command.to_string(),
        };
    }
    BuildError::CompilerFailed {
        compiler: compiler.to_string(),
        command: command.to_string(),
        problem: format!("{status}, with no error line in its log"),
        log: log.to_string(),
    }
}
