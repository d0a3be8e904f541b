// Proves impossible: an untyped launch (`Function::launch` with raw parameter pointers) without
// `unsafe`: nothing checks the pointers against the kernel's parameters.
use cuda_stack_driver::{Function, LaunchConfig, Result, Stream};
use std::ffi::c_void;

fn launch(function: &Function, stream: &Stream) -> Result<()> {
    let mut n: u32 = 16;
    let mut params = [&mut n as *mut u32 as *mut c_void];
    function.launch(stream, &LaunchConfig::for_num_elems(16), &mut params)
}

fn main() {
    let _ = launch;
}
