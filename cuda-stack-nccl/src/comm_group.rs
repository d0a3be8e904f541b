//! [`CommGroup`]: the communicators of several GPUs of one process, made together.

use crate::comm::{finish_init, to_int, Communicator};
use crate::config::CommConfig;
use crate::raw_comm::RawComm;
use crate::teardown::{self, Teardown};
use crate::{env, open_group, Error, Result, UniqueId};
use cuda_stack_driver::{Context, Device};
use cuda_stack_sys::nccl_types::{ncclComm_t, ncclResult_t};
use cuda_stack_sys::Nccl;
use std::ops::Deref;

/// One communicator per GPU of this process, rank `i` on `devices[i]`: NCCL's
/// `ncclCommInitAll`. Derefs to the slice of [`Communicator`]s; one thread can drive them all
/// with a [`crate::Group`], or each can go to its own thread ([`CommGroup::into_comms`]; with
/// one thread per GPU, each thread calls its own communicator's methods and no group is needed).
///
/// Before the communicators are made, peer access is enabled between every pair of their GPUs
/// that supports it, both ways ([`Context::enable_peer_access`]): ranks in one process may read
/// each other's buffers directly, and this stack's buffers come from memory pools that are
/// accessible to peers only when asked.
#[derive(Debug)]
pub struct CommGroup {
    comms: Vec<Communicator>,
}

impl Deref for CommGroup {
    type Target = [Communicator];
    fn deref(&self) -> &[Communicator] {
        &self.comms
    }
}

impl CommGroup {
    /// Non-blocking communicators for `devices` (rank `i` on `devices[i]`): what
    /// `ncclCommInitAll` does — one unique id, then `ncclCommInitRank` for every device inside
    /// one group — with `ncclCommInitRankConfig` and this crate's config, so initialisation and
    /// every later call are bounded by `config.timeout` (see [`Communicator`]). With
    /// [`CommConfig::blocking`] the communicators are blocking (every rank is in this process,
    /// so their initialisation cannot wait on a missing peer).
    pub fn new(devices: &[usize], config: &CommConfig) -> Result<CommGroup> {
        let (nccl, ctxs) = prepare("CommGroup::new", devices)?;
        let id = UniqueId::new()?;
        let n = devices.len();
        let name = config
            .name
            .as_deref()
            .map(|s| std::ffi::CString::new(s.replace('\0', " ")).unwrap_or_default());
        let mut cfgs: Vec<_> = (0..n).map(|_| config.raw(name.as_deref())).collect();
        let mut raws: Vec<ncclComm_t> = vec![std::ptr::null_mut(); n];
        // SAFETY: no arguments; ended below on this thread on every path.
        unsafe { nccl.ncclGroupStart()? };
        let mut first: Option<cuda_stack_sys::NcclError> = None;
        for (rank, ctx) in ctxs.iter().enumerate() {
            if let Err(e) = ctx.bind() {
                first.get_or_insert(cuda_stack_sys::NcclError::Call {
                    call: "ncclCommInitRankConfig",
                    code: ncclResult_t::ncclUnhandledCudaError,
                    name: "ncclUnhandledCudaError".into(),
                    description: format!(
                        "binding device {}'s context: {e}",
                        ctx.device().ordinal()
                    ),
                });
                break;
            }
            // SAFETY: out-pointer into `raws` and a config in `cfgs`, both alive (and not moved)
            // until every communicator is ready below; NCCL uses the device of the context bound
            // just above; rank < n.
            let r = unsafe {
                nccl.ncclCommInitRankConfig(
                    &mut raws[rank],
                    to_int(n)?,
                    id.raw,
                    to_int(rank)?,
                    &mut cfgs[rank],
                )
            };
            if let Err(e) = r {
                if e.code() != Some(ncclResult_t::ncclInProgress) {
                    first.get_or_insert(e);
                }
            }
        }
        // SAFETY: ends the group started above, on this thread.
        let ended = unsafe { nccl.ncclGroupEnd() };
        if let Err(e) = ended {
            if e.code() != Some(ncclResult_t::ncclInProgress) {
                first.get_or_insert(e);
            }
        }
        if let Some(e) = first {
            for (raw, ctx) in raws.iter().zip(&ctxs) {
                if !raw.is_null() {
                    teardown::spawn(nccl, ctx.clone(), RawComm(*raw), Teardown::Abort);
                }
            }
            return Err(e.into());
        }
        let comms: Vec<Communicator> = raws
            .iter()
            .zip(&ctxs)
            .enumerate()
            .map(|(rank, (raw, ctx))| {
                Communicator::wrap(nccl, ctx, *raw, rank, n, config.blocking, config.timeout)
            })
            .collect();
        let mut ready = Ok(());
        for c in &comms {
            let mut state = c.inner.lock();
            if let Err(e) = c
                .inner
                .wait_ready(&mut state, "communicator initialisation")
            {
                ready = Err(e);
                break;
            }
        }
        if let Err(e) = ready {
            // Abort every rank rather than leave the others finalizing against a dead one.
            for c in &comms {
                let _ = c.abort();
            }
            return Err(e);
        }
        drop(cfgs);
        Ok(CommGroup { comms })
    }

