// Proves impossible: writing a pinned buffer while an asynchronous host-to-device copy still reads
// it (the `PendingCopy` borrows it).
use cuda_stack_driver::{Context, PinnedBuffer, Result, Stream};

fn upload(ctx: &Context, stream: &Stream) -> Result<()> {
    let mut host = PinnedBuffer::<f32>::zeroed(ctx, 1024)?;
    let mut dev = stream.alloc_zeros::<f32>(1024)?;
    let pending = stream.copy_htod_async(&host, &mut dev)?;
    host[0] = 1.0;
    pending.wait()
}

fn main() {
    let _ = upload;
}
