// Proves impossible: a writable view (`DeviceViewMut`) outliving its buffer: the buffer is freed
// at the end of the inner scope while the view is used after it.
use cuda_stack_driver::{Result, Stream};

fn write_after_free(stream: &Stream) -> Result<()> {
    let mut view;
    {
        let mut buf = stream.alloc_zeros::<f32>(16)?;
        view = buf.slice_mut(4..12)?;
    }
    stream.memset_zeros(&mut view)
}

fn main() {
    let _ = write_after_free;
}
