// Proves impossible: moving a pinned buffer to another thread (where it could be freed or touched)
// while an asynchronous copy from it is in flight.
use cuda_stack_driver::{Context, PinnedBuffer, Result, Stream};

fn upload(ctx: &Context, stream: &Stream) -> Result<()> {
    let host = PinnedBuffer::<f32>::zeroed(ctx, 1024)?;
    let mut dev = stream.alloc_zeros::<f32>(1024)?;
    let pending = stream.copy_htod_async(&host, &mut dev)?;
    let t = std::thread::spawn(move || host.len());
    pending.wait()?;
    let _ = t.join();
    Ok(())
}

fn main() {
    let _ = upload;
}
