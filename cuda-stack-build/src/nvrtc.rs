//! Compiling with NVRTC (no nvcc, no host compiler): PTX only.

use crate::discover::CompilerInfo;
use crate::error::BuildError;
use crate::includes;
use crate::job::{Compiled, Job};
use std::ffi::{c_char, CString};

/// The options NVRTC is given for `job`: `-std`, the architecture, the user's options (nvcc's
/// host optimisation levels `-O0`…`-O3` are dropped: NVRTC optimises device code fully by
/// default and refuses them), and the include folders.
pub(crate) fn options(job: &Job<'_>) -> Vec<String> {
    let mut v = vec![
        format!("-std={}", job.std),
        format!("--gpu-architecture={}", job.arch.virtual_name()),
    ];
    v.extend(
        job.options
            .iter()
            .filter(|o| !matches!(o.as_str(), "-O0" | "-O1" | "-O2" | "-O3"))
            .cloned(),
    );
    for inc in job.includes {
        v.push(format!("--include-path={}", inc.display()));
    }
    v
}

/// Compiles `job` to PTX.
pub(crate) fn ptx(
    lib: &cuda_stack_sys::Nvrtc,
    info: &CompilerInfo,
    job: &Job<'_>,
) -> Result<Compiled, BuildError> {
    let src =
        std::fs::read_to_string(job.source).map_err(|e| BuildError::io("read", job.source, e))?;
    let opts = options(job);
    let shown = format!("NVRTC options: {}", opts.join(" "));
    let failed = |problem: String| BuildError::CompilerFailed {
        compiler: info.to_string(),
        command: shown.clone(),
        problem,
        log: String::new(),
    };
    let c_src = CString::new(src).map_err(|_| failed("the source contains a NUL byte".into()))?;
    let c_name = CString::new(job.display.clone())
        .map_err(|_| failed("the file name contains a NUL byte".into()))?;
    let c_opts: Vec<CString> = opts
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| failed("an option contains a NUL byte".into()))?;
    let ptrs: Vec<*const c_char> = c_opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: cuda_stack_sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every string is NUL-terminated and outlives the call; no in-memory headers.
    unsafe {
        lib.nvrtcCreateProgram(
            &mut prog,
            c_src.as_ptr(),
            c_name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    }
    .map_err(|e| failed(e.to_string()))?;
    let result = compile_program(lib, prog, &ptrs);
    // SAFETY: `prog` was created above and is destroyed once, here.
    let _ = unsafe { lib.nvrtcDestroyProgram(&mut prog) };
    let (status, log, ptx) = result.map_err(|e| failed(e.to_string()))?;
    if let Err(e) = status {
        return Err(crate::nvcc::failure(
            &info.to_string(),
            job,
            &shown,
            &log,
            &e.to_string(),
        ));
    }
    let include_dirs: Vec<_> = job.includes.to_vec();
    let deps = includes::scan(job.source, &include_dirs);
    Ok(Compiled {
        ptx: ptx.unwrap_or_default(),
        log,
        deps,
    })
}

type Outcome = (
    Result<(), cuda_stack_sys::NvrtcError>,
    String,
    Option<String>,
);

/// Compiles `prog`, returning the compile status, the log and (on success) the PTX.
fn compile_program(
    lib: &cuda_stack_sys::Nvrtc,
    prog: cuda_stack_sys::nvrtcProgram,
    opts: &[*const c_char],
) -> Result<Outcome, cuda_stack_sys::NvrtcError> {
    // SAFETY: `prog` is live; `opts` holds `opts.len()` NUL-terminated strings.
    let status = unsafe { lib.nvrtcCompileProgram(prog, opts.len() as i32, opts.as_ptr()) };
    let mut size = 0usize;
    // SAFETY: live program, out-pointer to a local.
    unsafe { lib.nvrtcGetProgramLogSize(prog, &mut size)? };
    let mut buf = vec![0u8; size.max(1)];
    // SAFETY: the buffer holds the `size` bytes NVRTC said the log needs.
    unsafe { lib.nvrtcGetProgramLog(prog, buf.as_mut_ptr().cast())? };
    let log = text(&buf);
    if status.is_err() {
        return Ok((status, log, None));
    }
    let mut size = 0usize;
    // SAFETY: live, compiled program; out-pointer to a local.
    unsafe { lib.nvrtcGetPTXSize(prog, &mut size)? };
    let mut buf = vec![0u8; size.max(1)];
    // SAFETY: the buffer holds the `size` bytes NVRTC said the PTX needs.
    unsafe { lib.nvrtcGetPTX(prog, buf.as_mut_ptr().cast())? };
    Ok((status, log, Some(text(&buf))))
}

/// The text up to the first NUL.
fn text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
