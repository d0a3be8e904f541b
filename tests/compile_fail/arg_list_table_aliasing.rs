// Proves impossible: one launch writing a buffer through a by-value table
// (`ArgList::write_in_table`, the multi-tensor kernels' pointer tables) while also passing it as
// another parameter: the list borrows a table buffer exclusively for as long as it lives.
use cuda_stack_driver::launch::ArgList;
use cuda_stack_driver::{Result, Stream};

fn build(stream: &Stream) -> Result<()> {
    let mut buf = stream.alloc_zeros::<f32>(256)?;
    let mut args = ArgList::new();
    let addr = args.write_in_table(&mut buf);
    args.read(&buf).scalar(addr);
    let _ = args;
    Ok(())
}

fn main() {
    let _ = build;
}
