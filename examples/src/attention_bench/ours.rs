//! Our side of every case, through the `Tensor` API (what a user of the crates calls), timed
//! with CUDA events on the current stream.

use super::cases::{Case, Dt, Op, Pass};
use super::ours_ops as o;
use cuda_examples::timing::GpuTimer;
use cuda_stack_driver::half::bf16;
use cuda_stack_runtime::{
    use_stream, AttentionElement, FloatElement, Runtime, Tensor, TensorElement,
};
use std::error::Error;

type Res<T> = Result<T, Box<dyn Error>>;

/// The timer and the timing parameters.
pub struct Bench {
    device: usize,
    timer: GpuTimer,
    trials: usize,
    target_s: f64,
    max_reps: usize,
    quick: bool,
}

/// A case's inputs, made once and reused by every timed call.
enum Inputs<T: TensorElement> {
    Attention {
        q: Tensor<T>,
        k: Tensor<T>,
        v: Tensor<T>,
        dout: Tensor<T>,
    },
    Rows {
        x: Tensor<T>,
        dy: Tensor<T>,
        w: Tensor<T>,
        b: Tensor<T>,
    },
    Lookup {
        table: Tensor<T>,
        idx: Tensor<i32>,
        dy: Tensor<T>,
    },
}

/// Standard-normal values of `shape` in `T` (generated in f32, rounded once).
fn randn<T: TensorElement>(shape: &[usize], seed: u64) -> Res<Tensor<T>> {
    Ok(Tensor::<f32>::randn(shape, seed)?.to_dtype::<T>()?)
}

impl Bench {
    /// A bench on GPU `device` (made current on this thread).
    pub fn new(device: usize, quick: bool) -> Res<Bench> {
        cuda_stack_runtime::set_device(device)?;
        let rt = Runtime::get(device)?;
        Ok(Bench {
            device,
            timer: GpuTimer::new(rt.context())?,
            trials: if quick { 3 } else { 5 },
            target_s: if quick { 0.005 } else { 0.020 },
            max_reps: if quick { 50 } else { 200 },
            quick,
        })
    }

    /// Median seconds per call: one warm-up call, `settle_s` of untimed back-to-back calls
    /// ([`Case::settle_secs`]), R back-to-back calls per trial (R so a trial lasts about
    /// `target_s`), the median over the trials (`tools/torch_attention.py` does the same).
    fn median(&self, settle_s: f64, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
        let s = cuda_stack_runtime::current_stream()?;
        f()?;
        let one = self.timer.time(&s, |_| f())?.as_secs_f64();
        if settle_s > 0.0 {
            for _ in 0..(settle_s / one.max(1e-7)).ceil() as usize {
                f()?;
            }
        }
        let reps = ((self.target_s / one.max(1e-7)) as usize).clamp(1, self.max_reps);
        // Slow cases (a call of 0.1 s or more) take 3 trials, so a sweep stays minutes long.
        let trials = if one >= 0.1 { 3 } else { self.trials };
        self.timer.median_per_call(&s, trials, reps, |_| f())
    }

    /// One call of `f` captured into a CUDA graph (on a capture stream of this device, the
    /// call's temporaries owned by the graph) and its replays timed as [`Bench::median`] times
    /// eager calls: the GPU's time for the call without our host side.
    fn graph_median(&self, settle_s: f64, f: impl FnOnce() -> Res<()>) -> Res<f64> {
        let rt = Runtime::get(self.device)?;
        let s = cuda_stack_runtime::current_stream()?;
        // The inputs were made on the current stream; the capture stream reads them.
        s.synchronize()?;
        let capture = rt.context().begin_capture()?;
        let stream = capture.stream().clone();
        let called = {
            let _on_capture = use_stream(&stream);
            f()
        };
        let graph = capture.end();
        called?;
        let exec = graph?.instantiate()?;
        self.median(settle_s, || Ok(exec.launch(&s)?))
    }

    /// Seconds per eager call of `case` and, for the attention cases, per call replayed from
    /// a CUDA graph.
    pub fn time(&mut self, case: &Case) -> Res<super::OursTimes> {
        match case.dt {
            Dt::F32 => self.time_as::<f32>(case),
            Dt::Bf16 => self.time_as::<bf16>(case),
        }
    }

