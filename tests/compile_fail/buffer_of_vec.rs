// Proves impossible: `DeviceBuffer<Vec<f32>>`: a `Vec` owns host heap memory through a pointer; it
// cannot be copied to the device byte for byte.
use cuda_stack_driver::{Result, Stream};

fn vecs(stream: &Stream) -> Result<()> {
    let _buf = stream.alloc_zeros::<Vec<f32>>(4)?;
    Ok(())
}

fn main() {
    let _ = vecs;
}
