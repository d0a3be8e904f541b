// Proves impossible: two live writable views of the same buffer (here overlapping, [0, 8) and
// [4, 12)), which would let one operation read memory another writes at the same time.
use cuda_stack_driver::{Result, Stream};

fn overlapping(stream: &Stream) -> Result<()> {
    let mut buf = stream.alloc_zeros::<f32>(16)?;
    let a = buf.slice_mut(0..8)?;
    let mut b = buf.slice_mut(4..12)?;
    stream.memcpy_dtod(&a, &mut b)
}

fn main() {
    let _ = overlapping;
}