    fn time_as<T: AttentionElement + FloatElement>(
        &mut self,
        case: &Case,
    ) -> Res<super::OursTimes> {
        let inputs = make_inputs::<T>(case)?;
        let settle = case.settle_secs(self.quick);
        if let (Inputs::Attention { q, k, v, dout }, Op::Sdpa) = (&inputs, case.op) {
            let call = || match case.pass {
                Pass::Fwd => o::sdpa_fwd(q, k, v, case.causal),
                _ => o::sdpa_fwd_bwd(q, k, v, dout, case.causal),
            };
            let eager = self.median(settle, call)?;
            // A capture that fails drops the graph figure only (the ratio then compares
            // PyTorch's faster time with our eager one).
            let graph = self
                .graph_median(settle, call)
                .map_err(|e| eprintln!("{}: CUDA-graph capture failed: {e}", case.id()))
                .ok();
            return Ok((eager, graph));
        }
        let t = match (&inputs, case.op) {
            (Inputs::Attention { q, k, v, .. }, Op::Chain) => {
                let scale = 1.0 / (case.d as f64).sqrt();
                self.median(settle, || o::chain(q, k, v, scale))?
            }
            (Inputs::Rows { x, dy, w, b }, Op::LayerNorm) => {
                let saved = o::layer_norm_fwd(x, w, b)?;
                match case.pass {
                    Pass::Fwd => self.median(settle, || o::layer_norm_fwd(x, w, b).map(drop))?,
                    _ => self.median(settle, || o::layer_norm_bwd(x, w, &saved, dy))?,
                }
            }
            (Inputs::Rows { x, dy, .. }, Op::Gelu) => match case.pass {
                Pass::Fwd => self.median(settle, || o::gelu_fwd(x))?,
                _ => self.median(settle, || o::gelu_bwd(x, dy))?,
            },
            (Inputs::Rows { x, .. }, Op::CrossEntropy) => {
                let t = targets(case.n, case.v)?;
                let one = Tensor::<f32>::from_vec(vec![1.0], &[])?.to_dtype::<T::Stat>()?;
                self.median(settle, || o::classifier(x, &t, &one))?
            }
            (Inputs::Lookup { table, idx, dy }, Op::Embedding) => match case.pass {
                Pass::Fwd => self.median(settle, || o::embedding_fwd(table, idx))?,
                _ => self.median(settle, || o::embedding_bwd(idx, dy, case.v))?,
            },
            _ => return Err(format!("attention_bench: no inputs for case {}", case.id()).into()),
        };
        Ok((t, None))
    }
}

/// Class targets `[n]` in `0..v`, spread over the vocabulary.
fn targets(n: usize, v: usize) -> Res<Tensor<i32>> {
    let t: Vec<i32> = (0..n).map(|i| ((i * 7919) % v) as i32).collect();
    Ok(Tensor::from_vec(t, &[n])?)
}

fn make_inputs<T: TensorElement>(case: &Case) -> Res<Inputs<T>> {
    Ok(match case.op {
        Op::Sdpa | Op::Chain => {
            let shape = [case.b, case.h, case.n, case.d];
            Inputs::Attention {
                q: randn(&shape, 1)?,
                k: randn(&shape, 2)?,
                v: randn(&shape, 3)?,
                dout: randn(&shape, 4)?,
            }
        }
        Op::LayerNorm => Inputs::Rows {
            x: randn(&[case.rows, case.c], 1)?,
            dy: randn(&[case.rows, case.c], 2)?,
            w: randn(&[case.c], 3)?,
            b: randn(&[case.c], 4)?,
        },
        Op::Gelu => Inputs::Rows {
            x: randn(&[case.n], 1)?,
            dy: randn(&[case.n], 2)?,
            w: randn(&[1], 3)?,
            b: randn(&[1], 4)?,
        },
        Op::CrossEntropy => Inputs::Rows {
            x: randn(&[case.n, case.v], 1)?,
            dy: randn(&[1], 2)?,
            w: randn(&[1], 3)?,
            b: randn(&[1], 4)?,
        },
        Op::Embedding => Inputs::Lookup {
            table: randn(&[case.v, case.c], 1)?,
            idx: targets(case.n, case.v)?,
            dy: randn(&[case.n, case.c], 2)?,
        },
    })
}
