// Proves impossible: moving a `CurrentContextGuard` to another thread: it must pop the context
// stack of the thread that pushed it, not the other thread's.
use cuda_stack_driver::{Context, Result};

fn push_elsewhere(ctx: &Context) -> Result<()> {
    let guard = ctx.push_current()?;
    let t = std::thread::spawn(move || drop(guard));
    let _ = t.join();
    Ok(())
}

fn main() {
    let _ = push_elsewhere;
}
