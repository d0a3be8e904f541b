//! The driver's extended launch description (`CUlaunchConfig` with its `CUlaunchAttribute`s) for
//! a [`LaunchConfig`] with a cluster, a cooperative grid or a programmatic dependency: built in one place for both
//! `cuLaunchKernelEx` ([`crate::Function::launch`]) and `cuOccupancyMaxActiveClusters`
//! ([`crate::Function::max_active_clusters`]).

use super::LaunchConfig;
use cuda_stack_sys::{CUlaunchAttribute, CUlaunchAttributeID, CUlaunchConfig, CUstream};

/// The attributes a [`LaunchConfig`] asks for (a cluster dimension, cooperative, a programmatic
/// dependency), at most three.
pub(crate) struct LaunchAttributes {
    attrs: [CUlaunchAttribute; 3],
    len: usize,
}

impl LaunchAttributes {
    /// `cfg`'s cluster dimension, cooperative flag and programmatic dependency, in that order;
    /// none for a plain launch.
    pub(crate) fn of(cfg: &LaunchConfig) -> LaunchAttributes {
        // SAFETY: all-zero is a valid value for these plain C structs/unions.
        let mut attrs: [CUlaunchAttribute; 3] = unsafe { std::mem::zeroed() };
        let mut len = 0;
        if let Some(c) = cfg.cluster() {
            attrs[len].id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attrs[len].value.clusterDim.x = c.x;
            attrs[len].value.clusterDim.y = c.y;
            attrs[len].value.clusterDim.z = c.z;
            len += 1;
        }
        if cfg.is_cooperative() {
            attrs[len].id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attrs[len].value.cooperative = 1;
            len += 1;
        }
        if cfg.is_programmatic_dependency() {
            attrs[len].id =
                CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attrs[len].value.programmaticStreamSerializationAllowed = 1;
            len += 1;
        }
        LaunchAttributes { attrs, len }
    }

    /// The driver's description of launching `cfg` on `stream` with these attributes. It points
    /// into `self`: keep `self` alive (and unmoved) until the driver call that reads it returns.
    pub(crate) fn config(&mut self, cfg: &LaunchConfig, stream: CUstream) -> CUlaunchConfig {
        let (g, b) = (cfg.grid(), cfg.block());
        CUlaunchConfig {
            gridDimX: g.x,
            gridDimY: g.y,
            gridDimZ: g.z,
            blockDimX: b.x,
            blockDimY: b.y,
            blockDimZ: b.z,
            sharedMemBytes: cfg.shared_mem_bytes(),
            hStream: stream,
            attrs: self.attrs.as_mut_ptr(),
            numAttrs: self.len as u32,
        }
    }
}
