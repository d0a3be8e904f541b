// Proves impossible: changing a captured kernel's parameter without `unsafe` (a new length can make
// the kernel write past its buffers).
use cuda_stack_driver::{GraphExec, Result};

fn grow(exec: &mut GraphExec) -> Result<()> {
    exec.set_kernel_param::<u32>(0, 2, 1 << 20)
}

fn main() {
    let _ = grow;
}
