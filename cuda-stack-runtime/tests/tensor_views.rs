//! tensor-lite on the GPU, part 1: creation and reading back (every dtype, sizes 0, 1, 31, 32,
//! 33, 1023, 1025 and primes), views (no copy, no allocation), `contiguous()` against CPU
//! index arithmetic, `Display` against PyTorch's strings, memory accounting, and the errors.
//!
//! Everything here is exact (copies and index arithmetic): tolerance 0, except `randn` (see
//! there). The tests run one at a time, because `memory_allocated()` is per device.

mod tensor_common;

use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::tensor::{DType, Tensor, TensorElement, TensorError};
use cuda_tests::{cpu, ensure, gpu};
use std::sync::Mutex;
use tensor_common::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn main() {
    cuda_tests::run(vec![
        cpu("from_vec_length_mismatch_shows_both", from_vec_mismatch),
        cpu("arange_rejects_bad_steps", arange_errors),
        gpu("roundtrip_every_dtype_and_size", roundtrip),
        gpu("zeros_ones_full_every_dtype", constants),
        gpu("arange_matches_cpu", arange),
        gpu("rand_is_philox_bit_exact_randn_within_tolerance", random),
        gpu("views_share_storage_and_allocate_nothing", views_no_copy),
        gpu("transpose_contiguous_every_dtype", transpose_contiguous),
        gpu("narrow_select_permute_expand_match_cpu", strided_views),
        gpu("view_errors_show_shapes_and_strides", view_errors),
        gpu("display_like_pytorch", display),
        gpu("memory_allocated_counts_tensors", memory_accounting),
        gpu("item_and_scalars", item),
    ]);
}

/// Runs a generic test for every dtype.
macro_rules! every_dtype {
    ($f:ident) => {{
        $f::<f32>()?;
        $f::<f64>()?;
        $f::<i32>()?;
        $f::<i64>()?;
        $f::<f16>()?;
        $f::<bf16>()?;
        Ok(())
    }};
}

fn from_vec_mismatch() -> TestResult {
    match Tensor::from_vec(vec![1.0f32; 5], &[2, 3]) {
        Err(e @ TensorError::ShapeMismatch { .. }) => {
            let m = e.to_string();
            ensure!(m.contains("[2, 3]") && m.contains("5"), "message: {m}");
            Ok(())
        }
        other => Err(format!("expected ShapeMismatch, got {other:?}").into()),
    }
}

fn arange_errors() -> TestResult {
    for (s, e, st) in [(0.0, 5.0, 0.0), (0.0, 5.0, -1.0), (0.0, f64::NAN, 1.0)] {
        match Tensor::<f32>::arange(s, e, st) {
            Err(TensorError::InvalidArgument { op: "arange", .. }) => {}
            other => return Err(format!("arange({s}, {e}, {st}): {other:?}").into()),
        }
    }
    Ok(())
}

fn roundtrip_one<T: TensorElement>() -> TestResult {
    for &n in SIZES {
        let data = values::<T>(n, n as u64 + 1);
        let x = Tensor::from_vec(data.clone(), &[n])?;
        ensure!(
            x.shape() == [n] && x.numel() == n && x.dtype() == T::DTYPE,
            "{x:?}"
        );
        ensure!(x.is_contiguous() && x.strides() == [1], "{x:?}");
        check_exact(
            &format!("{} roundtrip n={n}", T::DTYPE),
            &x.to_vec()?,
            &data,
        )?;
        // The same data as a matrix (and its rows as views).
        if n % 3 == 0 && n > 0 {
            let m = x.reshape(&[n / 3, 3])?;
            check_exact("reshaped", &m.to_vec()?, &data)?;
            let last = m.select(0, n / 3 - 1)?;
            check_exact("last row", &last.to_vec()?, &data[n - 3..])?;
        }
    }
    let m = Tensor::from_slice(&values::<T>(33 * 31, 9), &[33, 31])?;
    check_exact("2-D", &m.to_vec()?, &values::<T>(33 * 31, 9))?;
    Ok(())
}

