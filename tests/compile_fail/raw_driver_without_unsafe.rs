// Proves impossible: calling a raw driver entry point without `unsafe` (the raw layer takes raw
// pointers and handles that nothing validates).
use cuda_stack_driver::cuda_stack_sys::Driver;
use cuda_stack_driver::Result;

fn init() -> Result<()> {
    Driver::get()?.cuInit(0)?;
    Ok(())
}

fn main() {
    let _ = init;
}
