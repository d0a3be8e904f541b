// Proves impossible: changing a `LaunchConfig`'s fields in place (they are private; use the
// builder methods, e.g. `with_shared_mem`).
use cuda_stack_driver::{Dim3, LaunchConfig};

fn tweak(mut cfg: LaunchConfig) -> LaunchConfig {
    cfg.block = Dim3::new(4096, 1, 1);
    cfg
}

fn main() {
    let _ = tweak;
}
