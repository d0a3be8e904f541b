//! ElementwiseKernel's packet loop on the GPU (contiguous-only kernels: 16-byte vector loads
//! and stores when every pointer is aligned, then a scalar tail), against CPU references: every
//! dtype, lengths around every packet size, misaligned views (the scalar loop), `i` inside the
//! packets, `call_into` reading its output, and mixed element sizes. Ignored without a GPU.

use cuda_stack_jit::{AnyTensor, Arg, ElementwiseKernel, JitError, OutArg};
use cuda_stack_runtime::{Tensor, TensorElement};
use cuda_tests::{ensure, gpu, TestResult};

/// What the generic tests need of a dtype.
trait El: TensorElement
where
    for<'a> Arg<'a>: From<&'a Tensor<Self>>,
    for<'a> OutArg<'a>: From<&'a mut Tensor<Self>>,
    Tensor<Self>: TryFrom<AnyTensor, Error = JitError>,
{
}
impl El for f32 {}
impl El for f64 {}
impl El for i32 {}
impl El for i64 {}
impl El for half::f16 {}
impl El for half::bf16 {}

/// Small integers (exact in every dtype, products too): -3..=3.
fn small(n: usize, seed: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7 + seed * 3) % 7) as f64 - 3.0)
        .collect()
}

fn tensor<T: El>(vals: &[f64], shape: &[usize]) -> Result<Tensor<T>, Box<dyn std::error::Error>>
where
    for<'a> Arg<'a>: From<&'a Tensor<T>>,
    for<'a> OutArg<'a>: From<&'a mut Tensor<T>>,
    Tensor<T>: TryFrom<AnyTensor, Error = JitError>,
{
    Ok(Tensor::from_vec(
        vals.iter().map(|&v| T::from_f64(v)).collect(),
        shape,
    )?)
}

fn values<T: TensorElement>(t: &Tensor<T>) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    Ok(t.to_vec()?.into_iter().map(|v| v.to_f64()).collect())
}

/// The packet loop of contiguous-only kernels: lengths around every packet size (tails of 0 to
/// 7 elements), views one element in (misaligned: the scalar loop), mixed element sizes, `i`
/// inside the packet loop, and `call_into` reading its output (the packets load it first).
fn packets_tails_and_misaligned_views<T: El>() -> TestResult
where
    for<'a> Arg<'a>: From<&'a Tensor<T>>,
    for<'a> OutArg<'a>: From<&'a mut Tensor<T>>,
    Tensor<T>: TryFrom<AnyTensor, Error = JitError>,
{
    // SAFETY: each body reads its own elements and writes its own output.
    let k = unsafe { ElementwiseKernel::new("T x, T y", "T z", "z = x * y + x;", "pk_mul_add")? };
    let idx = unsafe { ElementwiseKernel::new("T x", "T z", "z = x + (T)(i % 5);", "pk_index")? };
    let acc = unsafe { ElementwiseKernel::new("T x", "T y", "y += x;", "pk_acc")? };
    let lens = [
        0usize,
        1,
        2,
        3,
        4,
        5,
        7,
        8,
        9,
        15,
        16,
        17,
        1023,
        1025,
        (1 << 20) + 7,
    ];
    for &n in &lens {
        for off in [0usize, 1] {
            let (vx, vy) = (small(n + off, 1), small(n + off, 2));
            let x = tensor::<T>(&vx, &[n + off])?.narrow(0, off, n)?;
            let y = tensor::<T>(&vy, &[n + off])?.narrow(0, off, n)?;
            let tag = format!("{:?} n={n} off={off}", T::DTYPE);
            let got = values(&k.call1::<T>(&[(&x).into(), (&y).into()])?)?;
            let want: Vec<f64> = (off..n + off).map(|i| vx[i] * vy[i] + vx[i]).collect();
            ensure!(got == want, "{tag}: x*y+x");
            let got = values(&idx.call1::<T>(&[(&x).into()])?)?;
            let want: Vec<f64> = (0..n).map(|i| vx[i + off] + (i % 5) as f64).collect();
            ensure!(got == want, "{tag}: x + i % 5");
            // In place: y (an exclusive contiguous tensor of its own) += x.
            let mut out = tensor::<T>(&vy[off..], &[n])?;
            acc.call_into(&[(&x).into()], &mut [(&mut out).into()])?;
            let want: Vec<f64> = (off..n + off).map(|i| vy[i] + vx[i]).collect();
            ensure!(values(&out)? == want, "{tag}: y += x");
        }
    }
    Ok(())
}

fn packets_every_dtype() -> TestResult {
    packets_tails_and_misaligned_views::<f32>()?;
    packets_tails_and_misaligned_views::<f64>()?;
    packets_tails_and_misaligned_views::<i32>()?;
    packets_tails_and_misaligned_views::<i64>()?;
    packets_tails_and_misaligned_views::<half::f16>()?;
    packets_tails_and_misaligned_views::<half::bf16>()?;
    // Mixed element sizes: 2 elements per packet (f16 packets of 4 bytes, f64 of 16).
    // SAFETY: as above.
    let mix = unsafe {
        ElementwiseKernel::new(
            "float16 h, float64 d",
            "float32 z",
            "z = (float)h * d;",
            "pk_mix",
        )?
    };
    for n in [0usize, 1, 2, 3, 1025] {
        let h = tensor::<half::f16>(&small(n, 3), &[n])?;
        let d = tensor::<f64>(&small(n, 4), &[n])?;
        let got = values(&mix.call1::<f32>(&[(&h).into(), (&d).into()])?)?;
        let want: Vec<f64> = small(n, 3)
            .iter()
            .zip(small(n, 4))
            .map(|(a, b)| a * b)
            .collect();
        ensure!(got == want, "mixed sizes n={n}");
    }
    Ok(())
}

fn main() {
    cuda_tests::run(vec![gpu(
        "elementwise: packets, tails, misaligned views, call_into",
        packets_every_dtype,
    )]);
}
