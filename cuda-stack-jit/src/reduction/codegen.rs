//! The CUDA source of one reduction specialization: the user's four expressions as device
//! functions, and two kernels built on the block/warp pattern of `kernels/cuda/reduce.cu`.
//!
//! - `NAME`: groups of `_G` threads (1, a warp of 32, or the whole block of 256) each reduce
//!   one output's elements, or one of `_P` chunks of them: every thread folds its strided share
//!   with `reduce(acc, map(inputs))` starting from `identity`, then the group combines its
//!   threads' values with shuffles (and, for a block, one pass through shared memory) in a fixed
//!   order. With `_P == 1` lane 0 applies `post_map` and writes the outputs; otherwise it writes
//!   the chunk's value to `_partial[o * _P + p]`.
//! - `NAME_finish`: one warp per output combines its `_P` partials in order and applies
//!   `post_map` (two launches, no host round trip, deterministic).
//!
//! Inputs are read at `kept_offset(o) + reduced_offset(r)`, each decomposed over the merged
//! kept and reduced dimensions (`_Dims`), so transposed, strided and broadcast views need no
//! copy.

use crate::params::Param;
use crate::prelude::PRELUDE;
use crate::source_map::{SourceBuilder, SourceMap};
use crate::types::{c_name, numpy_name};
use cuda_stack_runtime::DType;

/// A reduction specialization.
pub(crate) struct Spec<'a> {
    pub(crate) name: &'a str,
    pub(crate) inputs: &'a [Param],
    pub(crate) outputs: &'a [Param],
    /// Per input: a scalar (else a tensor).
    pub(crate) scalar: &'a [bool],
    pub(crate) dtypes: &'a [DType],
    pub(crate) placeholders: &'a [String],
    pub(crate) placeholder_types: &'a [DType],
    pub(crate) reduce_type: DType,
    pub(crate) nk: usize,
    pub(crate) nr: usize,
    pub(crate) preamble: &'a str,
    pub(crate) map_expr: &'a str,
    pub(crate) reduce_expr: &'a str,
    pub(crate) post_map_expr: &'a str,
    pub(crate) identity: &'a str,
}

/// Parameter byte sizes of `NAME` and `NAME_finish`.
pub(crate) fn param_sizes(s: &Spec<'_>) -> (Vec<usize>, Vec<usize>) {
    let mut a = Vec::new();
    for (k, &sc) in s.scalar.iter().enumerate() {
        a.push(if sc { s.dtypes[k].size() } else { 8 });
    }
    a.extend(s.outputs.iter().map(|_| 8));
    a.extend([8, 8, 8, 8, 8, 4]); // _partial, _m, _k, _P, _chunk, _G
    let tensors = s.scalar.iter().filter(|&&x| !x).count();
    if s.nk > 0 {
        a.extend(std::iter::repeat_n(8 * s.nk, 1 + tensors));
    }
    if s.nr > 0 {
        a.extend(std::iter::repeat_n(8 * s.nr, 1 + tensors));
    }
    let mut f = vec![8];
    f.extend(s.outputs.iter().map(|_| 8));
    for (k, &sc) in s.scalar.iter().enumerate() {
        if sc {
            f.push(s.dtypes[k].size());
        }
    }
    f.extend([8, 8, 8]); // _m, _k, _P
    (a, f)
}

/// Code decomposing `idx` (a `long long`) over `shape` into `off_<name>` for each tensor.
fn decompose(
    idx: &str,
    n: usize,
    shape: &str,
    prefix: &str,
    tensors: &[&str],
    indent: &str,
) -> String {
    let mut s = String::new();
    for t in tensors {
        s.push_str(&format!("{indent}long long {prefix}{t} = 0;\n"));
    }
    if n == 0 {
        return s;
    }
    s.push_str(&format!("{indent}{{\n{indent}    long long _r = {idx};\n"));
    if n > 1 {
        s.push_str(&format!(
            "#pragma unroll\n{indent}    for (int _d = {}; _d > 0; --_d) {{\n{indent}        const long long _c = _r % {shape}.v[_d];\n{indent}        _r /= {shape}.v[_d];\n",
            n - 1
        ));
        for t in tensors {
            s.push_str(&format!(
                "{indent}        {prefix}{t} += _c * {shape}_{t}.v[_d];\n"
            ));
        }
        s.push_str(&format!("{indent}    }}\n"));
    }
    for t in tensors {
        s.push_str(&format!(
            "{indent}    {prefix}{t} += _r * {shape}_{t}.v[0];\n"
        ));
    }
    s.push_str(&format!("{indent}}}\n"));
    s
}