fn roundtrip() -> TestResult {
    let _g = serial();
    every_dtype!(roundtrip_one)
}

fn constants_one<T: TensorElement>() -> TestResult {
    for &n in SIZES {
        let z = Tensor::<T>::zeros(&[n])?;
        check_exact("zeros", &z.to_vec()?, &vec![t::<T>(0.0); n])?;
        let o = Tensor::<T>::ones(&[n, 1])?;
        check_exact("ones", &o.to_vec()?, &vec![t::<T>(1.0); n])?;
        let v = t::<T>(-7.0);
        let full = Tensor::full(&[1, n], v)?;
        ensure!(full.shape() == [1, n], "shape {:?}", full.shape());
        check_exact("full", &full.to_vec()?, &vec![v; n])?;
    }
    let half = t::<T>(0.5);
    check_exact(
        "full 0.5",
        &Tensor::full(&[3, 5, 7], half)?.to_vec()?,
        &[half; 105],
    )?;
    Ok(())
}

fn constants() -> TestResult {
    let _g = serial();
    every_dtype!(constants_one)
}

fn arange() -> TestResult {
    let _g = serial();
    let a = Tensor::<f32>::arange(0.0, 10.0, 1.0)?;
    check_exact(
        "0..10",
        &a.to_vec()?,
        &(0..10).map(|i| i as f32).collect::<Vec<_>>(),
    )?;
    let b = Tensor::<f64>::arange(1.5, -2.0, -0.5)?;
    check_exact(
        "1.5..-2 by -0.5",
        &b.to_vec()?,
        &[1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5],
    )?;
    let c = Tensor::<i32>::arange(0.0, 5.0, 2.0)?;
    check_exact("0..5 by 2", &c.to_vec()?, &[0, 2, 4])?;
    let e = Tensor::<f16>::arange(3.0, 3.0, 1.0)?;
    ensure!(
        e.shape() == [0] && e.to_vec()?.is_empty(),
        "empty arange {e:?}"
    );
    let big = Tensor::<i32>::arange(0.0, 65537.0, 1.0)?;
    check_exact(
        "0..65537",
        &big.to_vec()?,
        &(0..65537).collect::<Vec<i32>>(),
    )?;
    Ok(())
}

fn random() -> TestResult {
    let _g = serial();
    for &n in SIZES {
        let seed = 0x1234_5678_9abc_def0 ^ n as u64;
        // Uniform: bit-exact with the CPU Philox twin (tolerance 0).
        let u = Tensor::<f32>::rand(&[n], seed)?;
        let want = cuda_stack_kernels::reference::fill_uniform(n, seed, 0);
        check_exact(&format!("rand n={n}"), &u.to_vec()?, &want)?;
        // Normal: logf/sincospif on the GPU vs f64 on the CPU: |diff| <= 1e-5 + 1e-5·|want|.
        let g = Tensor::<f32>::randn(&[n], seed)?;
        let want = cuda_stack_kernels::reference::fill_normal(n, seed, 0);
        let got: Vec<f64> = g.to_vec()?.into_iter().map(f64::from).collect();
        let want: Vec<f64> = want.into_iter().map(f64::from).collect();
        check_tol(&format!("randn n={n}"), &got, &want, |i| {
            1e-5 + 1e-5 * want[i].abs()
        })?;
    }
    // Shape does not change the stream: element i (row-major) is word i.
    let m = Tensor::<f32>::rand(&[33, 31], 7)?;
    check_exact(
        "rand 2-D",
        &m.to_vec()?,
        &cuda_stack_kernels::reference::fill_uniform(33 * 31, 7, 0),
    )?;
    match Tensor::<f64>::rand(&[4], 1) {
        Err(TensorError::UnsupportedDType {
            op: "rand",
            dtype: DType::F64,
            ..
        }) => Ok(()),
        other => Err(format!("rand::<f64>: {other:?}").into()),
    }
}

