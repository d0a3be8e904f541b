// Proves impossible: a kernel signature with a host slice (`&[f32]`) parameter: a host address
// passed to a kernel is not device memory. Only `&DeviceSlice<T>`, `&mut DeviceSlice<T>` and
// `DeviceRepr` values are kernel parameters.
use cuda_stack_driver::{Kernel, Module, Result};

fn make(module: &Module) -> Result<Kernel<(&'static [f32], u32)>> {
    // SAFETY: (the case is about the type, not this promise).
    unsafe { module.kernel::<(&'static [f32], u32)>("sum") }
}

fn main() {
    let _ = make;
}
