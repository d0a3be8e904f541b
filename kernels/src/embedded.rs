//! The tables of embedded kernel images: a `.cu` file's PTX targets and SASS cubins, as the
//! generated handles (this crate's and those `cuda-stack-build` writes for other crates) list them.
//! Plain data with the rules of which device runs which image; [`crate::ptx`] and [`crate::image`]
//! load them (and re-export these types where their users find them).

use crate::{Error, Result};
use cuda_stack_driver::ComputeCapability;

/// One `.cu` file's PTX, for one or more target architectures.
#[derive(Debug)]
pub struct PtxFile {
    /// The file's base name, e.g. `"reduce"`.
    pub name: &'static str,
    /// The CUDA source it was generated from, relative to `kernels/`.
    pub source: &'static str,
    /// Its targets, in ascending compute capability.
    pub targets: &'static [PtxTarget],
    /// Its SASS, one cubin per real architecture (ascending; empty where none was built). See
    /// [`crate::image`] for which is loaded.
    pub sass: &'static [SassImage],
}

/// PTX for one virtual architecture.
#[derive(Debug)]
pub struct PtxTarget {
    /// The virtual architecture, e.g. `"compute_75"`, `"compute_90a"`.
    pub arch: &'static str,
    /// The oldest compute capability that can run it.
    pub min_cc: ComputeCapability,
    /// The PTX text.
    pub ptx: &'static str,
}

impl PtxTarget {
    /// Whether a device of compute capability `cc` can run this PTX: any `cc` at or above
    /// `min_cc` for a portable target (`compute_80`); exactly `min_cc` for an
    /// architecture-specific one (`compute_90a`: Hopper's `wgmma` does not exist on Blackwell);
    /// the same major version for a family-specific one (`compute_100f`).
    pub fn runs_on(&self, cc: ComputeCapability) -> bool {
        if self.arch.ends_with('a') {
            cc == self.min_cc
        } else if self.arch.ends_with('f') {
            cc.major == self.min_cc.major && cc >= self.min_cc
        } else {
            cc >= self.min_cc
        }
    }
}

impl PtxFile {
    /// The newest target the device can run (see [`PtxTarget::runs_on`]): the driver
    /// JIT-compiles PTX for any newer GPU, and a newer target may use features older GPUs lack.
    /// Of two targets for one compute capability, the architecture-specific one wins.
    pub fn pick(&self, cc: ComputeCapability) -> Result<&'static PtxTarget> {
        self.targets
            .iter()
            .filter(|t| t.runs_on(cc))
            .max_by_key(|t| (t.min_cc, t.arch.ends_with('a')))
            .ok_or_else(|| Error::NoPtxForDevice {
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

/// One file's SASS for one real architecture: a cubin compiled by the same NVRTC, from the same
/// source and options, as the file's PTX; or, for the few files listed in
/// `kernels/tools/gen-kernels` where it was measured faster, a second cubin for the same
/// architecture assembled from that PTX by a newer ptxas, which only newer drivers load
/// ([`SassImage::min_driver`]).
#[derive(Debug)]
pub struct SassImage {
    /// The real architecture, e.g. `"sm_90"`, `"sm_90a"`.
    pub arch: &'static str,
    /// Its compute capability.
    pub cc: ComputeCapability,
    /// The oldest driver that loads it, as `cuDriverGetVersion` reports one (`12000`: every
    /// CUDA 12 driver, by CUDA's minor version compatibility; `13000`: CUDA 13.0, R580); 0 when
    /// unknown.
    pub min_driver: u32,
    /// The cubin.
    pub cubin: &'static [u8],
}

impl SassImage {
    /// Whether a device of compute capability `cc` runs this SASS: same major version and a
    /// minor version not below it (`sm_80` runs on 8.6 and 8.9), exactly its own compute
    /// capability for an architecture-specific `sm_90a`.
    pub fn runs_on(&self, cc: ComputeCapability) -> bool {
        if self.arch.ends_with('a') {
            cc == self.cc
        } else {
            cc.major == self.cc.major && cc.minor >= self.cc.minor
        }
    }
}
