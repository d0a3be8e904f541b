//! Collectives on tensors, `torch.distributed`'s calls on a tensor: each rank calls the same op
//! on its own tensor with its own [`Communicator`] (see `cuda-stack-nccl`).
//!
//! | `torch.distributed` | here |
//! |---|---|
//! | `dist.all_reduce(t, op)` | [`Tensor::all_reduce_`] (in place) |
//! | `dist.broadcast(t, src)` | [`Tensor::broadcast_`] (in place) |
//! | `dist.reduce(t, dst, op)` | [`Tensor::reduce_`] (in place; the result on the root) |
//! | `dist.all_gather_into_tensor(out, t)` | [`Tensor::all_gather`] → shape `[size, ..]` |
//! | `dist.all_gather_into_tensor(t, t.chunk(size)[rank])` | [`Tensor::all_gather_in_place_`] (flat, in place) |
//! | `dist.reduce_scatter_tensor(out, t, op)` | [`Tensor::reduce_scatter`] → first dimension / size |
//! | `dist.send(t, dst)`, `dist.recv(t, src)` | [`Tensor::send`], [`Tensor::recv_`] (in place) |
//!
//! The work is queued on the calling thread's current stream for the tensor's device
//! ([`crate::use_stream`]; the device's default stream otherwise), like every tensor op, and
//! ordered with the tensor's other uses by `cuda-stack-driver`'s tracking. The in-place ones follow
//! the tensor layer's rule: they write through a handle that no other tensor shares (a shared
//! tensor or a view becomes a private copy first, so other handles never see the write).
//! The communicator must be on the tensor's device.

use crate::tensor::error::{Result, TensorError};
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_nccl::{Communicator, NcclType, ReduceOp};

impl<T: TensorElement + NcclType> Tensor<T> {
    /// [`TensorError::DeviceMismatch`] unless `comm` uses this tensor's device.
    fn check_comm(&self, op: &'static str, comm: &Communicator) -> Result<()> {
        if comm.device() == self.device() {
            Ok(())
        } else {
            Err(TensorError::DeviceMismatch {
                op,
                lhs_device: self.device(),
                rhs_device: comm.device(),
                lhs_shape: self.shape().to_vec(),
                rhs_shape: Vec::new(),
            })
        }
    }

    /// Reduces this tensor across the ranks of `comm`, in place (`dist.all_reduce(t, op)`):
    /// every rank ends with the element-wise reduction of every rank's tensor. Shapes must match
    /// across ranks (the element count is what NCCL sees).
    pub fn all_reduce_(&mut self, comm: &Communicator, op: ReduceOp) -> Result<()> {
        self.check_comm("all_reduce_", comm)?;
        let (exec, buf) = self.exclusive_mut()?;
        comm.all_reduce_in_place(buf, op, exec.stream())?;
        Ok(())
    }

    /// Replaces this tensor with the root's (`dist.broadcast(t, src=root)`).
    pub fn broadcast_(&mut self, comm: &Communicator, root: usize) -> Result<()> {
        self.check_comm("broadcast_", comm)?;
        let (exec, buf) = self.exclusive_mut()?;
        comm.broadcast_in_place(buf, root, exec.stream())?;
        Ok(())
    }

    /// Reduces every rank's tensor into the root's, in place (`dist.reduce(t, dst=root, op)`).
    /// Only the root's value is defined afterwards, as in PyTorch (NCCL may use the others as
    /// scratch).
    pub fn reduce_(&mut self, comm: &Communicator, op: ReduceOp, root: usize) -> Result<()> {
        self.check_comm("reduce_", comm)?;
        let (exec, buf) = self.exclusive_mut()?;
        comm.reduce_in_place(buf, op, root, exec.stream())?;
        Ok(())
    }

