// Proves impossible: dropping (freeing) a pinned buffer while an asynchronous copy into it is in
// flight (the DMA engine would write freed memory).
use cuda_stack_driver::{Context, PinnedBuffer, Result, Stream};

fn download(ctx: &Context, stream: &Stream) -> Result<()> {
    let mut host = PinnedBuffer::<f32>::zeroed(ctx, 1024)?;
    let dev = stream.alloc_zeros::<f32>(1024)?;
    let pending = stream.copy_dtoh_async(&dev, &mut host)?;
    drop(host);
    pending.wait()
}

fn main() {
    let _ = download;
}
