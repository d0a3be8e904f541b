//! Collectives on tensors (`Tensor::all_reduce_`, `broadcast_`, `reduce_`, `all_gather`,
//! `all_gather_in_place_`, `reduce_scatter`) over every GPU present, one rank per GPU, each rank in its own thread with
//! its own current device (as `torch.distributed` runs one rank per device); CPU references.
//! On one GPU the communicator has one rank.

use cuda_stack_runtime::cuda_stack_nccl::{CommConfig, CommGroup, Communicator, Error, ReduceOp};
use cuda_stack_runtime::{set_device, Tensor, TensorError};
use cuda_tests::{ensure, gpu, gpu_nccl, TestResult};
use std::time::Duration;

fn main() {
    // SAFETY: the first statement of main: no other thread exists yet.
    unsafe { cuda_stack_runtime::cuda_stack_nccl::disable_nvls_in_environment() };
    cuda_tests::run(vec![
        gpu_nccl("tensor_collectives_match_cpu_on_every_gpu", collectives),
        gpu_nccl(
            "in_place_collectives_copy_a_shared_tensor_first",
            copy_on_write,
        ),
        gpu_nccl("collective_argument_errors_are_typed", errors),
        gpu_nccl(
            "all_gather_in_place_fills_every_part_of_a_flat_buffer",
            gather_in_place,
        ),
        gpu("copy_from_at_fills_a_flat_buffer_piece_by_piece", copy_at),
    ]);
}

fn comms() -> Result<Vec<Communicator>, Box<dyn std::error::Error>> {
    let cfg = CommConfig::with_timeout(Some(Duration::from_secs(60)));
    Ok(CommGroup::all(&cfg)?.into_comms())
}

/// Runs `f(rank, comm)` on one thread per rank, with that rank's device current.
fn per_rank(f: fn(usize, usize, &Communicator) -> TestResult) -> TestResult {
    let comms = comms()?;
    let size = comms.len();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || -> Result<(), String> {
                let r = c.rank();
                set_device(c.device()).map_err(|e| e.to_string())?;
                f(r, size, &c).map_err(|e| format!("rank {r}: {e}"))
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "a rank panicked")??;
    }
    Ok(())
}

fn value(r: usize, i: usize) -> f32 {
    (i % 5) as f32 + r as f32 * 0.5
}

fn rank_tensor(r: usize, shape: &[usize]) -> Result<Tensor<f32>, TensorError> {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| value(r, i)).collect(), shape)
}

fn collectives() -> TestResult {
    per_rank(|r, size, c| {
        let shape = [size * 2, 3];
        let n = size * 6;
        let mut t = rank_tensor(r, &shape)?;
        t.all_reduce_(c, ReduceOp::Sum)?;
        let want: Vec<f32> = (0..n)
            .map(|i| (0..size).map(|k| value(k, i)).sum())
            .collect();
        ensure!(
            t.to_vec()? == want,
            "all_reduce_: {:?} vs {want:?}",
            t.to_vec()?
        );
        ensure!(t.shape() == shape, "shape changed");

        let mut b = rank_tensor(r, &shape)?;
        b.broadcast_(c, size - 1)?;
        let want: Vec<f32> = (0..n).map(|i| value(size - 1, i)).collect();
        ensure!(b.to_vec()? == want, "broadcast_");

        let mut m = rank_tensor(r, &shape)?;
        m.reduce_(c, ReduceOp::Max, 0)?;
        if r == 0 {
            let want: Vec<f32> = (0..n)
                .map(|i| (0..size).map(|k| value(k, i)).fold(f32::MIN, f32::max))
                .collect();
            ensure!(m.to_vec()? == want, "reduce_ at the root");
        }

        let g = rank_tensor(r, &[2, 3])?.all_gather(c)?;
        ensure!(
            g.shape() == [size, 2, 3],
            "all_gather shape {:?}",
            g.shape()
        );
        let want: Vec<f32> = (0..size)
            .flat_map(|k| (0..6).map(move |i| value(k, i)))
            .collect();
        ensure!(g.to_vec()? == want, "all_gather values");

        let s = rank_tensor(r, &shape)?.reduce_scatter(c, ReduceOp::Sum)?;
        ensure!(s.shape() == [2, 3], "reduce_scatter shape {:?}", s.shape());
        let want: Vec<f32> = (r * 6..(r + 1) * 6)
            .map(|i| (0..size).map(|k| value(k, i)).sum())
            .collect();
        ensure!(s.to_vec()? == want, "reduce_scatter values");

        // A transposed view is gathered from its logical order.
        let v = rank_tensor(r, &[3, 2])?.t()?;
        let g = v.all_gather(c)?;
        ensure!(g.shape() == [size, 2, 3], "view gather shape");
        ensure!(
            g.to_vec()?[..6] == rank_tensor(0, &[3, 2])?.t()?.contiguous()?.to_vec()?[..],
            "view gather values"
        );
        Ok(())
    })
}

