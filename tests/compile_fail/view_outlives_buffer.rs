// Proves impossible: a read-only view (`DeviceView`) outliving its buffer. Dropping the buffer
// while a view of it is still used would leave the view pointing at freed device memory.
use cuda_stack_driver::{Result, Stream};

fn read_after_free(stream: &Stream) -> Result<Vec<f32>> {
    let buf = stream.alloc_zeros::<f32>(16)?;
    let view = buf.slice(0..8)?;
    drop(buf);
    stream.clone_dtoh(&view)
}

fn main() {
    let _ = read_after_free;
}