fn views_no_copy() -> TestResult {
    let _g = serial();
    let base = Tensor::<f32>::arange(0.0, 24.0, 1.0)?.reshape(&[2, 3, 4])?;
    base.synchronize()?;
    let before = cuda_stack_runtime::memory_allocated()?;
    let views = [
        base.transpose(0, 2)?,
        base.narrow(1, 1, 2)?,
        base.permute(&[2, 0, 1])?,
        base.select(0, 1)?,
        base.unsqueeze(0)?.expand(&[5, 2, 3, 4])?,
        base.reshape(&[6, 4])?,
        base.slice(2, 1..3)?,
        base.contiguous()?, // already contiguous: the same storage
        base.flatten()?,
    ];
    let after = cuda_stack_runtime::memory_allocated()?;
    ensure!(
        before == after,
        "views allocated: {before} -> {after} bytes"
    );
    for v in &views {
        ensure!(v.shares_storage(&base), "{v:?} does not share storage");
    }
    // narrow(1, 1, 2) starts 4 elements (16 bytes) in.
    ensure!(views[1].offset() == 4, "offset {}", views[1].offset());
    ensure!(views[1].data_ptr() == base.data_ptr() + 16, "data_ptr");
    ensure!(
        !views[0].is_contiguous() && views[5].is_contiguous(),
        "contiguity"
    );
    // A copy allocates and does not share.
    let c = views[0].contiguous()?;
    ensure!(
        !c.shares_storage(&base) && c.is_contiguous(),
        "contiguous copy {c:?}"
    );
    ensure!(
        cuda_stack_runtime::memory_allocated()? > after,
        "the copy is not counted"
    );
    Ok(())
}

fn transpose_one<T: TensorElement>() -> TestResult {
    for (r, c) in [
        (0, 5),
        (1, 1),
        (31, 33),
        (32, 32),
        (33, 1025),
        (1025, 3),
        (5, 0),
    ] {
        let data = values::<T>(r * c, (r * 1000 + c) as u64);
        let x = Tensor::from_vec(data.clone(), &[r, c])?;
        let want = build(&[c, r], |i| data[i[1] * c + i[0]]);
        let tv = x.t()?;
        ensure!(
            tv.shape() == [c, r] && tv.strides() == [1, c.max(1) as isize],
            "{tv:?}"
        );
        let tc = tv.contiguous()?;
        ensure!(tc.is_contiguous() && tc.shape() == [c, r], "{tc:?}");
        let what = format!("{} [{r}, {c}]^T", T::DTYPE);
        check_exact(&what, &tc.to_vec()?, &want)?;
        // to_vec of the view gathers the same way.
        check_exact(&what, &tv.to_vec()?, &want)?;
        // And back.
        check_exact(&what, &tc.t()?.contiguous()?.to_vec()?, &data)?;
    }
    Ok(())
}

fn transpose_contiguous() -> TestResult {
    let _g = serial();
    every_dtype!(transpose_one)
}

