//! The CUDA source of one elementwise specialization.
//!
//! ```text
//! <prelude>                      float16/bfloat16, _Raw, _Ind, _Dims (see crate::prelude)
//! typedef float T;               one per placeholder
//! <preamble>                     the user's
//! __device__ void NAME_op(i, _ind, const float& x, float& y) { <operation> }
//! extern "C" __global__ void NAME(const float* __restrict__ _in_x, float* __restrict__ _out_y,
//!                                 long long _n [, _Dims<N> _shape, _Dims<N> _st_x, …]) {
//!     grid-stride loop over _j < _n (32-bit indices when they fit, 64-bit otherwise):
//!         NAME_op(_j, _ind, _in_x[_j], _out_y[_j]);            contiguous operands
//!         NAME_op(_j, _ind, _in_x[offset_x(_j)], _out_y[_j]);  strided/broadcast ones
//!     (contiguous-only kernels: when every pointer is aligned to its packet, each trip moves
//!      one packet of V = 16 / (largest element size) elements per parameter, one vector
//!      access each (16 bytes for the largest type), then a scalar tail of n % V; otherwise
//!      each trip loads 4 elements a grid stride apart into registers first, then runs the
//!      operation on each: 4 independent loads in flight per thread)
//! }
//! ```
//! The operation appears once (in `NAME_op`), so a compile error in it is reported once, at
//! the user's line. Outputs are always contiguous (new, or made exclusive first), so they are
//! indexed by `_j` directly; only strided inputs decompose `_j` over the merged dimensions.

use super::Kind;
use crate::params::Param;
use crate::prelude::PRELUDE;
use crate::source_map::{SourceBuilder, SourceMap};
use crate::types::{c_name, numpy_name};
use cuda_stack_runtime::DType;

/// What a specialization is: the kernel, its parameters' dtypes and kinds, and the number of
/// merged dimensions of its strided inputs.
pub(crate) struct Spec<'a> {
    pub(crate) name: &'a str,
    pub(crate) params: &'a [Param],
    pub(crate) placeholders: &'a [String],
    pub(crate) placeholder_types: &'a [DType],
    pub(crate) dtypes: &'a [DType],
    pub(crate) kinds: &'a [Kind],
    pub(crate) ndim: usize,
    /// Whether the outputs hold values the operation may read (`call_into`): the packet loop
    /// then loads them first; new outputs (`call`) are only written.
    pub(crate) outputs_read: bool,
    pub(crate) preamble: &'a str,
    pub(crate) operation: &'a str,
}

/// Elements per packet of a contiguous-only kernel (`16 / the largest element size` among its
/// tensor parameters), or 1 for a kernel with strided or raw parameters (no packet loop).
pub(crate) fn packet_elements(kinds: &[Kind], dtypes: &[DType]) -> usize {
    if kinds.iter().any(|k| matches!(k, Kind::Strided | Kind::Raw)) {
        return 1;
    }
    let widest = kinds
        .iter()
        .zip(dtypes)
        .filter(|(k, _)| **k == Kind::Flat)
        .map(|(_, d)| d.size())
        .max()
        .unwrap_or(16);
    (16 / widest.clamp(1, 16)).max(1)
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Flat => "contiguous tensor",
            Kind::Strided => "strided/broadcast tensor",
            Kind::Raw => "raw tensor",
            Kind::Scalar => "scalar",
        }
    }
}

/// The byte size of each kernel parameter, in order (checked against the compiled kernel).
pub(crate) fn param_sizes(spec: &Spec<'_>) -> Vec<usize> {
    let mut s = Vec::new();
    for (k, &kind) in spec.kinds.iter().enumerate() {
        match kind {
            Kind::Flat | Kind::Strided => s.push(8),
            Kind::Raw => s.extend([8, 8]),
            Kind::Scalar => s.push(spec.dtypes[k].size()),
        }
    }
    s.push(8); // _n
    if spec.kinds.contains(&Kind::Strided) {
        s.push(8 * spec.ndim); // _shape
        s.extend(
            spec.kinds
                .iter()
                .filter(|&&k| k == Kind::Strided)
                .map(|_| 8 * spec.ndim),
        );
    }
    s
}

