//! Devices: enumeration and typed attributes.

use crate::{driver, Result};
use cuda_stack_sys::{CUdevice, CUdevice_attribute as A};

/// A CUDA device (a GPU), by ordinal. Cheap to copy; it owns nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    ordinal: i32,
    raw: CUdevice,
}

/// A compute capability, e.g. 9.0 for Hopper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    /// Major version.
    pub major: i32,
    /// Minor version.
    pub minor: i32,
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The device limits a launch is validated against, read once per context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Max threads in one block.
    pub max_threads_per_block: u32,
    /// Max block dimensions (x, y, z).
    pub max_block_dim: [u32; 3],
    /// Max grid dimensions (x, y, z).
    pub max_grid_dim: [u32; 3],
    /// Shared memory per block without opting in.
    pub max_shared_per_block: u32,
    /// Shared memory per block with opt-in (`cuFuncSetAttribute`).
    pub max_shared_per_block_optin: u32,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Compute capability.
    pub compute_capability: ComputeCapability,
    /// Whether cooperative launches are supported.
    pub cooperative_launch: bool,
    /// Whether stream-ordered allocation (`cuMemAllocAsync`) is supported.
    pub memory_pools: bool,
}

impl Device {
    /// How many CUDA devices there are.
    pub fn count() -> Result<usize> {
        let drv = driver()?;
        let mut n = 0;
        // SAFETY: out-pointer to a local.
        unsafe { drv.cuDeviceGetCount(&mut n)? };
        Ok(n.max(0) as usize)
    }

    /// The device with this ordinal.
    pub fn get(ordinal: usize) -> Result<Device> {
        let drv = driver()?;
        let ordinal = i32::try_from(ordinal).unwrap_or(i32::MAX);
        let mut raw = 0;
        // SAFETY: out-pointer to a local; an out-of-range ordinal is an error, not UB.
        unsafe { drv.cuDeviceGet(&mut raw, ordinal)? };
        Ok(Device { ordinal, raw })
    }

    /// Every device, in ordinal order.
    pub fn all() -> Result<Vec<Device>> {
        (0..Device::count()?).map(Device::get).collect()
    }

    /// The ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal as usize
    }

    /// The raw `CUdevice` (escape hatch for other crates).
    pub fn as_raw(&self) -> CUdevice {
        self.raw
    }

    /// An integer attribute (`cuDeviceGetAttribute`).
    pub fn attribute(&self, attr: A) -> Result<i32> {
        let mut v = 0;
        // SAFETY: out-pointer to a local.
        unsafe { driver()?.cuDeviceGetAttribute(&mut v, attr, self.raw)? };
        Ok(v)
    }

    fn attr_u32(&self, attr: A) -> Result<u32> {
        Ok(self.attribute(attr)?.max(0) as u32)
    }

    /// The device's name, e.g. "NVIDIA H200".
    pub fn name(&self) -> Result<String> {
        let mut buf = [0 as std::ffi::c_char; 256];
        // SAFETY: the buffer's length is passed with it.
        unsafe { driver()?.cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, self.raw)? };
        // SAFETY: the driver NUL-terminates within the buffer.
        Ok(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// The device's UUID (16 bytes), as `nvidia-smi -L` shows it (`GPU-…`).
    pub fn uuid(&self) -> Result<[u8; 16]> {
        let mut u = cuda_stack_sys::CUuuid::default();
        // SAFETY: out-pointer to a local.
        unsafe { driver()?.cuDeviceGetUuid_v2(&mut u, self.raw)? };
        Ok(u.bytes.map(|b| b as u8))
    }

    /// Compute capability.
    pub fn compute_capability(&self) -> Result<ComputeCapability> {
        Ok(ComputeCapability {
            major: self.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            minor: self.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        })
    }

    /// Streaming multiprocessors.
    pub fn sm_count(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    }

    /// Total global memory in bytes.
    pub fn total_memory(&self) -> Result<usize> {
        let mut b = 0;
        // SAFETY: out-pointer to a local.
        unsafe { driver()?.cuDeviceTotalMem_v2(&mut b, self.raw)? };
        Ok(b)
    }

    /// Peak SM clock in kHz.
    pub fn clock_rate_khz(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
    }

    /// Peak memory clock in kHz.
    pub fn memory_clock_rate_khz(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
    }

    /// Global memory bus width in bits.
    pub fn memory_bus_width_bits(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
    }

    /// Theoretical peak DRAM bandwidth in bytes/s (double data rate × bus width).
    pub fn peak_memory_bandwidth(&self) -> Result<f64> {
        Ok(
            2.0 * self.memory_clock_rate_khz()? as f64 * 1e3 * self.memory_bus_width_bits()? as f64
                / 8.0,
        )
    }

    /// Max threads per block.
    pub fn max_threads_per_block(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    }

    /// Max shared memory per block without opt-in, in bytes.
    pub fn max_shared_memory_per_block(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)
    }

    /// Max dynamic shared memory per block with opt-in, in bytes.
    pub fn max_shared_memory_per_block_optin(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    }

    /// Warp size (32 on every NVIDIA GPU so far).
    pub fn warp_size(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)
    }

    /// L2 cache size in bytes.
    pub fn l2_cache_bytes(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
    }

    /// Number of copy engines (concurrent copy and kernel execution).
    pub fn async_engine_count(&self) -> Result<u32> {
        self.attr_u32(A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)
    }

    /// Whether stream-ordered allocation from memory pools is supported.
    pub fn memory_pools_supported(&self) -> Result<bool> {
        Ok(self.attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0)
    }

    /// The limits a launch is validated against.
    pub fn limits(&self) -> Result<DeviceLimits> {
        Ok(DeviceLimits {
            max_threads_per_block: self.max_threads_per_block()?,
            max_block_dim: [
                self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid_dim: [
                self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                self.attr_u32(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            max_shared_per_block: self.max_shared_memory_per_block()?,
            max_shared_per_block_optin: self.max_shared_memory_per_block_optin()?,
            sm_count: self.sm_count()?,
            compute_capability: self.compute_capability()?,
            cooperative_launch: self.attribute(A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? != 0,
            memory_pools: self.memory_pools_supported()?,
        })
    }
}
