//! A captured step keeps the tensor layer's promise that a `Tensor` is a value: a replay rewrites
//! the parameters, their gradients and the step's outputs in place, so it is refused (typed
//! error, nothing queued) while any of them is shared with a handle taken since the capture, or
//! was replaced; and what a capture produced cannot be read before its graph has run.

use cuda_stack_nn::{
    class_targets, CapturedStep, Linear, Module, NnError, Optimizer, Relu, Sequential, Sgd,
    SgdConfig, Var,
};
use cuda_stack_runtime::{use_stream, Runtime, Tensor, TensorError};
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![
        gpu(
            "replay_refuses_while_a_parameter_value_is_shared",
            shared_parameter,
        ),
        gpu(
            "replay_refuses_while_a_gradient_or_output_is_shared",
            shared_gradient_and_output,
        ),
        gpu("replay_refuses_after_gradients_were_dropped", dropped_grads),
        gpu(
            "capture_outputs_are_refused_until_the_graph_runs",
            outputs_before_replay,
        ),
        gpu(
            "tensors_of_a_raw_capture_are_refused_until_launched_or_for_good",
            raw_capture_values,
        ),
    ]);
}

type Setup = (Sequential<f32>, Sgd<f32>, Var<f32>, Tensor<i32>);

/// A small MLP, its SGD optimizer warmed up by one eager step, a static input and targets.
fn setup() -> Result<Setup, NnError> {
    let m = Sequential::<f32>::new()
        .append(Linear::new(16, 12, 1)?)
        .append(Relu)
        .append(Linear::new(12, 4, 2)?);
    let mut opt = Sgd::new(m.parameters(), SgdConfig::new(0.1))?;
    let x = Var::constant(Tensor::<f32>::randn(&[8, 16], 3)?);
    let t = class_targets(&[0, 1, 2, 3, 0, 1, 2, 3], 4)?;
    opt.zero_grad();
    m.forward(&x)?.cross_entropy(&t)?.backward()?;
    opt.step()?;
    Ok((m, opt, x, t))
}

fn capture(s: &mut Setup) -> Result<(CapturedStep, Var<f32>), NnError> {
    let (m, opt, x, t) = s;
    CapturedStep::capture(opt, |o| {
        o.zero_grad();
        let loss = m.forward(x)?.cross_entropy(t)?;
        loss.backward()?;
        o.step()?;
        Ok(loss)
    })
}

fn refused(r: Result<(), NnError>, target: &str, why: &str) -> TestResult {
    match r {
        Err(NnError::ReplayRefused {
            target: t, problem, ..
        }) if t == target && problem.contains(why) => Ok(()),
        other => Err(format!("expected a refusal for {target} ({why}), got {other:?}").into()),
    }
}

fn shared_parameter() -> TestResult {
    let mut s = setup()?;
    let (step, _loss) = capture(&mut s)?;
    step.replay()?;
    step.synchronize()?;
    let p0 = s.1.parameters()[0].clone();
    let kept = p0.value(); // a value taken after the capture
    let before = kept.to_vec()?;
    refused(step.replay(), "parameter 0", "shares its value")?;
    step.synchronize()?;
    ensure!(
        kept.to_vec()? == before,
        "a kept Tensor value changed across a refused replay"
    );
    // A copy of its own is not affected, and with the handle gone the replay runs.
    let copy = p0.value().deep_copy()?;
    drop(kept);
    step.replay()?;
    step.synchronize()?;
    ensure!(
        copy.to_vec()? == before,
        "a deep copy changed with a replay"
    );
    ensure!(
        p0.value().to_vec()? != before,
        "the replay did not update the parameter"
    );
    Ok(())
}

fn shared_gradient_and_output() -> TestResult {
    let mut s = setup()?;
    let (step, loss) = capture(&mut s)?;
    step.replay()?;
    step.synchronize()?;
    let p1 = s.1.parameters()[1].clone();
    let g = p1.grad()?.ok_or("no gradient after a replay")?;
    refused(step.replay(), "parameter 1", "shares its gradient")?;
    drop(g);
    let l = loss.value();
    let first = l.to_vec()?;
    refused(step.replay(), "output 0 of the step", "shares its value")?;
    ensure!(l.to_vec()? == first, "the kept loss changed");
    drop(l);
    // Reading after a replay through temporary handles is the way.
    step.replay()?;
    step.synchronize()?;
    ensure!(
        loss.value().to_vec()? != first,
        "the loss did not change with a training step"
    );
    Ok(())
}

fn dropped_grads() -> TestResult {
    let mut s = setup()?;
    let (step, _loss) = capture(&mut s)?;
    step.replay()?;
    s.1.zero_grad();
    refused(step.replay(), "parameter 0", "was dropped")?;
    Ok(())
}

fn outputs_before_replay() -> TestResult {
    let mut s = setup()?;
    let (step, loss) = capture(&mut s)?;
    let r = loss.value().to_vec();
    ensure!(
        matches!(r, Err(TensorError::NotYetComputed { discarded: false })),
        "the loss read before the first replay: {r:?}"
    );
    let g = s.1.parameters()[0]
        .grad()?
        .ok_or("no gradient slot after the capture")?;
    let r = g.sum_all();
    ensure!(
        matches!(r, Err(TensorError::NotYetComputed { .. })),
        "an op on a gradient before the first replay: {r:?}"
    );
    drop(g);
    step.replay()?;
    step.synchronize()?;
    let v = loss.value().item()?;
    ensure!(v.is_finite(), "the loss after the first replay: {v}");
    Ok(())
}

fn raw_capture_values() -> TestResult {
    let rt = Runtime::get(0)?;
    let a = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
    let b = Tensor::<f32>::from_vec(vec![10.0, 20.0, 30.0], &[3])?;
    let cap = rt.context().begin_capture()?;
    let stream = cap.stream().clone();
    let c = {
        let _on = use_stream(&stream);
        let c = (&a + &b)?;
        // Inside the capture the op's own work may use it.
        (&c * &c)?
    };
    let exec = cap.end()?.instantiate()?;
    let r = c.to_vec();
    ensure!(
        matches!(r, Err(TensorError::NotYetComputed { discarded: false })),
        "a captured result read before the launch: {r:?}"
    );
    let r = (&c + &a).map(|_| ());
    ensure!(
        matches!(r, Err(TensorError::NotYetComputed { .. })),
        "an eager op on a captured result before the launch: {r:?}"
    );
    exec.launch(&stream)?;
    ensure!(
        c.to_vec()? == [121.0, 484.0, 1089.0],
        "the captured result after the launch"
    );
    // A capture dropped without a launch: its results never hold a value.
    let cap = rt.context().begin_capture()?;
    let d = {
        let _on = use_stream(cap.stream());
        (&a + &b)?
    };
    drop(cap.end()?);
    let r = d.to_vec();
    ensure!(
        matches!(r, Err(TensorError::NotYetComputed { discarded: true })),
        "a result of a discarded capture: {r:?}"
    );
    Ok(())
}
