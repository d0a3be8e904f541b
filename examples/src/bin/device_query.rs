//! `device_query`: a small `nvidia-smi` / `deviceQuery`, using only the raw layer (`cuda-stack-sys`).
//!
//! Prints the driver library it loaded (path, version, load time) and, for each device, its name,
//! compute capability, SMs, memory, clocks and launch limits. Without a driver it prints where it
//! looked and why each place failed, and exits with status 1.
//!
//! Run: `cargo run --release -p cuda-examples --bin device_query`

use cuda_stack_sys::{CUdevice_attribute as A, Driver, DriverError};
use std::process::ExitCode;

fn main() -> ExitCode {
    let drv = match Driver::get() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("device_query: no CUDA driver found.\n{e}");
            return ExitCode::FAILURE;
        }
    };
    match query(drv) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("device_query: {e}");
            ExitCode::FAILURE
        }
    }
}

fn query(drv: &Driver) -> Result<(), DriverError> {
    let resolved = drv
        .resolved_path()
        .map(|p| format!(" -> {}", p.display()))
        .unwrap_or_default();
    println!(
        "CUDA driver: {} (cuDriverGetVersion = {}), loaded from {}{}",
        drv.version_string(),
        drv.version().unwrap_or(0),
        drv.path().display(),
        resolved
    );
    println!(
        "  Driver::load took {:.3} ms ({} of {} entry points resolved)",
        drv.load_time().as_secs_f64() * 1e3,
        drv.table().resolved_count(),
        cuda_stack_sys::driver_table::DriverTable::SYMBOLS.len()
    );
    match cuda_stack_sys::Nvrtc::get() {
        Ok(n) => println!(
            "NVRTC: {}, loaded from {}",
            n.version_string(),
            n.resolved_path()
                .unwrap_or_else(|| n.path().to_path_buf())
                .display()
        ),
        Err(e) => println!("NVRTC: not found ({} places tried)", e.attempts.len()),
    }
    let mut count = 0;
    // SAFETY: `cuInit` takes no pointers; `count` is a valid out-pointer.
    unsafe {
        drv.cuInit(0)?;
        drv.cuDeviceGetCount(&mut count)?;
    }
    println!("{count} CUDA device(s)");
    for ordinal in 0..count {
        print_device(drv, ordinal)?;
    }
    Ok(())
}

fn print_device(drv: &Driver, ordinal: i32) -> Result<(), DriverError> {
    let mut dev = 0;
    let mut name = [0 as std::ffi::c_char; 256];
    let mut uuid = cuda_stack_sys::CUuuid::default();
    let mut total = 0usize;
    // SAFETY: out-pointers to locals; the buffer length is passed with the buffer.
    unsafe {
        drv.cuDeviceGet(&mut dev, ordinal)?;
        drv.cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev)?;
        drv.cuDeviceGetUuid_v2(&mut uuid, dev)?;
        drv.cuDeviceTotalMem_v2(&mut total, dev)?;
    }
    // SAFETY: the driver NUL-terminates the name inside the buffer.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy();
    let attr = |a: A| -> Result<i32, DriverError> {
        let mut v = 0;
        // SAFETY: out-pointer to a local.
        unsafe { drv.cuDeviceGetAttribute(&mut v, a, dev)? };
        Ok(v)
    };
    let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let sms = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let sm_khz = attr(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?;
    let mem_khz = attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?;
    let bus_bits = attr(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?;
    let uuid: String = uuid
        .bytes
        .iter()
        .map(|b| format!("{:02x}", *b as u8))
        .collect();
    println!("\nDevice {ordinal}: {name}");
    println!("  UUID                         GPU-{uuid}");
    println!("  compute capability           {major}.{minor} (sm_{major}{minor})");
    println!("  streaming multiprocessors    {sms}");
    println!(
        "  global memory                {:.1} GiB",
        total as f64 / (1u64 << 30) as f64
    );
    println!("  SM clock (max)               {} MHz", sm_khz / 1000);
    println!(
        "  memory clock, bus            {} MHz, {bus_bits}-bit (peak ~{:.0} GB/s)",
        mem_khz / 1000,
        2.0 * mem_khz as f64 * 1e3 * bus_bits as f64 / 8.0 / 1e9
    );
    println!(
        "  L2 cache                     {} MiB",
        attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? >> 20
    );
    println!(
        "  warp size                    {}",
        attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?
    );
    println!(
        "  max threads per block        {}",
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?
    );
    println!(
        "  max threads per SM           {}",
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?
    );
    println!(
        "  max block dims               {} x {} x {}",
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?
    );
    println!(
        "  max grid dims                {} x {} x {}",
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?
    );
    println!(
        "  shared memory per block      {} KiB (opt-in up to {} KiB; {} KiB per SM)",
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)? >> 10,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? >> 10,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)? >> 10
    );
    println!(
        "  registers per block          {}",
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?
    );
    println!(
        "  async copy engines           {}",
        attr(A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?
    );
    println!(
        "  memory pools (cuMemAllocAsync) {}",
        if attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0 {
            "supported"
        } else {
            "not supported"
        }
    );
    Ok(())
}
