//! ElementwiseKernel, ReductionKernel and RawKernel on the GPU, against CPU references: every
//! dtype, odd shapes, broadcasting, strided views, scalars, raw parameters, in-place outputs,
//! reductions over every axis pattern, and the disk cache seen from a kernel. Ignored without
//! a GPU.

use cuda_stack_jit::cache::KernelCache;
use cuda_stack_jit::{
    AnyTensor, Arg, Axes, ElementwiseKernel, In, JitError, KernelOptions, Origin, Out, OutArg,
    RawKernel, ReductionKernel,
};
use cuda_stack_runtime::{Tensor, TensorElement};
use cuda_tests::{ensure, gpu, TestResult};
use std::sync::Arc;

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

/// Row-major values of `t` broadcast to `shape` (a host twin of the kernel's indexing).
fn broadcast_host(vals: &[f64], shape: &[usize], out: &[usize]) -> Vec<f64> {
    let n: usize = out.iter().product();
    let off = out.len() - shape.len();
    (0..n)
        .map(|mut i| {
            let mut src = 0usize;
            let mut step = 1usize;
            for d in (0..out.len()).rev() {
                let c = i % out[d];
                i /= out[d];
                if d >= off {
                    let s = shape[d - off];
                    if s != 1 {
                        src += c * step;
                    }
                    step *= s;
                }
            }
            vals[src]
        })
        .collect()
}

fn close(got: &[f64], want: &[f64], rel: f64, what: &str) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} values, expected {}",
        got.len(),
        want.len()
    );
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = rel * w.abs().max(1.0);
        ensure!(
            (g - w).abs() <= tol,
            "{what}: element {k}: got {g}, expected {w}"
        );
    }
    Ok(())
}

fn seed_square() -> TestResult {
    // Seed 001, literally.
    // SAFETY: the body reads x and writes y, its own elements.
    let square =
        unsafe { ElementwiseKernel::new("float32 x", "float32 y", "y = x * x;", "square_kernel")? };
    let x = Tensor::<f32>::arange(0.0, 10.0, 1.0)?;
    let y = square.call1::<f32>(&[(&x).into()])?;
    ensure!(
        y.to_vec()? == [0., 1., 4., 9., 16., 25., 36., 49., 64., 81.],
        "{:?}",
        y.to_vec()?
    );
    Ok(())
}

fn binary_on<T: El>() -> TestResult
where
    for<'a> Arg<'a>: From<&'a Tensor<T>>,
    for<'a> OutArg<'a>: From<&'a mut Tensor<T>>,
    Tensor<T>: TryFrom<AnyTensor, Error = JitError>,
{
    // SAFETY: the body reads its own elements and writes z.
    let k = unsafe { ElementwiseKernel::new("T x, T y", "T z", "z = x * y + x;", "mul_add")? };
    let f = |x: f64, y: f64| x * y + x;
    for (sx, sy) in [
        (vec![7usize, 13], vec![7usize, 13]),
        (vec![3, 1, 5], vec![4, 5]),
        (vec![1], vec![2, 3, 1]),
        (vec![1031], vec![1]),
        (vec![], vec![5, 3]),
        (vec![0, 3], vec![3]),
    ] {
        let (nx, ny) = (sx.iter().product::<usize>(), sy.iter().product::<usize>());
        let (vx, vy) = (small(nx, 1), small(ny, 2));
        let x = tensor::<T>(&vx, &sx)?;
        let y = tensor::<T>(&vy, &sy)?;
        let out = k.call1::<T>(&[(&x).into(), (&y).into()])?;
        let shape = cuda_stack_runtime::tensor::broadcast_shapes("test", &sx, &sy)?;
        ensure!(
            out.shape() == shape.as_slice(),
            "{sx:?}, {sy:?}: shape {:?}",
            out.shape()
        );
        let (bx, by) = (
            broadcast_host(&vx, &sx, &shape),
            broadcast_host(&vy, &sy, &shape),
        );
        let want: Vec<f64> = bx.iter().zip(&by).map(|(&a, &b)| f(a, b)).collect();
        close(
            &values(&out)?,
            &want,
            0.0,
            &format!("{} {sx:?} x {sy:?}", T::DTYPE),
        )?;
    }
    // Strided views: a transpose, a narrowed (offset) slice, an expanded row.
    let base = tensor::<T>(&small(6 * 9, 3), &[6, 9])?;
    let t = base.t()?; // [9, 6], strides (1, 9)
    let nar = tensor::<T>(&small(9 * 8, 4), &[9, 8])?.narrow(1, 2, 6)?; // [9, 6], offset 2
    let out = k.call1::<T>(&[(&t).into(), (&nar).into()])?;
    let (vt, vn) = (t.contiguous()?, nar.contiguous()?);
    let want: Vec<f64> = values(&vt)?
        .iter()
        .zip(values(&vn)?)
        .map(|(&a, b)| f(a, b))
        .collect();
    close(
        &values(&out)?,
        &want,
        0.0,
        &format!("{} transposed x narrowed", T::DTYPE),
    )?;
    let row = tensor::<T>(&small(6, 5), &[1, 6])?.expand(&[9, 6])?;
    let out = k.call1::<T>(&[(&row).into(), (&t).into()])?;
    let want: Vec<f64> = values(&row.contiguous()?)?
        .iter()
        .zip(values(&vt)?)
        .map(|(&a, b)| f(a, b))
        .collect();
    close(
        &values(&out)?,
        &want,
        0.0,
        &format!("{} expanded x transposed", T::DTYPE),
    )?;
    Ok(())
}

