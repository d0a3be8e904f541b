// Proves impossible: making a typed kernel handle without `unsafe`: the signature is a promise
// about the CUDA code that the compiler cannot check.
use cuda_stack_driver::{Kernel, Module, Result};

fn make(module: &Module) -> Result<Kernel<(u32,)>> {
    module.kernel::<(u32,)>("k")
}

fn main() {
    let _ = make;
}
