//! Making tensors (from host data, constants, ranges, random numbers) and reading them back.

use super::error::{Result, TensorError};
use super::layout::numel_of;
use super::storage::Exec;
use super::{Tensor, TensorElement};

/// The element count of `shape`, or [`TensorError::SizeOverflow`].
fn count(op: &'static str, shape: &[usize]) -> Result<usize> {
    numel_of(shape).ok_or_else(|| TensorError::SizeOverflow {
        op,
        shape: shape.to_vec(),
    })
}

/// The element count of `shape`, which `len` elements of data must match.
fn check_data_len(len: usize, shape: &[usize]) -> Result<usize> {
    const OP: &str = "from_slice";
    let n = count(OP, shape)?;
    if n != len {
        return Err(TensorError::ShapeMismatch {
            op: OP,
            lhs: vec![len],
            rhs: shape.to_vec(),
            why: format!("shape {shape:?} has {n} elements but the data has {len}"),
        });
    }
    Ok(n)
}

impl<T: TensorElement> Tensor<T> {
    /// A tensor of `shape` holding `data` in row-major order, on the current device
    /// ([`crate::set_device`]). Returns when the data is on the device.
    pub fn from_vec(data: Vec<T>, shape: &[usize]) -> Result<Self> {
        Self::from_slice(&data, shape)
    }

    /// A tensor of `shape` holding a copy of `data` (row-major), on the current device.
    /// `data.len()` must equal the element count of `shape`.
    pub fn from_slice(data: &[T], shape: &[usize]) -> Result<Self> {
        check_data_len(data.len(), shape)?;
        Self::from_slice_on(Exec::current()?.device(), data, shape)
    }

    /// [`Tensor::from_slice`] on device `device`.
    pub fn from_slice_on(device: usize, data: &[T], shape: &[usize]) -> Result<Self> {
        let n = check_data_len(data.len(), shape)?;
        let exec = Exec::on(device)?;
        let rt = exec.runtime();
        // SAFETY: the copy writes all `n` elements (lengths are equal), or fails.
        let storage = unsafe {
            exec.storage_with(n, |dst| {
                Ok(rt.copy_htod_pageable(exec.stream(), data, dst)?)
            })?
        };
        Self::from_storage(storage, shape)
    }

    /// A 0-dimensional tensor holding `value` (`torch.tensor(3.0)`), on the current device.
    pub fn scalar(value: T) -> Result<Self> {
        Self::from_slice(&[value], &[])
    }

    /// A tensor of zeros (`cudaMemsetAsync` on the default stream), on the current device.
    pub fn zeros(shape: &[usize]) -> Result<Self> {
        let n = count("zeros", shape)?;
        let storage = Exec::current()?.zeros::<T>(n)?;
        Self::from_storage(storage, shape)
    }

    /// A tensor of ones, on the current device.
    pub fn ones(shape: &[usize]) -> Result<Self> {
        Self::full(shape, T::from_f64(1.0))
    }

    /// A tensor with every element `value` (the `fill` kernel; for i64, a broadcast copy), on
    /// the current device.
    pub fn full(shape: &[usize], value: T) -> Result<Self> {
        let n = count("full", shape)?;
        let exec = Exec::current()?;
        let k = exec.kernels()?;
        // SAFETY: `fill` writes all `n` elements (or fails).
        let storage = unsafe {
            exec.storage_with(n, |out| T::fill(&k, exec.stream(), out, value))
                .map_err(|e| e.with_shape(shape))?
        };
        Self::from_storage(storage, shape)
    }

    /// A tensor of `shape` with every element `value` on **`self`'s** device (`torch.full_like`
    /// with a shape; `zeros_like`/`ones_like` are `value` 0 and 1): the `fill` kernel, no host
    /// copy.
    pub fn full_like(&self, shape: &[usize], value: T) -> Result<Self> {
        let n = count("full_like", shape)?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        // SAFETY: `fill` writes all `n` elements (or fails).
        let storage = unsafe {
            exec.storage_with(n, |out| T::fill(&k, exec.stream(), out, value))
                .map_err(|e| e.with_shape(shape))?
        };
        Self::from_storage(storage, shape)
    }

