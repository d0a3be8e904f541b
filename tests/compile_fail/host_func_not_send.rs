// Proves impossible: a stream callback that is not `Send` (it captures an `Rc`): it runs on a
// driver thread, concurrently with this one.
use cuda_stack_driver::{Result, Stream};
use std::rc::Rc;

fn callback(stream: &Stream) -> Result<()> {
    let counter = Rc::new(std::cell::Cell::new(0u32));
    let c = counter.clone();
    stream.launch_host_func(move || c.set(c.get() + 1))?;
    stream.synchronize()
}

fn main() {
    let _ = callback;
}