/// The source and where the user's code lies in it.
pub(crate) fn generate(spec: &Spec<'_>) -> (String, SourceMap) {
    let name = spec.name;
    let mut b = SourceBuilder::new();
    let mut head = format!("// cuda-stack-jit ElementwiseKernel `{name}`: generated source\n");
    for (k, p) in spec.params.iter().enumerate() {
        head.push_str(&format!(
            "//   {:<6} {} {}: {} ({})\n",
            if p.output { "out" } else { "in" },
            numpy_name(spec.dtypes[k]),
            p.name,
            spec.kinds[k].describe(),
            c_name(spec.dtypes[k])
        ));
    }
    if spec.kinds.contains(&Kind::Strided) {
        head.push_str(&format!(
            "//   strided inputs are indexed over {} merged dimension(s)\n",
            spec.ndim
        ));
    }
    b.push(&head);
    b.push(PRELUDE);
    for (p, d) in spec.placeholders.iter().zip(spec.placeholder_types) {
        b.push(&format!("typedef {} {p};", c_name(*d)));
    }
    if !spec.preamble.trim().is_empty() {
        b.push("// ---- preamble ----");
        b.push_user("preamble", spec.preamble);
    }

    // The per-element function holding the operation.
    let mut op_params = vec![
        "const long long i".to_string(),
        "const _Ind& _ind".to_string(),
    ];
    for (k, p) in spec.params.iter().enumerate() {
        let ct = c_name(spec.dtypes[k]);
        op_params.push(match (spec.kinds[k], p.output) {
            (Kind::Raw, false) => format!("const _Raw<const {ct}>& {}", p.name),
            (Kind::Raw, true) => format!("const _Raw<{ct}>& {}", p.name),
            (_, false) => format!("const {ct}& {}", p.name),
            (_, true) => format!("{ct}& {}", p.name),
        });
    }
    b.push("// ---- operation ----");
    b.push(&format!(
        "__device__ __forceinline__ void {name}_op({}) {{",
        op_params.join(", ")
    ));
    b.push_user("operation", spec.operation);
    b.push("}");

    // The kernel.
    let nd = spec.ndim;
    let mut kparams = Vec::new();
    for (k, p) in spec.params.iter().enumerate() {
        let ct = c_name(spec.dtypes[k]);
        let n = &p.name;
        match (spec.kinds[k], p.output) {
            (Kind::Raw, false) => {
                kparams.push(format!("const {ct}* _rawp_{n}"));
                kparams.push(format!("const long long _rawn_{n}"));
            }
            (Kind::Raw, true) => {
                kparams.push(format!("{ct}* _rawp_{n}"));
                kparams.push(format!("const long long _rawn_{n}"));
            }
            (Kind::Scalar, _) => kparams.push(format!("const {ct} {n}")),
            (_, false) => kparams.push(format!("const {ct}* __restrict__ _in_{n}")),
            (_, true) => kparams.push(format!("{ct}* __restrict__ _out_{n}")),
        }
    }
    kparams.push("const long long _n".into());
    let strided: Vec<&str> = spec
        .params
        .iter()
        .zip(spec.kinds)
        .filter(|(_, &k)| k == Kind::Strided)
        .map(|(p, _)| p.name.as_str())
        .collect();
    if !strided.is_empty() {
        kparams.push(format!("const _Dims<{nd}> _shape"));
        for n in &strided {
            kparams.push(format!("const _Dims<{nd}> _st_{n}"));
        }
    }
    let mut k = String::new();
    if strided.is_empty()
        && !spec.kinds.contains(&Kind::Raw)
        && packet_elements(spec.kinds, spec.dtypes) > 1
    {
        k.push_str("// ---- packets ----\n");
        k.push_str(PACKETS);
        k.push('\n');
    }
    k.push_str("// ---- kernel ----\n");
    k.push_str(&format!(
        "extern \"C\" __global__ void {name}({}) {{\n",
        kparams.join(", ")
    ));
    k.push_str("    const _Ind _ind = {_n};\n");
    for (j, p) in spec.params.iter().enumerate() {
        if spec.kinds[j] == Kind::Raw {
            let ct = c_name(spec.dtypes[j]);
            let c = if p.output { "" } else { "const " };
            k.push_str(&format!(
                "    const _Raw<{c}{ct}> {n} = {{_rawp_{n}, _rawn_{n}}};\n",
                n = p.name
            ));
        }
    }
    k.push_str(
        "    const unsigned long long _stride = (unsigned long long)gridDim.x * blockDim.x;\n",
    );
    k.push_str(
        "    const unsigned long long _first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n",
    );
    // The call of the operation for index `_j` of index type `I`.
    let call = |ity: &str| {
        let mut s = String::new();
        if !strided.is_empty() {
            s.push_str(&format!("            {ity} _r = _j;\n"));
            for n in &strided {
                s.push_str(&format!("            long long _o_{n} = 0;\n"));
            }
            if nd > 1 {
                s.push_str(&format!(
                    "#pragma unroll\n            for (int _d = {}; _d > 0; --_d) {{\n",
                    nd - 1
                ));
                s.push_str(&format!(
                    "                const {ity} _size = ({ity})_shape.v[_d];\n                const {ity} _c = _r % _size;\n                _r /= _size;\n"
                ));
                for n in &strided {
                    s.push_str(&format!(
                        "                _o_{n} += (long long)_c * _st_{n}.v[_d];\n"
                    ));
                }
                s.push_str("            }\n");
            }
            for n in &strided {
                s.push_str(&format!(
                    "            _o_{n} += (long long)_r * _st_{n}.v[0];\n"
                ));
            }
        }
        let mut args = vec!["(long long)_j".to_string(), "_ind".to_string()];
        for (j, p) in spec.params.iter().enumerate() {
            let n = &p.name;
            args.push(match (spec.kinds[j], p.output) {
                (Kind::Raw, _) | (Kind::Scalar, _) => n.clone(),
                (Kind::Strided, false) => format!("_in_{n}[_o_{n}]"),
                (_, false) => format!("_in_{n}[_j]"),
                (_, true) => format!("_out_{n}[_j]"),
            });
        }
        s.push_str(&format!("            {name}_op({});\n", args.join(", ")));
        s
    };
    let no_raw = !spec.kinds.contains(&Kind::Raw);
    if strided.is_empty() && no_raw {
        // Contiguous operands only: element j depends on element j of each operand alone, so
        // each thread loads UNROLL elements (a grid stride apart) before computing any: that
        // many independent loads in flight per thread (a plain grid-stride loop issues them
        // one at a time, and memory-bound kernels then miss the bandwidth). First, when every
        // pointer is aligned to its packet, the packet loop (one vector access per parameter
        // per trip) and its scalar tail.
        let v = packet_elements(spec.kinds, spec.dtypes);
        if v > 1 {
            k.push_str(&packet_loop(spec, name, v));
        }
        k.push_str(&unrolled_loops(spec, name));
        k.push_str("}\n");
        b.push(&k);
        return b.finish();
    }
    k.push_str("    if ((unsigned long long)_n + _stride <= 0xffffffffull) {\n");
    k.push_str("        // 32-bit indices: cheaper arithmetic when every index fits.\n");
    k.push_str("        for (unsigned int _j = (unsigned int)_first; _j < (unsigned int)_n; _j += (unsigned int)_stride) {\n");
    k.push_str(&call("unsigned int"));
    k.push_str("        }\n    } else {\n");
    k.push_str(
        "        for (unsigned long long _j = _first; _j < (unsigned long long)_n; _j += _stride) {\n",
    );
    k.push_str(&call("unsigned long long"));
    k.push_str("        }\n    }\n}\n");
    b.push(&k);
    b.finish()
}

