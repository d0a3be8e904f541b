//! The environment a build reads, and the record of which variables it read (each becomes a
//! `cargo:rerun-if-env-changed` line).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::sync::Mutex;

type Lookup = Box<dyn Fn(&str) -> Option<OsString> + Send + Sync>;

/// Where variables come from: the process environment, or a function (tests).
pub(crate) struct Env {
    lookup: Lookup,
    read: Mutex<BTreeSet<String>>,
    is_process: bool,
}

impl Env {
    /// The process environment.
    pub fn process() -> Env {
        Env {
            lookup: Box::new(|k| std::env::var_os(k)),
            read: Mutex::new(BTreeSet::new()),
            is_process: true,
        }
    }

    /// Variables from `f` only.
    pub fn from_fn(f: impl Fn(&str) -> Option<OsString> + Send + Sync + 'static) -> Env {
        Env {
            lookup: Box::new(f),
            read: Mutex::new(BTreeSet::new()),
            is_process: false,
        }
    }

    /// Whether this is the process environment (only then can the `cc` crate, which reads the
    /// process environment itself, be asked).
    pub fn is_process(&self) -> bool {
        self.is_process
    }

    /// Reads `key`, remembering that it was read.
    pub fn get(&self, key: &str) -> Option<OsString> {
        self.note_read(key);
        (self.lookup)(key)
    }

    /// Reads `key` as UTF-8 text.
    pub fn get_str(&self, key: &str) -> Option<String> {
        self.get(key).and_then(|v| v.into_string().ok())
    }

    /// Records `key` as read (for variables another crate reads on our behalf).
    pub fn note_read(&self, key: &str) {
        self.read
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_string());
    }

    /// Every variable read so far, sorted.
    pub fn vars_read(&self) -> Vec<String> {
        self.read
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}
