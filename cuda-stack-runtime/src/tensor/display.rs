//! `Display` like PyTorch's `repr` (`torch/_tensor_str.py`, default print options: precision
//! 4, threshold 1000, edge items 3, line width 80):
//!
//! ```text
//! tensor([[1., 2.],
//!         [3., 4.]], device='cuda:0')
//! tensor([0.5000, 0.2500], device='cuda:0', dtype=torch.float16)
//! tensor([   0,    1,    2,  ..., 1997, 1998, 1999], device='cuda:0', dtype=torch.int32)
//! ```
//!
//! Floats print with 4 decimals, or without decimals ("1.") when every finite value is an
//! integer, or in scientific notation when the finite non-zero magnitudes span more than 1000×,
//! exceed 1e8 or (non-integers) go below 1e-4; all values are right-aligned to one width. Tensors
//! with more than 1000 elements show the first and last 3 entries of each dimension with `...`
//! between. `dtype=` is shown for dtypes other than float32 and int64, as PyTorch does.
//!
//! The formatting is host code over a copy of the data ([`format_tensor`]), unit-tested on the
//! CPU against strings printed by PyTorch.

use super::{DType, Tensor, TensorElement};
use std::fmt;

const PRECISION: usize = 4;
const THRESHOLD: usize = 1000;
const EDGE: usize = 3;
const LINE_WIDTH: usize = 80;

/// One element as the printer sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value {
    Float(f64),
    Int(i64),
}

fn value<T: TensorElement>(v: T) -> Value {
    match v.to_i64() {
        Some(i) => Value::Int(i),
        None => Value::Float(v.to_f64()),
    }
}

