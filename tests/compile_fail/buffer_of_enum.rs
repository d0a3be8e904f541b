// Proves impossible: a device buffer of a plain enum: only its declared discriminants are valid
// values, and the device could write any other.
use cuda_stack_driver::{Result, Stream};

#[derive(Clone, Copy)]
#[repr(u32)]
enum Op {
    Add = 0,
    Mul = 1,
}

fn enums(stream: &Stream) -> Result<()> {
    let _buf = stream.clone_htod(&[Op::Add, Op::Mul])?;
    Ok(())
}

fn main() {
    let _ = enums;
}
