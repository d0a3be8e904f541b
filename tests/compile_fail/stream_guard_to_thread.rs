// Proves impossible: moving a `StreamGuard` (`use_stream`) to another thread: it must end the
// scope of the thread that opened it, not leave that thread's stream current and remove an
// entry of the other thread's.
use cuda_stack_runtime::cuda_stack_driver::Stream;
use cuda_stack_runtime::use_stream;

fn scope_elsewhere(s: &Stream) {
    let guard = use_stream(s);
    let t = std::thread::spawn(move || drop(guard));
    let _ = t.join();
}

fn main() {
    let _ = scope_elsewhere;
}
