//! [`gradcheck`]: the analytic gradients of a function of [`Var`]s against central finite
//! differences, in f64 (`torch.autograd.gradcheck`).
//!
//! For a function `f` of inputs `x_0 … x_{k−1}` with output `y`, every entry of the Jacobian
//! `∂y_j / ∂x_i[e]` is computed twice: analytically, by one backward pass per output element
//! with a one-hot output gradient (the rows of the Jacobian), and numerically, by
//! `(f(x + h·e) − f(x − h·e)) / 2h` per input element. They must agree within
//! `atol + rtol · |numeric|`, entry by entry. It costs `2 · Σ numel(x_i)` forward passes and
//! `numel(y)` forward + backward passes, so use small shapes (as with PyTorch's gradcheck).

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::Tensor;

/// Step and tolerances (PyTorch's defaults: `eps = 1e-6`, `atol = 1e-5`, `rtol = 1e-3`).
#[derive(Clone, Copy, Debug)]
pub struct GradcheckOptions {
    /// The finite-difference step `h`.
    pub eps: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance (times `|numeric|`).
    pub rtol: f64,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        GradcheckOptions {
            eps: 1e-6,
            atol: 1e-5,
            rtol: 1e-3,
        }
    }
}

/// The worst Jacobian entry found, and whether every entry was within tolerance.
#[derive(Clone, Debug)]
pub struct GradcheckReport {
    /// Whether every entry agreed within `atol + rtol · |numeric|`.
    pub passed: bool,
    /// Jacobian entries compared.
    pub entries: usize,
    /// The largest `|analytic − numeric| − rtol · |numeric|` over all entries.
    pub worst_excess: f64,
    /// Where it was: (input index, element of the input, element of the output).
    pub worst_at: (usize, usize, usize),
    /// The analytic and numeric values there.
    pub worst_values: (f64, f64),
}

impl std::fmt::Display for GradcheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (i, e, j) = self.worst_at;
        let (a, n) = self.worst_values;
        write!(
            f,
            "gradcheck {}: {} Jacobian entries; worst at input {i} element {e}, output element \
             {j}: analytic {a:.9e}, numeric {n:.9e}",
            if self.passed { "passed" } else { "FAILED" },
            self.entries
        )
    }
}

/// Checks `f`'s gradients at `inputs` (each becomes a [`Var::parameter`]); see the module docs.
pub fn gradcheck(
    f: impl Fn(&[Var<f64>]) -> Result<Var<f64>>,
    inputs: &[Tensor<f64>],
    opts: GradcheckOptions,
) -> Result<GradcheckReport> {
    let host: Vec<Vec<f64>> = inputs
        .iter()
        .map(|t| t.to_vec())
        .collect::<std::result::Result<_, _>>()?;
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape().to_vec()).collect();
    let device = inputs.first().map_or(0, |t| t.device());
    let make = |vals: &[Vec<f64>]| -> Result<Vec<Var<f64>>> {
        vals.iter()
            .zip(&shapes)
            .map(|(v, s)| Ok(Var::parameter(Tensor::from_slice_on(device, v, s)?)))
            .collect()
    };

    // Analytic: row j of the Jacobian from a backward pass with a one-hot output gradient.
    let probe = f(&make(&host)?)?;
    let out_shape = probe.shape();
    let out_n = probe.numel();
    let mut analytic: Vec<Vec<Vec<f64>>> = Vec::with_capacity(out_n); // [j][input][element]
    for j in 0..out_n {
        let vars = make(&host)?;
        let y = f(&vars)?;
        let mut onehot = vec![0.0; out_n];
        onehot[j] = 1.0;
        y.backward_with(&Tensor::from_slice_on(device, &onehot, &out_shape)?, false)?;
        let mut row = Vec::with_capacity(vars.len());
        for (v, h) in vars.iter().zip(&host) {
            row.push(match v.grad()? {
                Some(g) => g.to_vec()?,
                None => vec![0.0; h.len()],
            });
        }
        analytic.push(row);
    }

    // Numeric: central differences, one input element at a time.
    let mut report = GradcheckReport {
        passed: true,
        entries: 0,
        worst_excess: f64::NEG_INFINITY,
        worst_at: (0, 0, 0),
        worst_values: (0.0, 0.0),
    };
    for i in 0..host.len() {
        for e in 0..host[i].len() {
            let mut plus = host.clone();
            plus[i][e] += opts.eps;
            let mut minus = host.clone();
            minus[i][e] -= opts.eps;
            let yp = crate::no_grad(|| f(&make(&plus)?).and_then(|y| Ok(y.value().to_vec()?)))?;
            let ym = crate::no_grad(|| f(&make(&minus)?).and_then(|y| Ok(y.value().to_vec()?)))?;
            for j in 0..out_n {
                let numeric = (yp[j] - ym[j]) / (2.0 * opts.eps);
                let a = analytic[j][i][e];
                let excess = (a - numeric).abs() - opts.rtol * numeric.abs();
                report.entries += 1;
                if excess > opts.atol || a.is_nan() != numeric.is_nan() {
                    report.passed = false;
                }
                if excess > report.worst_excess || a.is_nan() {
                    report.worst_excess = excess;
                    report.worst_at = (i, e, j);
                    report.worst_values = (a, numeric);
                }
            }
        }
    }
    Ok(report)
}
