// Proves impossible: a handle to a module `__device__` global typed `bool` (the device may hold
// any byte there, and reading it back as `bool` would be undefined behaviour).
use cuda_stack_driver::{Module, Result};

fn find_flag(module: &Module) -> Result<()> {
    let _flag = module.global::<bool>("flag")?;
    Ok(())
}

fn main() {
    let _ = find_flag;
}
