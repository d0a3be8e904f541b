// Proves impossible: `DeviceBuffer<String>`: a heap-owning type (pointer, length, capacity) cannot
// live in device memory.
use cuda_stack_driver::{Result, Stream};

fn strings(stream: &Stream) -> Result<()> {
    let _buf = stream.alloc_zeros::<String>(2)?;
    Ok(())
}

fn main() {
    let _ = strings;
}