fn every_dtype_broadcast_and_strided() -> TestResult {
    binary_on::<f32>()?;
    binary_on::<f64>()?;
    binary_on::<i32>()?;
    binary_on::<i64>()?;
    binary_on::<half::f16>()?;
    binary_on::<half::bf16>()?;
    Ok(())
}

/// A call whose signature matches the last call's reuses its bound plan: every change of dtype,
/// shape, strides or argument kind must still give the right answer, and a view's offset (not
/// part of the signature) must be honoured on a reused plan.
fn remembered_plans_follow_arguments() -> TestResult {
    // SAFETY: own elements only.
    let k = unsafe { ElementwiseKernel::new("T x, T y", "T z", "z = x * 2 + y;", "twice_plus")? };
    let want = |x: &[f64], y: &[f64], ys: &[usize], out: &[usize]| -> Vec<f64> {
        let by = broadcast_host(y, ys, out);
        x.iter().zip(&by).map(|(a, b)| a * 2.0 + b).collect()
    };
    let yv = small(3, 2);
    let y = tensor::<f32>(&yv, &[3])?;
    // The same signature three times (new data the second time): bound once, reused twice.
    for seed in [1, 5, 1] {
        let x = tensor::<f32>(&small(12, seed), &[4, 3])?;
        let z = k.call1::<f32>(&[(&x).into(), (&y).into()])?;
        let w = want(&small(12, seed), &yv, &[3], &[4, 3]);
        close(&values(&z)?, &w, 0.0, "same signature")?;
    }
    // Same shape, other strides: a transposed [3, 4] tensor seen as [4, 3].
    let xt = tensor::<f32>(&small(12, 3), &[3, 4])?.t()?;
    let z = k.call1::<f32>(&[(&xt).into(), (&y).into()])?;
    let w = want(&values(&xt.contiguous()?)?, &yv, &[3], &[4, 3]);
    close(&values(&z)?, &w, 0.0, "transposed view")?;
    // A contiguous [4, 3] again (bound, remembered), then a view of the same shape and strides
    // at another offset (the remembered plan, this view's pointer).
    let x = tensor::<f32>(&small(12, 1), &[4, 3])?;
    k.call1::<f32>(&[(&x).into(), (&y).into()])?;
    let big = tensor::<f32>(&small(15, 4), &[5, 3])?;
    let xo = big.narrow(0, 1, 4)?;
    ensure!(
        xo.offset() == 3 && xo.is_contiguous(),
        "narrow: a contiguous view at offset 3"
    );
    let z = k.call1::<f32>(&[(&xo).into(), (&y).into()])?;
    let w = want(&small(15, 4)[3..], &yv, &[3], &[4, 3]);
    close(&values(&z)?, &w, 0.0, "offset view on a remembered plan")?;
    // Another dtype, another broadcast shape, a scalar for y: each rebinds.
    let x64 = tensor::<f64>(&small(12, 6), &[4, 3])?;
    let y64 = tensor::<f64>(&small(4, 7), &[4, 1])?;
    for _ in 0..2 {
        let z = k.call1::<f64>(&[(&x64).into(), (&y64).into()])?;
        let w = want(&small(12, 6), &small(4, 7), &[4, 1], &[4, 3]);
        close(&values(&z)?, &w, 0.0, "f64, [4, 1] broadcast")?;
    }
    for _ in 0..2 {
        let z = k.call1::<f32>(&[(&x).into(), 1.5f64.into()])?;
        let w: Vec<f64> = small(12, 1).iter().map(|v| v * 2.0 + 1.5).collect();
        close(&values(&z)?, &w, 0.0, "scalar y")?;
    }
    // A dtype that does not fit the remembered plan is still refused.
    let xi = tensor::<i32>(&small(12, 1), &[4, 3])?;
    ensure!(
        k.call(&[(&xi).into(), (&y).into()]).is_err(),
        "T bound to int32 by x and float32 by y must be an error"
    );
    Ok(())
}

