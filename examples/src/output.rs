//! Program output: text for people unless `--json`, then one JSON document at the end.

use serde_json::Value;

/// Prints its `println!`-style arguments unless the first argument (`--json`) is true; with
/// `--json` a program prints only its JSON summary.
///
/// ```
/// let json = false;
/// cuda_examples::say!(json, "{} MiB", 16);
/// ```
#[macro_export]
macro_rules! say {
    ($json:expr, $($t:tt)*) => { if !$json { println!($($t)*); } };
}

/// Text output unless `--json`, then one JSON document (the fields [`Out::put`] collected) at the
/// end, printed by [`Out::finish`].
#[derive(Debug, Default)]
pub struct Out {
    json: bool,
    doc: serde_json::Map<String, Value>,
}

impl Out {
    /// Output for a program run with `--json` (`json = true`) or without.
    pub fn new(json: bool) -> Out {
        Out {
            json,
            doc: Default::default(),
        }
    }

    /// Whether the program runs with `--json`.
    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Prints `s` as a line, unless `--json`.
    pub fn say(&self, s: impl AsRef<str>) {
        if !self.json {
            println!("{}", s.as_ref());
        }
    }

    /// Sets field `k` of the JSON document (replacing an earlier value).
    pub fn put(&mut self, k: &str, v: Value) {
        self.doc.insert(k.to_string(), v);
    }

    /// Prints the JSON document on one line, if `--json`.
    pub fn finish(self) {
        if self.json {
            println!("{}", Value::Object(self.doc));
        }
    }

    /// The JSON document collected so far.
    pub fn document(&self) -> &serde_json::Map<String, Value> {
        &self.doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn put_collects_fields_and_replaces() {
        let mut out = Out::new(true);
        assert!(out.is_json());
        out.put("n", json!(1));
        out.put("n", json!(2));
        out.put("name", json!("x"));
        assert_eq!(
            Value::Object(out.document().clone()),
            json!({"n": 2, "name": "x"})
        );
    }
}
