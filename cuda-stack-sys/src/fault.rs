//! Fault injection for the checked-call stratum (cargo feature `fault-injection`).
//!
//! [`inject`] arms a rule: the `nth` call (counting from 1, from the moment the rule is armed) of
//! the named entry point, **on the calling thread**, does not reach the library and returns
//! `status` instead. Rules are per thread so that tests running in parallel do not disturb each
//! other; a rule fires once and is then removed. The feature is off by default, and when off none
//! of this is compiled.

use std::cell::RefCell;

#[derive(Debug)]
struct Rule {
    call: String,
    remaining: u32,
    status: u32,
}

thread_local! {
    static RULES: RefCell<Vec<Rule>> = const { RefCell::new(Vec::new()) };
}

/// Makes the `nth` next call of `call` on this thread return `status` (a raw `CUresult`,
/// `nvrtcResult`, `cublasStatus_t` or `ncclResult_t` value) without calling the library. `nth` of 0 is treated as 1.
pub fn inject(call: &str, nth: u32, status: u32) {
    RULES.with(|r| {
        r.borrow_mut().push(Rule {
            call: call.to_string(),
            remaining: nth.max(1),
            status,
        })
    });
}

/// Removes every rule armed on this thread.
pub fn clear() {
    RULES.with(|r| r.borrow_mut().clear());
}

/// Counts a call of `call`; returns the status to inject if a rule fires now.
pub(crate) fn intercept(call: &str) -> Option<u32> {
    RULES.with(|r| {
        let mut rules = r.borrow_mut();
        let mut fired = None;
        for (i, rule) in rules.iter_mut().enumerate() {
            if rule.call == call {
                rule.remaining -= 1;
                if rule.remaining == 0 && fired.is_none() {
                    fired = Some((i, rule.status));
                }
            }
        }
        fired.map(|(i, status)| {
            rules.remove(i);
            status
        })
    })
}
