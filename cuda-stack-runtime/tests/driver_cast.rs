//! `cuda_stack_driver::memory::cast` on the GPU: typed views of byte buffers and back, slice casts,
//! and their checks.

use cuda_stack_runtime::cuda_stack_driver::{bytemuck, DeviceBuffer, Error};
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![
        gpu("into_typed_and_back_keeps_the_memory", into_typed_roundtrip),
        gpu(
            "into_typed_too_long_hands_the_buffer_back",
            into_typed_too_long,
        ),
        gpu("slice_casts_read_and_write_the_same_bytes", slice_casts),
        gpu("misaligned_or_partial_casts_are_errors", bad_casts),
        gpu("is_held_by_graph_follows_the_graph", held_by_graph),
    ]);
}

fn into_typed_roundtrip() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let bytes: DeviceBuffer<u8> = s.alloc_zeros::<u8>(4096)?;
    let ptr = bytes.as_raw_ptr();
    let mut typed = bytes.into_typed::<f32>(1000)?;
    ensure!(typed.len() == 1000, "len {}", typed.len());
    ensure!(typed.as_raw_ptr() == ptr, "moved");
    ensure!(typed.buffer_bytes() == 4096, "buffer bytes");
    let data: Vec<f32> = (0..1000).map(|i| i as f32 - 0.25).collect();
    s.memcpy_htod(&data, &mut typed)?;
    ensure!(s.clone_dtoh(&typed)? == data, "typed roundtrip");
    ensure!(typed.home_stream().same_as(&s), "home stream");
    let back = typed.into_bytes();
    ensure!(back.len() == 4096 && back.as_raw_ptr() == ptr, "into_bytes");
    let raw = s.clone_dtoh(&back)?;
    ensure!(
        raw[..4000] == *bytemuck::cast_slice::<f32, u8>(&data),
        "bytes differ"
    );
    ensure!(raw[4000..].iter().all(|&b| b == 0), "tail changed");
    // Zero elements are fine.
    let empty = back.into_typed::<f64>(0)?;
    ensure!(empty.is_empty(), "empty");
    Ok(())
}

fn into_typed_too_long() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let bytes = s.clone_htod(&[9u8; 100])?;
    let e = match bytes.into_typed::<f32>(26) {
        Ok(_) => return Err("26 f32s fit in 100 bytes?".into()),
        Err(e) => e,
    };
    ensure!(
        matches!(
            e.error(),
            Error::OutOfBounds {
                end: 104,
                len: 100,
                ..
            }
        ),
        "{e}"
    );
    let back = e.into_buffer();
    ensure!(
        back.len() == 100 && s.clone_dtoh(&back)? == [9u8; 100],
        "buffer not handed back intact"
    );
    ensure!(back.into_typed::<f32>(25).is_ok(), "25 f32s fit");
    Ok(())
}

fn slice_casts() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let data: Vec<f32> = (0..256).map(|i| i as f32 * 1.5).collect();
    let mut buf = s.clone_htod(&data)?;
    {
        let bytes = buf.cast::<u8>()?;
        ensure!(bytes.len() == 1024, "byte len");
        ensure!(
            s.clone_dtoh(&bytes)? == bytemuck::cast_slice::<f32, u8>(&data),
            "byte view contents"
        );
    }
    {
        // Write through a u32 view of a sub-slice; read back as f32.
        let mut sub = buf.slice_mut(16..32)?;
        let mut bits = sub.cast_mut::<u32>()?;
        let ones: Vec<u32> = vec![1.0f32.to_bits(); 16];
        s.memcpy_htod(&ones, &mut bits)?;
    }
    let got = s.clone_dtoh(&buf)?;
    for (i, &g) in got.iter().enumerate() {
        let want = if (16..32).contains(&i) { 1.0 } else { data[i] };
        ensure!(g == want, "[{i}] = {g}, want {want}");
    }
    // Wider elements: pairs of f32 as [f32; 2].
    let pairs = buf.cast::<[f32; 2]>()?;
    ensure!(pairs.len() == 128, "pairs");
    let p = s.clone_dtoh(&pairs)?;
    ensure!(p[100] == [data[200], data[201]], "pair contents");
    Ok(())
}

fn bad_casts() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let buf = s.alloc_zeros::<u8>(64)?;
    let misaligned = buf.slice(1..9)?;
    ensure!(
        matches!(misaligned.cast::<f32>(), Err(Error::Unsupported { .. })),
        "misaligned f32 cast accepted"
    );
    let partial = buf.slice(0..6)?;
    ensure!(partial.cast::<f32>().is_err(), "6 bytes as f32 accepted");
    let half_aligned = buf.slice(4..20)?;
    ensure!(
        half_aligned.cast::<f64>().is_err(),
        "4-aligned f64 accepted"
    );
    ensure!(
        half_aligned.cast::<f32>()?.len() == 4,
        "4-aligned f32 refused"
    );
    ensure!(buf.slice(3..3)?.cast::<u64>().is_err(), "misaligned empty");
    ensure!(buf.slice(8..8)?.cast::<u64>()?.is_empty(), "aligned empty");
    Ok(())
}

fn held_by_graph() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let mut buf = s.alloc_zeros::<f32>(64)?;
    ensure!(!buf.is_held_by_graph(), "fresh buffer held");
    s.synchronize()?;
    let graph = s.capture(|st| st.memset_bytes(&mut buf, 0))?;
    ensure!(buf.is_held_by_graph(), "captured buffer not held");
    drop(graph);
    ensure!(
        !buf.is_held_by_graph(),
        "still held after the graph is gone"
    );
    Ok(())
}
