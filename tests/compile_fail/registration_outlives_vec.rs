// Proves impossible: touching a `Vec` after handing it to a `HostRegistration`. The registration
// owns the memory (so leaking it with `mem::forget` can only leak, never let DMA hit freed
// memory); the data is reached through the registration, which waits for pending copies.
use cuda_stack_driver::{Context, HostRegistration, Result, Stream};

fn upload(ctx: &Context, stream: &Stream) -> Result<()> {
    let mut dev = stream.alloc_zeros::<f32>(1024)?;
    let data = vec![1.0f32; 1024];
    let reg = HostRegistration::new(ctx, data)?;
    let pending = stream.copy_htod_async(&reg, &mut dev)?;
    println!("{}", data[0]);
    pending.wait()
}

fn main() {
    let _ = upload;
}