/// (what, view, its shape, its elements computed on the CPU)
type Case<T> = (&'static str, Tensor<T>, Vec<usize>, Vec<T>);

fn strided_one<T: TensorElement>() -> TestResult {
    let shape = [4usize, 5, 6];
    let data = values::<T>(120, 3);
    let x = Tensor::from_vec(data.clone(), &shape)?;
    let a = |i: &[usize]| at(&data, &shape, i);
    let cases: Vec<Case<T>> = vec![
        (
            "narrow(1, 1, 3)",
            x.narrow(1, 1, 3)?,
            vec![4, 3, 6],
            build(&[4, 3, 6], |i| a(&[i[0], i[1] + 1, i[2]])),
        ),
        (
            "narrow(-1, 2, 3)",
            x.narrow(-1, 2, 3)?,
            vec![4, 5, 3],
            build(&[4, 5, 3], |i| a(&[i[0], i[1], i[2] + 2])),
        ),
        (
            "select(2, 5)",
            x.select(2, 5)?,
            vec![4, 5],
            build(&[4, 5], |i| a(&[i[0], i[1], 5])),
        ),
        (
            "permute(2, 0, 1)",
            x.permute(&[2, 0, 1])?,
            vec![6, 4, 5],
            build(&[6, 4, 5], |i| a(&[i[1], i[2], i[0]])),
        ),
        (
            "narrow(1, 0, 1).expand(2, 4, 5, 6)",
            x.narrow(1, 0, 1)?.expand(&[2, 4, 5, 6])?,
            vec![2, 4, 5, 6],
            build(&[2, 4, 5, 6], |i| a(&[i[1], 0, i[3]])),
        ),
        (
            "slice(0, 1..3).transpose(0, 2)",
            x.slice(0, 1..3)?.transpose(0, 2)?,
            vec![6, 5, 2],
            build(&[6, 5, 2], |i| a(&[i[2] + 1, i[1], i[0]])),
        ),
        (
            "select(0, 3).t().narrow(0, 1, 4)",
            x.select(0, 3)?.t()?.narrow(0, 1, 4)?,
            vec![4, 5],
            build(&[4, 5], |i| a(&[3, i[1], i[0] + 1])),
        ),
        (
            "narrow(0, 4, 0)",
            x.narrow(0, 4, 0)?,
            vec![0, 5, 6],
            Vec::new(),
        ),
        (
            "unsqueeze(1).expand(4, 3, 5, 6).permute(3, 1, 0, 2)",
            x.unsqueeze(1)?
                .expand(&[4, 3, 5, 6])?
                .permute(&[3, 1, 0, 2])?,
            vec![6, 3, 4, 5],
            build(&[6, 3, 4, 5], |i| a(&[i[2], i[3], i[0]])),
        ),
    ];
    for (what, v, shape, want) in cases {
        let what = format!("{} {what}", T::DTYPE);
        ensure!(
            v.shape() == shape.as_slice(),
            "{what}: shape {:?}",
            v.shape()
        );
        ensure!(v.shares_storage(&x), "{what}: not a view");
        let c = v.contiguous()?;
        ensure!(
            c.is_contiguous() && c.shape() == shape.as_slice(),
            "{what}: {c:?}"
        );
        check_exact(&what, &c.to_vec()?, &want)?;
    }
    Ok(())
}

fn strided_views() -> TestResult {
    let _g = serial();
    every_dtype!(strided_one)
}

fn view_errors() -> TestResult {
    let _g = serial();
    let x = Tensor::<f32>::arange(0.0, 12.0, 1.0)?.reshape(&[2, 6])?;
    let tv = x.t()?;
    for r in [tv.reshape(&[12]), tv.view(&[3, 4]), tv.flatten()] {
        match r {
            Err(e @ TensorError::NonContiguousView { .. }) => {
                let m = e.to_string();
                ensure!(m.contains("[6, 2]") && m.contains("[1, 6]"), "message: {m}");
            }
            other => return Err(format!("expected NonContiguousView, got {other:?}").into()),
        }
    }
    // Copy first, then it works: the transposed order.
    let flat = tv.contiguous()?.reshape(&[12])?;
    check_exact(
        "t().contiguous().reshape",
        &flat.to_vec()?,
        &[0., 6., 1., 7., 2., 8., 3., 9., 4., 10., 5., 11.],
    )?;
    match x.view(&[5]) {
        Err(TensorError::ShapeMismatch { lhs, rhs, .. }) => {
            ensure!(lhs == [2, 6] && rhs == [5], "{lhs:?} {rhs:?}")
        }
        other => return Err(format!("expected ShapeMismatch, got {other:?}").into()),
    }
    ensure!(
        matches!(
            x.narrow(1, 4, 3),
            Err(TensorError::IndexOutOfRange {
                dim: 1,
                size: 6,
                ..
            })
        ),
        "narrow past the end"
    );
    ensure!(
        matches!(x.select(0, 2), Err(TensorError::IndexOutOfRange { .. })),
        "select past the end"
    );
    ensure!(
        matches!(
            x.transpose(0, 2),
            Err(TensorError::DimOutOfRange { dim: 2, .. })
        ),
        "transpose dim 2"
    );
    ensure!(
        matches!(x.permute(&[1, 1]), Err(TensorError::InvalidArgument { .. })),
        "permute [1, 1]"
    );
    ensure!(
        matches!(x.expand(&[3, 6]), Err(TensorError::ShapeMismatch { .. })),
        "expand 2 -> 3"
    );
    ensure!(
        matches!(x.slice(1, 5..9), Err(TensorError::IndexOutOfRange { .. })),
        "slice 5..9"
    );
    Ok(())
}

fn display() -> TestResult {
    let _g = serial();
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    let s = a.to_string();
    ensure!(
        s == "tensor([[1., 2.],\n        [3., 4.]], device='cuda:0')",
        "{s}"
    );
    let s = a.t()?.to_string();
    ensure!(
        s == "tensor([[1., 3.],\n        [2., 4.]], device='cuda:0')",
        "{s}"
    );
    let h = Tensor::from_vec(vec![f16::from_f32(0.5), f16::from_f32(0.25)], &[2])?;
    let s = h.to_string();
    ensure!(
        s == "tensor([0.5000, 0.2500], device='cuda:0', dtype=torch.float16)",
        "{s}"
    );
    let i = Tensor::<i32>::arange(0.0, 2000.0, 1.0)?;
    let s = i.to_string();
    ensure!(
        s == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], device='cuda:0',\n       \
              dtype=torch.int32)",
        "{s}"
    );
    let total = Tensor::<i32>::arange(1.0, 5.0, 1.0)?.sum_all()?;
    let s = total.to_string();
    ensure!(s == "tensor(10, device='cuda:0')", "i64 sum: {s}");
    let s = Tensor::from_vec(vec![1.5f64, -0.25], &[2])?.to_string();
    ensure!(
        s == "tensor([ 1.5000, -0.2500], device='cuda:0', dtype=torch.float64)",
        "{s}"
    );
    let s = Tensor::<f32>::zeros(&[2, 0])?.to_string();
    ensure!(s == "tensor([], device='cuda:0', size=(2, 0))", "{s}");
    Ok(())
}

