// Proves impossible: launching a kernel with fewer arguments than its signature has (the driver
// would read the missing parameters from garbage).
use cuda_stack_driver::{DeviceSlice, Kernel, LaunchConfig, Result, Stream};

/// `saxpy(const float* x, float* y, float a, unsigned n)`.
type Saxpy = Kernel<(
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    f32,
    u32,
)>;

fn launch(k: &Saxpy, stream: &Stream) -> Result<()> {
    let x = stream.alloc_zeros::<f32>(256)?;
    let mut y = stream.alloc_zeros::<f32>(256)?;
    let cfg = LaunchConfig::for_num_elems(256);
    // SAFETY: (beside the point here: the call must not compile at all)
    unsafe { k.launch(stream, &cfg, &x, &mut y, 2.0) }
}

fn main() {
    let _ = launch;
}
