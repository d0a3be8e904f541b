// Proves impossible: writing registered memory while an async copy from it is in flight: the
// `PendingCopy` borrows the registration, so `as_mut_slice` cannot be called until it is done.
use cuda_stack_driver::{Context, HostRegistration, Result, Stream};

fn upload(ctx: &Context, stream: &Stream) -> Result<()> {
    let mut dev = stream.alloc_zeros::<f32>(1024)?;
    let mut reg = HostRegistration::new(ctx, vec![1.0f32; 1024])?;
    let pending = stream.copy_htod_async(&reg, &mut dev)?;
    reg.as_mut_slice()?[0] = 2.0;
    pending.wait()?;
    Ok(())
}

fn main() {
    let _ = upload;
}
