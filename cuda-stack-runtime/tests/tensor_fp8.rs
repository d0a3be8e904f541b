//! FP8 tensors: storage and host round trip (any GPU), views made contiguous (the 1-byte strided
//! copy), and on compute capability 8.9+ the scaled casts (bit-exact against the `float8`
//! crate's conversion of `x · scale`), amax, current and delayed scaling; below 8.9 the casts
//! must fail with the kernels' `UnsupportedDevice` error, not panic or launch.

use cuda_stack_kernels::ops;
use cuda_stack_runtime::cuda_stack_driver::float8::{F8E4M3, F8E5M2};
use cuda_stack_runtime::cuda_stack_driver::half::bf16;
use cuda_stack_runtime::tensor::{DType, Tensor, TensorError};
use cuda_tests::{ensure, gpu, TestResult};

fn fp8_gpu() -> bool {
    cuda_stack_runtime::Runtime::get(0)
        .is_ok_and(|rt| ops::fp8_supported(rt.context().limits().compute_capability))
}

/// `from_slice` / `to_vec`, `zeros`, `full`, a transposed view made contiguous: no kernel of
/// FP8 arithmetic involved, so every GPU runs it.
fn storage_round_trip() -> TestResult {
    let v: Vec<F8E4M3> = (0..35).map(|i| F8E4M3::from_f32(i as f32 - 17.0)).collect();
    let t = Tensor::from_slice(&v, &[5, 7])?;
    ensure!(t.dtype() == DType::F8E4M3, "dtype {:?}", t.dtype());
    let back = t.to_vec()?;
    ensure!(
        back.iter()
            .map(|x| x.to_bits())
            .eq(v.iter().map(|x| x.to_bits())),
        "round trip: {back:?}"
    );
    let tt = t.t()?.contiguous()?.to_vec()?;
    for r in 0..7 {
        for c in 0..5 {
            ensure!(
                tt[r * 5 + c].to_bits() == v[c * 7 + r].to_bits(),
                "transpose [{r}, {c}]"
            );
        }
    }
    let z = Tensor::<F8E5M2>::zeros(&[3, 3])?.to_vec()?;
    ensure!(z.iter().all(|x| x.to_bits() == 0), "zeros: {z:?}");
    let f = Tensor::full(&[4], F8E5M2::from_f32(3.0))?.to_vec()?;
    ensure!(f.iter().all(|x| x.to_f32() == 3.0), "full: {f:?}");
    // Arithmetic is not FP8's: a typed error.
    let r = &t + &t;
    ensure!(
        matches!(r, Err(TensorError::UnsupportedDType { .. })),
        "FP8 addition: {r:?}"
    );
    Ok(())
}

fn casts() -> TestResult {
    let x: Vec<f32> = (0..1027)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.731)
        .collect();
    let xt = Tensor::from_slice(&x, &[13, 79])?;
    if !fp8_gpu() {
        let r = xt.amax();
        ensure!(
            matches!(
                r,
                Err(TensorError::Kernel(
                    cuda_stack_kernels::Error::UnsupportedDevice { .. }
                ))
            ),
            "below 8.9: {r:?}"
        );
        return Ok(());
    }
    let amax = xt.amax()?.item()?;
    let want_amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    ensure!(amax == want_amax, "amax {amax}, expected {want_amax}");

    // Delayed scaling with an explicit scale; the cast records amax in the same pass.
    let scale = Tensor::scalar(2.5f32)?;
    let cast = xt.to_fp8::<F8E4M3>(&scale)?;
    ensure!(
        cast.data.shape() == [13, 79],
        "shape {:?}",
        cast.data.shape()
    );
    ensure!(cast.amax.item()? == want_amax, "recorded amax");
    let (want, _) = ops::fp8_quantize_cpu::<f32, F8E4M3>(&x, 2.5);
    let got = cast.data.to_vec()?;
    ensure!(
        got.iter()
            .map(|v| v.to_bits())
            .eq(want.iter().map(|v| v.to_bits())),
        "to_fp8 differs from the CPU conversion"
    );
    let inv = Tensor::scalar(1.0f32 / 2.5)?;
    let back = Tensor::<bf16>::from_fp8(&cast.data, &inv)?.to_vec()?;
    let want_back = ops::fp8_dequantize_cpu::<F8E4M3, bf16>(&want, 1.0 / 2.5);
    ensure!(
        back == want_back,
        "from_fp8 differs from the CPU conversion"
    );

    // Current scaling: amax maps to 448, the round trip is within e4m3's half ulp (2^-4).
    let (q, inv) = xt.to_fp8_current::<F8E4M3>()?;
    let y = Tensor::<f32>::from_fp8(&q, &inv)?.to_vec()?;
    for (a, b) in x.iter().zip(&y) {
        ensure!(
            (a - b).abs() <= a.abs() / 16.0 + 1e-6,
            "round trip {a} -> {b}"
        );
    }
    let top = q
        .to_vec()?
        .iter()
        .fold(0.0f32, |m, v| m.max(v.to_f32().abs()));
    ensure!(top == 448.0, "amax element maps to 448, got {top}");

    // The scale update from a history (NaN ignored, margin 1).
    let hist = Tensor::from_slice(&[1.0f32, f32::NAN, 4.0], &[3])?;
    let (s, i) = hist.fp8_scale::<F8E5M2>(&Tensor::scalar(1.0f32)?, 1)?;
    ensure!(
        s.item()? == 57344.0 / 4.0 / 2.0 && i.item()? == 2.0 * 4.0 / 57344.0,
        "scale {}, inv {}",
        s.item()?,
        i.item()?
    );
    // A scale that is not one element is refused.
    let r = xt.to_fp8::<F8E4M3>(&Tensor::from_slice(&[1.0f32, 2.0], &[2])?);
    ensure!(
        matches!(r, Err(TensorError::InvalidArgument { .. })),
        "two-element scale: {r:?}"
    );
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("fp8_storage_round_trip", storage_round_trip),
        gpu("fp8_casts_amax_scaling", casts),
    ]);
}
