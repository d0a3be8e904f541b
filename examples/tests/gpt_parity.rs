//! The GPT of `cuda_examples::gpt` step for step against PyTorch, without Python: the committed
//! fixture `fixtures/gpt-tiny` (written by `tools/torch_gpt.py --config tiny --batch 2 --seq 64
//! --steps 10 --device cpu`, f32; see `fixtures/README.md`) holds PyTorch's initial
//! weights, a batch, its step-0 gradients and ten losses. In f32 the loss, every gradient and
//! the AdamW steps must match tightly, in bf16 loosely (`ParityTolerances`); and the check
//! must fail where the fixture is tampered with (one gradient value, one later loss), naming
//! what differs, so a passing check means something.

use cuda_examples::gpt::parity::{compare_with_torch, ParityReport, ParityTolerances};
use cuda_stack_nn::checkpoint;
use cuda_stack_runtime::cuda_stack_driver::half::bf16;
use cuda_tests::{cpu, ensure, gpu, TestResult};
use std::path::PathBuf;

const MODEL: &[u8] = include_bytes!("fixtures/gpt-tiny/model.safetensors");
const BATCH: &[u8] = include_bytes!("fixtures/gpt-tiny/batch.safetensors");
const GRADS: &[u8] = include_bytes!("fixtures/gpt-tiny/grads.safetensors");
const EXPECTED: &str = include_str!("fixtures/gpt-tiny/expected.json");

fn main() {
    cuda_tests::run(vec![
        gpu("matches_pytorch_step_for_step_f32", || {
            matches::<f32>(ParityTolerances::F32, "f32")
        }),
        gpu("matches_pytorch_step_for_step_bf16", || {
            matches::<bf16>(ParityTolerances::BF16, "bf16")
        }),
        gpu("a_changed_gradient_is_found_and_named", changed_gradient),
        gpu("a_changed_later_loss_is_found", changed_loss),
        cpu("a_missing_file_is_an_error_naming_it", missing_file),
    ]);
}

/// The fixture written to a fresh folder, `grads` and `expected` possibly altered.
fn folder(tag: &str, grads: &[u8], expected: &str) -> Result<PathBuf, std::io::Error> {
    let dir = std::env::temp_dir().join(format!("gpt-parity-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("model.safetensors"), MODEL)?;
    std::fs::write(dir.join("batch.safetensors"), BATCH)?;
    std::fs::write(dir.join("grads.safetensors"), grads)?;
    std::fs::write(dir.join("expected.json"), expected)?;
    Ok(dir)
}

fn show(what: &str, r: &ParityReport) {
    println!(
        "{what}: step-0 loss {:.7} vs {:.7} ({:.2e}); worst gradient {} {:.2e}; worst later \
         loss {:.2e} over {} steps",
        r.step0_loss.0,
        r.step0_loss.1,
        r.step0_relative(),
        r.grads.first().map_or("-", |g| g.name.as_str()),
        r.grads.first().map_or(0.0, |g| g.relative),
        r.worst_step_relative(),
        r.step_losses.len()
    );
}

fn matches<U>(tol: ParityTolerances, what: &str) -> TestResult
where
    U: cuda_stack_nn::GradElement + cuda_stack_runtime::AttentionElement + 'static,
{
    let dir = folder(what, GRADS, EXPECTED)?;
    let r = compare_with_torch::<U>(&dir, tol, true); // the default, fused MLP
    let _ = std::fs::remove_dir_all(&dir);
    let r = r?;
    show(what, &r);
    ensure!(r.passed(), "{what}: {:?}", r.failures);
    ensure!(
        r.step_losses.len() == 9 && r.grads.len() == 2 + 2 * 12 + 2,
        "{what}: {} later steps and {} gradients compared (9 and 28 expected)",
        r.step_losses.len(),
        r.grads.len()
    );
    Ok(())
}

fn changed_gradient() -> TestResult {
    // PyTorch's gradient of one weight, its largest value moved by 1 % of itself.
    let name = "transformer.h.1.mlp.c_fc.weight";
    let (mut tensors, meta) = checkpoint::decode(GRADS)?;
    let t = tensors
        .get_mut(name)
        .ok_or_else(|| format!("the fixture has no {name}"))?;
    let mut v: Vec<f32> = t
        .bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let i = (0..v.len())
        .max_by(|&a, &b| v[a].abs().total_cmp(&v[b].abs()))
        .ok_or("an empty gradient")?;
    v[i] *= 1.01;
    t.bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let list: Vec<_> = tensors.into_iter().collect();
    let grads = checkpoint::encode(&list, Some(&meta))?;
    let dir = folder("grad", &grads, EXPECTED)?;
    let r = compare_with_torch::<f32>(&dir, ParityTolerances::F32, false);
    let _ = std::fs::remove_dir_all(&dir);
    let r = r?;
    show("tampered gradient", &r);
    ensure!(
        r.failures.len() == 1 && r.failures[0].contains(name),
        "expected exactly one failure, naming {name}: {:?}",
        r.failures
    );
    Ok(())
}

fn changed_loss() -> TestResult {
    let mut exp: serde_json::Value = serde_json::from_str(EXPECTED)?;
    let losses = exp["losses"]
        .as_array_mut()
        .ok_or("the fixture's expected.json has no losses")?;
    let l5 = losses[5].as_f64().ok_or("loss 5")?;
    losses[5] = serde_json::json!(l5 * 1.001);
    let dir = folder("loss", GRADS, &exp.to_string())?;
    let r = compare_with_torch::<f32>(&dir, ParityTolerances::F32, false);
    let _ = std::fs::remove_dir_all(&dir);
    let r = r?;
    show("tampered loss", &r);
    ensure!(
        r.failures.len() == 1 && r.failures[0].starts_with("step 5 loss"),
        "expected exactly one failure, at step 5: {:?}",
        r.failures
    );
    Ok(())
}

fn missing_file() -> TestResult {
    let dir = std::env::temp_dir().join(format!("gpt-parity-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let r = compare_with_torch::<f32>(&dir, ParityTolerances::F32, false);
    let _ = std::fs::remove_dir_all(&dir);
    match r {
        Ok(_) => Err("a folder without expected.json compared".into()),
        Err(e) => {
            ensure!(
                e.to_string().contains("expected.json"),
                "the error does not name the missing file: {e}"
            );
            Ok(())
        }
    }
}