/// The packet loop of a contiguous-only kernel, taken when every tensor pointer is aligned to
/// its packet (`v` elements): per trip, one vector load of each input's packet (and of each
/// output's, when `outputs_read`), the operation on each of the `v` elements in registers,
/// one vector store of each output's packet; then the last `n % v` elements, one per thread,
/// and the kernel returns. 32-bit indices when every index fits, 64-bit otherwise.
fn packet_loop(spec: &Spec<'_>, name: &str, v: usize) -> String {
    let flat: Vec<(&str, &str, bool)> = spec
        .params
        .iter()
        .enumerate()
        .filter(|(k, _)| spec.kinds[*k] == Kind::Flat)
        .map(|(k, p)| (p.name.as_str(), c_name(spec.dtypes[k]), p.output))
        .collect();
    let ptr = |n: &str, out: bool| format!("_{}_{n}", if out { "out" } else { "in" });
    let mut k = String::new();
    k.push_str(&format!(
        "    // Packets of {v} elements (one vector access per parameter) when every pointer is
    // aligned to its packet.
    if ((0"
    ));
    for (n, ct, out) in &flat {
        k.push_str(&format!(
            " | ((unsigned long long){} & ({v} * sizeof({ct}) - 1))",
            ptr(n, *out)
        ));
    }
    k.push_str(
        ") == 0) {
",
    );
    k.push_str(&format!(
        "        const unsigned long long _packs = (unsigned long long)_n / {v};
"
    ));
    let mut args = vec!["(long long)_j".to_string(), "_ind".to_string()];
    for (j, p) in spec.params.iter().enumerate() {
        args.push(match (spec.kinds[j], p.output) {
            (Kind::Flat, _) => format!("_p_{}.v[_u]", p.name),
            _ => p.name.clone(),
        });
    }
    let body = |ity: &str| {
        let mut s = format!(
            "            for ({ity} _p = ({ity})_first; _p < ({ity})_packs; _p += ({ity})_stride) {{
"
        );
        for (n, ct, out) in &flat {
            let p = ptr(n, *out);
            s.push_str(&if *out && !spec.outputs_read {
                format!(
                    "                _Vec<{ct}, {v}> _p_{n} = {{}};
"
                )
            } else {
                format!(
                    "                _Vec<{ct}, {v}> _p_{n} = _vload<{ct}, {v}>({p}, _p);
"
                )
            });
        }
        s.push_str(&format!(
            "#pragma unroll
                for (int _u = 0; _u < {v}; ++_u) {{
                    const {ity} _j = _p * {v} + ({ity})_u;
                    {name}_op({});
                }}
",
            args.join(", ")
        ));
        for (n, ct, out) in &flat {
            if *out {
                s.push_str(&format!(
                    "                _vstore<{ct}, {v}>({}, _p, _p_{n});
",
                    ptr(n, true)
                ));
            }
        }
        s.push_str(
            "            }
",
        );
        s
    };
    k.push_str(
        "        if ((unsigned long long)_n + _stride <= 0xffffffffull) {
",
    );
    k.push_str(&body("unsigned int"));
    k.push_str(
        "        } else {
",
    );
    k.push_str(&body("unsigned long long"));
    k.push_str(
        "        }
",
    );
    // The tail: fewer than v elements, one per thread of the first few.
    let mut targs = vec!["(long long)_j".to_string(), "_ind".to_string()];
    for (j, p) in spec.params.iter().enumerate() {
        let n = &p.name;
        targs.push(match (spec.kinds[j], p.output) {
            (Kind::Flat, false) => format!("_in_{n}[_j]"),
            (_, true) => format!("_out_{n}[_j]"),
            _ => n.clone(),
        });
    }
    k.push_str(&format!(
        "        const unsigned long long _j = _packs * {v} + _first;
        if (_j < (unsigned long long)_n) {name}_op({});
        return;
    }}
",
        targs.join(", ")
    ));
    k
}

