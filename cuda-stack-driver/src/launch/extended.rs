//! The driver's extended launch description (`CUlaunchConfig` with its `CUlaunchAttribute`s) for
//! a [`LaunchConfig`] with a cluster, a cooperative grid or a programmatic dependency: built in one place for both
//! `cuLaunchKernelEx` ([`crate::Function::launch`]) and `cuOccupancyMaxActiveClusters`
//! ([`crate::Function::max_active_clusters`]).

use super::LaunchConfig;
use cuda_stack_sys::{CUlaunchAttribute, CUlaunchAttributeID, CUlaunchConfig, CUstream};
use std::marker::PhantomData;

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

    /// The driver's description of launching `cfg` on `stream` with these attributes. The raw
    /// struct points into `self`'s array; the returned value borrows `self` mutably, so the
    /// attributes can be neither moved, changed nor dropped while the description exists.
    pub(crate) fn config(&mut self, cfg: &LaunchConfig, stream: CUstream) -> ExtendedConfig<'_> {
        let (g, b) = (cfg.grid(), cfg.block());
        ExtendedConfig {
            raw: CUlaunchConfig {
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
            },
            _attrs: PhantomData,
        }
    }
}

/// A `CUlaunchConfig` whose `attrs` pointer points into the [`LaunchAttributes`] it was made
/// from, carrying that borrow so the pointer cannot outlive or alias a moved array.
pub(crate) struct ExtendedConfig<'a> {
    raw: CUlaunchConfig,
    _attrs: PhantomData<&'a mut LaunchAttributes>,
}

impl ExtendedConfig<'_> {
    /// The raw description for `cuLaunchKernelEx` / `cuOccupancyMaxActiveClusters`; valid while
    /// `self` lives.
    pub(crate) fn as_raw(&self) -> &CUlaunchConfig {
        &self.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::LaunchConfig;

    #[test]
    fn attributes_follow_the_config_in_order() {
        let cfg = LaunchConfig::new((4, 1, 1), (128, 1, 1))
            .with_cluster((2, 1, 1))
            .with_programmatic_dependency();
        let mut attrs = LaunchAttributes::of(&cfg);
        let lc = attrs.config(&cfg, std::ptr::null_mut());
        let raw = lc.as_raw();
        assert_eq!(raw.numAttrs, 2);
        assert_eq!((raw.gridDimX, raw.blockDimX), (4, 128));
        // SAFETY: `raw.attrs` points at `attrs`' array of 3, borrowed by `lc`, which lives here.
        let (a0, a1) = unsafe { (&*raw.attrs, &*raw.attrs.add(1)) };
        assert_eq!(
            a0.id,
            CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        );
        assert_eq!(
            a1.id,
            CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        );
        // SAFETY: the union member the id names.
        assert_eq!(unsafe { a0.value.clusterDim.x }, 2);
    }

    #[test]
    fn a_plain_config_has_no_attributes() {
        let cfg = LaunchConfig::new((1, 1, 1), (32, 1, 1));
        let mut attrs = LaunchAttributes::of(&cfg);
        assert_eq!(
            attrs.config(&cfg, std::ptr::null_mut()).as_raw().numAttrs,
            0
        );
    }
}
