// Proves impossible: a device buffer of a `#[repr(C)]` struct that is not `Pod` (this one has 3
// padding bytes after `flag`: copying it would expose uninitialised bytes).
use cuda_stack_driver::{Result, Stream};

#[derive(Clone, Copy)]
#[repr(C)]
struct Particle {
    flag: u8,
    x: f32,
}

fn padded(stream: &Stream) -> Result<()> {
    let _buf = stream.clone_htod(&[Particle { flag: 1, x: 2.0 }])?;
    Ok(())
}

fn main() {
    let _ = padded;
}
