//! `LaunchConfig`: grid, block, dynamic shared memory, cluster, cooperative flag and programmatic
//! dependency, validated against the device before a launch.

use crate::{DeviceLimits, Error, Result};

/// Grid or block dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// x extent.
    pub x: u32,
    /// y extent.
    pub y: u32,
    /// z extent.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }

    /// The product of the extents (as u64: it can exceed u32).
    pub const fn volume(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3::new(x, 1, 1)
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3::new(x, y, 1)
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3::new(x, y, z)
    }
}

/// How to launch a kernel: `<<<grid, block, shared_mem>>>`, plus thread-block clusters,
/// cooperative launch and programmatic dependent launch. Its fields are private: build it with the constructors, and it is checked
/// against the device's limits before each launch, so a bad configuration gives an error naming
/// the limit instead of `CUDA_ERROR_INVALID_VALUE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    grid: Dim3,
    block: Dim3,
    shared_mem_bytes: u32,
    cluster: Option<Dim3>,
    cooperative: bool,
    programmatic: bool,
}

impl LaunchConfig {
    /// `grid` blocks of `block` threads, no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
            cluster: None,
            cooperative: false,
            programmatic: false,
        }
    }

    /// One thread per element: blocks of 256 and enough of them to cover `n` (at least one
    /// block, so an empty launch is still valid; kernels guard `i < n`).
    pub fn for_num_elems(n: usize) -> LaunchConfig {
        Self::for_num_elems_with_block(n, 256)
    }

    /// One thread per element with blocks of `block` threads.
    pub fn for_num_elems_with_block(n: usize, block: u32) -> LaunchConfig {
        let block = block.max(1);
        let grid = n.div_ceil(block as usize).clamp(1, u32::MAX as usize) as u32;
        LaunchConfig::new(grid, block)
    }

    /// 2-D tiles: blocks of `tile` = (x, y) threads covering a `rows × cols` output, x along
    /// columns (as seed 003's matmul: `grid = (ceil(cols/x), ceil(rows/y))`).
    pub fn tiles_2d(rows: usize, cols: usize, tile: (u32, u32)) -> LaunchConfig {
        let (tx, ty) = (tile.0.max(1), tile.1.max(1));
        let gx = cols.div_ceil(tx as usize).clamp(1, u32::MAX as usize) as u32;
        let gy = rows.div_ceil(ty as usize).clamp(1, u32::MAX as usize) as u32;
        LaunchConfig::new((gx, gy), (tx, ty))
    }

    /// With `bytes` of dynamic shared memory per block.
    pub fn with_shared_mem(mut self, bytes: u32) -> LaunchConfig {
        self.shared_mem_bytes = bytes;
        self
    }

    /// In thread-block clusters of `dims` blocks (compute capability 9.0+). The grid must be a
    /// multiple of the cluster in each dimension.
    pub fn with_cluster(mut self, dims: impl Into<Dim3>) -> LaunchConfig {
        self.cluster = Some(dims.into());
        self
    }

    /// As a cooperative launch (all blocks resident at once; grid-wide sync allowed).
    pub fn cooperative(mut self) -> LaunchConfig {
        self.cooperative = true;
        self
    }

    /// With a programmatic dependency on the kernel before it in the stream (programmatic
    /// dependent launch, `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`; compute
    /// capability 9.0+): the driver may start this kernel's blocks before that kernel has
    /// finished, once each of its blocks has run `griddepcontrol.launch_dependents`
    /// (`cudaTriggerProgrammaticLaunchCompletion`) or exited. This hides the gap between two
    /// dependent launches on a stream (about 1.6 µs on an H200 between two kernels launched
    /// eagerly), not the work itself.
    ///
    /// The kernel must therefore execute `griddepcontrol.wait` (`cudaGridDependencySynchronize`)
    /// before it reads or writes any memory that earlier work in the stream may write or read:
    /// that instruction waits until every kernel it depends on has completed and its writes are
    /// visible. A kernel without it races the kernel before it. This is part of the contract of
    /// the (unsafe) launch calls; a kernel that runs the wait first is correct with or without
    /// this attribute (without it the wait returns at once). Work other than a kernel (a copy, an
    /// event wait) before the launch is waited for as usual.
    pub fn with_programmatic_dependency(mut self) -> LaunchConfig {
        self.programmatic = true;
        self
    }

    /// Grid dimensions.
    pub fn grid(&self) -> Dim3 {
        self.grid
    }
    /// Block dimensions.
    pub fn block(&self) -> Dim3 {
        self.block
    }
    /// Dynamic shared memory per block, bytes.
    pub fn shared_mem_bytes(&self) -> u32 {
        self.shared_mem_bytes
    }
    /// Cluster dimensions, if any.
    pub fn cluster(&self) -> Option<Dim3> {
        self.cluster
    }
    /// Whether this is a cooperative launch.
    pub fn is_cooperative(&self) -> bool {
        self.cooperative
    }
    /// Whether the launch may overlap the kernel before it
    /// ([`LaunchConfig::with_programmatic_dependency`]).
    pub fn is_programmatic_dependency(&self) -> bool {
        self.programmatic
    }
    /// Whether the launch needs `cuLaunchKernelEx` (a cluster, cooperative or a programmatic
    /// dependency) rather than `cuLaunchKernel`.
    pub(crate) fn is_extended(&self) -> bool {
        self.cluster.is_some() || self.cooperative || self.programmatic
    }
    /// Threads per block.
    pub fn threads_per_block(&self) -> u64 {
        self.block.volume()
    }
    /// Total threads launched.
    pub fn total_threads(&self) -> u64 {
        self.block.volume() * self.grid.volume()
    }

    /// Checks the configuration against the device's limits and the kernel's own (its max
    /// threads per block, which its register use lowers, and its static plus allowed dynamic
    /// shared memory). `kernel` names the kernel in the error.
    #[inline]
    pub fn validate(&self, limits: &DeviceLimits, kernel: &KernelLimits, name: &str) -> Result<()> {
        if self.plainly_fits(limits, kernel) {
            return Ok(());
        }
        self.validate_in_full(limits, kernel, name)
    }

    /// The common case in a few comparisons, for every launch: every dimension between 1 and
    /// its limit, the threads and the dynamic shared memory within both limits, no cluster, not
    /// cooperative, no programmatic dependency. `true` only where [`LaunchConfig::validate_in_full`] finds nothing wrong.
    #[inline]
    fn plainly_fits(&self, limits: &DeviceLimits, kernel: &KernelLimits) -> bool {
        let (b, g) = (self.block, self.grid);
        let within = |v: [u32; 3], max: [u32; 3]| {
            v[0] >= 1
                && v[1] >= 1
                && v[2] >= 1
                && v[0] <= max[0]
                && v[1] <= max[1]
                && v[2] <= max[2]
        };
        let threads = b.volume();
        within([b.x, b.y, b.z], limits.max_block_dim)
            && within([g.x, g.y, g.z], limits.max_grid_dim)
            && threads <= limits.max_threads_per_block as u64
            && threads <= kernel.max_threads_per_block as u64
            && self.shared_mem_bytes <= kernel.max_dynamic_shared_bytes
            && self.cluster.is_none()
            && !self.cooperative
            && !self.programmatic
    }

    /// Every check, with the message that names the first problem found.
    #[cold]
    fn validate_in_full(
        &self,
        limits: &DeviceLimits,
        kernel: &KernelLimits,
        name: &str,
    ) -> Result<()> {
        let fail = |problem: String| {
            Err(Error::LaunchConfig {
                kernel: name.to_string(),
                problem,
            })
        };
        let axes = ["x", "y", "z"];
        let b = [self.block.x, self.block.y, self.block.z];
        let g = [self.grid.x, self.grid.y, self.grid.z];
        for i in 0..3 {
            if b[i] == 0 || g[i] == 0 {
                return fail(format!(
                    "grid {:?} and block {:?} must be at least 1 in every dimension (a 0 launches nothing and the driver rejects it)",
                    (g[0], g[1], g[2]),
                    (b[0], b[1], b[2])
                ));
            }
            if b[i] > limits.max_block_dim[i] {
                return fail(format!(
                    "block.{} is {}; this device allows at most {}",
                    axes[i], b[i], limits.max_block_dim[i]
                ));
            }
            if g[i] > limits.max_grid_dim[i] {
                return fail(format!(
                    "grid.{} is {}; this device allows at most {}",
                    axes[i], g[i], limits.max_grid_dim[i]
                ));
            }
        }
        let threads = self.block.volume();
        if threads > limits.max_threads_per_block as u64 {
            return fail(format!(
                "block has {threads} threads; this device allows {}",
                limits.max_threads_per_block
            ));
        }
        if threads > kernel.max_threads_per_block as u64 {
            return fail(format!(
                "block has {threads} threads; this kernel allows {} (its register use limits it)",
                kernel.max_threads_per_block
            ));
        }
        if self.shared_mem_bytes > kernel.max_dynamic_shared_bytes {
            let optin = limits
                .max_shared_per_block_optin
                .saturating_sub(kernel.static_shared_bytes);
            return fail(if self.shared_mem_bytes > optin {
                format!(
                    "{} bytes of dynamic shared memory requested; this device allows {} per block ({} with this kernel's {} static bytes)",
                    self.shared_mem_bytes, limits.max_shared_per_block_optin, optin, kernel.static_shared_bytes
                )
            } else {
                format!(
                    "{} bytes of dynamic shared memory requested but the kernel is set up for {}; raise it with Function::set_max_dynamic_shared_mem (up to {optin})",
                    self.shared_mem_bytes, kernel.max_dynamic_shared_bytes
                )
            });
        }
        if let Some(c) = self.cluster {
            let cc = limits.compute_capability;
            if cc.major < 9 {
                return fail(format!(
                    "thread-block clusters need compute capability 9.0 or newer; this device is {cc}"
                ));
            }
            let cd = [c.x, c.y, c.z];
            for i in 0..3 {
                if cd[i] == 0 || g[i] % cd[i] != 0 {
                    return fail(format!(
                        "grid.{} = {} is not a multiple of cluster.{} = {}",
                        axes[i], g[i], axes[i], cd[i]
                    ));
                }
            }
            if c.volume() > 8 {
                return fail(format!(
                    "cluster has {} blocks; the portable maximum is 8",
                    c.volume()
                ));
            }
        }
        if self.cooperative && !limits.cooperative_launch {
            return fail("cooperative launch is not supported by this device".into());
        }
        if self.programmatic && limits.compute_capability.major < 9 {
            return fail(format!(
                "a programmatic dependency (programmatic dependent launch) needs compute capability 9.0 or newer; this device is {}",
                limits.compute_capability
            ));
        }
        Ok(())
    }
}