/// Python's `"{:.{p}e}"`: mantissa, `e`, sign, at least two exponent digits.
fn sci(v: f64, precision: usize) -> String {
    if !v.is_finite() {
        return nonfinite(v);
    }
    let s = format!("{v:.precision$e}");
    match s.split_once('e') {
        Some((mant, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mant}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// Python's spelling of inf and nan.
fn nonfinite(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

/// Python's `"{:.{p}f}"`.
fn fixed(v: f64, precision: usize) -> String {
    if v.is_finite() {
        format!("{v:.precision$}")
    } else {
        nonfinite(v)
    }
}

/// PyTorch's `_Formatter`: the mode and width chosen from the values that will be shown.
struct Formatter {
    floating: bool,
    int_mode: bool,
    sci_mode: bool,
    width: usize,
}

impl Formatter {
    fn new(floating: bool, values: &[Value]) -> Formatter {
        let mut f = Formatter {
            floating,
            int_mode: true,
            sci_mode: false,
            width: 1,
        };
        if !floating {
            for v in values {
                f.width = f.width.max(f.raw(*v).len());
            }
            return f;
        }
        let finite: Vec<f64> = values
            .iter()
            .filter_map(|v| match *v {
                Value::Float(x) if x.is_finite() && x != 0.0 => Some(x),
                Value::Int(i) if i != 0 => Some(i as f64),
                _ => None,
            })
            .collect();
        if finite.is_empty() {
            return f;
        }
        let (min, max) = finite.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
            (lo.min(x.abs()), hi.max(x.abs()))
        });
        f.int_mode = finite.iter().all(|x| x.ceil() == *x);
        let ratio_or_big = max / min > 1000.0 || max > 1.0e8;
        f.sci_mode = if f.int_mode {
            ratio_or_big
        } else {
            ratio_or_big || min < 1.0e-4
        };
        for &x in &finite {
            let len = if f.sci_mode {
                sci(x, PRECISION).len()
            } else if f.int_mode {
                fixed(x, 0).len() + 1
            } else {
                fixed(x, PRECISION).len()
            };
            f.width = f.width.max(len);
        }
        f
    }

    /// The value without padding.
    fn raw(&self, v: Value) -> String {
        match v {
            Value::Int(i) if !self.floating => i.to_string(),
            Value::Int(i) => self.raw(Value::Float(i as f64)),
            Value::Float(x) if self.sci_mode => sci(x, PRECISION),
            Value::Float(x) if self.int_mode => {
                let mut s = fixed(x, 0);
                if x.is_finite() {
                    s.push('.');
                }
                s
            }
            Value::Float(x) => fixed(x, PRECISION),
        }
    }

    /// The value right-aligned to the common width.
    fn format(&self, v: Value) -> String {
        format!("{:>w$}", self.raw(v), w = self.width)
    }
}

/// Row-major sizes of the sub-blocks: `block[d] = Π shape[d+1..]`.
fn block_sizes(shape: &[usize]) -> Vec<usize> {
    let mut b = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        b[d] = b[d + 1] * shape[d + 1];
    }
    b
}

/// The indices shown along a dimension of size `n` (all, or the edges when summarising).
fn shown(n: usize, summarize: bool) -> (Vec<usize>, bool) {
    if summarize && n > 2 * EDGE {
        ((0..EDGE).chain(n - EDGE..n).collect(), true)
    } else {
        ((0..n).collect(), false)
    }
}

/// The values the printer shows (`get_summarized_data`), in order.
fn summarized(values: &[Value], shape: &[usize], summarize: bool, out: &mut Vec<Value>) {
    let Some((&n, rest)) = shape.split_first() else {
        out.extend(values.first().copied());
        return;
    };
    let block = rest.iter().product::<usize>();
    for i in shown(n, summarize).0 {
        if let Some(sub) = values.get(i * block..(i + 1) * block) {
            summarized(sub, rest, summarize, out);
        }
    }
}

/// `_tensor_str_with_formatter`: the bracketed body of a (sub-)tensor.
fn body(
    values: &[Value],
    shape: &[usize],
    indent: usize,
    summarize: bool,
    f: &Formatter,
) -> String {
    match shape {
        [] => values.first().map_or_else(String::new, |v| f.format(*v)),
        [n] => {
            let per_line = ((LINE_WIDTH.saturating_sub(indent)) / (f.width + 2)).max(1);
            let (idx, gap) = shown(*n, summarize);
            let mut items: Vec<String> = Vec::with_capacity(idx.len() + 1);
            for (pos, i) in idx.iter().enumerate() {
                if gap && pos == EDGE {
                    items.push(" ...".into());
                }
                if let Some(v) = values.get(*i) {
                    items.push(f.format(*v));
                }
            }
            let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
            format!(
                "[{}]",
                lines.join(&format!(",\n{}", " ".repeat(indent + 1)))
            )
        }
        [n, rest @ ..] => {
            let block = block_sizes(shape)[0];
            let (idx, gap) = shown(*n, summarize);
            let mut parts: Vec<String> = Vec::with_capacity(idx.len() + 1);
            for (pos, i) in idx.iter().enumerate() {
                if gap && pos == EDGE {
                    parts.push("...".into());
                }
                if let Some(sub) = values.get(i * block..(i + 1) * block) {
                    parts.push(body(sub, rest, indent + 1, summarize, f));
                }
            }
            let sep = format!(
                ",{}{}",
                "\n".repeat(shape.len() - 1),
                " ".repeat(indent + 1)
            );
            format!("[{}]", parts.join(&sep))
        }
    }
}

/// The full `repr` of a tensor from its row-major host values.
pub(crate) fn format_tensor(
    values: &[Value],
    shape: &[usize],
    dtype: DType,
    device: usize,
) -> String {
    const PREFIX: &str = "tensor(";
    let indent = PREFIX.len();
    let numel: usize = shape.iter().product();
    let mut suffixes = vec![format!("device='cuda:{device}'")];
    let text = if numel == 0 {
        if shape.len() != 1 {
            let dims: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
            suffixes.push(format!("size=({})", dims.join(", ")));
        }
        if dtype != DType::F32 {
            suffixes.push(format!("dtype={}", dtype.torch_name()));
        }
        "[]".to_string()
    } else {
        if !matches!(dtype, DType::F32 | DType::I64) {
            suffixes.push(format!("dtype={}", dtype.torch_name()));
        }
        let summarize = numel > THRESHOLD;
        let mut shown_values = Vec::new();
        summarized(values, shape, summarize, &mut shown_values);
        let f = Formatter::new(dtype.is_float(), &shown_values);
        body(values, shape, indent, summarize, &f)
    };
    // `_add_suffixes`.
    let mut out = format!("{PREFIX}{text}");
    let mut last_line = match out.rfind('\n') {
        Some(p) => out.len() - p + 1,
        None => out.len() + 2,
    };
    for s in suffixes {
        if last_line + s.len() + 2 > LINE_WIDTH {
            out.push_str(&format!(",\n{}{s}", " ".repeat(indent)));
            last_line = indent + s.len();
        } else {
            out.push_str(&format!(", {s}"));
            last_line += s.len() + 2;
        }
    }
    out.push(')');
    out
}

impl<T: TensorElement> fmt::Display for Tensor<T> {
    /// Copies the tensor to the host (waiting for the GPU) and prints it like PyTorch. If the
    /// copy fails, prints `tensor(<error: …>)` with the failure instead.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_vec() {
            Ok(data) => {
                let values: Vec<Value> = data.into_iter().map(value).collect();
                f.write_str(&format_tensor(
                    &values,
                    self.shape(),
                    T::DTYPE,
                    self.device(),
                ))
            }
            Err(e) => write!(
                f,
                "tensor(<error: {e}>, shape={:?}, device='cuda:{}')",
                self.shape(),
                self.device()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(v: &[f64]) -> Vec<Value> {
        v.iter().map(|&x| Value::Float(x)).collect()
    }

    fn ints(v: impl IntoIterator<Item = i64>) -> Vec<Value> {
        v.into_iter().map(Value::Int).collect()
    }

    fn f32s(v: &[f64], shape: &[usize]) -> String {
        format_tensor(&floats(v), shape, DType::F32, 0)
    }

    #[test]
    fn integers_as_floats() {
        assert_eq!(
            f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]),
            "tensor([[1., 2.],\n        [3., 4.]], device='cuda:0')"
        );
        assert_eq!(f32s(&[0.0, 0.0], &[2]), "tensor([0., 0.], device='cuda:0')");
        assert_eq!(f32s(&[-0.0], &[1]), "tensor([-0.], device='cuda:0')");
        assert_eq!(f32s(&[3.0], &[]), "tensor(3., device='cuda:0')");
        assert_eq!(
            f32s(&[1.0, 10.0, -100.0], &[3]),
            "tensor([   1.,   10., -100.], device='cuda:0')"
        );
    }

    #[test]
    fn fixed_four_decimals() {
        assert_eq!(
            f32s(&[1.5, f64::NAN, 0.25], &[3]),
            "tensor([1.5000,    nan, 0.2500], device='cuda:0')"
        );
        assert_eq!(
            f32s(&[f64::NEG_INFINITY, 2.0, f64::INFINITY], &[3]),
            "tensor([-inf, 2., inf], device='cuda:0')"
        );
    }

    #[test]
    fn scientific_when_the_range_is_wide() {
        assert_eq!(
            f32s(&[1e-5, 1.0], &[2]),
            "tensor([1.0000e-05, 1.0000e+00], device='cuda:0')"
        );
        assert_eq!(
            f32s(&[1.0, 1e9], &[2]),
            "tensor([1.0000e+00, 1.0000e+09], device='cuda:0')"
        );
        assert_eq!(sci(123456.0, 4), "1.2346e+05");
        assert_eq!(sci(-1e-100, 4), "-1.0000e-100");
    }

    #[test]
    fn dtype_suffixes_like_pytorch() {
        let v = floats(&[0.5, 0.25]);
        assert_eq!(
            format_tensor(&v, &[2], DType::F16, 1),
            "tensor([0.5000, 0.2500], device='cuda:1', dtype=torch.float16)"
        );
        assert_eq!(
            format_tensor(&ints([1, -2]), &[2], DType::I32, 0),
            "tensor([ 1, -2], device='cuda:0', dtype=torch.int32)"
        );
        assert_eq!(
            format_tensor(&ints([6]), &[], DType::I64, 0),
            "tensor(6, device='cuda:0')"
        );
        assert_eq!(
            format_tensor(&[], &[0], DType::F32, 0),
            "tensor([], device='cuda:0')"
        );
        assert_eq!(
            format_tensor(&[], &[2, 0], DType::I64, 0),
            "tensor([], device='cuda:0', size=(2, 0), dtype=torch.int64)"
        );
    }

    #[test]
    fn long_rows_wrap_at_80_columns() {
        let v: Vec<f64> = (0..30).map(f64::from).collect();
        assert_eq!(
            f32s(&v, &[30]),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n        \
             14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n        \
             28., 29.], device='cuda:0')"
        );
    }

    #[test]
    fn large_tensors_are_summarised() {
        assert_eq!(
            format_tensor(&ints(0..2000), &[2000], DType::I64, 0),
            "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], device='cuda:0')"
        );
        let v: Vec<f64> = (0..2000).map(|i| f64::from(i) + 1000.0).collect();
        assert_eq!(
            f32s(&v, &[40, 50]),
            "tensor([[1000., 1001., 1002.,  ..., 1047., 1048., 1049.],\n        \
             [1050., 1051., 1052.,  ..., 1097., 1098., 1099.],\n        \
             [1100., 1101., 1102.,  ..., 1147., 1148., 1149.],\n        \
             ...,\n        \
             [2850., 2851., 2852.,  ..., 2897., 2898., 2899.],\n        \
             [2900., 2901., 2902.,  ..., 2947., 2948., 2949.],\n        \
             [2950., 2951., 2952.,  ..., 2997., 2998., 2999.]], device='cuda:0')"
        );
        // 0 … 1999 spans more than 1000x: scientific notation, as PyTorch prints it.
        let v: Vec<f64> = (0..2000).map(f64::from).collect();
        let s = f32s(&v, &[2000]);
        assert_eq!(
            s,
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        \
             1.9990e+03], device='cuda:0')"
        );
    }

    #[test]
    fn three_dims_separate_blocks_with_a_blank_line() {
        let v: Vec<f64> = (0..8).map(f64::from).collect();
        assert_eq!(
            f32s(&v, &[2, 2, 2]),
            "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]], \
             device='cuda:0')"
        );
    }

    #[test]
    fn long_suffixes_go_to_a_new_line() {
        // `_add_suffixes` counts the last line as its length + 2 and wraps a suffix that would
        // pass 80 columns.
        let v: Vec<f64> = (0..14).map(|i| f64::from(i) + 0.5).collect();
        let s = format_tensor(&floats(&v), &[14], DType::F64, 0);
        assert!(
            s.ends_with("13.5000], device='cuda:0',\n       dtype=torch.float64)"),
            "{s}"
        );
        let v: Vec<f64> = (0..15).map(|i| f64::from(i) + 0.5).collect();
        let s = format_tensor(&floats(&v), &[15], DType::F64, 0);
        assert!(
            s.ends_with("14.5000],\n       device='cuda:0', dtype=torch.float64)"),
            "{s}"
        );
    }
}
