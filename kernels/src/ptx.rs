//! The embedded PTX files and how one is picked for a device.

use crate::{Error, Result};
use cuda_driver::{ComputeCapability, Context, Module};
use std::sync::OnceLock;

/// One `.cu` file's PTX, for one or more target architectures.
#[derive(Debug)]
pub struct PtxFile {
    /// The file's base name, e.g. `"reduce"`.
    pub name: &'static str,
    /// The CUDA source it was generated from, relative to `kernels/`.
    pub source: &'static str,
    /// Its targets, in ascending compute capability.
    pub targets: &'static [PtxTarget],
}

/// PTX for one virtual architecture.
#[derive(Debug)]
pub struct PtxTarget {
    /// The virtual architecture, e.g. `"compute_75"`.
    pub arch: &'static str,
    /// The oldest compute capability that can run it.
    pub min_cc: ComputeCapability,
    /// An architecture-specific target (`compute_90a`): it runs on exactly `min_cc`, not on newer
    /// devices (features such as `wgmma` are not carried forward).
    pub exact: bool,
    /// The PTX text.
    pub ptx: &'static str,
}

impl PtxFile {
    /// The newest target whose compute capability is not above `cc`: the driver JIT-compiles
    /// PTX for any newer GPU, and a newer target may use features older GPUs lack. An
    /// architecture-specific target (`exact`) counts only on its own compute capability.
    pub fn pick(&self, cc: ComputeCapability) -> Result<&'static PtxTarget> {
        self.targets
            .iter()
            .filter(|t| t.min_cc <= cc && (!t.exact || t.min_cc == cc))
            .max_by_key(|t| t.min_cc)
            .ok_or(Error::NoPtxForDevice {
                file: self.name,
                device: cc,
                oldest: self
                    .targets
                    .iter()
                    .map(|t| t.min_cc)
                    .min()
                    .unwrap_or(ComputeCapability { major: 0, minor: 0 }),
            })
    }
}

/// The PTX text of file `name` (e.g. `"vector_add"`) for a device of compute capability `cc`.
pub fn ptx_for(name: &str, cc: ComputeCapability) -> Result<&'static str> {
    let file = crate::PTX_FILES
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| Error::Invalid {
            op: "ptx_for",
            problem: format!(
                "no PTX file named `{name}`; the files are: {}",
                crate::PTX_FILES
                    .iter()
                    .map(|f| f.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
    Ok(file.pick(cc)?.ptx)
}

/// Loads `file`'s PTX for `ctx`'s device.
pub(crate) fn load(ctx: &Context, file: &'static PtxFile) -> Result<Module> {
    let target = file.pick(ctx.limits().compute_capability)?;
    Ok(ctx.load_ptx(target.ptx)?)
}

/// The kernels of one optional PTX file (one without a portable target), loaded into its context
/// on first use and kept: tensor-core kernels are JIT-compiled only by programs that call them,
/// and only on devices that can run them.
pub(crate) struct LazyModule<T> {
    ctx: Context,
    file: &'static PtxFile,
    cell: OnceLock<T>,
}

impl<T> LazyModule<T> {
    pub(crate) fn new(ctx: &Context, file: &'static PtxFile) -> Self {
        Self {
            ctx: ctx.clone(),
            file,
            cell: OnceLock::new(),
        }
    }

    /// The loaded kernels, loading the file first if no call has yet. Two threads racing on the
    /// first call may both load it; one result is kept, the other dropped.
    pub(crate) fn get(&self, make: impl FnOnce(&Module) -> Result<T>) -> Result<&T> {
        if let Some(v) = self.cell.get() {
            return Ok(v);
        }
        let module = load(&self.ctx, self.file)?;
        let v = make(&module)?;
        Ok(self.cell.get_or_init(|| v))
    }
}

impl<T: Clone> Clone for LazyModule<T> {
    fn clone(&self) -> Self {
        let cell = OnceLock::new();
        if let Some(v) = self.cell.get() {
            let _ = cell.set(v.clone());
        }
        Self {
            ctx: self.ctx.clone(),
            file: self.file,
            cell,
        }
    }
}

impl<T> std::fmt::Debug for LazyModule<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyModule")
            .field("file", &self.file.name)
            .field("loaded", &self.cell.get().is_some())
            .finish()
    }
}
