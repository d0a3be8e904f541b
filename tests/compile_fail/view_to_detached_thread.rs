// Proves impossible: sending a view to a detached thread (`std::thread::spawn` needs `'static`),
// where it could outlive the buffer it borrows.
use cuda_stack_driver::{Result, Stream};

fn send_view(stream: &Stream) -> Result<()> {
    let buf = stream.alloc_zeros::<f32>(16)?;
    let view = buf.slice(..)?;
    let s = stream.clone();
    std::thread::spawn(move || s.clone_dtoh(&view));
    Ok(())
}

fn main() {
    let _ = send_view;
}
