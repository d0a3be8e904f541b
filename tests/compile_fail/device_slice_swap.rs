// Proves impossible: swapping two `&mut DeviceSlice`s' contents with `std::mem::swap` (unsized):
// that would exchange the buffers' host-side bookkeeping, not their device data.
use cuda_stack_driver::{DeviceSlice, Result, Stream};

fn swap(stream: &Stream) -> Result<()> {
    let mut a = stream.alloc_zeros::<f32>(16)?;
    let mut b = stream.alloc_zeros::<f32>(32)?;
    let (a, b): (&mut DeviceSlice<f32>, &mut DeviceSlice<f32>) = (&mut a, &mut b);
    std::mem::swap(a, b);
    Ok(())
}

fn main() {
    let _ = swap;
}