/// The packet type and its vector load/store: `V` elements of `T` moved as one access of
/// `sizeof(T) · V` bytes (2 to 16), through a union with the matching unsigned type.
const PACKETS: &str = r#"template <typename T, int V> struct _Vec { T v[V]; };
template <int B> struct _Bits;
template <> struct _Bits<16> { typedef uint4 t; };
template <> struct _Bits<8> { typedef uint2 t; };
template <> struct _Bits<4> { typedef unsigned int t; };
template <> struct _Bits<2> { typedef unsigned short t; };
template <typename T, int V> union _VecBits {
    typename _Bits<sizeof(T) * V>::t b;
    _Vec<T, V> v;
};
template <typename T, int V, typename I>
__device__ __forceinline__ _Vec<T, V> _vload(const T* p, I k) {
    _VecBits<T, V> u;
    u.b = reinterpret_cast<const typename _Bits<sizeof(T) * V>::t*>(p)[k];
    return u.v;
}
template <typename T, int V, typename I>
__device__ __forceinline__ void _vstore(T* p, I k, const _Vec<T, V>& x) {
    _VecBits<T, V> u;
    u.v = x;
    reinterpret_cast<typename _Bits<sizeof(T) * V>::t*>(p)[k] = u.b;
}"#;

/// Elements each thread of a contiguous-only kernel loads before it computes.
const UNROLL: usize = 4;

