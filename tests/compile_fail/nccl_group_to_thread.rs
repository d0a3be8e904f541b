// Proves impossible: moving an open NCCL `Group` to another thread: NCCL's group state belongs
// to the thread that called `ncclGroupStart`, and `ncclGroupEnd` must be called there.
use cuda_stack_nccl::Group;

fn end_elsewhere() -> cuda_stack_nccl::Result<()> {
    let g = Group::new()?;
    let t = std::thread::spawn(move || g.end());
    let _ = t.join();
    Ok(())
}

fn main() {
    let _ = end_elsewhere;
}
