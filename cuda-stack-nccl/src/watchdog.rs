//! The process-wide watchdog: one thread that looks at every communicator with a timeout every
//! [`WATCHDOG_PERIOD`], and aborts those NCCL reports broken or whose oldest operation has not
//! finished on the GPU within the timeout (see [`crate::Communicator`]).

use crate::comm::CommInner;
use std::sync::{Arc, Mutex, Once, Weak};
use std::time::Duration;

/// How often the watchdog looks.
pub const WATCHDOG_PERIOD: Duration = Duration::from_millis(50);

static WATCHED: Mutex<Vec<Weak<CommInner>>> = Mutex::new(Vec::new());
static START: Once = Once::new();

/// Adds a communicator to the watch (held weakly: the watch never keeps one alive).
pub(crate) fn register(comm: &Arc<CommInner>) {
    {
        let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
        w.retain(|c| c.strong_count() > 0);
        w.push(Arc::downgrade(comm));
    }
    START.call_once(|| {
        if let Err(e) = std::thread::Builder::new()
            .name("cuda-stack-nccl-watchdog".into())
            .spawn(run)
        {
            log::error!(
                "cuda-stack-nccl: cannot start the watchdog thread ({e}): only waits on the host are \
                 bounded by the timeout, a collective hung on the GPU is not"
            );
        }
    });
}

fn run() {
    loop {
        std::thread::sleep(WATCHDOG_PERIOD);
        let live: Vec<Arc<CommInner>> = {
            let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
            w.retain(|c| c.strong_count() > 0);
            w.iter().filter_map(Weak::upgrade).collect()
        };
        for c in &live {
            c.watchdog_check();
        }
    }
}
