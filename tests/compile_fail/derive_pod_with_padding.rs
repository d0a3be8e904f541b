// Proves impossible: deriving `Pod` (and so `DeviceRepr`) for a struct with padding: bytemuck's
// derive rejects it, so the `DeviceBuffer<Particle>` below cannot exist.
use cuda_stack_driver::bytemuck::{Pod, Zeroable};
use cuda_stack_driver::{Result, Stream};

#[derive(Clone, Copy, Pod, Zeroable)]
#[bytemuck(crate = "cuda_stack_driver::bytemuck")]
#[repr(C)]
struct Particle {
    flag: u8,
    x: f32,
}

fn padded(stream: &Stream) -> Result<()> {
    let _buf = stream.alloc_zeros::<Particle>(4)?;
    Ok(())
}

fn main() {
    let _ = padded;
}
