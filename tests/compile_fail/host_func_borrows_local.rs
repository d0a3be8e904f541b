// Proves impossible: a stream callback borrowing a local: it runs later, on a driver thread, when
// the local may be gone (`launch_host_func` needs `'static`).
use cuda_stack_driver::{Result, Stream};

fn callback(stream: &Stream) -> Result<()> {
    let results = vec![0.0f32; 16];
    stream.launch_host_func(|| println!("{}", results.len()))
}

fn main() {
    let _ = callback;
}
