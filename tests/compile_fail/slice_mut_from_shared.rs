// Proves impossible: getting a writable view out of a shared reference to a buffer (two holders
// of `&DeviceBuffer` could then both write the same memory).
use cuda_stack_driver::{DeviceBuffer, Result, Stream};

fn upgrade(stream: &Stream, buf: &DeviceBuffer<f32>) -> Result<()> {
    let mut w = buf.slice_mut(..)?;
    stream.memset_zeros(&mut w)
}

fn main() {
    let _ = upgrade;
}
