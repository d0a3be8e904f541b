// Proves impossible: using the halves from `split_at_mut` after borrowing the whole buffer
// mutably again (the whole-buffer write would alias both halves).
use cuda_stack_driver::{Result, Stream};

fn reborrow(stream: &Stream) -> Result<()> {
    let mut buf = stream.alloc_zeros::<f32>(16)?;
    let (mut lo, hi) = buf.split_at_mut(8)?;
    stream.memset_zeros(&mut buf)?;
    stream.memcpy_dtod(&hi, &mut lo)
}

fn main() {
    let _ = reborrow;
}
