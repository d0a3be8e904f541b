// Proves impossible: writing device memory through a read-only view (`buf.slice(..)` gives
// `DeviceView`, which derefs only to `&DeviceSlice`).
use cuda_stack_driver::{Result, Stream};

fn write_read_only(stream: &Stream) -> Result<()> {
    let buf = stream.alloc_zeros::<f32>(16)?;
    let view = buf.slice(0..4)?;
    stream.memcpy_htod(&[1.0f32, 2.0, 3.0, 4.0], &view)
}

fn main() {
    let _ = write_read_only;
}
