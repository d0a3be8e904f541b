// Proves impossible: reading a pinned buffer while an asynchronous device-to-host copy still writes
// it (the `PendingCopy` borrows it exclusively).
use cuda_stack_driver::{Context, PinnedBuffer, Result, Stream};

fn download(ctx: &Context, stream: &Stream) -> Result<f32> {
    let mut host = PinnedBuffer::<f32>::zeroed(ctx, 1024)?;
    let dev = stream.alloc_zeros::<f32>(1024)?;
    let pending = stream.copy_dtoh_async(&dev, &mut host)?;
    let first = host[0];
    pending.wait()?;
    Ok(first)
}

fn main() {
    let _ = download;
}
