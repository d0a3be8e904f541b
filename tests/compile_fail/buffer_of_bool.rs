// Proves impossible: `DeviceBuffer<bool>`: only 0 and 1 are valid `bool`s, but a kernel can write
// any byte, and reading it back would be undefined behaviour.
use cuda_stack_driver::{Result, Stream};

fn bools(stream: &Stream) -> Result<()> {
    let _flags = stream.alloc_zeros::<bool>(16)?;
    Ok(())
}

fn main() {
    let _ = bools;
}
