//! Binary images checked before loading; special handles and alignment.

use super::*;

/// The driver reads a cubin or fatbin as far as the image's own headers say (and unknown bytes
/// as NUL-terminated PTX): `load_module` checks the image against its slice first. The fixtures
/// are `cuda-stack-driver/testdata/add1.cu` built by nvcc 13.0.
pub(crate) fn binary_images_checked() -> TestResult {
    const CUBIN: &[u8] = include_bytes!("../../../cuda-stack-driver/testdata/add1_sm90.cubin");
    const FATBIN: &[u8] =
        include_bytes!("../../../cuda-stack-driver/testdata/add1_sm80_sm90.fatbin");
    use cuda_stack_driver::{JitOptions, ModuleImage};
    let ctx = context()?;
    let opts = JitOptions::default();
    for (image, what) in [
        (ModuleImage::Cubin(&[]), "an empty cubin"),
        (ModuleImage::Cubin(b"abc"), "three bytes as a cubin"),
        (
            ModuleImage::Cubin(&CUBIN[..CUBIN.len() / 2]),
            "half a cubin",
        ),
        (
            ModuleImage::Fatbin(&FATBIN[..FATBIN.len() - 8]),
            "a truncated fatbin",
        ),
        (ModuleImage::Fatbin(CUBIN), "a cubin passed as a fatbin"),
    ] {
        ensure!(
            matches!(
                ctx.load_module(image, &opts),
                Err(Error::InvalidImage { .. })
            ),
            "{what} was handed to the driver"
        );
    }
    // The whole images load and run (the fatbin on any sm_80+ GPU through its SASS or PTX,
    // the sm_90 cubin only on compute capability 9.0).
    let cc = ctx.limits().compute_capability;
    let mut images = vec![ModuleImage::Fatbin(FATBIN)];
    if (cc.major, cc.minor) == (9, 0) {
        images.push(ModuleImage::Cubin(CUBIN));
    }
    let s = ctx.new_stream()?;
    for image in images {
        let m = ctx.load_module(image, &opts)?;
        // SAFETY: matches add1(float*, unsigned) in testdata/add1.cu.
        let k: Kernel<(&mut DeviceSlice<f32>, u32)> = unsafe { m.kernel("add1")? };
        let mut x = s.clone_htod(&[1.0f32; 100])?;
        // SAFETY: the kernel touches x[i] for i < 100 only; x has 100 elements.
        unsafe { k.launch(&s, &LaunchConfig::for_num_elems(100), &mut x, 100)? };
        ensure!(s.clone_dtoh(&x)? == [2.0f32; 100], "add1 from {image:?}");
    }
    Ok(())
}

/// A `Stream` stands for one queue: the per-thread and legacy special handles are refused. A
/// `PinnedBuffer` of a type aligned beyond what the driver guarantees is refused.
pub(crate) fn special_handles_and_alignment() -> TestResult {
    let ctx = context()?;
    for raw in [1usize, 2] {
        // SAFETY: the handles are the driver's documented special streams (always "live"); the
        // call must refuse them before using them.
        let r =
            unsafe { Stream::from_raw(&ctx, raw as cuda_stack_driver::cuda_stack_sys::CUstream) };
        ensure!(
            matches!(r, Err(Error::Unsupported { .. })),
            "special stream handle {raw:#x} accepted"
        );
    }
    #[repr(C, align(8192))]
    #[derive(Clone, Copy)]
    struct Big([u8; 8192]);
    // SAFETY: one byte array filling the whole (8192-byte) size: no padding, any bits valid.
    unsafe impl cuda_stack_driver::bytemuck::Zeroable for Big {}
    // SAFETY: as above; Copy and 'static.
    unsafe impl cuda_stack_driver::bytemuck::Pod for Big {}
    ensure!(
        matches!(
            PinnedBuffer::<Big>::zeroed(&ctx, 2),
            Err(Error::Unsupported { .. })
        ),
        "a pinned buffer of an 8192-aligned type"
    );
    Ok(())
}
