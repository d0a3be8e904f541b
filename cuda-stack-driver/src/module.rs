//! Modules: PTX, cubin or fatbin images loaded into a context, with their kernels and globals.

use crate::launch::Signature;
use crate::stream::EnqueueGuard;
use crate::{driver, Context, DeviceRepr, Error, Function, Kernel, Result, Stream};
use cuda_stack_sys::{CUjit_option as J, CUmodule, CUresult};
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// A module image to load.
#[derive(Debug, Clone, Copy)]
pub enum ModuleImage<'a> {
    /// PTX text (JIT-compiled by the driver for this device).
    Ptx(&'a str),
    /// A cubin (SASS for one architecture).
    Cubin(&'a [u8]),
    /// A fatbin (several cubins and/or PTX).
    Fatbin(&'a [u8]),
}

/// Options for the driver's JIT compiler (used when the image contains PTX).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JitOptions {
    /// Optimization level 0–4 (driver default 4).
    pub optimization_level: Option<u32>,
    /// Cap on registers per thread.
    pub max_registers: Option<u32>,
    /// Generate line info (for profilers).
    pub line_info: bool,
    /// Ask for a verbose info log.
    pub verbose_log: bool,
}

/// A loaded module. Cheap to clone; unloaded when the last clone and the last [`Function`] from
/// it are dropped, after synchronizing its context, so queued kernels finish first. While a
/// graph capture is in progress on any stream of the context, the unload is deferred (a
/// context-wide synchronize would invalidate the capture) to the next module drop or the
/// context's release.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

pub(crate) struct ModuleInner {
    raw: CUmodule,
    pub(crate) ctx: Context,
    /// Launches of this module's kernels hold the read side while they enqueue;
    /// [`DeviceGlobal`] accesses hold the write side, so a global is never read or written
    /// while a kernel that may use it is being queued or (after a context synchronize) running.
    pub(crate) globals: std::sync::RwLock<()>,
    pub(crate) ptx: Option<String>,
    entries: Vec<String>,
    info_log: String,
}

// SAFETY: a CUmodule handle is immutable driver state usable from any thread.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl<'a> EnqueueGuard<'a> {
    /// Also holds `module`'s globals lock (read side) for a launch of one of its kernels.
    pub(crate) fn with_module(self, module: &'a ModuleInner) -> Self {
        self.also_holding(module.globals.read().unwrap_or_else(|p| p.into_inner()))
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("entries", &self.inner.entries)
            .finish()
    }
}

const LOG_BYTES: usize = 16 << 10;

impl Context {
    /// Loads PTX text with default JIT options.
    pub fn load_ptx(&self, ptx: &str) -> Result<Module> {
        self.load_module(ModuleImage::Ptx(ptx), &JitOptions::default())
    }

