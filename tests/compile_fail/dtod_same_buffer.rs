// Proves impossible: a device-to-device copy whose source and destination are the same buffer
// (an overlapping `cuMemcpyDtoD`, which the driver does not define).
use cuda_stack_driver::{Result, Stream};

fn self_copy(stream: &Stream) -> Result<()> {
    let mut buf = stream.alloc_zeros::<f32>(16)?;
    stream.memcpy_dtod(&buf, &mut buf)
}

fn main() {
    let _ = self_copy;
}
