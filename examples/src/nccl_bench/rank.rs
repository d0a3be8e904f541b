//! One rank with its own communicator, driven by plain `Communicator` calls on its own stream:
//! the threads and processes layouts. Every rank runs the same sequence (NCCL's contract), so
//! the same code on every rank keeps them in step.
//!
//! Per operation: a check against the CPU (at `min(max, 1 MiB)` and at one element per rank);
//! per size: warm-up calls, a barrier (a one-element all-reduce, then a synchronize), the GPU
//! time between two events around `iters` calls, and the slowest rank's time found with a
//! max-all-reduce of every rank's µs through the communicator itself (as
//! `tools/torch_nccl_bench.py` does).

use super::{Op, Plan, Res, Row};
use cuda_stack_driver::{DeviceBuffer, Event, Stream};
use cuda_stack_nccl::{Communicator, ReduceOp};

/// One rank's buffers, stream and events.
pub struct RankBench<'c> {
    comm: &'c Communicator,
    stream: Stream,
    send: DeviceBuffer<f32>,
    recv: DeviceBuffer<f32>,
    /// One f64: the barrier's and the max-reduction's buffer.
    stat: DeviceBuffer<f64>,
    start: Event,
    end: Event,
}

impl<'c> RankBench<'c> {
    /// Buffers for `plan`'s largest size on `comm`'s device, and a stream of its own.
    pub fn new(comm: &'c Communicator, plan: &Plan) -> Res<RankBench<'c>> {
        let stream = comm.context().new_stream()?;
        let elems = plan.buffer_elems(comm.size());
        Ok(RankBench {
            comm,
            send: stream.alloc_zeros::<f32>(elems)?,
            recv: stream.alloc_zeros::<f32>(elems)?,
            stat: stream.alloc_zeros::<f64>(1)?,
            start: Event::new(comm.context(), true)?,
            end: Event::new(comm.context(), true)?,
            stream,
        })
    }

    /// The receive buffer (the host-time measurement's buffer) with the stream.
    pub fn parts(&mut self) -> (&Communicator, &Stream, &mut DeviceBuffer<f32>) {
        (self.comm, &self.stream, &mut self.recv)
    }

    /// Queues one `op` with `send`/`recv` elements (all-reduce and broadcast in place on the
    /// receive buffer, broadcast from rank 0).
    fn once(&mut self, op: Op, send: usize, recv: usize) -> Res<()> {
        let RankBench {
            comm,
            stream,
            send: sb,
            recv: rb,
            ..
        } = self;
        match op {
            Op::AllReduce => {
                comm.all_reduce_in_place(&mut rb.slice_mut(0..recv)?, ReduceOp::Sum, stream)?
            }
            Op::AllGather => {
                comm.all_gather(&sb.slice(0..send)?, &mut rb.slice_mut(0..recv)?, stream)?
            }
            Op::ReduceScatter => comm.reduce_scatter(
                &sb.slice(0..send)?,
                &mut rb.slice_mut(0..recv)?,
                ReduceOp::Sum,
                stream,
            )?,
            Op::Broadcast => comm.broadcast_in_place(&mut rb.slice_mut(0..recv)?, 0, stream)?,
        }
        Ok(())
    }

    /// Waits until every rank got here: a one-element all-reduce, then a synchronize.
    pub fn barrier(&mut self) -> Res<()> {
        self.comm
            .all_reduce_in_place(&mut self.stat, ReduceOp::Sum, &self.stream)?;
        self.comm.synchronize(&self.stream)?;
        Ok(())
    }

    /// The largest of every rank's `v` (a max-all-reduce through the communicator).
    pub fn max_across(&mut self, v: f64) -> Res<f64> {
        self.stream.memcpy_htod(&[v], &mut self.stat)?;
        self.comm
            .all_reduce_in_place(&mut self.stat, ReduceOp::Max, &self.stream)?;
        self.comm.synchronize(&self.stream)?;
        let got = self.stream.clone_dtoh(&self.stat)?;
        got.first()
            .copied()
            .ok_or_else(|| "the max-all-reduce returned nothing".into())
    }

    /// Runs `op` once on rank-dependent data and checks this rank's result against the CPU.
    pub fn check(&mut self, op: Op, bytes: usize) -> Res<()> {
        let (rank, n) = (self.comm.rank(), self.comm.size());
        let Some((send, recv, _)) = op.counts(bytes, n) else {
            return Ok(());
        };
        let mine = (rank + 1) as f32;
        self.stream
            .memcpy_htod(&vec![mine; send], &mut self.send.slice_mut(0..send)?)?;
        self.stream
            .memcpy_htod(&vec![mine; recv], &mut self.recv.slice_mut(0..recv)?)?;
        self.once(op, send, recv)?;
        self.comm.synchronize(&self.stream)?;
        let got = self.stream.clone_dtoh(&self.recv.slice(0..recv)?)?;
        op.check_received(&format!("rank {rank} of {n}"), &got, send, n)
    }

    /// GPU µs per iteration of `op` at `bytes`, the slowest rank's; `None` when the size holds
    /// less than one element per rank.
    pub fn time(&mut self, plan: &Plan, op: Op, bytes: usize) -> Res<Option<Row>> {
        let Some((send, recv, size)) = op.counts(bytes, self.comm.size()) else {
            return Ok(None);
        };
        let iters = plan.iterations(bytes);
        for _ in 0..plan.warmup() {
            self.once(op, send, recv)?;
        }
        self.comm.synchronize(&self.stream)?;
        self.barrier()?;
        self.start.record(&self.stream)?;
        for _ in 0..iters {
            self.once(op, send, recv)?;
        }
        self.end.record(&self.stream)?;
        self.end.synchronize()?;
        self.comm.check()?;
        let us = self.start.elapsed(&self.end)?.as_secs_f64() * 1e6 / iters as f64;
        let us = self.max_across(us)?;
        Ok(Some(Row {
            op,
            bytes,
            size,
            send,
            recv,
            iters,
            us,
        }))
    }

    /// The whole sweep of `plan`: every op checked, then timed at every size; `emit` gets
    /// each row as it is measured (every rank gets the same rows).
    pub fn run(&mut self, plan: &Plan, emit: &mut dyn FnMut(Row)) -> Res<()> {
        let n = self.comm.size();
        for &op in &plan.ops {
            self.check(op, plan.max.min(1 << 20))?;
            self.check(op, 4 * n)?;
            for bytes in plan.sizes() {
                if let Some(row) = self.time(plan, op, bytes)? {
                    emit(row);
                }
            }
        }
        Ok(())
    }
}
