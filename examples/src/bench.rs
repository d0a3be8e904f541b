//! Benchmark plumbing: medians, a plain-text table, and PyTorch's figures.

use std::collections::HashMap;

/// The median of `v` (NaN when empty).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// A text table printed with aligned columns.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| h.to_string()).collect()],
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: &[String]) {
        self.rows.push(cells.to_vec());
    }

    /// The table as text, columns padded, a rule under the header.
    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for (i, r) in self.rows.iter().enumerate() {
            let line: Vec<String> = (0..cols)
                .map(|c| {
                    let s = r.get(c).map_or("", String::as_str);
                    format!("{s:<w$}", w = width[c])
                })
                .collect();
            out += line.join(" | ").trim_end();
            out.push('\n');
            if i == 0 {
                let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
                out += &rule.join("-|-");
                out.push('\n');
            }
        }
        out
    }

    /// Prints the table followed by a blank line.
    pub fn print(&self) {
        println!("{}", self.render());
    }
}

/// Numbers in `s`, in order.
fn numbers(s: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in s.chars().chain(std::iter::once(' ')) {
        if ch.is_ascii_digit() || ch == '.' || (ch == '-' && cur.is_empty()) {
            cur.push(ch);
        } else {
            if let Ok(v) = cur.parse::<f64>() {
                out.push(v);
            }
            cur.clear();
        }
    }
    out
}

/// Reads the output of `anchors/torch_baseline.py` into named figures:
/// `d2d`, `add` (GB/s), `add_ms`, `sum`, `sum_ms`, `transpose`, `strided_N`, `sgemm_N`
/// (TFLOP/s), `tf32`, `h2d_pageable`, `h2d_pinned`, `d2h_pinned` (GB/s), `eager_submit`,
/// `eager_total`, `graph_per_op` (µs), `relu_unfused_us`, `relu_fwd_bwd_us`, `attention_ms`,
/// `sdpa_ms`, `mlp_us`, and `softmax_ms`/`softmax` (GB/s) when present.
pub fn parse_torch_baseline(text: &str) -> HashMap<String, f64> {
    let mut m = HashMap::new();
    for line in text.lines() {
        let Some((head, tail)) = line.split_once(':') else {
            continue;
        };
        let n = numbers(tail);
        let first = n.first().copied();
        let put = |m: &mut HashMap<String, f64>, k: &str, v: Option<f64>| {
            if let Some(v) = v {
                m.insert(k.to_string(), v);
            }
        };
        let head = head.trim();
        if head.starts_with("torch d2d copy") {
            put(&mut m, "d2d", first);
        } else if head.starts_with("torch add ") {
            put(&mut m, "add_ms", first);
            put(&mut m, "add", n.get(1).copied());
        } else if head.starts_with("torch sum ") {
            put(&mut m, "sum_ms", first);
            put(&mut m, "sum", n.get(1).copied());
        } else if head.starts_with("torch softmax") {
            put(&mut m, "softmax_ms", first);
            put(&mut m, "softmax", n.get(1).copied());
        } else if head.starts_with("torch transpose") {
            put(&mut m, "transpose", first);
        } else if let Some(s) = head.strip_prefix("torch strided read stride=") {
            put(&mut m, &format!("strided_{}", s.trim()), first);
        } else if let Some(s) = head.strip_prefix("torch sgemm fp32 ") {
            put(&mut m, &format!("sgemm_{}", s.trim()), first);
        } else if head.starts_with("torch tf32") {
            put(&mut m, "tf32", first);
        } else if head.starts_with("torch H2D pageable") {
            put(&mut m, "h2d_pageable", first);
        } else if head.starts_with("torch H2D pinned") {
            put(&mut m, "h2d_pinned", first);
        } else if head.starts_with("torch D2H pinned") {
            put(&mut m, "d2h_pinned", first);
        } else if head.starts_with("torch eager tiny add_") {
            put(&mut m, "eager_submit", first);
            put(&mut m, "eager_total", n.get(1).copied());
        } else if head.starts_with("torch cuda-graph") {
            // "torch cuda-graph 100 tiny adds: X us/op"
            put(&mut m, "graph_per_op", first);
        } else if head.starts_with("torch unfused relu") {
            put(&mut m, "relu_unfused_us", first);
        } else if head.starts_with("torch relu(x*s+b) fwd+bwd") {
            put(&mut m, "relu_fwd_bwd_us", first);
        } else if head.starts_with("torch attention chain") {
            put(&mut m, "attention_ms", first);
        } else if head.starts_with("torch sdpa") {
            put(&mut m, "sdpa_ms", first);
        } else if head.starts_with("torch tiny MLP") {
            put(&mut m, "mlp_us", first);
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_baseline_script_output() {
        let text = "torch 2.11.0 NVIDIA H200 SMs 132\n\
            torch d2d copy 2^28 f32: 4258.1 GB/s\n\
            torch add 2^28 f32: 0.739 ms 4359.0 GB/s\n\
            torch strided read stride=8: useful 931.2 GB/s\n\
            torch sgemm fp32 4096: 51.2 TFLOP/s\n\
            torch H2D pageable 256MiB: 10.1 GB/s\n\
            torch eager tiny add_: submit 5.10 us/op, total 5.33 us/op\n\
            torch cuda-graph 100 tiny adds: 0.92 us/op\n";
        let m = parse_torch_baseline(text);
        assert_eq!(m["d2d"], 4258.1);
        assert_eq!((m["add_ms"], m["add"]), (0.739, 4359.0));
        assert_eq!(m["strided_8"], 931.2);
        assert_eq!(m["sgemm_4096"], 51.2);
        assert_eq!(m["h2d_pageable"], 10.1);
        assert_eq!((m["eager_submit"], m["eager_total"]), (5.10, 5.33));
        assert_eq!(m["graph_per_op"], 0.92);
    }

    #[test]
    fn median_and_table() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        let mut t = Table::new(&["a", "bb"]);
        t.row(&["xyz".into(), "1".into()]);
        assert_eq!(t.render(), "a   | bb\n----|---\nxyz | 1\n");
    }
}
