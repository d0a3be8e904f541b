// Proves impossible: launching one `GraphExec` from two threads at once (it is `Send` but not
// `Sync`: the driver does not synchronise concurrent use of an executable graph).
use cuda_stack_driver::{GraphExec, Result, Stream};

fn replay_twice(exec: &GraphExec, a: &Stream, b: &Stream) -> Result<()> {
    std::thread::scope(|s| {
        let t = s.spawn(|| exec.launch(a));
        exec.launch(b)?;
        t.join().unwrap_or(Ok(()))
    })
}

fn main() {
    let _ = replay_twice;
}