fn scalars_index_and_size() -> TestResult {
    // SAFETY: own elements only.
    let k = unsafe {
        ElementwiseKernel::new(
            "T x, T a, int64 b",
            "T y, int64 j",
            "y = x * a + (T)b; j = i + _ind.size();",
            "affine",
        )?
    };
    let x = tensor::<f32>(&small(35, 1), &[5, 7])?;
    // a: an f64 scalar converted to T = float32; b: an i32 converted to int64.
    let out = k.call(&[(&x).into(), 2.5f64.into(), 3i32.into()])?;
    let y = out[0].clone().into_typed::<f32>()?;
    let j = out[1].clone().into_typed::<i64>()?;
    let want: Vec<f64> = small(35, 1).iter().map(|v| v * 2.5 + 3.0).collect();
    close(&values(&y)?, &want, 0.0, "y")?;
    ensure!(
        j.to_vec()? == (0..35).map(|i| i + 35).collect::<Vec<i64>>(),
        "j: {:?}",
        j.to_vec()?
    );
    // A placeholder bound only by a scalar takes the scalar's dtype.
    // SAFETY: own elements only.
    let fill = unsafe {
        ElementwiseKernel::new("T v, raw float32 shape_of", "T y", "y = v;", "fill_like")?
    };
    let like = Tensor::<f32>::zeros(&[4])?;
    let r = fill.call_sized(&[7i32.into(), (&like).into()], 4)?;
    ensure!(
        r[0].clone().into_typed::<i32>()?.to_vec()? == [7; 4],
        "call_sized"
    );
    Ok(())
}

fn raw_parameters_and_bounds() -> TestResult {
    // SAFETY: raw access through `[]` only.
    let k = unsafe {
        ElementwiseKernel::new(
            "raw T t, T x",
            "T y",
            "y = t[(i + 1) % t.size()] + x;",
            "rotate_add",
        )?
    };
    // A transposed table: the kernel reads a contiguous copy, in row-major order of the view.
    let table = tensor::<f64>(&small(12, 2), &[3, 4])?.t()?;
    let x = tensor::<f64>(&small(5, 3), &[5])?;
    let y = k.call1::<f64>(&[(&table).into(), (&x).into()])?;
    let tv = values(&table.contiguous()?)?;
    let want: Vec<f64> = small(5, 3)
        .iter()
        .enumerate()
        .map(|(i, v)| tv[(i + 1) % 12] + v)
        .collect();
    close(&values(&y)?, &want, 0.0, "raw table")?;
    // An index outside the raw tensor traps the kernel instead of reading other memory: run
    // it in a child process (the trap kills its context) and check that it reported an error.
    let out = std::process::Command::new(std::env::current_exe()?)
        .env(TRAP_CHILD, "1")
        .output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(0),
        "child: {:?}\n{text}",
        out.status
    );
    ensure!(text.contains("trapped:"), "child output: {text}");
    Ok(())
}

