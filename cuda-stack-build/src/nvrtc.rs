//! Compiling with NVRTC (no nvcc, no host compiler): PTX, and SASS as one cubin per real
//! architecture (NVRTC writes no fatbins; the handles pick a cubin at load, see
//! `cuda_stack_kernels::ptx`).

use crate::arch::Arch;
use crate::discover::CompilerInfo;
use crate::error::BuildError;
use crate::includes;
use crate::job::{Compiled, Job};
use std::ffi::{c_char, CString};

/// The options NVRTC is given for `job`: `-std`, `--gpu-architecture=arch` (`compute_75` for
/// PTX, `sm_90` for a cubin), the user's options (nvcc's host optimisation levels `-O0`…`-O3`
/// are dropped: NVRTC optimises device code fully by default and refuses them), and the
/// include folders.
fn options_for(job: &Job<'_>, arch: &str) -> Vec<String> {
    let mut v = vec![
        format!("-std={}", job.std),
        format!("--gpu-architecture={arch}"),
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
    let (c, _) = compile(lib, info, job, &job.arch.virtual_name(), Output::Ptx)?;
    Ok(c)
}

/// Compiles `job`'s source to SASS for the real architecture `real` (`sm_90`, `sm_90a`): the
/// cubin, and the compile's log.
pub(crate) fn cubin(
    lib: &cuda_stack_sys::Nvrtc,
    info: &CompilerInfo,
    job: &Job<'_>,
    real: &Arch,
) -> Result<(Vec<u8>, String), BuildError> {
    let (c, bytes) = compile(lib, info, job, &real.real_name(), Output::Cubin)?;
    Ok((bytes, c.log))
}

/// What a compile hands back besides its log.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    Ptx,
    Cubin,
}

/// Compiles `job`'s source for `arch`; the PTX (empty for a cubin) and the binary (empty for
/// PTX).
fn compile(
    lib: &cuda_stack_sys::Nvrtc,
    info: &CompilerInfo,
    job: &Job<'_>,
    arch: &str,
    output: Output,
) -> Result<(Compiled, Vec<u8>), BuildError> {
    let src =
        std::fs::read_to_string(job.source).map_err(|e| BuildError::io("read", job.source, e))?;
    let opts = options_for(job, arch);
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
    let result = compile_program(lib, prog, &ptrs, output);
    // SAFETY: `prog` was created above and is destroyed once, here.
    let _ = unsafe { lib.nvrtcDestroyProgram(&mut prog) };
    let (status, log, out) = result.map_err(|e| failed(e.to_string()))?;
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
    let out = out.unwrap_or_default();
    let (ptx, binary) = match output {
        Output::Ptx => (text(&out), Vec::new()),
        Output::Cubin => (String::new(), out),
    };
    Ok((Compiled { ptx, log, deps }, binary))
}

type Outcome = (
    Result<(), cuda_stack_sys::NvrtcError>,
    String,
    Option<Vec<u8>>,
);

/// Compiles `prog`, returning the compile status, the log and (on success) the PTX or cubin
/// bytes.
fn compile_program(
    lib: &cuda_stack_sys::Nvrtc,
    prog: cuda_stack_sys::nvrtcProgram,
    opts: &[*const c_char],
    output: Output,
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
    if output == Output::Cubin {
        // SAFETY: live, compiled program; out-pointer to a local.
        unsafe { lib.nvrtcGetCUBINSize(prog, &mut size)? };
        let mut buf = vec![0u8; size];
        // SAFETY: the buffer holds the `size` bytes NVRTC said the cubin needs.
        unsafe { lib.nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast())? };
        return Ok((status, log, Some(buf)));
    }
    // SAFETY: live, compiled program; out-pointer to a local.
    unsafe { lib.nvrtcGetPTXSize(prog, &mut size)? };
    let mut buf = vec![0u8; size.max(1)];
    // SAFETY: the buffer holds the `size` bytes NVRTC said the PTX needs.
    unsafe { lib.nvrtcGetPTX(prog, buf.as_mut_ptr().cast())? };
    Ok((status, log, Some(buf)))
}

/// The text up to the first NUL.
fn text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