fn memory_accounting() -> TestResult {
    let _g = serial();
    const MIB: usize = 1 << 20;
    let before = cuda_stack_runtime::memory_allocated()?;
    let x = Tensor::<f32>::zeros(&[MIB])?; // 4 MiB: a large-pool block of exactly 4 MiB
    let with_x = cuda_stack_runtime::memory_allocated()?;
    ensure!(
        with_x - before == 4 * MIB,
        "zeros(1Mi f32) counted {}",
        with_x - before
    );
    let y = (&x + &x)?;
    let with_y = cuda_stack_runtime::memory_allocated()?;
    ensure!(
        with_y - with_x == 4 * MIB,
        "x + x counted {}",
        with_y - with_x
    );
    let v = y.narrow(0, 10, 100)?;
    ensure!(
        cuda_stack_runtime::memory_allocated()? == with_y,
        "a view allocated"
    );
    drop((x, y));
    // The view keeps y's storage alive.
    ensure!(
        cuda_stack_runtime::memory_allocated()? == with_y - 4 * MIB,
        "after dropping x: {}",
        cuda_stack_runtime::memory_allocated()?
    );
    check_exact("view outlives its base", &v.to_vec()?, &[0.0f32; 100])?;
    drop(v);
    ensure!(
        cuda_stack_runtime::memory_allocated()? == before,
        "leaked: {} vs {before}",
        cuda_stack_runtime::memory_allocated()?
    );
    Ok(())
}

fn item() -> TestResult {
    let _g = serial();
    let s = Tensor::scalar(3.5f32)?;
    ensure!(s.shape().is_empty() && s.numel() == 1, "{s:?}");
    ensure!(s.item()? == 3.5, "item");
    ensure!(s.to_string() == "tensor(3.5000, device='cuda:0')", "{s}");
    let m = Tensor::from_vec(vec![1i32, 2], &[2])?;
    ensure!(
        matches!(m.item(), Err(TensorError::ShapeMismatch { op: "item", .. })),
        "item of 2 elements"
    );
    ensure!(m.select(0, 1)?.item()? == 2, "select().item()");
    Ok(())
}