    /// [`CommGroup::new`] for every GPU of the process.
    pub fn all(config: &CommConfig) -> Result<CommGroup> {
        let n = Device::count()?;
        CommGroup::new(&(0..n).collect::<Vec<_>>(), config)
    }

    /// The communicators as `ncclCommInitAll` itself makes them: **blocking** NCCL
    /// communicators (an NCCL call may block the host inside NCCL, so initialisation and host
    /// waits are not bounded by a timeout; operations that hang on the GPU still are, by the
    /// watchdog, with `config.timeout`). [`CommGroup::new`] is the same without the blocking.
    pub fn init_all(devices: &[usize], config: &CommConfig) -> Result<CommGroup> {
        let (nccl, ctxs) = prepare("CommGroup::init_all", devices)?;
        let n = devices.len();
        let list = devices
            .iter()
            .map(|&d| to_int(d))
            .collect::<Result<Vec<i32>>>()?;
        let mut raws: Vec<ncclComm_t> = vec![std::ptr::null_mut(); n];
        // SAFETY: `raws` has room for `n` handles and `list` holds `n` device ordinals.
        let called = unsafe { nccl.ncclCommInitAll(raws.as_mut_ptr(), to_int(n)?, list.as_ptr()) };
        if let Err(e) = called {
            return Err(e.into());
        }
        let comms = raws
            .iter()
            .zip(&ctxs)
            .enumerate()
            .map(|(rank, (raw, ctx))| finish_init(nccl, ctx, *raw, rank, n, true, config, Ok(())))
            .collect::<Result<Vec<_>>>()?;
        Ok(CommGroup { comms })
    }

    /// The communicators, rank order.
    pub fn comms(&self) -> &[Communicator] {
        &self.comms
    }

    /// The communicators, to hand one to each thread.
    pub fn into_comms(mut self) -> Vec<Communicator> {
        std::mem::take(&mut self.comms)
    }
}

impl Drop for CommGroup {
    /// Ends every rank nobody else holds at once (each on its own teardown thread, so their
    /// finalizes meet), then waits for them, at most 5 s in all.
    fn drop(&mut self) {
        let mut pending = Vec::new();
        for c in self.comms.drain(..) {
            if std::sync::Arc::strong_count(&c.inner) == 1 {
                pending.extend(c.inner.start_teardown());
            }
        }
        let deadline = std::time::Instant::now() + teardown::DROP_GRACE;
        for done in pending {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let _ = done.recv_timeout(left);
        }
    }
}

/// The checks and set-up every constructor shares: NVLS off, no group open, a non-empty list of
/// distinct existing devices, NCCL loaded, contexts retained and peer access enabled.
fn prepare(what: &'static str, devices: &[usize]) -> Result<(&'static Nccl, Vec<Context>)> {
    env::check_nvls_disabled()?;
    open_group::refuse_if_open(what)?;
    if devices.is_empty() {
        return Err(Error::Invalid {
            what,
            problem: "no devices given".into(),
        });
    }
    let count = Device::count()?;
    for (i, &d) in devices.iter().enumerate() {
        if d >= count {
            return Err(Error::Invalid {
                what,
                problem: format!("device {d} does not exist (this machine has {count})"),
            });
        }
        if devices[..i].contains(&d) {
            return Err(Error::Invalid {
                what,
                problem: format!(
                    "device {d} is listed twice; NCCL allows one rank per GPU in a communicator"
                ),
            });
        }
    }
    let nccl = Nccl::get()?;
    let ctxs = devices
        .iter()
        .map(|&d| Context::new(d))
        .collect::<cuda_stack_driver::Result<Vec<_>>>()?;
    enable_peer_access(&ctxs)?;
    Ok((nccl, ctxs))
}

/// Enables peer access between every pair of `ctxs` whose devices support it, both ways.
pub fn enable_peer_access(ctxs: &[Context]) -> Result<()> {
    for a in ctxs {
        for b in ctxs {
            if !a.same_as(b) && a.device().can_access_peer(&b.device())? {
                a.enable_peer_access(b)?;
            }
        }
    }
    Ok(())
}
