// Proves impossible: pinned host memory of `bool`: the DMA engine writes raw bytes into it, which
// need not be valid `bool`s.
use cuda_stack_driver::{Context, PinnedBuffer, Result};

fn pinned_bools(ctx: &Context) -> Result<()> {
    let _host = PinnedBuffer::<bool>::zeroed(ctx, 16)?;
    Ok(())
}

fn main() {
    let _ = pinned_bools;
}
