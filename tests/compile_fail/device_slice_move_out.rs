// Proves impossible: moving a `DeviceSlice` out from behind a reference (it is unsized, like
// `[T]`): a by-value copy of the slice's bookkeeping would outlive the buffer's borrow.
use cuda_stack_driver::{DeviceSlice, Result, Stream};

fn move_out(stream: &Stream) -> Result<()> {
    let buf = stream.alloc_zeros::<f32>(16)?;
    let s: DeviceSlice<f32> = *buf;
    let _ = s;
    Ok(())
}

fn main() {
    let _ = move_out;
}