/// The grid-stride loops of a kernel whose operands are all contiguous or scalars: per trip,
/// [`UNROLL`] elements a grid stride apart are loaded into registers, then the operation runs
/// on each (outputs written in place). 32-bit indices when every index fits, 64-bit otherwise.
fn unrolled_loops(spec: &Spec<'_>, name: &str) -> String {
    let inputs: Vec<(&str, &str)> = spec
        .params
        .iter()
        .enumerate()
        .filter(|(k, p)| !p.output && spec.kinds[*k] == Kind::Flat)
        .map(|(k, p)| (p.name.as_str(), c_name(spec.dtypes[k])))
        .collect();
    let mut args = vec!["(long long)_j".to_string(), "_ind".to_string()];
    for (j, p) in spec.params.iter().enumerate() {
        let n = &p.name;
        args.push(match (spec.kinds[j], p.output) {
            (Kind::Flat, false) => format!("_v_{n}[_u]"),
            (_, true) => format!("_out_{n}[_j]"),
            _ => n.clone(),
        });
    }
    let body = |ity: &str| {
        let mut s = format!(
            "        for ({ity} _j0 = ({ity})_first; _j0 < ({ity})_n; _j0 += {UNROLL} * ({ity})_stride) {{\n"
        );
        for (n, ct) in &inputs {
            s.push_str(&format!("            {ct} _v_{n}[{UNROLL}];\n"));
        }
        s.push_str(&format!(
            "#pragma unroll\n            for (int _u = 0; _u < {UNROLL}; ++_u) {{\n                const {ity} _j = _j0 + ({ity})_u * ({ity})_stride;\n                if (_j < ({ity})_n) {{\n"
        ));
        for (n, _) in &inputs {
            s.push_str(&format!("                    _v_{n}[_u] = _in_{n}[_j];\n"));
        }
        s.push_str("                }\n            }\n");
        s.push_str(&format!(
            "#pragma unroll\n            for (int _u = 0; _u < {UNROLL}; ++_u) {{\n                const {ity} _j = _j0 + ({ity})_u * ({ity})_stride;\n                if (_j < ({ity})_n) {name}_op({});\n            }}\n",
            args.join(", ")
        ));
        s.push_str("        }\n");
        s
    };
    let mut k = String::new();
    k.push_str(&format!(
        "    if ((unsigned long long)_n + {UNROLL} * _stride <= 0xffffffffull) {{\n"
    ));
    k.push_str("        // 32-bit indices: cheaper arithmetic when every index fits.\n");
    k.push_str(&body("unsigned int"));
    k.push_str("    } else {\n");
    k.push_str(&body("unsigned long long"));
    k.push_str("    }\n");
    k
}
