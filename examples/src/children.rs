//! The child processes of a one-process-per-GPU run (`dp_train`, `train_gpt --gpus N`): waited
//! for side by side against one deadline, each child's output read on a thread of its own (a full
//! pipe must never stall a child), and every child still running stopped as soon as one fails or
//! the deadline passes.

use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Why a set of children did not all finish well.
#[derive(Debug)]
pub enum ChildrenError {
    /// Child `rank` (its index) could not be waited for, or exited unsuccessfully; the others
    /// were stopped.
    Failed {
        /// The child's index.
        rank: usize,
        /// Its exit status, or the error waiting for it gave.
        why: String,
    },
    /// Not every child finished within `limit`; all were stopped.
    Timeout {
        /// The deadline the children had.
        limit: Duration,
    },
}

impl std::fmt::Display for ChildrenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildrenError::Failed { rank, why } => write!(f, "rank {rank} failed ({why})"),
            ChildrenError::Timeout { limit } => write!(
                f,
                "a rank's process did not finish within {} s (every rank was stopped)",
                limit.as_secs()
            ),
        }
    }
}

impl std::error::Error for ChildrenError {}

/// Waits for every child of `children` (a child's rank is its index) for at most `limit`: their
/// outputs in rank order once all exited successfully. At the first child that fails, or when
/// the limit passes, every child still running is stopped ([`kill`]) and the error says which.
pub fn wait_all(children: Vec<Child>, limit: Duration) -> Result<Vec<Output>, ChildrenError> {
    let n = children.len();
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    let (tx, rx) = mpsc::channel();
    for (rank, child) in children.into_iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((rank, child.wait_with_output()));
        });
    }
    drop(tx);
    let deadline = Instant::now() + limit;
    let mut outs: Vec<Option<Output>> = (0..n).map(|_| None).collect();
    for _ in 0..n {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((rank, waited)) = rx.recv_timeout(left) else {
            kill(&pids);
            return Err(ChildrenError::Timeout { limit });
        };
        let why = match waited {
            Ok(o) if o.status.success() => {
                outs[rank] = Some(o);
                continue;
            }
            Ok(o) => o.status.to_string(),
            Err(e) => format!("waiting for it: {e}"),
        };
        kill(&pids);
        return Err(ChildrenError::Failed { rank, why });
    }
    Ok(outs.into_iter().flatten().collect())
}

/// Stops processes by id (`kill PID`; for the children a run started, whose `Child` handles its
/// waiting threads own). A process that already exited is not an error.
pub fn kill(pids: &[u32]) {
    for pid in pids {
        let _ = Command::new("kill")
            .arg(pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The ids of `children`, for [`kill`] (a run that could not start every child stops those it
/// started).
pub fn ids(children: &[Child]) -> Vec<u32> {
    children.iter().map(Child::id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Child {
        Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh starts")
    }

    #[test]
    fn outputs_come_in_rank_order() {
        // Rank 0 finishes last.
        let children = vec![sh("sleep 0.3; echo zero"), sh("echo one"), sh("echo two")];
        let outs = wait_all(children, Duration::from_secs(20)).expect("all succeed");
        let text: Vec<String> = outs
            .iter()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .collect();
        assert_eq!(text, ["zero", "one", "two"]);
    }

    #[test]
    fn a_failing_rank_stops_the_others() {
        let start = Instant::now();
        let children = vec![sh("sleep 30"), sh("exit 3"), sh("sleep 30")];
        match wait_all(children, Duration::from_secs(60)) {
            Err(ChildrenError::Failed { rank, why }) => {
                assert_eq!(rank, 1);
                assert!(why.contains('3'), "{why}");
            }
            other => panic!("expected rank 1's failure, got {other:?}"),
        }
        // The sleeping ranks were stopped, not waited for.
        assert!(start.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn the_deadline_stops_every_rank() {
        let start = Instant::now();
        let children = vec![sh("echo done"), sh("sleep 30")];
        match wait_all(children, Duration::from_millis(500)) {
            Err(ChildrenError::Timeout { limit }) => assert_eq!(limit, Duration::from_millis(500)),
            other => panic!("expected the deadline, got {other:?}"),
        }
        assert!(start.elapsed() < Duration::from_secs(20));
    }
}
