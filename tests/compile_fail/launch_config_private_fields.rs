// Proves impossible: building a `LaunchConfig` from its fields, bypassing the constructors (its
// fields are private; configurations come from `new`, `for_num_elems`, `tiles_2d`, …).
use cuda_stack_driver::{Dim3, LaunchConfig};

fn make() -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(2048, 1, 1),
        ..LaunchConfig::for_num_elems(1)
    }
}

fn main() {
    let _ = make;
}