fn copy_on_write() -> TestResult {
    per_rank(|r, size, c| {
        let mut t = rank_tensor(r, &[8])?;
        let keep = t.clone();
        t.all_reduce_(c, ReduceOp::Sum)?;
        ensure!(
            !t.shares_storage(&keep),
            "a shared tensor was reduced in place"
        );
        ensure!(
            keep.to_vec()? == rank_tensor(r, &[8])?.to_vec()?,
            "the other handle changed"
        );
        let want: Vec<f32> = (0..8)
            .map(|i| (0..size).map(|k| value(k, i)).sum())
            .collect();
        ensure!(t.to_vec()? == want, "values");
        Ok(())
    })
}

fn errors() -> TestResult {
    per_rank(|r, size, c| {
        if size > 1 {
            let t = rank_tensor(r, &[size * 2 + 1])?;
            ensure!(
                matches!(
                    t.reduce_scatter(c, ReduceOp::Sum),
                    Err(TensorError::ShapeMismatch { .. })
                ),
                "an indivisible reduce_scatter was accepted"
            );
        }
        let mut u = rank_tensor(r, &[4])?;
        ensure!(
            matches!(
                u.broadcast_(c, size),
                Err(TensorError::Collective(e)) if matches!(*e, Error::InvalidRank { .. })
            ),
            "root out of range accepted"
        );
        Ok(())
    })
}

/// The gradient buckets' fill: pieces copied into a flat buffer at offsets, in place.
fn copy_at() -> TestResult {
    let mut flat = Tensor::<f32>::zeros(&[10])?;
    let ptr = flat.data_ptr();
    flat.copy_from_at_(0, &Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?)?;
    flat.copy_from_at_(
        7,
        &Tensor::from_vec(vec![8.0, 9.0, 10.0], &[3])?.unsqueeze(0)?,
    )?;
    ensure!(flat.data_ptr() == ptr, "an exclusive buffer was copied");
    ensure!(
        flat.to_vec()? == [1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 8.0, 9.0, 10.0],
        "{:?}",
        flat.to_vec()?
    );
    // A transposed source is copied in its logical (row-major) order.
    let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?.t()?;
    flat.copy_from_at_(4, &t)?;
    ensure!(
        flat.to_vec()?[4..8] == [1.0, 3.0, 2.0, 4.0],
        "{:?}",
        flat.to_vec()?
    );
    ensure!(
        matches!(
            flat.copy_from_at_(8, &Tensor::zeros(&[3])?),
            Err(TensorError::ShapeMismatch { .. })
        ),
        "a piece past the end was accepted"
    );
    // Shared: copy on write, the other handle keeps the old values.
    let keep = flat.clone();
    flat.copy_from_at_(0, &Tensor::from_vec(vec![-1.0f32], &[1])?)?;
    ensure!(
        keep.to_vec()?[0] == 1.0 && flat.to_vec()?[0] == -1.0,
        "copy on write"
    );
    Ok(())
}

/// Each rank writes its own part of a flat buffer of `size` parts of 5 elements (the rest is
/// garbage); after `all_gather_in_place_`, part `k` holds rank `k`'s values on every rank. A
/// buffer that does not split into equal parts is refused.
fn gather_in_place() -> TestResult {
    per_rank(|r, size, c| {
        let n = 5 * size;
        let mine: Vec<f32> = (0..n)
            .map(|i| if i / 5 == r { value(r, i) } else { -7.0 })
            .collect();
        let mut t = Tensor::from_vec(mine, &[n])?;
        t.all_gather_in_place_(c)?;
        let want: Vec<f32> = (0..n).map(|i| value(i / 5, i)).collect();
        ensure!(
            t.to_vec()? == want,
            "all_gather_in_place_: {:?} vs {want:?}",
            t.to_vec()?
        );
        if size > 1 {
            let mut odd = Tensor::<f32>::zeros(&[n + 1])?;
            let e = odd.all_gather_in_place_(c);
            ensure!(
                matches!(
                    e,
                    Err(TensorError::ShapeMismatch {
                        op: "all_gather_in_place_",
                        ..
                    })
                ),
                "{e:?}"
            );
        }
        Ok(())
    })
}
