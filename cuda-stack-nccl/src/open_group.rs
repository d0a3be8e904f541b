//! Whether a [`Group`](crate::Group) is open on this thread. NCCL's group state belongs to the
//! thread: while a group is open, every NCCL call on the thread that does not go through the
//! group is refused (NCCL would defer it to the group's end, after its borrows had ended).

use crate::{Error, Result};
use std::cell::Cell;

thread_local! {
    /// Whether a [`Group`](crate::Group) is open on this thread (or was leaked here).
    static OPEN: Cell<bool> = const { Cell::new(false) };
}

/// [`Error::GroupOpen`] if a group is open on this thread.
pub(crate) fn refuse_if_open(what: &'static str) -> Result<()> {
    if OPEN.with(Cell::get) {
        Err(Error::GroupOpen { what })
    } else {
        Ok(())
    }
}

/// Notes that this thread's group opened (`ncclGroupStart`) or ended (`ncclGroupEnd`).
pub(crate) fn set_open(open: bool) {
    OPEN.with(|o| o.set(open));
}
