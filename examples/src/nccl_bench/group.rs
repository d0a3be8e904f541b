//! The group layout: this process drives every rank from one thread, each iteration one
//! `cuda_stack_nccl::Group` with one operation per rank (as `nccl-tests` runs by default). The
//! time of a size is the slowest rank's, between events on each rank's stream.

use super::{Op, Plan, Res, Row};
use cuda_stack_driver::{DeviceBuffer, Event, Stream};
use cuda_stack_nccl::{CommConfig, CommGroup, Group, ReduceOp};

/// One rank's stream, buffers and events.
struct Rank {
    stream: Stream,
    send: DeviceBuffer<f32>,
    recv: DeviceBuffer<f32>,
    start: Event,
    end: Event,
}

/// Queues one iteration of `op` with `send`/`recv` elements on every rank (one group).
fn once(op: Op, comms: &CommGroup, ranks: &mut [Rank], send: usize, recv: usize) -> Res<()> {
    // The views first: the group borrows them until it ends.
    let mut views = ranks
        .iter_mut()
        .map(|r| {
            let Rank {
                stream,
                send: sb,
                recv: rb,
                ..
            } = r;
            Ok((&*stream, sb.slice(0..send)?, rb.slice_mut(0..recv)?))
        })
        .collect::<cuda_stack_driver::Result<Vec<_>>>()?;
    let mut g = Group::new()?;
    for (c, (s, sv, rv)) in comms.iter().zip(views.iter_mut()) {
        match op {
            Op::AllReduce => g.all_reduce_in_place(c, &mut **rv, ReduceOp::Sum, s)?,
            Op::AllGather => g.all_gather(c, &**sv, &mut **rv, s)?,
            Op::ReduceScatter => g.reduce_scatter(c, &**sv, &mut **rv, ReduceOp::Sum, s)?,
            Op::Broadcast => g.broadcast_in_place(c, &mut **rv, 0, s)?,
        }
    }
    g.end()?;
    Ok(())
}

/// Runs `op` once on rank-dependent data and checks every rank's result against the CPU.
fn check(op: Op, comms: &CommGroup, ranks: &mut [Rank], bytes: usize) -> Res<()> {
    let n = ranks.len();
    let Some((send, recv, _)) = op.counts(bytes, n) else {
        return Ok(());
    };
    for (i, r) in ranks.iter_mut().enumerate() {
        let v = vec![(i + 1) as f32; send];
        let w = vec![(i + 1) as f32; recv];
        r.stream.memcpy_htod(&v, &mut r.send.slice_mut(0..send)?)?;
        r.stream.memcpy_htod(&w, &mut r.recv.slice_mut(0..recv)?)?;
    }
    once(op, comms, ranks, send, recv)?;
    for (i, r) in ranks.iter().enumerate() {
        let got = r.stream.clone_dtoh(&r.recv.slice(0..recv)?)?;
        op.check_received(&format!("rank {i}"), &got, send, n)?;
    }
    Ok(())
}

/// GPU µs per iteration of `op`: the slowest rank's time between its events.
fn time(
    plan: &Plan,
    op: Op,
    comms: &CommGroup,
    ranks: &mut [Rank],
    (send, recv): (usize, usize),
    iters: usize,
) -> Res<f64> {
    for _ in 0..plan.warmup() {
        once(op, comms, ranks, send, recv)?;
    }
    for r in ranks.iter() {
        r.stream.synchronize()?;
    }
    for r in ranks.iter() {
        r.start.record(&r.stream)?;
    }
    for _ in 0..iters {
        once(op, comms, ranks, send, recv)?;
    }
    for r in ranks.iter() {
        r.end.record(&r.stream)?;
    }
    let mut worst: f64 = 0.0;
    for (c, r) in comms.iter().zip(ranks.iter()) {
        r.end.synchronize()?;
        c.check()?;
        worst = worst.max(r.start.elapsed(&r.end)?.as_secs_f64());
    }
    Ok(worst / iters as f64 * 1e6)
}

/// The sweep of `plan` on `n` GPUs driven from this thread: rows in `plan`'s order.
pub fn run(plan: &Plan, n: usize) -> Res<Vec<Row>> {
    let devices: Vec<usize> = (0..n).collect();
    let config = CommConfig::with_timeout(Some(plan.timeout));
    let comms = if plan.blocking {
        CommGroup::init_all(&devices, &config)?
    } else {
        CommGroup::new(&devices, &config)?
    };
    let elems = plan.buffer_elems(n);
    let mut ranks = comms
        .iter()
        .map(|cm| -> Res<Rank> {
            let stream = cm.context().new_stream()?;
            Ok(Rank {
                send: stream.alloc_zeros::<f32>(elems)?,
                recv: stream.alloc_zeros::<f32>(elems)?,
                start: Event::new(cm.context(), true)?,
                end: Event::new(cm.context(), true)?,
                stream,
            })
        })
        .collect::<Res<Vec<_>>>()?;
    let mut rows = Vec::new();
    for &op in &plan.ops {
        check(op, &comms, &mut ranks, plan.max.min(1 << 20))?;
        check(op, &comms, &mut ranks, 4 * n)?;
        for bytes in plan.sizes() {
            let Some((send, recv, size)) = op.counts(bytes, n) else {
                continue;
            };
            let iters = plan.iterations(bytes);
            let us = time(plan, op, &comms, &mut ranks, (send, recv), iters)?;
            rows.push(Row {
                op,
                bytes,
                size,
                send,
                recv,
                iters,
                us,
            });
        }
    }
    Ok(rows)
}
