// Proves impossible: returning a `PendingCopy` from the function that owns its pinned buffer (the
// buffer would be freed on return while the copy still reads it).
use cuda_stack_driver::{Context, DeviceSlice, PendingCopy, PinnedBuffer, Result, Stream};

fn start_upload<'a>(
    ctx: &Context,
    stream: &Stream,
    dev: &mut DeviceSlice<f32>,
) -> Result<PendingCopy<'a>> {
    let host = PinnedBuffer::<f32>::zeroed(ctx, dev.len())?;
    stream.copy_htod_async(&host, dev)
}

fn main() {
    let _ = start_upload;
}
