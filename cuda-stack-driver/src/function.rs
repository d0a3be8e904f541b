//! `Function`: one kernel entry point of a loaded module, its attributes and occupancy, and the
//! untyped (`unsafe`) launch.

use crate::launch::{KernelLimits, LaunchAttributes, Signature};
use crate::module::ModuleInner;
use crate::stream::EnqueueGuard;
use crate::{driver, Error, LaunchConfig, Result, Stream};
use cuda_stack_sys::{CUfunction, CUfunction_attribute as FA, CUresult};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

/// A kernel in a loaded module. Cheap to clone; it keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    inner: Arc<FunctionInner>,
}

struct FunctionInner {
    raw: CUfunction,
    name: String,
    module: Arc<ModuleInner>,
    max_threads_per_block: u32,
    static_shared_bytes: u32,
    max_dynamic_shared_bytes: AtomicU32,
    /// Each parameter's byte size, asked once: typed handles are made per call by some callers
    /// (`Kernel::from_function` checks the sizes every time), and the driver's answer — one
    /// `cuFuncGetParamInfo` per parameter plus a failing one past the last — cost about a
    /// microsecond per launch (kernels/TUNING.md, round 4).
    param_sizes: OnceLock<Vec<usize>>,
    /// Each parameter's PTX type (`"f32"`, `"u64"` …), read from the module's PTX once (`None`
    /// for a cubin or fatbin, which carry no types): the kind check runs at every
    /// `Kernel::from_function` too, and the entry's text is searched for only the first time.
    param_types: OnceLock<Option<Vec<String>>>,
}

// SAFETY: a CUfunction handle is immutable driver state usable from any thread; the mutable
// fields are an atomic and a once-initialised cell.
unsafe impl Send for FunctionInner {}
// SAFETY: as above.
unsafe impl Sync for FunctionInner {}

/// A kernel's resource use, from the compiler via the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionAttributes {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_shared_bytes: u32,
    /// Local memory per thread (spills, large arrays), bytes.
    pub local_bytes: u32,
    /// Max threads per block this kernel can be launched with.
    pub max_threads_per_block: u32,
    /// Max dynamic shared memory per block currently allowed.
    pub max_dynamic_shared_bytes: u32,
    /// PTX ISA version it was compiled from ×10 (e.g. 84).
    pub ptx_version: u32,
    /// Binary (SASS) architecture ×10 (e.g. 90).
    pub binary_version: u32,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.inner.name)
            .finish()
    }
}

fn attr(raw: CUfunction, a: FA) -> Result<u32> {
    let mut v = 0;
    // SAFETY: out-pointer to a local; live function handle.
    unsafe { driver()?.cuFuncGetAttribute(&mut v, a, raw)? };
    Ok(v.max(0) as u32)
}

