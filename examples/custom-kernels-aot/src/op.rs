//! The fused op on tensors: checked wrappers around the generated handles (the part seed 004's
//! `custom_ops.cpp` does with `TORCH_CHECK` before launching).

use crate::kernels::Kernels;
use cuda_stack_kernels::cuda_stack_driver::LaunchConfig;
use cuda_stack_runtime::{Tensor, TensorError};

type Result<T> = std::result::Result<T, TensorError>;

/// Most blocks a launch uses: the kernels loop (grid-stride) over whatever is left.
const MAX_THREADS: usize = 65_536 * 256;

/// `(rows, cols)` of `input` viewed as `[rows, cols]` (cols = its last dimension), after
/// checking that `bias` is `[cols]`, that both are on one device, and that both fit the
/// kernels' `int` sizes.
fn matrix_shape(
    op: &'static str,
    input: &Tensor<f32>,
    bias: &Tensor<f32>,
) -> Result<(usize, usize)> {
    let Some(&cols) = input.shape().last() else {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: Vec::new(),
            rhs: bias.shape().to_vec(),
            why: "input must have at least one dimension (its last is the bias dimension)".into(),
        });
    };
    if bias.shape() != [cols] {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: input.shape().to_vec(),
            rhs: bias.shape().to_vec(),
            why: format!("bias must have shape [{cols}] (the last dimension of input)"),
        });
    }
    if input.device() != bias.device() {
        return Err(TensorError::DeviceMismatch {
            op,
            lhs_device: input.device(),
            rhs_device: bias.device(),
            lhs_shape: input.shape().to_vec(),
            rhs_shape: bias.shape().to_vec(),
        });
    }
    let rows = input.numel().checked_div(cols).unwrap_or(0);
    for (what, v) in [("rows", rows), ("cols", cols)] {
        if v > i32::MAX as usize {
            return Err(TensorError::InvalidArgument {
                op,
                problem: format!(
                    "{what} = {v} exceeds the kernels' int limit {}; split the input",
                    i32::MAX
                ),
            });
        }
    }
    Ok((rows, cols))
}

fn grid(n: usize) -> LaunchConfig {
    LaunchConfig::for_num_elems(n.clamp(1, MAX_THREADS))
}

/// `relu(input * scale + bias)` (seed 004's `fused_op_forward`), computed by this crate's own
/// kernel: `bias` has shape `[cols]` where `cols` is the last dimension of `input`.
/// Bit-for-bit equal to [`crate::reference::forward`].
pub fn fused_op_forward(
    input: &Tensor<f32>,
    bias: &Tensor<f32>,
    scale: f32,
) -> Result<Tensor<f32>> {
    const OP: &str = "fused_op_forward";
    let (rows, cols) = matrix_shape(OP, input, bias)?;
    let mut out = input.full_like(input.shape(), 0.0)?;
    let n = rows * cols;
    if n == 0 {
        return Ok(out);
    }
    let (x, b) = (input.contiguous()?, bias.contiguous()?);
    let (ctx, stream) = (x.context()?, x.stream()?);
    let k = Kernels::get(&ctx)?;
    let (xs, bs) = (x.as_slice()?, b.as_slice()?);
    let os = out.as_mut_slice()?;
    // SAFETY: the kernel touches input[i], output[i] for i < rows·cols and bias[i % cols];
    // input and output hold exactly rows·cols elements and bias cols (checked above, `out` made
    // with input's shape), rows and cols fit `int`, and it loops over any grid.
    unsafe {
        k.fused_op_forward.launch(
            &stream,
            &grid(n),
            &xs,
            &bs,
            scale,
            os,
            rows as i32,
            cols as i32,
        )
    }
    .map_err(cuda_stack_kernels::Error::from)?;
    Ok(out)
}

/// The backward pass of [`fused_op_forward`] at `input`, given the output's gradient:
/// `(grad_input, grad_bias)` with `g = (input·scale + bias > 0) ? grad_output : 0`,
/// `grad_input = g · scale`, `grad_bias[c] = Σ_rows g` (summed in row order: deterministic).
pub fn fused_op_backward(
    input: &Tensor<f32>,
    bias: &Tensor<f32>,
    scale: f32,
    grad_output: &Tensor<f32>,
) -> Result<(Tensor<f32>, Tensor<f32>)> {
    const OP: &str = "fused_op_backward";
    let (rows, cols) = matrix_shape(OP, input, bias)?;
    if grad_output.shape() != input.shape() || grad_output.device() != input.device() {
        return Err(TensorError::ShapeMismatch {
            op: OP,
            lhs: input.shape().to_vec(),
            rhs: grad_output.shape().to_vec(),
            why: "grad_output must have input's shape, on input's device".into(),
        });
    }
    let mut grad_input = input.full_like(input.shape(), 0.0)?;
    let mut grad_bias = input.full_like(&[cols], 0.0)?;
    let n = rows * cols;
    if n == 0 {
        return Ok((grad_input, grad_bias));
    }
    let (x, b, g) = (
        input.contiguous()?,
        bias.contiguous()?,
        grad_output.contiguous()?,
    );
    let (ctx, stream) = (x.context()?, x.stream()?);
    let k = Kernels::get(&ctx)?;
    let (xs, bs, gs) = (x.as_slice()?, b.as_slice()?, g.as_slice()?);
    // SAFETY: as in `fused_op_forward`: grad_output, input, grad_input hold rows·cols elements,
    // bias cols; indices stay below those; any grid.
    unsafe {
        k.fused_op_backward_input.launch(
            &stream,
            &grid(n),
            &gs,
            &xs,
            &bs,
            scale,
            grad_input.as_mut_slice()?,
            rows as i32,
            cols as i32,
        )
    }
    .map_err(cuda_stack_kernels::Error::from)?;
    // SAFETY: column c < cols reads element r·cols + c < rows·cols of grad_output and input,
    // bias[c], and writes grad_bias[c]; grad_bias holds cols elements; any grid.
    unsafe {
        k.fused_op_backward_bias.launch(
            &stream,
            &grid(cols),
            &gs,
            &xs,
            &bs,
            scale,
            grad_bias.as_mut_slice()?,
            rows as i32,
            cols as i32,
        )
    }
    .map_err(cuda_stack_kernels::Error::from)?;
    Ok((grad_input, grad_bias))
}

/// The op as a method: `x.fused_op(&bias, 2.0)` on a [`Tensor`] (no autograd) or a
/// [`cuda_stack_nn::Var`] (with autograd).
pub trait FusedOpExt: Sized {
    /// The error type.
    type Error;
    /// `relu(self * scale + bias)`.
    fn fused_op(&self, bias: &Self, scale: f32) -> std::result::Result<Self, Self::Error>;
}

impl FusedOpExt for Tensor<f32> {
    type Error = TensorError;
    fn fused_op(&self, bias: &Self, scale: f32) -> Result<Self> {
        fused_op_forward(self, bias, scale)
    }
}
