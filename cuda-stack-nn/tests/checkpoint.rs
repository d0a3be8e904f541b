//! Checkpoints: a model's named parameters saved in the safetensors format and loaded into
//! another model (values bit for bit; converted when the dtypes differ), and the strict
//! loader's errors (missing, unexpected and mis-shaped names, nothing copied).

use cuda_stack_nn::checkpoint::{self, Checkpoint};
use cuda_stack_nn::{Linear, Module, NnError, Relu, Sequential};
use cuda_stack_runtime::cuda_stack_driver::half::bf16;
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![
        gpu("save_then_load_into_another_model", round_trip),
        gpu("strict_loading_names_every_mismatch", strict),
    ]);
}

fn mlp<T: cuda_stack_nn::GradElement>(
    seed: u64,
    hidden: usize,
) -> cuda_stack_nn::Result<Sequential<T>> {
    Ok(Sequential::new()
        .append(Linear::new(4, hidden, seed)?)
        .append(Relu)
        .append(Linear::new(hidden, 2, seed + 1)?))
}

fn path(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "cuda-stack-ckpt-{tag}-{}.safetensors",
        std::process::id()
    ))
}

fn round_trip() -> TestResult {
    let a = mlp::<f32>(1, 3)?;
    let file = path("rt");
    let mut meta = std::collections::BTreeMap::new();
    meta.insert("step".to_string(), "7".to_string());
    checkpoint::save(&file, &a.named_parameters(), Some(&meta))?;
    let ck = Checkpoint::open(&file)?;
    ensure!(
        ck.metadata().get("step").map(String::as_str) == Some("7"),
        "metadata"
    );
    let b = mlp::<f32>(99, 3)?;
    ck.load_into(&b.named_parameters())?;
    for ((n, p), (_, q)) in a.named_parameters().iter().zip(b.named_parameters().iter()) {
        ensure!(
            p.value().to_vec()? == q.value().to_vec()?,
            "{n} differs after loading"
        );
    }
    // Into a bf16 model: each value rounded once.
    let c = mlp::<bf16>(5, 3)?;
    ck.load_into(&c.named_parameters())?;
    for ((n, p), (_, q)) in a.named_parameters().iter().zip(c.named_parameters().iter()) {
        let want: Vec<bf16> = p
            .value()
            .to_vec()?
            .iter()
            .map(|&x| bf16::from_f32(x))
            .collect();
        ensure!(
            q.value().to_vec()? == want,
            "{n} (bf16) differs after loading"
        );
    }
    let _ = std::fs::remove_file(&file);
    Ok(())
}

fn strict() -> TestResult {
    let a = mlp::<f32>(1, 3)?;
    let file = path("strict");
    checkpoint::save(&file, &a.named_parameters(), None)?;
    let ck = Checkpoint::open(&file)?;
    // Another hidden width: two mis-shaped weights and a mis-shaped bias.
    let b = mlp::<f32>(2, 5)?;
    let before: Vec<Vec<f32>> = b
        .named_parameters()
        .iter()
        .map(|(_, p)| p.value().to_vec())
        .collect::<Result<_, _>>()?;
    match ck.load_into(&b.named_parameters()) {
        Err(NnError::Invalid { problem, .. }) => {
            ensure!(
                problem.contains("in the file"),
                "no shape message: {problem}"
            )
        }
        other => return Err(format!("mis-shaped load: {other:?}").into()),
    }
    let after: Vec<Vec<f32>> = b
        .named_parameters()
        .iter()
        .map(|(_, p)| p.value().to_vec())
        .collect::<Result<_, _>>()?;
    ensure!(before == after, "a refused load changed a parameter");
    // A name too few and one too many.
    let mut named = a.named_parameters();
    let (name, var) = named.pop().ok_or("no parameters")?;
    named.push((format!("{name}.renamed"), var));
    match ck.load_into(&named) {
        Err(NnError::Invalid { problem, .. }) => ensure!(
            problem.contains("missing") && problem.contains("unexpected"),
            "{problem}"
        ),
        other => return Err(format!("renamed load: {other:?}").into()),
    }
    let _ = std::fs::remove_file(&file);
    ensure!(
        Checkpoint::open(&file).is_err(),
        "opening a missing file worked"
    );
    Ok(())
}