const TRAP_CHILD: &str = "CUDA_JIT_TEST_TRAP_CHILD";

/// In the child: reads index 10 of a 4-element raw tensor. Exits 0 when the error surfaced.
fn trap_child() -> ! {
    let run = || -> Result<(), Box<dyn std::error::Error>> {
        // SAFETY: the access goes through the bounds-checked `[]` (the point of the test).
        let k = unsafe {
            ElementwiseKernel::new("raw float32 t", "float32 y", "y = t[i + 10];", "oob")?
        };
        let t = Tensor::<f32>::zeros(&[4])?;
        let y = k.call_sized(&[(&t).into()], 1)?;
        let v = y[0].clone().into_typed::<f32>()?.to_vec()?;
        Err(format!("no error; read {v:?}").into())
    };
    match run() {
        Err(e) if e.to_string().contains("no error") => {
            println!("{e}");
            std::process::exit(3)
        }
        Err(e) => {
            println!("trapped: {e}");
            std::process::exit(0)
        }
        Ok(()) => std::process::exit(3),
    }
}

fn in_place_and_copy_on_write() -> TestResult {
    // SAFETY: own elements only.
    let axpy = unsafe { ElementwiseKernel::new("T x, T a", "T y", "y += a * x;", "axpy")? };
    let x = tensor::<f32>(&small(10, 1), &[10])?;
    let mut y = tensor::<f32>(&small(10, 2), &[10])?;
    let keep = y.clone(); // shares y's storage: the write must not show through it
    axpy.call_into(&[(&x).into(), 2.0f32.into()], &mut [(&mut y).into()])?;
    let want: Vec<f64> = small(10, 2)
        .iter()
        .zip(small(10, 1))
        .map(|(y, x)| y + 2.0 * x)
        .collect();
    close(&values(&y)?, &want, 0.0, "y after axpy")?;
    close(
        &values(&keep)?,
        &small(10, 2),
        0.0,
        "the clone kept its values",
    )?;
    // Exclusive now: a second update is in place (same storage).
    let ptr = y.data_ptr();
    axpy.call_into(&[(&x).into(), 1.0f32.into()], &mut [(&mut y).into()])?;
    ensure!(y.data_ptr() == ptr, "an exclusive output was copied");
    // A wrong output shape is an error.
    let mut bad = Tensor::<f32>::zeros(&[3])?;
    match axpy.call_into(&[(&x).into(), 1.0f32.into()], &mut [(&mut bad).into()]) {
        Err(JitError::Shape { .. }) => {}
        other => return Err(format!("output shape: {other:?}").into()),
    }
    Ok(())
}

fn call_errors_are_typed() -> TestResult {
    // SAFETY: own elements only.
    let square =
        unsafe { ElementwiseKernel::new("float32 x", "float32 y", "y = x * x;", "square_kernel")? };
    let d = Tensor::<f64>::zeros(&[3])?;
    match square.call(&[(&d).into()]) {
        Err(JitError::DTypeMismatch { param, .. }) if param == "x" => {}
        other => return Err(format!("dtype: {other:?}").into()),
    }
    let f = Tensor::<f32>::zeros(&[3])?;
    match square.call(&[(&f).into(), (&f).into()]) {
        Err(JitError::ArgCount {
            expected: 1,
            found: 2,
            ..
        }) => {}
        other => return Err(format!("count: {other:?}").into()),
    }
    // SAFETY: own elements only.
    let add = unsafe { ElementwiseKernel::new("T x, T y", "T z", "z = x + y;", "add_t")? };
    let a = Tensor::<f32>::zeros(&[2, 3])?;
    let b = Tensor::<f32>::zeros(&[4])?;
    match add.call(&[(&a).into(), (&b).into()]) {
        Err(JitError::Shape { .. }) => {}
        other => return Err(format!("broadcast: {other:?}").into()),
    }
    let i = Tensor::<i32>::zeros(&[2, 3])?;
    match add.call(&[(&a).into(), (&i).into()]) {
        Err(JitError::DTypeMismatch { param, .. }) if param == "y" => {}
        other => return Err(format!("placeholder conflict: {other:?}").into()),
    }
    // A syntax error names the user's line.
    // SAFETY: never runs.
    let bad = unsafe {
        ElementwiseKernel::new(
            "float32 x",
            "float32 y",
            "float t = x;\ny = t * nope;",
            "bad_body",
        )?
    };
    match bad.call(&[(&f).into()]) {
        Err(JitError::Compile { log, .. }) => {
            ensure!(log.contains("operation line 2"), "log not mapped: {log}");
        }
        other => return Err(format!("compile: {other:?}").into()),
    }
    Ok(())
}

