//! The embedded PTX files and how one is picked for a device.

use crate::{Error, Result};
use cuda_driver::{ComputeCapability, Context, Module};

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
    /// The PTX text.
    pub ptx: &'static str,
}

impl PtxFile {
    /// The newest target whose compute capability is not above `cc`: the driver JIT-compiles
    /// PTX for any newer GPU, and a newer target may use features older GPUs lack.
    pub fn pick(&self, cc: ComputeCapability) -> Result<&'static PtxTarget> {
        self.targets
            .iter()
            .filter(|t| t.min_cc <= cc)
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
