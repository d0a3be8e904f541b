//! Compiling CUDA C at run time with NVRTC (like PyTorch's `load_inline` or CuPy's `RawKernel`).

use crate::{Context, Error, Result};
use cuda_stack_sys::{nvrtcResult, Nvrtc};
use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// NVRTC options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// `--gpu-architecture`: `compute_XY` for PTX, `sm_XY` for a cubin. `None`: NVRTC's default.
    pub arch: Option<String>,
    /// `-D NAME` or `-D NAME=VALUE`.
    pub defines: Vec<(String, Option<String>)>,
    /// `-I DIR`.
    pub include_paths: Vec<PathBuf>,
    /// `-lineinfo` (for profilers).
    pub line_info: bool,
    /// `--use_fast_math`.
    pub fast_math: bool,
    /// `-std=…`, e.g. `"c++17"`.
    pub std: Option<String>,
    /// Anything else, passed as is.
    pub extra: Vec<String>,
}

impl CompileOptions {
    /// Options targeting `ctx`'s device as PTX (`compute_XY`).
    pub fn for_context(ctx: &Context) -> CompileOptions {
        let cc = ctx.limits().compute_capability;
        CompileOptions {
            arch: Some(format!("compute_{}{}", cc.major, cc.minor)),
            ..Default::default()
        }
    }

    /// The command-line arguments these options stand for.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(arch) = &self.arch {
            a.push(format!("--gpu-architecture={arch}"));
        }
        for (k, v) in &self.defines {
            a.push(match v {
                Some(v) => format!("-D{k}={v}"),
                None => format!("-D{k}"),
            });
        }
        for p in &self.include_paths {
            a.push(format!("-I{}", p.display()));
        }
        if self.line_info {
            a.push("-lineinfo".into());
        }
        if self.fast_math {
            a.push("--use_fast_math".into());
        }
        if let Some(s) = &self.std {
            a.push(format!("-std={s}"));
        }
        a.extend(self.extra.iter().cloned());
        a
    }
}

/// What to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Output {
    Ptx,
    Cubin,
}

fn nvrtc() -> Result<&'static Nvrtc> {
    Ok(Nvrtc::get()?)
}

/// The NVRTC in use as `(major, minor)` (`nvrtcVersion`), `None` when it could not say.
pub fn version() -> Result<Option<(i32, i32)>> {
    Ok(nvrtc()?.version())
}

/// The real architectures this NVRTC can compile for, as `major * 10 + minor` (e.g. `[75, 80,
/// …, 90, 100, 120]`), from `nvrtcGetSupportedArchs`, in increasing order.
pub fn supported_archs() -> Result<Vec<u32>> {
    let nv = nvrtc()?;
    let mut n = 0;
    // SAFETY: out-pointer to a local.
    unsafe { nv.nvrtcGetNumSupportedArchs(&mut n)? };
    let mut archs = vec![0i32; n.max(0) as usize];
    // SAFETY: the array has room for the `n` values NVRTC reported.
    unsafe { nv.nvrtcGetSupportedArchs(archs.as_mut_ptr())? };
    let mut archs: Vec<u32> = archs.into_iter().map(|a| a.max(0) as u32).collect();
    archs.sort_unstable();
    Ok(archs)
}

/// Compiles `src` (named `name` in messages) to PTX. A compile error returns NVRTC's log.
pub fn compile_ptx(name: &str, src: &str, opts: &CompileOptions) -> Result<String> {
    let bytes = compile(name, src, opts, Output::Ptx)?;
    String::from_utf8(bytes).map_err(|_| Error::Unsupported {
        what: "NVRTC output",
        why: "the PTX is not UTF-8".into(),
    })
}

/// Compiles `src` to a cubin; `opts.arch` must be a real architecture (`sm_XY`).
pub fn compile_cubin(name: &str, src: &str, opts: &CompileOptions) -> Result<Vec<u8>> {
    compile(name, src, opts, Output::Cubin)
}

type CacheKey = (String, String, CompileOptions, bool);

/// [`compile_ptx`] through an in-process cache keyed by the source, the options (which include
/// the target architecture, so the device) and the NVRTC in use.
pub fn compile_ptx_cached(name: &str, src: &str, opts: &CompileOptions) -> Result<String> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, String>>> = OnceLock::new();
    let nv = nvrtc()?;
    let key = (src.to_string(), nv.version_string(), opts.clone(), true);
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(hit.clone());
    }
    let ptx = compile_ptx(name, src, opts)?;
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, ptx.clone());
    Ok(ptx)
}

fn compile(name: &str, src: &str, opts: &CompileOptions, out: Output) -> Result<Vec<u8>> {
    let nv = nvrtc()?;
    let nul = |what: &'static str| Error::Unsupported {
        what,
        why: "it contains a NUL byte".into(),
    };
    let c_src = CString::new(src).map_err(|_| nul("CUDA source"))?;
    let c_name = CString::new(name).map_err(|_| nul("program name"))?;
    let args = opts.to_args();
    let c_args: Vec<CString> = args
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|_| nul("NVRTC option")))
        .collect::<Result<_>>()?;
    let arg_ptrs: Vec<*const c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    let mut prog = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings that outlive the program; no headers.
    unsafe {
        nv.nvrtcCreateProgram(
            &mut prog,
            c_src.as_ptr(),
            c_name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )?
    };
    let result = (|| -> Result<Vec<u8>> {
        // SAFETY: live program; the option array outlives the call.
        let compiled =
            unsafe { nv.nvrtcCompileProgram(prog, arg_ptrs.len() as i32, arg_ptrs.as_ptr()) };
        if let Err(e) = compiled {
            if e.code() == Some(nvrtcResult::NVRTC_ERROR_COMPILATION) {
                return Err(Error::Compile {
                    name: name.to_string(),
                    options: args.clone(),
                    log: program_log(nv, prog),
                });
            }
            return Err(e.into());
        }
        let mut n = 0usize;
        let mut buf;
        // SAFETY: live program; the buffer has the size NVRTC reported.
        unsafe {
            match out {
                Output::Ptx => {
                    nv.nvrtcGetPTXSize(prog, &mut n)?;
                    buf = vec![0u8; n];
                    nv.nvrtcGetPTX(prog, buf.as_mut_ptr().cast())?;
                    if buf.last() == Some(&0) {
                        buf.pop();
                    }
                }
                Output::Cubin => {
                    nv.nvrtcGetCUBINSize(prog, &mut n)?;
                    buf = vec![0u8; n];
                    nv.nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast())?;
                }
            }
        }
        Ok(buf)
    })();
    // SAFETY: destroys the program created above, once.
    let destroyed = unsafe { nv.nvrtcDestroyProgram(&mut prog) };
    let out = result?;
    destroyed?;
    Ok(out)
}

fn program_log(nv: &Nvrtc, prog: cuda_stack_sys::nvrtcProgram) -> String {
    let mut n = 0usize;
    // SAFETY: live program; buffer of the reported size.
    unsafe {
        if nv.nvrtcGetProgramLogSize(prog, &mut n).is_err() {
            return String::new();
        }
        let mut log = vec![0u8; n];
        if nv
            .nvrtcGetProgramLog(prog, log.as_mut_ptr().cast())
            .is_err()
        {
            return String::new();
        }
        String::from_utf8_lossy(&log)
            .trim_end_matches('\0')
            .trim_end()
            .to_string()
    }
}
