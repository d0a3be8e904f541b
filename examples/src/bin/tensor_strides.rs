//! `tensor_strides`: seed 003's "Tensors, Strides, and Storage" — a Tensor is a view (shape,
//! strides, offset) on a flat Storage; `x[1, :]`, `x[:, 0]` and a transpose are metadata only;
//! `contiguous()` copies, and only when it must.
//!
//! Run: `cargo run --release -p cuda-examples --bin tensor_strides [-- --quick]`

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_stack_runtime::{self as rt, tensor::Tensor};
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Storage, strides, views and contiguous(), as seed 003 describes them")]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    run("tensor_strides", body)
}

fn describe(name: &str, t: &Tensor<f32>) {
    println!(
        "  {name:<22} shape {:?}, strides {:?}, offset {}, contiguous {}, storage {} floats at {:#x}",
        t.shape(),
        t.strides(),
        t.offset(),
        t.is_contiguous(),
        t.storage_len(),
        t.data_ptr() - 4 * t.offset() as u64
    );
}

/// `offset + i * stride[0] + j * stride[1]`: where element `[i, j]` of a 2-D view lives.
fn locate(t: &Tensor<f32>, i: usize, j: usize) -> usize {
    (t.offset() as isize + i as isize * t.strides()[0] + j as isize * t.strides()[1]) as usize
}

fn body() -> ProgramResult {
    let args = Args::parse();
    rt::set_device(args.common.device)?;
    println!(
        "x = torch.arange(16.).reshape(4, 4)   →   Tensor::arange(0., 16., 1.)?.view(&[4, 4])?"
    );
    let x = Tensor::<f32>::arange(0.0, 16.0, 1.0)?.view(&[4, 4])?;
    let storage = x.to_vec()?;
    println!("{x}");
    describe("x", &x);
    let before = rt::memory_allocated()?;

    println!("\nViews: new Tensors, same Storage, no copy (memory_allocated stays {before} B)");
    let row = x.select(0, 1)?; // x[1, :]
    let col = x.select(1, 0)?; // x[:, 0]
    let xt = x.t()?;
    describe("row = x[1, :]", &row);
    describe("col = x[:, 0]", &col);
    describe("xt = x.t()", &xt);
    for (name, v) in [("row", &row), ("col", &col), ("xt", &xt)] {
        if !v.shares_storage(&x) {
            return Err(format!("{name} does not share x's storage").into());
        }
    }
    if rt::memory_allocated()? != before {
        return Err("a view allocated memory".into());
    }
    println!(
        "  row = {:?} (offset 4, stride 1: seed 003's x[1, :])",
        row.to_vec()?
    );
    println!(
        "  col = {:?} (offset 0, stride 4: seed 003's x[:, 0])",
        col.to_vec()?
    );
    if row.offset() != 4 || row.strides() != [1] || col.offset() != 0 || col.strides() != [4] {
        return Err("row/col layouts differ from seed 003's".into());
    }

    println!(
        "\nStrides are the whole story: element [i, j] lives at offset + i·stride[0] + j·stride[1]"
    );
    let xt_host = xt.to_vec()?;
    for (i, j) in [(0usize, 1usize), (2, 3), (3, 0)] {
        let at = locate(&xt, i, j);
        println!(
            "  xt[{i}, {j}] = storage[{} + {i}·{} + {j}·{}] = storage[{at}] = {}",
            xt.offset(),
            xt.strides()[0],
            xt.strides()[1],
            storage[at]
        );
        if xt_host[i * 4 + j] != storage[at] {
            return Err("stride arithmetic disagrees with the GPU's copy".into());
        }
    }

    println!("\nview() needs a contiguous tensor, as in PyTorch:");
    match xt.view(&[16]) {
        Err(e) => println!("  xt.view([16]) → error: {e}"),
        Ok(_) => return Err("viewing a transposed tensor as 1-D should fail".into()),
    }
    let c = xt.contiguous()?;
    let after = rt::memory_allocated()?;
    describe("c = xt.contiguous()", &c);
    println!(
        "  contiguous() copied: memory_allocated {before} B → {after} B (new storage: {})",
        !c.shares_storage(&x)
    );
    let same = x.contiguous()?;
    println!(
        "  x.contiguous() on an already contiguous tensor is free: shares storage = {}",
        same.shares_storage(&x)
    );
    if !same.shares_storage(&x) || c.shares_storage(&x) || c.to_vec()? != xt_host {
        return Err("contiguous() copied when it should not, or did not when it should".into());
    }
    println!("  c.view([16]) = {:?}", c.view(&[16])?.to_vec()?);

    println!("\nexpand: broadcasting with stride 0 (one row, seen four times):");
    let r = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 4])?;
    let e = r.expand(&[4, 4])?;
    describe("e = r.expand(4, 4)", &e);
    let sum = (&x + &e)?;
    println!("  x + e =\n{sum}");
    let want: Vec<f32> = storage
        .iter()
        .enumerate()
        .map(|(k, v)| v + (k % 4 + 1) as f32)
        .collect();
    if sum.to_vec()? != want {
        return Err("broadcast add is wrong".into());
    }
    let _ = args.common.quick;
    Ok(())
}