    /// Every rank's tensor, stacked: a new tensor of shape `[size, ..shape]` whose slice `r` is
    /// rank `r`'s (`dist.all_gather_into_tensor`).
    pub fn all_gather(&self, comm: &Communicator) -> Result<Tensor<T>> {
        const OP: &str = "all_gather";
        self.check_comm(OP, comm)?;
        let src = self.contiguous()?;
        let view = src.dense()?;
        let n = src.numel();
        let mut shape = vec![comm.size()];
        shape.extend_from_slice(src.shape());
        let total = n
            .checked_mul(comm.size())
            .ok_or_else(|| TensorError::SizeOverflow {
                op: OP,
                shape: shape.clone(),
            })?;
        let exec = src.exec()?;
        // SAFETY: the all-gather writes all `n × size` elements of `out` (each rank's chunk) or
        // fails, dropping the buffer unread.
        let storage = unsafe {
            exec.storage_with(total, |out| {
                comm.all_gather(&view, out, exec.stream())?;
                Ok(())
            })?
        };
        Tensor::from_storage(storage, &shape)
    }

    /// [`Tensor::all_gather`] in place, over a flat buffer of `size` equal parts (row-major):
    /// this rank's own part `rank` is what it contributes, and afterwards part `r` is rank
    /// `r`'s everywhere (`ncclAllGather` with the send buffer inside the receive buffer, as
    /// ZeRO-1 gathers a flat parameter buffer). The element count must divide by the number of
    /// ranks. In place when [`Tensor::is_exclusive`] (a private copy first otherwise).
    pub fn all_gather_in_place_(&mut self, comm: &Communicator) -> Result<()> {
        const OP: &str = "all_gather_in_place_";
        self.check_comm(OP, comm)?;
        let size = comm.size();
        if size == 0 || self.numel() % size != 0 {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: vec![size],
                why: format!(
                    "{} elements do not split into {size} equal parts, one per rank",
                    self.numel()
                ),
            });
        }
        let (exec, buf) = self.exclusive_mut()?;
        comm.all_gather_in_place(buf, exec.stream())?;
        Ok(())
    }

    /// Reduces every rank's tensor and gives rank `r` the `r`-th of `size` equal parts along the
    /// first dimension (`dist.reduce_scatter_tensor`): shape `[d0 / size, ..]`. The first
    /// dimension must divide by the number of ranks.
    pub fn reduce_scatter(&self, comm: &Communicator, op: ReduceOp) -> Result<Tensor<T>> {
        const OP: &str = "reduce_scatter";
        self.check_comm(OP, comm)?;
        let size = comm.size();
        let d0 = self.shape().first().copied().unwrap_or(1);
        if d0 % size != 0 {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: vec![size],
                why: format!(
                    "the first dimension ({d0}) must split into {size} equal parts, one per rank"
                ),
            });
        }
        let src = self.contiguous()?;
        let view = src.dense()?;
        let mut shape = src.shape().to_vec();
        if let Some(first) = shape.first_mut() {
            *first /= size;
        }
        let n = src.numel() / size;
        let exec = src.exec()?;
        // SAFETY: the reduce-scatter writes all `n` elements of `out` or fails, dropping it.
        let storage = unsafe {
            exec.storage_with(n, |out| {
                comm.reduce_scatter(&view, out, op, exec.stream())?;
                Ok(())
            })?
        };
        Tensor::from_storage(storage, &shape)
    }

    /// Sends this tensor to rank `peer` (`dist.send`); `peer` must post a [`Tensor::recv_`] of
    /// the same element count. Between two ranks that both send and receive, use a
    /// `cuda_stack_nccl::Group` on the slices instead.
    pub fn send(&self, comm: &Communicator, peer: usize) -> Result<()> {
        self.check_comm("send", comm)?;
        let src = self.contiguous()?;
        let view = src.dense()?;
        let exec = src.exec()?;
        comm.send(&view, peer, exec.stream())?;
        Ok(())
    }

    /// Receives this tensor's values from rank `peer`, in place (`dist.recv`).
    pub fn recv_(&mut self, comm: &Communicator, peer: usize) -> Result<()> {
        self.check_comm("recv_", comm)?;
        let (exec, buf) = self.exclusive_mut()?;
        comm.recv(buf, peer, exec.stream())?;
        Ok(())
    }
}