    /// The 1-D tensor `start, start + step, …` up to but excluding `end` (`torch.arange`), with
    /// `ceil((end - start) / step)` elements, each `start + i * step` computed in f64 and rounded
    /// to `T`. Built on the host and copied (there is no iota kernel), on the current device.
    pub fn arange(start: f64, end: f64, step: f64) -> Result<Self> {
        const OP: &str = "arange";
        if !(start.is_finite() && end.is_finite() && step.is_finite()) || step == 0.0 {
            return Err(TensorError::InvalidArgument {
                op: OP,
                problem: format!(
                    "start {start}, end {end} and step {step} must be finite and the step non-zero"
                ),
            });
        }
        let len = ((end - start) / step).ceil();
        if len < 0.0 {
            return Err(TensorError::InvalidArgument {
                op: OP,
                problem: format!(
                    "the step {step} goes away from end {end} (start {start}): the bounds are \
                     inconsistent with the step's sign"
                ),
            });
        }
        if len > isize::MAX as f64 {
            return Err(TensorError::InvalidArgument {
                op: OP,
                problem: format!("{len} elements are too many"),
            });
        }
        let len = len as usize;
        let mut data: Vec<T> = Vec::new();
        data.try_reserve_exact(len)
            .map_err(|e| TensorError::InvalidArgument {
                op: OP,
                problem: format!("cannot hold {len} elements on the host to build the range: {e}"),
            })?;
        data.extend((0..len).map(|i| T::from_f64(start + i as f64 * step)));
        let n = data.len();
        Self::from_vec(data, &[n])
    }

    /// Uniform random numbers in `[0, 1)`, generated on the GPU (f32 only).
    ///
    /// Element `i` (row-major) is `(w >> 8) · 2⁻²⁴` where `w` is word `i` of the
    /// **Philox4x32-10** stream keyed by `seed` (counter-based: the value depends only on
    /// `(seed, i)`, not on the launch). So a CPU twin reproduces it **bit-exactly**:
    /// `cuda_stack_kernels::reference::fill_uniform(n, seed, 0)`.
    pub fn rand(shape: &[usize], seed: u64) -> Result<Self> {
        Self::random("rand", shape, seed, T::rand_uniform)
    }

    /// Standard normal random numbers (Box–Muller on pairs of Philox4x32-10 words keyed by
    /// `seed`), generated on the GPU (f32 only). The GPU uses `logf`/`sincospif`, so the CPU twin
    /// `cuda_stack_kernels::reference::fill_normal(n, seed, 0)` agrees to a few ulp, not bit for bit.
    pub fn randn(shape: &[usize], seed: u64) -> Result<Self> {
        Self::random("randn", shape, seed, T::rand_normal)
    }

    fn random(
        op: &'static str,
        shape: &[usize],
        seed: u64,
        fill: fn(
            &cuda_stack_kernels::Kernels,
            &cuda_stack_driver::Stream,
            &mut cuda_stack_driver::DeviceSlice<T>,
            u64,
        ) -> Result<()>,
    ) -> Result<Self> {
        let n = count(op, shape)?;
        let exec = Exec::current()?;
        let k = exec.kernels()?;
        // SAFETY: the Philox fill kernels write all `n` elements (or fail).
        let storage = unsafe {
            exec.storage_with(n, |out| fill(&k, exec.stream(), out, seed))
                .map_err(|e| e.with_shape(shape))?
        };
        Self::from_storage(storage, shape)
    }

    /// The elements in row-major order, copied to the host (`tensor.tolist()` flattened). Waits
    /// for the work queued on the device's default stream; a non-contiguous view is gathered on
    /// the GPU first.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let n = self.numel();
        if n == 0 {
            return Ok(Vec::new());
        }
        let x = self.contiguous()?;
        let exec = x.exec()?;
        let mut out = vec![T::zeroed(); n];
        exec.runtime()
            .copy_dtoh_pageable(exec.stream(), &x.dense()?, &mut out)?;
        Ok(out)
    }

    /// The value of a one-element tensor (`tensor.item()`); waits for the GPU.
    pub fn item(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(TensorError::ShapeMismatch {
                op: "item",
                lhs: self.shape().to_vec(),
                rhs: Vec::new(),
                why: format!(
                    "only a tensor with one element can be converted to a scalar, this one has {}",
                    self.numel()
                ),
            });
        }
        self.to_vec()?
            .first()
            .copied()
            .ok_or_else(|| TensorError::SizeOverflow {
                op: "item",
                shape: self.shape().to_vec(),
            })
    }

    /// A copy on device `device` (through the host; the same tensor if it is already there).
    pub fn to_device(&self, device: usize) -> Result<Self> {
        if device == self.device() {
            return Ok(self.clone());
        }
        Self::from_slice_on(device, &self.to_vec()?, self.shape())
    }

    /// Waits until all work queued on this tensor's device's default stream has finished
    /// (`torch.cuda.synchronize()` for one stream).
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.exec()?.stream().synchronize()?)
    }
}