    /// Loads a module image (`cuModuleLoadDataEx`). A JIT failure returns the JIT's error log;
    /// PTX of a newer ISA than the driver supports returns [`Error::PtxTooNew`] naming both.
    pub fn load_module(&self, image: ModuleImage<'_>, opts: &JitOptions) -> Result<Module> {
        self.bind()?;
        let drv = driver()?;
        let ptx_c;
        let binary;
        let (data, ptx): (*const c_void, Option<String>) = match image {
            ModuleImage::Ptx(s) => {
                ptx_c = CString::new(s.replace('\0', "")).map_err(|_| Error::Unsupported {
                    what: "PTX with NUL bytes",
                    why: "PTX is text".into(),
                })?;
                (ptx_c.as_ptr().cast(), Some(s.to_string()))
            }
            // The driver takes only a pointer and reads as far as the image's own headers say:
            // check them against the slice, and hand it an aligned, zero-padded copy.
            ModuleImage::Cubin(b) => {
                crate::module_image::check_cubin(b)?;
                binary = crate::module_image::aligned_copy(b);
                (binary.as_ptr().cast(), None)
            }
            ModuleImage::Fatbin(b) => {
                crate::module_image::check_fatbin(b)?;
                binary = crate::module_image::aligned_copy(b);
                (binary.as_ptr().cast(), None)
            }
        };
        let mut info = vec![0u8; LOG_BYTES];
        let mut error = vec![0u8; LOG_BYTES];
        let mut keys = vec![
            J::CU_JIT_INFO_LOG_BUFFER,
            J::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            J::CU_JIT_ERROR_LOG_BUFFER,
            J::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values: Vec<*mut c_void> = vec![
            info.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
            error.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
        ];
        let mut push = |k: J, v: usize| {
            keys.push(k);
            values.push(v as *mut c_void);
        };
        if let Some(l) = opts.optimization_level {
            push(J::CU_JIT_OPTIMIZATION_LEVEL, l as usize);
        }
        if let Some(r) = opts.max_registers {
            push(J::CU_JIT_MAX_REGISTERS, r as usize);
        }
        if opts.line_info {
            push(J::CU_JIT_GENERATE_LINE_INFO, 1);
        }
        if opts.verbose_log {
            push(J::CU_JIT_LOG_VERBOSE, 1);
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: `data` is a NUL-terminated PTX string, or a binary image whose declared extents
        // were checked to lie inside it (`module_image`), copied to aligned memory that lives
        // across the call; the option arrays have equal length and the log buffers their
        // stated sizes.
        let r = unsafe {
            drv.cuModuleLoadDataEx(
                &mut raw,
                data,
                keys.len() as u32,
                keys.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let text = |b: &[u8]| {
            String::from_utf8_lossy(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())])
                .into_owned()
        };
        if let Err(e) = r {
            if e.code() == Some(CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {
                return Err(Error::PtxTooNew {
                    ptx_isa: ptx
                        .as_deref()
                        .and_then(crate::ptx_info::isa_version)
                        .unwrap_or("unknown")
                        .to_string(),
                    driver: drv.version_string(),
                });
            }
            return Err(Error::ModuleLoad {
                source: e,
                log: text(&error),
            });
        }
        let entries = match &ptx {
            Some(p) => crate::ptx_info::entries(p),
            None => enumerate_functions(raw).unwrap_or_default(),
        };
        Ok(Module {
            inner: Arc::new(ModuleInner {
                raw,
                ctx: self.clone(),
                globals: std::sync::RwLock::new(()),
                ptx,
                entries,
                info_log: text(&info),
            }),
        })
    }
}

/// The kernel names of a loaded module, from the driver (CUDA 12.4+).
fn enumerate_functions(m: CUmodule) -> Result<Vec<String>> {
    let drv = driver()?;
    let mut n = 0u32;
    // SAFETY: out-pointer; live module.
    unsafe { drv.cuModuleGetFunctionCount(&mut n, m)? };
    let mut fs = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: the array has room for `n` handles.
    unsafe { drv.cuModuleEnumerateFunctions(fs.as_mut_ptr(), n, m)? };
    fs.into_iter()
        .map(|f| {
            let mut p = std::ptr::null();
            // SAFETY: live function (its module is loaded for this whole call); the name the driver
            // returns belongs to the module and is copied out before the module can go.
            unsafe {
                drv.cuFuncGetName(&mut p, f)?;
                Ok(std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
            }
        })
        .collect()
}

impl Module {
    /// The kernel entry points the module has.
    pub fn entries(&self) -> &[String] {
        &self.inner.entries
    }

    /// The JIT's info log from loading (may be empty).
    pub fn info_log(&self) -> &str {
        &self.inner.info_log
    }

    /// The context it is loaded in.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// The raw `CUmodule` (escape hatch).
    pub fn as_raw(&self) -> CUmodule {
        self.inner.raw
    }

    /// The kernel called `name` (its unmangled name: declare it `extern "C"`). An unknown name
    /// gives [`Error::KernelNotFound`] listing the kernels the module has.
    pub fn function(&self, name: &str) -> Result<Function> {
        let c = CString::new(name).map_err(|_| self.not_found(name))?;
        let mut f = std::ptr::null_mut();
        // SAFETY: out-pointer; NUL-terminated name; live module.
        match unsafe { driver()?.cuModuleGetFunction(&mut f, self.inner.raw, c.as_ptr()) } {
            Ok(()) => Function::new(f, name.to_string(), self.inner.clone()),
            Err(e) if e.code() == Some(CUresult::CUDA_ERROR_NOT_FOUND) => Err(self.not_found(name)),
            Err(e) => Err(e.into()),
        }
    }

    fn not_found(&self, name: &str) -> Error {
        Error::KernelNotFound {
            name: name.to_string(),
            available: self.inner.entries.clone(),
        }
    }

    /// A typed handle to the kernel `name` (see [`Kernel`]). Checks the number and byte sizes of
    /// its parameters against `Args`.
    ///
    /// # Safety
    /// The kernel's CUDA declaration must match `Args` as [`Kernel::from_function`] describes.
    pub unsafe fn kernel<Args: Signature>(&self, name: &str) -> Result<Kernel<Args>> {
        // SAFETY: forwarded to the caller.
        unsafe { Kernel::from_function(self.function(name)?) }
    }

    /// A typed handle to the kernel `name` without the driver's parameter check (see
    /// [`Kernel::from_function_prechecked`]): for generated handles checked ahead of time.
    ///
    /// # Safety
    /// As for [`Kernel::from_function_prechecked`].
    pub unsafe fn kernel_prechecked<Args: Signature>(&self, name: &str) -> Result<Kernel<Args>> {
        // SAFETY: forwarded to the caller.
        Ok(unsafe { Kernel::from_function_prechecked(self.function(name)?) })
    }

    /// The module-scope `__device__` variable `name`, which must be exactly `size_of::<T>()`
    /// bytes (use an array type for arrays).
    pub fn global<T: DeviceRepr>(&self, name: &str) -> Result<DeviceGlobal<T>> {
        let c = CString::new(name).map_err(|_| Error::Global {
            name: name.into(),
            problem: "name contains a NUL byte".into(),
        })?;
        let (mut ptr, mut bytes) = (0, 0usize);
        // SAFETY: out-pointers; NUL-terminated name; live module.
        match unsafe {
            driver()?.cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.inner.raw, c.as_ptr())
        } {
            Ok(()) => {}
            Err(e) if e.code() == Some(CUresult::CUDA_ERROR_NOT_FOUND) => {
                return Err(Error::Global {
                    name: name.into(),
                    problem: "no such global in the module (declare it `__device__` at file scope)"
                        .into(),
                })
            }
            Err(e) => return Err(e.into()),
        }
        if bytes != std::mem::size_of::<T>() {
            return Err(Error::Global {
                name: name.into(),
                problem: format!(
                    "it is {bytes} bytes but {} is {} bytes",
                    std::any::type_name::<T>(),
                    std::mem::size_of::<T>()
                ),
            });
        }
        Ok(DeviceGlobal {
            ptr,
            module: self.inner.clone(),
            _t: std::marker::PhantomData,
        })
    }
}

/// A module-scope `__device__` variable. It keeps its module loaded.
pub struct DeviceGlobal<T: DeviceRepr> {
    ptr: cuda_stack_sys::CUdeviceptr,
    module: Arc<ModuleInner>,
    _t: std::marker::PhantomData<T>,
}

impl<T: DeviceRepr> DeviceGlobal<T> {
    /// Checks `stream` and makes the global idle: no kernel of the context is queued or running
    /// when this returns, and none of this module can be queued while the returned guard lives.
    fn exclusive<'a>(
        &'a self,
        stream: &'a Stream,
        what: &'static str,
    ) -> Result<(std::sync::RwLockWriteGuard<'a, ()>, EnqueueGuard<'a>)> {
        let ctx = &self.module.ctx;
        if !stream.context().same_as(ctx) {
            return Err(Error::DeviceMismatch {
                what: "the stream",
                expected: ctx.device().ordinal() as i32,
                found: stream.context().device().ordinal() as i32,
            });
        }
        // Same lock order as a launch (stream gate, then module), so the two cannot deadlock.
        let gate = stream.inner.enter();
        let launches = self
            .module
            .globals
            .write()
            .unwrap_or_else(|p| p.into_inner());
        stream.refuse_capture(what)?;
        // Kernels on every stream (not only `stream`) may use the global.
        ctx.inner.while_no_capture(what, || Ok(()))?;
        Ok((launches, gate))
    }

    /// Reads the value; blocks until every kernel queued in the context so far has finished
    /// (any of them may write the global), then copies on `stream`.
    pub fn read(&self, stream: &Stream) -> Result<T> {
        let _excl = self.exclusive(stream, "DeviceGlobal::read")?;
        let mut v = T::zeroed();
        // SAFETY: the global is `size_of::<T>()` bytes (checked) and lives with the module;
        // the host value is a valid destination; any bytes are a valid T; no kernel runs.
        let r = unsafe {
            driver()?.cuMemcpyDtoHAsync_v2(
                (&mut v as *mut T).cast(),
                self.ptr,
                std::mem::size_of::<T>(),
                stream.as_raw(),
            )
        };
        r?;
        let synced = stream.synchronize();
        if synced.is_err() {
            stream.inner.settle();
        }
        synced?;
        Ok(v)
    }

    /// Writes the value; blocks until every kernel queued in the context so far has finished
    /// (any of them may read the global), copies on `stream`, and waits for the copy.
    pub fn write(&self, stream: &Stream, value: &T) -> Result<()> {
        let _excl = self.exclusive(stream, "DeviceGlobal::write")?;
        // SAFETY: as in `read`; the source outlives the synchronize below.
        unsafe {
            driver()?.cuMemcpyHtoDAsync_v2(
                self.ptr,
                (value as *const T).cast(),
                std::mem::size_of::<T>(),
                stream.as_raw(),
            )?;
        }
        let synced = stream.synchronize();
        if synced.is_err() {
            stream.inner.settle();
        }
        synced
    }

    /// The device address.
    pub fn as_raw_ptr(&self) -> cuda_stack_sys::CUdeviceptr {
        self.ptr
    }
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        // Every unload goes through the context's deferred list, unloaded after a context-wide
        // synchronize, and only while no capture is in progress (a synchronize would invalidate
        // it): otherwise after the capture, by the next unload or the context's release.
        self.ctx
            .inner
            .deferred_unloads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.raw);
        let ctx = self.ctx.clone();
        crate::host_callback::release_on_drop(self.ctx.clone(), "unloading a module", move || {
            match ctx.inner.unload_deferred() {
                Err(Error::Unsupported { .. }) => Ok(()), // a capture is running: later
                r => r,
            }
        });
    }
}