/// CPU reduction of `vals` (shape `shape`) over `axes` with `map`, `reduce` from `id`.
fn reduce_host(
    vals: &[f64],
    shape: &[usize],
    axes: &[usize],
    id: f64,
    map: impl Fn(f64) -> f64,
    red: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let m: usize = kept.iter().map(|&d| shape[d]).product();
    let mut out = vec![id; m];
    let n: usize = shape.iter().product();
    for (i, &v) in vals.iter().enumerate().take(n) {
        let mut rem = i;
        let mut coord = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            coord[d] = rem % shape[d];
            rem /= shape[d];
        }
        let o = kept.iter().fold(0, |acc, &d| acc * shape[d] + coord[d]);
        out[o] = red(out[o], map(v));
    }
    out
}

fn reductions_over_axes() -> TestResult {
    // SAFETY: the expressions only combine values.
    let sumsq = unsafe {
        ReductionKernel::new("T x", "T y", "x * x", "a + b", "y = a", "0", "sum_squares")?
    };
    // SAFETY: as above.
    let maxk = unsafe {
        ReductionKernel::new(
            "T x",
            "T y",
            "x",
            "(a > b ? a : b)",
            "y = a",
            "-1e30",
            "max_all",
        )?
    };
    for (shape, axes_list) in [
        (
            vec![3usize, 5, 7],
            vec![vec![], vec![0], vec![1], vec![2], vec![0, 2], vec![0, 1, 2]],
        ),
        (vec![1000, 3], vec![vec![0], vec![1]]),
        (vec![3, 100_003], vec![vec![1], vec![0, 1]]), // few outputs, long rows: chunks
        (vec![100_000, 3], vec![vec![1], vec![0]]),    // many short rows: a thread each
        (vec![2, 1, 4097], vec![vec![2], vec![0, 2]]),
    ] {
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n)
            .map(|i| ((i * 37) % 101) as f64 / 16.0 - 3.0)
            .collect();
        let x = Tensor::<f64>::from_vec(v.clone(), &shape)?;
        for axes in axes_list {
            let ax: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            let which = if axes.is_empty() {
                Axes::all()
            } else {
                Axes::dims(&ax)
            };
            let all_axes: Vec<usize> = if axes.is_empty() {
                (0..shape.len()).collect()
            } else {
                axes.clone()
            };
            let want = reduce_host(&v, &shape, &all_axes, 0.0, |x| x * x, |a, b| a + b);
            let got = sumsq.call1::<f64>(&[(&x).into()], &which)?;
            close(
                &values(&got)?,
                &want,
                1e-12,
                &format!("sum of squares {shape:?} over {axes:?}"),
            )?;
            let want = reduce_host(&v, &shape, &all_axes, -1e30, |x| x, f64::max);
            let got = maxk.call1::<f64>(&[(&x).into()], &which.clone().keepdims(true))?;
            ensure!(
                got.shape().len() == shape.len(),
                "keepdims shape {:?}",
                got.shape()
            );
            close(
                &values(&got)?,
                &want,
                0.0,
                &format!("max {shape:?} over {axes:?}"),
            )?;
            // Same shape, same bits (a fixed reduction order).
            let again = maxk.call1::<f64>(&[(&x).into()], &which.clone().keepdims(true))?;
            ensure!(again.to_vec()? == got.to_vec()?, "not deterministic");
        }
    }
    Ok(())
}