impl Function {
    pub(crate) fn new(raw: CUfunction, name: String, module: Arc<ModuleInner>) -> Result<Function> {
        Ok(Function {
            inner: Arc::new(FunctionInner {
                raw,
                name,
                module,
                max_threads_per_block: attr(raw, FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
                static_shared_bytes: attr(raw, FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
                max_dynamic_shared_bytes: AtomicU32::new(attr(
                    raw,
                    FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                )?),
                param_sizes: OnceLock::new(),
                param_types: OnceLock::new(),
            }),
        })
    }

    /// The module this kernel belongs to (a graph that launches it holds the module's globals
    /// lock while a replay is queued, as a direct launch does).
    pub(crate) fn module(&self) -> &Arc<ModuleInner> {
        &self.inner.module
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The raw `CUfunction` (escape hatch).
    pub fn as_raw(&self) -> CUfunction {
        self.inner.raw
    }

    /// Registers, shared and local memory, and limits.
    pub fn attributes(&self) -> Result<FunctionAttributes> {
        let r = self.inner.raw;
        Ok(FunctionAttributes {
            registers: attr(r, FA::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_shared_bytes: attr(r, FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            local_bytes: attr(r, FA::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            max_threads_per_block: attr(r, FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_dynamic_shared_bytes: attr(r, FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
            ptx_version: attr(r, FA::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: attr(r, FA::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
        })
    }

    /// The launch limits the configuration is checked against.
    pub fn limits(&self) -> KernelLimits {
        KernelLimits {
            max_threads_per_block: self.inner.max_threads_per_block,
            static_shared_bytes: self.inner.static_shared_bytes,
            max_dynamic_shared_bytes: self.inner.max_dynamic_shared_bytes.load(Ordering::Relaxed),
        }
    }

    /// Allows up to `bytes` of dynamic shared memory per block (needed above 48 KiB).
    pub fn set_max_dynamic_shared_mem(&self, bytes: u32) -> Result<()> {
        let limits = self.inner.module.ctx.limits();
        let allowed = limits
            .max_shared_per_block_optin
            .saturating_sub(self.inner.static_shared_bytes);
        if bytes > allowed {
            return Err(Error::LaunchConfig {
                kernel: self.inner.name.clone(),
                problem: format!(
                    "{bytes} bytes of dynamic shared memory asked for; this device allows {allowed} for this kernel ({} per block minus {} static)",
                    limits.max_shared_per_block_optin, self.inner.static_shared_bytes
                ),
            });
        }
        // SAFETY: live handle, value within the device's limit.
        unsafe {
            driver()?.cuFuncSetAttribute(
                self.inner.raw,
                FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )?
        };
        self.inner
            .max_dynamic_shared_bytes
            .store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// How many blocks of `block_threads` threads (with `dynamic_shared` bytes each) fit on one
    /// SM at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`).
    pub fn max_active_blocks_per_sm(
        &self,
        block_threads: u32,
        dynamic_shared: usize,
    ) -> Result<u32> {
        self.inner.module.ctx.bind()?;
        let mut n = 0;
        // SAFETY: out-pointer to a local; live handle.
        unsafe {
            driver()?.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut n,
                self.inner.raw,
                block_threads as i32,
                dynamic_shared,
            )?
        };
        Ok(n.max(0) as u32)
    }

    /// How many clusters of `cfg`'s shape (its cluster dimensions, block size and dynamic shared
    /// memory; its grid is ignored) can be resident on the device at once
    /// (`cuOccupancyMaxActiveClusters`): the most clusters a persistent grid should launch. A
    /// cluster's blocks share one GPC, so this is often less than the SM count over the cluster
    /// size (an H200, blocks that each fill an SM: 30 clusters of 4, not 33; 15 of 8, not 16).
    /// `cfg` must name a cluster ([`LaunchConfig::with_cluster`]); `cfg` is validated as for a
    /// launch first.
    pub fn max_active_clusters(&self, cfg: &LaunchConfig) -> Result<u32> {
        let Some(c) = cfg.cluster() else {
            return Err(Error::LaunchConfig {
                kernel: self.inner.name.clone(),
                problem: "max_active_clusters needs a launch configuration with a cluster \
                          (LaunchConfig::with_cluster)"
                    .into(),
            });
        };
        // The grid only has to be a multiple of the cluster for the check; the query ignores it.
        let probe = LaunchConfig::new((c.x, c.y, c.z), cfg.block())
            .with_shared_mem(cfg.shared_mem_bytes())
            .with_cluster(c);
        probe.validate(
            self.inner.module.ctx.limits(),
            &self.limits(),
            &self.inner.name,
        )?;
        self.inner.module.ctx.bind()?;
        let mut attrs = LaunchAttributes::of(&probe);
        let lc = attrs.config(&probe, std::ptr::null_mut());
        let mut n = 0;
        // SAFETY: out-pointer to a local; `lc` and `attrs` live across the call; live handle.
        unsafe { driver()?.cuOccupancyMaxActiveClusters(&mut n, self.inner.raw, lc.as_raw())? };
        Ok(n.max(0) as u32)
    }

    /// The block size that maximises occupancy and the minimum grid that fills the device
    /// (`cuOccupancyMaxPotentialBlockSize`), as `(min_grid, block)`.
    pub fn max_potential_block_size(&self, dynamic_shared: usize) -> Result<(u32, u32)> {
        self.inner.module.ctx.bind()?;
        let (mut grid, mut block) = (0, 0);
        // SAFETY: out-pointers to locals; no size callback.
        unsafe {
            driver()?.cuOccupancyMaxPotentialBlockSize(
                &mut grid,
                &mut block,
                self.inner.raw,
                None,
                dynamic_shared,
                0,
            )?
        };
        Ok((grid.max(1) as u32, block.max(1) as u32))
    }

    /// One thread per element with the occupancy-maximising block size.
    pub fn occupancy_config(&self, n: usize, dynamic_shared: u32) -> Result<LaunchConfig> {
        let (_, block) = self.max_potential_block_size(dynamic_shared as usize)?;
        Ok(LaunchConfig::for_num_elems_with_block(n, block).with_shared_mem(dynamic_shared))
    }

    /// The byte size of each parameter, from the driver (`cuFuncGetParamInfo`, CUDA 12.4+), or
    /// from the module's PTX when the driver cannot say.
    pub fn param_sizes(&self) -> Result<Vec<usize>> {
        Ok(self.cached_param_sizes()?.to_vec())
    }

    /// [`Function::param_sizes`], asked once per function (a kernel's parameters never change);
    /// a failed query is not kept, so the next call asks again.
    fn cached_param_sizes(&self) -> Result<&[usize]> {
        if let Some(v) = self.inner.param_sizes.get() {
            return Ok(v);
        }
        let sizes = self.query_param_sizes()?;
        Ok(self.inner.param_sizes.get_or_init(|| sizes))
    }

    fn query_param_sizes(&self) -> Result<Vec<usize>> {
        let drv = driver()?;
        let mut sizes = Vec::new();
        if drv.table().cuFuncGetParamInfo.is_some() {
            loop {
                let (mut off, mut size) = (0usize, 0usize);
                // SAFETY: out-pointers to locals; an index past the end is an error.
                match unsafe {
                    drv.cuFuncGetParamInfo(self.inner.raw, sizes.len(), &mut off, &mut size)
                } {
                    Ok(()) => sizes.push(size),
                    Err(e) if e.code() == Some(CUresult::CUDA_ERROR_INVALID_VALUE) => {
                        return Ok(sizes)
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        match &self.inner.module.ptx {
            Some(ptx) => crate::ptx_info::entry_param_sizes(ptx, &self.inner.name).ok_or_else(|| Error::Unsupported {
                what: "checking kernel parameters",
                why: format!("`.entry {}` was not found in the module's PTX", self.inner.name),
            }),
            None => Err(Error::Unsupported {
                what: "checking kernel parameters",
                why: "the driver lacks cuFuncGetParamInfo (needs CUDA 12.4+) and the module is not PTX".into(),
            }),
        }
    }

    /// Where the module is PTX, checks that each parameter of `Args` is of the kind its `.param`
    /// declaration says (a Rust float where the PTX declares an integer, or the reverse, is
    /// refused). A cubin or fatbin carries no parameter types: only the sizes are checked there.
    pub(crate) fn check_param_kinds<Args: Signature>(&self) -> Result<()> {
        let types = self.inner.param_types.get_or_init(|| {
            let ptx = self.inner.module.ptx.as_deref()?;
            crate::ptx_info::entry_param_types(ptx, &self.inner.name)
        });
        let Some(types) = types else {
            return Ok(()); // sizes were checked; the module carries no parameter types
        };
        match Args::first_kind_mismatch(types) {
            None => Ok(()),
            Some((index, rust)) => Err(Error::SignatureKindMismatch {
                kernel: self.inner.name.clone(),
                index,
                rust,
                ptx: format!(".{}", types[index]),
            }),
        }
    }

    pub(crate) fn check_param_sizes(&self, expected: &[usize]) -> Result<()> {
        let found = self.cached_param_sizes()?;
        if found != expected {
            return Err(Error::SignatureMismatch {
                kernel: self.inner.name.clone(),
                expected: expected.to_vec(),
                found: found.to_vec(),
            });
        }
        Ok(())
    }

    /// Checks `cfg` against the device and this kernel, and that `stream` is in the module's
    /// context; binds the context; enters the stream (hold the guard until the launch and its
    /// bookkeeping are done).
    #[inline]
    pub(crate) fn prepare<'s>(
        &'s self,
        stream: &'s Stream,
        cfg: &LaunchConfig,
    ) -> Result<EnqueueGuard<'s>> {
        let ctx = &self.inner.module.ctx;
        if !stream.context().same_as(ctx) {
            return Err(Error::DeviceMismatch {
                what: "the stream",
                expected: ctx.device().ordinal() as i32,
                found: stream.context().device().ordinal() as i32,
            });
        }
        cfg.validate(ctx.limits(), &self.limits(), &self.inner.name)?;
        ctx.bind_cached()?;
        let gate = stream.inner.enter();
        Ok(gate.with_module(&self.inner.module))
    }

    /// Launches with raw parameters, after validating `cfg`.
    ///
    /// # Safety
    /// `params` must hold one pointer per kernel parameter, each to a value of exactly that
    /// parameter's type and size; device pointers among them must be valid for everything the
    /// kernel does with them, and nothing else may use that memory concurrently in a conflicting
    /// way (no ordering is done for you here). When `stream` is capturing, that memory must also
    /// stay valid (and unaliased) for every replay of the graph: the graph keeps only the
    /// kernel's module alive, not memory it knows nothing about. With
    /// [`LaunchConfig::with_programmatic_dependency`], the kernel must run `griddepcontrol.wait`
    /// before it touches memory that earlier work in the stream may use.
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let _gate = self.prepare(stream, cfg)?;
        // SAFETY: forwarded to the caller.
        unsafe { self.launch_prepared(stream, cfg, params) }
    }

    /// Launches an already validated configuration.
    ///
    /// # Safety
    /// As for [`Function::launch`], and `prepare` succeeded for this stream and config and its
    /// guard is still held.
    #[inline]
    pub(crate) unsafe fn launch_prepared(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let drv = driver()?;
        if stream.inner.is_capturing() {
            // The graph will own this kernel (and so its module): a replay never runs unloaded
            // code, whatever is dropped in between.
            stream
                .inner
                .captured
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .functions
                .push(self.clone());
        }
        let (g, b) = (cfg.grid(), cfg.block());
        if !cfg.is_extended() {
            // SAFETY: forwarded to the caller.
            unsafe {
                drv.cuLaunchKernel(
                    self.inner.raw,
                    g.x,
                    g.y,
                    g.z,
                    b.x,
                    b.y,
                    b.z,
                    cfg.shared_mem_bytes(),
                    stream.as_raw(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )?
            };
            return Ok(());
        }
        let mut attrs = LaunchAttributes::of(cfg);
        let lc = attrs.config(cfg, stream.as_raw());
        // SAFETY: forwarded to the caller; `lc` and `attrs` live across the call.
        unsafe {
            drv.cuLaunchKernelEx(
                lc.as_raw(),
                self.inner.raw,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )?
        };
        Ok(())
    }
}
