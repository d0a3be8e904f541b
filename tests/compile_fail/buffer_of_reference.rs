// Proves impossible: device memory holding host references (`DeviceBuffer<&f32>`): a host
// address means nothing on the device, and bytes a kernel writes are not a valid reference.
use cuda_stack_driver::{Result, Stream};

fn refs(stream: &Stream) -> Result<()> {
    let _buf = stream.alloc_zeros::<&f32>(4)?;
    Ok(())
}

fn main() {
    let _ = refs;
}