fn reductions_dtypes_views_and_post_map() -> TestResult {
    // f16 input accumulated in f32 (reduce_type), mean through _in_ind/_out_ind.
    // SAFETY: the expressions only combine values.
    let mean = unsafe {
        ReductionKernel::with_options(
            "T x",
            "float32 y",
            "(float)x",
            "a + b",
            "y = a / (float)(_in_ind.size() / _out_ind.size())",
            "0",
            "mean_f32",
            Some("float32"),
            KernelOptions::new(),
        )?
    };
    let shape = [37usize, 53];
    let v = small(37 * 53, 5);
    let x = tensor::<half::f16>(&v, &shape)?;
    let got = mean.call1::<f32>(&[(&x).into()], &Axes::dims(&[0]))?;
    let want: Vec<f64> = reduce_host(&v, &shape, &[0], 0.0, |x| x, |a, b| a + b)
        .iter()
        .map(|s| s / 37.0)
        .collect();
    close(&values(&got)?, &want, 1e-6, "f16 column means")?;
    // A transposed view and a broadcast weight: sum over the reduced axis of x * w.
    // SAFETY: as above.
    let dot = unsafe {
        ReductionKernel::new(
            "T x, T w",
            "T y",
            "x * w",
            "a + b",
            "y = a",
            "0",
            "weighted_sum",
        )?
    };
    let base = Tensor::<f32>::from_vec(
        small(6 * 11, 1).iter().map(|&v| v as f32).collect(),
        &[6, 11],
    )?;
    let t = base.t()?; // [11, 6]
    let w = Tensor::<f32>::from_vec(small(6, 2).iter().map(|&v| v as f32).collect(), &[6])?;
    let got = dot.call1::<f32>(&[(&t).into(), (&w).into()], &Axes::dims(&[-1]))?;
    let tv = values(&t.contiguous()?)?;
    let wv = small(6, 2);
    let want: Vec<f64> = (0..11)
        .map(|r| (0..6).map(|c| tv[r * 6 + c] * wv[c]).sum())
        .collect();
    close(&values(&got)?, &want, 1e-6, "transposed weighted sum")?;
    // i32 summed into int64 (exact), and an empty reduction gives the identity.
    // SAFETY: as above.
    let sum64 = unsafe {
        ReductionKernel::new(
            "int32 x",
            "int64 y",
            "(long long)x",
            "a + b",
            "y = a",
            "0",
            "sum_i64",
        )?
    };
    let xi = Tensor::<i32>::from_vec(
        (0..1_000_003).map(|i| (i % 1000) - 500).collect(),
        &[1_000_003],
    )?;
    let want: i64 = (0..1_000_003i64).map(|i| (i % 1000) - 500).sum();
    ensure!(
        sum64
            .call1::<i64>(&[(&xi).into()], &Axes::all())?
            .to_vec()?
            == [want],
        "i64 sum"
    );
    let empty = Tensor::<i32>::zeros(&[0, 3])?;
    let got = sum64.call1::<i64>(&[(&empty).into()], &Axes::dims(&[0]))?;
    ensure!(
        got.to_vec()? == [0, 0, 0],
        "empty reduction: {:?}",
        got.to_vec()?
    );
    match sum64.call(&[(&xi).into()], &Axes::dims(&[1])) {
        Err(JitError::Axis { .. }) => {}
        other => return Err(format!("bad axis: {other:?}").into()),
    }
    Ok(())
}

const RAW_SRC: &str = r#"
extern "C" __global__ void scale_rows(const float* x, float* y, float s, unsigned int n) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = x[i] * s;
}
"#;