/// A kernel's own launch limits, read from its function attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelLimits {
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
    pub max_threads_per_block: u32,
    /// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`.
    pub static_shared_bytes: u32,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` (48 KiB minus static by default).
    pub max_dynamic_shared_bytes: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ComputeCapability;

    fn h100() -> DeviceLimits {
        DeviceLimits {
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [2147483647, 65535, 65535],
            max_shared_per_block: 48 << 10,
            max_shared_per_block_optin: 227 << 10,
            sm_count: 132,
            compute_capability: ComputeCapability { major: 9, minor: 0 },
            cooperative_launch: true,
            memory_pools: true,
        }
    }
    const K: KernelLimits = KernelLimits {
        max_threads_per_block: 1024,
        static_shared_bytes: 0,
        max_dynamic_shared_bytes: 48 << 10,
    };

    fn problem(cfg: LaunchConfig) -> String {
        cfg.validate(&h100(), &K, "k").unwrap_err().to_string()
    }

    /// The fast path accepts nothing the full check refuses, over every combination of
    /// boundary values of each field (and accepts the plain configurations themselves).
    #[test]
    fn fast_path_agrees_with_the_full_check() {
        let lim = h100();
        let dims = [0u32, 1, 2, 64, 65, 1024, 1025, 65535, 65536, 2147483647];
        let (mut fast, mut checked) = (0, 0);
        for &bx in &dims {
            for &by in &[0u32, 1, 2, 1024, 1025] {
                for &bz in &[0u32, 1, 64, 65] {
                    for &gx in &dims {
                        for &gy in &[0u32, 1, 65535, 65536] {
                            for &shm in &[0u32, 48 << 10, (48 << 10) + 1] {
                                for k in [
                                    K,
                                    KernelLimits {
                                        max_threads_per_block: 256,
                                        ..K
                                    },
                                ] {
                                    let cfg = LaunchConfig::new((gx, gy, 1), (bx, by, bz))
                                        .with_shared_mem(shm);
                                    let full = cfg.validate_in_full(&lim, &k, "k");
                                    if cfg.plainly_fits(&lim, &k) {
                                        fast += 1;
                                        assert!(full.is_ok(), "{cfg:?}: {full:?}");
                                    }
                                    checked += 1;
                                    assert_eq!(
                                        cfg.validate(&lim, &k, "k").is_ok(),
                                        full.is_ok(),
                                        "{cfg:?}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(fast > 0 && fast < checked, "{fast} of {checked}");
        assert!(LaunchConfig::new(132, 256).plainly_fits(&lim, &K));
        assert!(!LaunchConfig::new(132, 256)
            .with_cluster((2, 1, 1))
            .plainly_fits(&lim, &K));
    }

    #[test]
    fn too_many_threads_names_the_limit() {
        let p = problem(LaunchConfig::new(1, (1024, 2)));
        assert!(
            p.contains("block has 2048 threads; this device allows 1024"),
            "{p}"
        );
    }

    #[test]
    fn zero_dims_and_grid_limits() {
        assert!(problem(LaunchConfig::new(0, 32)).contains("at least 1"));
        assert!(problem(LaunchConfig::new((1, 70000), 32))
            .contains("grid.y is 70000; this device allows at most 65535"));
        assert!(problem(LaunchConfig::new(1, (1, 1, 65))).contains("block.z is 65"));
    }

    #[test]
    fn shared_memory_limits() {
        let p = problem(LaunchConfig::new(1, 32).with_shared_mem(300 << 10));
        assert!(p.contains("this device allows 232448 per block"), "{p}");
        let p = problem(LaunchConfig::new(1, 32).with_shared_mem(100 << 10));
        assert!(p.contains("set_max_dynamic_shared_mem"), "{p}");
    }

    #[test]
    fn clusters() {
        let ok = LaunchConfig::new(8, 128).with_cluster(2);
        assert!(ok.validate(&h100(), &K, "k").is_ok());
        assert!(problem(LaunchConfig::new(7, 128).with_cluster(2)).contains("not a multiple"));
        assert!(
            problem(LaunchConfig::new(16, 128).with_cluster(16)).contains("portable maximum is 8")
        );
        let mut a100 = h100();
        a100.compute_capability = ComputeCapability { major: 8, minor: 0 };
        let p = ok.validate(&a100, &K, "k").unwrap_err().to_string();
        assert!(
            p.contains("compute capability 9.0 or newer; this device is 8.0"),
            "{p}"
        );
    }

    #[test]
    fn programmatic_dependency() {
        let plain = LaunchConfig::new(8, 128);
        let ok = plain.with_programmatic_dependency();
        assert!(ok.is_programmatic_dependency() && ok.is_extended());
        assert!(!plain.is_programmatic_dependency() && !plain.is_extended());
        assert!(ok.validate(&h100(), &K, "k").is_ok());
        let mut a100 = h100();
        a100.compute_capability = ComputeCapability { major: 8, minor: 0 };
        let p = ok.validate(&a100, &K, "k").unwrap_err().to_string();
        assert!(
            p.contains("programmatic dependency") && p.contains("this device is 8.0"),
            "{p}"
        );
        assert!(plain.validate(&a100, &K, "k").is_ok());
    }

    #[test]
    fn helpers() {
        let c = LaunchConfig::for_num_elems(1_000_001);
        assert_eq!((c.grid().x, c.block().x), (3907, 256));
        assert_eq!(LaunchConfig::for_num_elems(0).grid().x, 1);
        let t = LaunchConfig::tiles_2d(100, 33, (16, 16));
        assert_eq!(
            (t.grid(), t.block()),
            (Dim3::new(3, 7, 1), Dim3::new(16, 16, 1))
        );
    }
}