/// The source and where the user's code lies in it.
pub(crate) fn generate(s: &Spec<'_>) -> (String, SourceMap) {
    let name = s.name;
    let rt = c_name(s.reduce_type);
    let ni = s.inputs.len();
    let mut b = SourceBuilder::new();
    let mut head = format!("// cuda-stack-jit ReductionKernel `{name}`: generated source\n");
    for (k, p) in s.inputs.iter().chain(s.outputs).enumerate() {
        let kind = if k >= ni {
            "output"
        } else if s.scalar[k] {
            "scalar"
        } else {
            "tensor"
        };
        head.push_str(&format!(
            "//   {} {}: {kind} ({})\n",
            numpy_name(s.dtypes[k]),
            p.name,
            c_name(s.dtypes[k])
        ));
    }
    head.push_str(&format!(
        "//   reduce type {} ({rt}); {} kept and {} reduced merged dimension(s)\n",
        numpy_name(s.reduce_type),
        s.nk,
        s.nr
    ));
    b.push(&head);
    b.push(PRELUDE);
    for (p, d) in s.placeholders.iter().zip(s.placeholder_types) {
        b.push(&format!("typedef {} {p};", c_name(*d)));
    }
    b.push(&format!("typedef {rt} _R;"));
    if !s.preamble.trim().is_empty() {
        b.push("// ---- preamble ----");
        b.push_user("preamble", s.preamble);
    }
    let in_decl: Vec<String> = s
        .inputs
        .iter()
        .enumerate()
        .map(|(k, p)| format!("const {}& {}", c_name(s.dtypes[k]), p.name))
        .collect();
    let out_decl: Vec<String> = s
        .outputs
        .iter()
        .enumerate()
        .map(|(k, p)| format!("{}& {}", c_name(s.dtypes[ni + k]), p.name))
        .collect();
    let scalar_decl: Vec<String> = s
        .inputs
        .iter()
        .enumerate()
        .filter(|(k, _)| s.scalar[*k])
        .map(|(k, p)| format!("const {}& {}", c_name(s.dtypes[k]), p.name))
        .collect();
    b.push("// ---- identity, map, reduce, post-map ----");
    b.push(&format!(
        "__device__ __forceinline__ _R {name}_identity() {{ return (_R)("
    ));
    b.push_user("identity", s.identity);
    b.push("); }");
    b.push(&format!(
        "__device__ __forceinline__ _R {name}_map({}) {{ return (_R)(",
        in_decl.join(", ")
    ));
    b.push_user("map_expr", s.map_expr);
    b.push("); }");
    b.push(&format!(
        "__device__ __forceinline__ _R {name}_reduce(const _R& a, const _R& b) {{ return (_R)("
    ));
    b.push_user("reduce_expr", s.reduce_expr);
    b.push("); }");
    let mut post_params = vec!["const _R& a".to_string()];
    post_params.extend(out_decl.iter().cloned());
    post_params.extend(scalar_decl.iter().cloned());
    post_params.push("const _Ind& _in_ind".into());
    post_params.push("const _Ind& _out_ind".into());
    b.push(&format!(
        "__device__ __forceinline__ void {name}_post({}) {{",
        post_params.join(", ")
    ));
    b.push_user("post_map_expr", s.post_map_expr);
    b.push(";\n}");
    b.push(&format!(
        r#"// Combines the values of a group of 32 lanes (lane 0 ends with the result, in lane order).
__device__ __forceinline__ _R {name}_warp(_R v) {{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = {name}_reduce(v, _shfl_down(v, off));
    return v;
}}
// The whole block (thread 0 ends with the result); every thread of the block must call it.
__device__ __forceinline__ _R {name}_block(_R v) {{
    __shared__ _R _warp_vals[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = {name}_warp(v);
    if (lane == 0) _warp_vals[warp] = v;
    __syncthreads();
    if (warp == 0) {{
        v = (lane < (int)(blockDim.x / 32)) ? _warp_vals[lane] : {name}_identity();
        v = {name}_warp(v);
    }}
    __syncthreads();  // _warp_vals is reused by the block's next group
    return v;
}}"#
    ));

    // The main kernel.
    let tensors: Vec<&str> = s
        .inputs
        .iter()
        .enumerate()
        .filter(|(k, _)| !s.scalar[*k])
        .map(|(_, p)| p.name.as_str())
        .collect();
    let mut kp = Vec::new();
    for (k, p) in s.inputs.iter().enumerate() {
        let ct = c_name(s.dtypes[k]);
        kp.push(if s.scalar[k] {
            format!("const {ct} {}", p.name)
        } else {
            format!("const {ct}* __restrict__ _in_{}", p.name)
        });
    }
    for (k, p) in s.outputs.iter().enumerate() {
        kp.push(format!(
            "{}* __restrict__ _out_{}",
            c_name(s.dtypes[ni + k]),
            p.name
        ));
    }
    kp.push("_R* __restrict__ _partial".into());
    kp.push("const long long _m, const long long _k, const long long _P, const long long _chunk, const int _G".into());
    if s.nk > 0 {
        kp.push(format!("const _Dims<{}> _kshape", s.nk));
        for t in &tensors {
            kp.push(format!("const _Dims<{}> _kshape_{t}", s.nk));
        }
    }
    if s.nr > 0 {
        kp.push(format!("const _Dims<{}> _rshape", s.nr));
        for t in &tensors {
            kp.push(format!("const _Dims<{}> _rshape_{t}", s.nr));
        }
    }
    let map_args: Vec<String> = s
        .inputs
        .iter()
        .enumerate()
        .map(|(k, p)| {
            if s.scalar[k] {
                p.name.clone()
            } else {
                format!("_in_{n}[_ko_{n} + _ro_{n}]", n = p.name)
            }
        })
        .collect();
    let post_args = |acc: &str, o: &str| {
        let mut a = vec![acc.to_string()];
        a.extend(s.outputs.iter().map(|p| format!("_out_{}[{o}]", p.name)));
        a.extend(
            s.inputs
                .iter()
                .enumerate()
                .filter(|(k, _)| s.scalar[*k])
                .map(|(_, p)| p.name.clone()),
        );
        a.push("_in_ind".into());
        a.push("_out_ind".into());
        a.join(", ")
    };
    let mut k = String::from("// ---- kernels ----\n");
    k.push_str(&format!(
        "extern \"C\" __global__ void {name}({}) {{\n",
        kp.join(", ")
    ));
    k.push_str("    const _Ind _in_ind = {_m * _k}, _out_ind = {_m};\n");
    k.push_str("    const long long _t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
    k.push_str("    const int _lane = (int)(threadIdx.x % (unsigned)_G);\n");
    k.push_str("    const long long _gstep = (long long)gridDim.x * blockDim.x / _G;\n");
    k.push_str(
        "    for (long long _g = _t / _G; _g < _m * _P; _g += _gstep) {  // uniform in a group\n",
    );
    k.push_str("        const long long _o = _g / _P, _p = _g % _P;\n");
    k.push_str("        const long long _r0 = _p * _chunk;\n");
    k.push_str("        const long long _r1 = _r0 + _chunk < _k ? _r0 + _chunk : _k;\n");
    k.push_str(&decompose(
        "_o", s.nk, "_kshape", "_ko_", &tensors, "        ",
    ));
    k.push_str(&format!("        _R _acc = {name}_identity();\n"));
    k.push_str("        for (long long _j = _r0 + _lane; _j < _r1; _j += _G) {\n");
    k.push_str(&decompose(
        "_j",
        s.nr,
        "_rshape",
        "_ro_",
        &tensors,
        "            ",
    ));
    k.push_str(&format!(
        "            _acc = {name}_reduce(_acc, {name}_map({}));\n",
        map_args.join(", ")
    ));
    k.push_str("        }\n");
    k.push_str(&format!(
        "        if (_G == 32) _acc = {name}_warp(_acc);\n        else if (_G > 32) _acc = {name}_block(_acc);\n"
    ));
    k.push_str("        if (_lane == 0) {\n");
    k.push_str(&format!(
        "            if (_P == 1) {name}_post({});\n",
        post_args("_acc", "_o")
    ));
    k.push_str("            else _partial[_g] = _acc;\n        }\n    }\n}\n");

    // The finishing kernel.
    let mut fp = vec!["const _R* __restrict__ _partial".to_string()];
    for (j, p) in s.outputs.iter().enumerate() {
        fp.push(format!(
            "{}* __restrict__ _out_{}",
            c_name(s.dtypes[ni + j]),
            p.name
        ));
    }
    for (j, p) in s.inputs.iter().enumerate() {
        if s.scalar[j] {
            fp.push(format!("const {} {}", c_name(s.dtypes[j]), p.name));
        }
    }
    fp.push("const long long _m, const long long _k, const long long _P".into());
    k.push_str(&format!(
        "extern \"C\" __global__ void {name}_finish({}) {{\n",
        fp.join(", ")
    ));
    k.push_str("    const _Ind _in_ind = {_m * _k}, _out_ind = {_m};\n");
    k.push_str("    const int _lane = threadIdx.x % 32;\n");
    k.push_str("    const long long _wstep = (long long)gridDim.x * blockDim.x / 32;\n");
    k.push_str("    for (long long _o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; _o < _m; _o += _wstep) {\n");
    k.push_str(&format!("        _R _acc = {name}_identity();\n"));
    k.push_str(&format!(
        "        for (long long _p = _lane; _p < _P; _p += 32) _acc = {name}_reduce(_acc, _partial[_o * _P + _p]);\n"
    ));
    k.push_str(&format!("        _acc = {name}_warp(_acc);\n"));
    k.push_str(&format!(
        "        if (_lane == 0) {name}_post({});\n    }}\n}}\n",
        post_args("_acc", "_o")
    ));
    b.push(&k);
    b.finish()
}