fn raw_kernel_on_tensors() -> TestResult {
    type Sig = (In<f32>, Out<f32>, f32, u32);
    // SAFETY: the declaration matches the signature.
    let k = unsafe { RawKernel::<Sig>::new(RAW_SRC, "scale_rows", &[])? };
    let base = Tensor::<f32>::from_vec((0..20).map(|i| i as f32).collect(), &[4, 5])?;
    let x = base.t()?; // non-contiguous: passed as a contiguous copy
    let mut y = Tensor::<f32>::zeros(&[5, 4])?;
    let n = 20u32;
    ensure!(n as usize == x.numel() && n as usize == y.numel(), "sizes");
    // SAFETY: the kernel touches i < n, and both tensors have n elements.
    unsafe {
        k.launch(
            &cuda_stack_jit::LaunchConfig::for_num_elems(20),
            (&x, &mut y, 3.0, n),
        )?
    };
    let want: Vec<f32> = x.contiguous()?.to_vec()?.iter().map(|v| v * 3.0).collect();
    ensure!(y.to_vec()? == want, "{:?}", y.to_vec()?);
    // A wrong signature is caught when the kernel is loaded.
    // SAFETY: deliberately wrong; never launched.
    match unsafe { RawKernel::<(In<f32>, Out<f32>, f64)>::new(RAW_SRC, "scale_rows", &[]) } {
        Err(JitError::Driver(cuda_stack_driver::Error::SignatureMismatch { .. })) => {}
        other => return Err(format!("signature: {other:?}").into()),
    }
    Ok(())
}

fn disk_cache_seen_from_kernels() -> TestResult {
    let dir = std::env::temp_dir().join(format!("cuda-stack-jit-gpu-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let define = |cache: Arc<KernelCache>| {
        // SAFETY: own elements only.
        unsafe {
            ElementwiseKernel::with_options(
                "T x",
                "T y",
                "y = x * (T)3;",
                "triple",
                KernelOptions::new().cache(cache),
            )
        }
    };
    let x = Tensor::<f32>::ones(&[100])?;
    let first_cache = Arc::new(KernelCache::with_dir(&dir, 1 << 30));
    let first = define(first_cache.clone())?.launch_info(&[(&x).into()])?;
    ensure!(first.origin == Origin::Compiled, "{:?}", first.origin);
    // Another cache on the same folder stands for a new process: no compile.
    let second_cache = Arc::new(KernelCache::with_dir(&dir, 1 << 30));
    let k = define(second_cache.clone())?;
    let second = k.launch_info(&[(&x).into()])?;
    ensure!(second.origin == Origin::Disk, "{:?}", second.origin);
    ensure!(
        second_cache.stats().compiles == 0,
        "{:?}",
        second_cache.stats()
    );
    ensure!(
        k.call1::<f32>(&[(&x).into()])?.to_vec()? == vec![3.0f32; 100],
        "result"
    );
    println!(
        "compile {:.1} ms, disk load {:.2} ms; grid {} x {} on {} SMs ({} blocks/SM)",
        first.compile_time.as_secs_f64() * 1e3,
        second.compile_time.as_secs_f64() * 1e3,
        second.grid,
        second.block,
        second.sm_count,
        second.blocks_per_sm
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn main() {
    if std::env::var_os(TRAP_CHILD).is_some() {
        trap_child();
    }
    let trials = vec![
        gpu("elementwise: seed 001 square_kernel", seed_square),
        gpu(
            "elementwise: every dtype, broadcasting, strided views",
            every_dtype_broadcast_and_strided,
        ),
        gpu(
            "elementwise: remembered plans follow dtypes, shapes, strides, offsets",
            remembered_plans_follow_arguments,
        ),
        gpu(
            "elementwise: scalars, i and _ind.size(), call_sized",
            scalars_index_and_size,
        ),
        gpu(
            "elementwise: raw parameters (an index outside traps)",
            raw_parameters_and_bounds,
        ),
        gpu(
            "elementwise: in-place outputs, copy-on-write",
            in_place_and_copy_on_write,
        ),
        gpu("elementwise: call errors are typed", call_errors_are_typed),
        gpu(
            "reduction: every axis pattern, keepdims, chunked and thread-per-row",
            reductions_over_axes,
        ),
        gpu(
            "reduction: dtypes, views, broadcast, post-map, empty",
            reductions_dtypes_views_and_post_map,
        ),
        gpu("raw kernel: typed launch on tensors", raw_kernel_on_tensors),
        gpu(
            "cache: a second cache on the folder loads without compiling",
            disk_cache_seen_from_kernels,
        ),
    ];
    cuda_tests::run(trials);
}
