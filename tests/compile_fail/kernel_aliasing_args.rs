// Proves impossible: one launch reading and writing the same buffer through two parameters (`&buf`
// and `&mut buf`): a kernel may assume its output does not alias its input.
use cuda_stack_driver::{DeviceSlice, Kernel, LaunchConfig, Result, Stream};

/// `saxpy(const float* x, float* y, float a, unsigned n)`.
type Saxpy = Kernel<(
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    f32,
    u32,
)>;

fn launch(k: &Saxpy, stream: &Stream) -> Result<()> {
    let mut buf = stream.alloc_zeros::<f32>(256)?;
    let cfg = LaunchConfig::for_num_elems(256);
    // SAFETY: (beside the point here: the call must not compile at all)
    unsafe { k.launch(stream, &cfg, &buf, &mut buf, 2.0, 256) }
}

fn main() {
    let _ = launch;
}
