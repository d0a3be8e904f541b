//! [`ReductionKernel`]: CuPy's reduction kernel template — map each element, reduce the mapped
//! values pairwise from an identity, map the result — over all elements or along dimensions.

mod codegen;

use crate::args::{with_tensor, AnyTensor, Arg, OutArg, TensorRef};
use crate::broadcast::{self, MAX_DIMS};
use crate::buffers::{contiguous_copy, push_out, push_read, push_scalar, OutBuf};
use crate::cache::KernelCache;
use crate::error::{JitError, Result};
use crate::loaded::{self, Build, Loaded, SpecKey, SpecTable, BLOCK, MAX_PARAMS};
use crate::options::KernelOptions;
use crate::params::{self, Param};
use crate::types::{self, TypeSpec};
use crate::typing;
use cuda_stack_driver::launch::ArgList;
use cuda_stack_driver::LaunchConfig;
use cuda_stack_runtime::DType;
use std::sync::Arc;

/// Which dimensions a reduction runs over (`axis=` and `keepdims=` in CuPy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Axes {
    dims: Option<Vec<isize>>,
    keepdims: bool,
}

impl Axes {
    /// Every dimension (`axis=None`): one value per output.
    pub fn all() -> Axes {
        Axes::default()
    }

    /// These dimensions of the inputs' broadcast shape (negative counts from the end).
    pub fn dims(dims: &[isize]) -> Axes {
        Axes {
            dims: Some(dims.to_vec()),
            keepdims: false,
        }
    }

    /// Keep the reduced dimensions, with size 1 (`keepdims=True`).
    pub fn keepdims(mut self, keep: bool) -> Axes {
        self.keepdims = keep;
        self
    }
}

/// A user-defined reduction kernel (CuPy's `cupy.ReductionKernel`).
///
/// ```no_run
/// use cuda_stack_jit::{Axes, ReductionKernel};
/// use cuda_stack_runtime::Tensor;
/// # fn main() -> cuda_stack_jit::Result<()> {
/// // SAFETY: the expressions only combine values.
/// let l2norm = unsafe {
///     ReductionKernel::new("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")?
/// };
/// let x = Tensor::<f32>::arange(0.0, 10.0, 1.0)?.reshape(&[2, 5])?;
/// let rows = l2norm.call1::<f32>(&[(&x).into()], &Axes::dims(&[1]))?;   // shape [2]
/// let all = l2norm.call1::<f32>(&[(&x).into()], &Axes::all())?;         // shape []
/// # let _ = (rows, all); Ok(()) }
/// ```
///
/// `map_expr` sees the input parameters by name (tensor elements and scalars) and gives a
/// value of the reduce type; `reduce_expr` combines two such values `a` and `b`; `identity`
/// starts every reduction (and is the result of an empty one); `post_map_expr` sees the
/// reduced value `a`, the outputs and scalar inputs, `_in_ind.size()` (elements reduced in all)
/// and `_out_ind.size()` (outputs), and assigns the outputs. The reduce type is `reduce_type`
/// when given (a type name or a placeholder), else the first output's type.
///
/// Inputs broadcast together; the reduction runs over [`Axes`] of the broadcast shape, on
/// strided views in place. Each group of threads (one thread, one warp or one block, chosen
/// from the shape) reduces one output in a fixed order, so results are deterministic for a
/// shape; when few outputs have many elements each, the elements are split into chunks
/// reduced by several blocks and a second kernel combines the chunks.
#[derive(Clone)]
pub struct ReductionKernel {
    def: Arc<Def>,
}

struct Def {
    name: String,
    inputs: Vec<Param>,
    outputs: Vec<Param>,
    placeholders: Vec<String>,
    reduce_type: Option<TypeSpec>,
    map_expr: String,
    reduce_expr: String,
    post_map_expr: String,
    identity: String,
    preamble: String,
    options: Vec<String>,
    cache: Arc<KernelCache>,
    specs: SpecTable,
}

impl std::fmt::Debug for ReductionKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReductionKernel")
            .field("name", &self.def.name)
            .field("in_params", &params::list(&self.def.inputs))
            .field("out_params", &params::list(&self.def.outputs))
            .finish()
    }
}

/// One call, bound.
struct Bound {
    device: usize,
    dtypes: Vec<DType>,
    placeholder_types: Vec<DType>,
    reduce_type: DType,
    scalar: Vec<bool>,
    out_shape: Vec<usize>,
    m: usize,
    k: usize,
    kdims: Vec<i64>,
    kstrides: Vec<Vec<i64>>,
    rdims: Vec<i64>,
    rstrides: Vec<Vec<i64>>,
    copies: Vec<(usize, AnyTensor)>,
    key: SpecKey,
}

impl ReductionKernel {
    /// Defines a reduction (see the type docs). Nothing is compiled until the first call.
    ///
    /// # Safety
    /// The expressions (and any preamble) are CUDA C that runs as written: they must access
    /// device memory only through the values the generated code hands them (input elements,
    /// scalars, `a`/`b`, the outputs' elements), never through pointers they form themselves.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn new(
        in_params: &str,
        out_params: &str,
        map_expr: &str,
        reduce_expr: &str,
        post_map_expr: &str,
        identity: &str,
        name: &str,
    ) -> Result<ReductionKernel> {
        // SAFETY: forwarded to the caller.
        unsafe {
            Self::with_options(
                in_params,
                out_params,
                map_expr,
                reduce_expr,
                post_map_expr,
                identity,
                name,
                None,
                KernelOptions::new(),
            )
        }
    }

    /// [`ReductionKernel::new`] with a `reduce_type` (a type name or one of the parameters'
    /// placeholders) and options.
    ///
    /// # Safety
    /// As for [`ReductionKernel::new`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn with_options(
        in_params: &str,
        out_params: &str,
        map_expr: &str,
        reduce_expr: &str,
        post_map_expr: &str,
        identity: &str,
        name: &str,
        reduce_type: Option<&str>,
        options: KernelOptions,
    ) -> Result<ReductionKernel> {
        let parse_err = |what: &'static str, text: &str, problem: String| JitError::Parse {
            kernel: name.to_string(),
            what,
            text: text.to_string(),
            problem,
        };
        if !types::is_identifier(name) || name.starts_with('_') {
            return Err(parse_err(
                "name",
                name,
                "a kernel name is a C identifier not starting with `_`".into(),
            ));
        }
        let reserved = ["a", "b"];
        let inputs = params::parse(name, "in_params", in_params, false, &reserved)?;
        let outputs = params::parse(name, "out_params", out_params, true, &reserved)?;
        let all: Vec<Param> = inputs.iter().chain(&outputs).cloned().collect();
        params::check_unique(name, &all)?;
        if let Some(p) = all.iter().find(|p| p.raw) {
            return Err(parse_err(
                "parameter lists",
                &p.declaration(),
                "raw parameters are not supported in reductions".into(),
            ));
        }
        if outputs.is_empty() || inputs.is_empty() {
            return Err(parse_err(
                "parameter lists",
                &params::list(&all),
                "a reduction needs at least one input and one output".into(),
            ));
        }
        if all.len() + 1 > MAX_PARAMS {
            return Err(JitError::Limit {
                kernel: name.to_string(),
                problem: format!(
                    "{} parameters; at most {} are supported",
                    all.len(),
                    MAX_PARAMS - 1
                ),
            });
        }
        if identity.trim().is_empty() {
            return Err(parse_err(
                "identity",
                identity,
                "give the value reductions start from (e.g. `0` for a sum)".into(),
            ));
        }
        let placeholders = typing::placeholders(all.iter());
        let reduce_type = match reduce_type {
            None => None,
            Some(t) => {
                let spec =
                    types::parse_type(t.trim()).map_err(|p| parse_err("reduce_type", t, p))?;
                if let TypeSpec::Placeholder(p) = &spec {
                    if !placeholders.contains(p) {
                        return Err(parse_err(
                            "reduce_type",
                            t,
                            format!(
                                "`{p}` is neither a type name nor a placeholder of the parameters"
                            ),
                        ));
                    }
                }
                Some(spec)
            }
        };
        Ok(ReductionKernel {
            def: Arc::new(Def {
                name: name.to_string(),
                inputs,
                outputs,
                placeholders,
                reduce_type,
                map_expr: map_expr.to_string(),
                reduce_expr: reduce_expr.to_string(),
                post_map_expr: post_map_expr.to_string(),
                identity: identity.to_string(),
                preamble: options.preamble.clone(),
                options: options.nvrtc_options.clone(),
                cache: options.cache_or_global(),
                specs: SpecTable::default(),
            }),
        })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// Reduces `args` over `axes`; returns the outputs (new, contiguous), in parameter order.
    pub fn call(&self, args: &[Arg<'_>], axes: &Axes) -> Result<Vec<AnyTensor>> {
        self.run(args, None, axes)
    }

    /// [`ReductionKernel::call`] for a kernel with one output of type `T`.
    pub fn call1<T>(&self, args: &[Arg<'_>], axes: &Axes) -> Result<cuda_stack_runtime::Tensor<T>>
    where
        T: cuda_stack_runtime::TensorElement,
        cuda_stack_runtime::Tensor<T>: TryFrom<AnyTensor, Error = JitError>,
    {
        let mut out = self.call(args, axes)?;
        if out.len() != 1 {
            return Err(JitError::ArgCount {
                kernel: self.def.name.clone(),
                what: "outputs (call1 returns one)",
                expected: 1,
                found: out.len(),
                params: params::list(&self.def.outputs),
            });
        }
        out.remove(0).into_typed::<T>()
    }

    /// Reduces into given outputs (each of the reduced shape; made exclusive first).
    pub fn call_into(
        &self,
        args: &[Arg<'_>],
        axes: &Axes,
        outputs: &mut [OutArg<'_>],
    ) -> Result<()> {
        self.run(args, Some(outputs), axes).map(|_| ())
    }

    /// The generated CUDA source for these arguments and axes, without compiling it.
    pub fn source_for(&self, args: &[Arg<'_>], axes: &Axes) -> Result<String> {
        let b = self.bind(args, None, axes)?;
        Ok(self.generate(&b).0)
    }

    /// The source for inputs of `dtypes` (`scalar[k]`: input `k` is a scalar) with `nk` kept
    /// and `nr` reduced merged dimensions, without tensors (tests, learners without a GPU).
    pub(crate) fn source_for_layout(
        &self,
        dtypes: &[DType],
        scalar: &[bool],
        nk: usize,
        nr: usize,
    ) -> Result<String> {
        let d = &self.def;
        let typed =
            typing::resolve_dtypes(&d.name, &d.placeholders, &d.inputs, &d.outputs, dtypes)?;
        let reduce_type = self.reduce_type_of(&typed);
        let b = Bound {
            device: 0,
            dtypes: typed.params,
            placeholder_types: typed.placeholders,
            reduce_type,
            scalar: (0..d.inputs.len())
                .map(|k| scalar.get(k).copied().unwrap_or(false))
                .collect(),
            out_shape: Vec::new(),
            m: 0,
            k: 0,
            kdims: vec![1; nk],
            kstrides: Vec::new(),
            rdims: vec![1; nr],
            rstrides: Vec::new(),
            copies: Vec::new(),
            key: SpecKey::default(),
        };
        Ok(self.generate(&b).0)
    }

    fn reduce_type_of(&self, typed: &typing::Typed) -> DType {
        let def = &self.def;
        match &def.reduce_type {
            None => typed.params[def.inputs.len()],
            Some(TypeSpec::Concrete(d)) => *d,
            Some(TypeSpec::Placeholder(p)) => {
                let k = def.placeholders.iter().position(|x| x == p).unwrap_or(0);
                typed.placeholders[k]
            }
        }
    }

    fn spec<'a>(&'a self, b: &'a Bound) -> codegen::Spec<'a> {
        let d = &self.def;
        codegen::Spec {
            name: &d.name,
            inputs: &d.inputs,
            outputs: &d.outputs,
            scalar: &b.scalar,
            dtypes: &b.dtypes,
            placeholders: &d.placeholders,
            placeholder_types: &b.placeholder_types,
            reduce_type: b.reduce_type,
            nk: b.kdims.len(),
            nr: b.rdims.len(),
            preamble: &d.preamble,
            map_expr: &d.map_expr,
            reduce_expr: &d.reduce_expr,
            post_map_expr: &d.post_map_expr,
            identity: &d.identity,
        }
    }

    fn generate(&self, b: &Bound) -> (String, crate::source_map::SourceMap) {
        codegen::generate(&self.spec(b))
    }

    fn loaded(&self, b: &Bound) -> Result<Arc<Loaded>> {
        if let Some(l) = self.def.specs.get(&b.key) {
            return Ok(l);
        }
        let (source, map) = self.generate(b);
        let (main, finish) = codegen::param_sizes(&self.spec(b));
        let name = &self.def.name;
        let l = loaded::load(
            &self.def.cache,
            b.device,
            Build {
                kernel: name,
                source,
                map,
                options: &self.def.options,
                entries: vec![(name.clone(), main), (format!("{name}_finish"), finish)],
            },
        )?;
        Ok(self.def.specs.insert(b.key, Arc::new(l)))
    }

    fn shapes(&self, args: &[Arg<'_>]) -> String {
        broadcast::describe(
            self.def
                .inputs
                .iter()
                .zip(args)
                .filter_map(|(p, a)| match a {
                    Arg::Tensor(t) => Some((p.name.as_str(), t.shape())),
                    Arg::Scalar(_) => None,
                }),
        )
    }

    fn bind(&self, args: &[Arg<'_>], outs: Option<&[OutArg<'_>]>, axes: &Axes) -> Result<Bound> {
        let def = &self.def;
        let kernel = &def.name;
        let count = |what, expected: usize, found: usize, list: &[Param]| {
            if expected == found {
                Ok(())
            } else {
                Err(JitError::ArgCount {
                    kernel: kernel.clone(),
                    what,
                    expected,
                    found,
                    params: params::list(list),
                })
            }
        };
        count("inputs", def.inputs.len(), args.len(), &def.inputs)?;
        if let Some(o) = outs {
            count("outputs", def.outputs.len(), o.len(), &def.outputs)?;
        }
        let mut device = None;
        let devices = def
            .inputs
            .iter()
            .zip(args)
            .filter_map(|(p, a)| match a {
                Arg::Tensor(t) => Some((p, t.device())),
                Arg::Scalar(_) => None,
            })
            .chain(
                outs.into_iter()
                    .flatten()
                    .zip(&def.outputs)
                    .map(|(o, p)| (p, o.device())),
            );
        for (p, d) in devices {
            match device {
                None => device = Some(d),
                Some(e) if e != d => {
                    return Err(JitError::DeviceMismatch {
                        kernel: kernel.clone(),
                        param: p.name.clone(),
                        expected: e,
                        found: d,
                    })
                }
                Some(_) => {}
            }
        }
        let typed = typing::resolve(
            kernel,
            &def.placeholders,
            &def.inputs,
            &def.outputs,
            args,
            outs,
        )?;
        let reduce_type = self.reduce_type_of(&typed);
        let scalar: Vec<bool> = args.iter().map(|a| matches!(a, Arg::Scalar(_))).collect();
        let tensors: Vec<(usize, TensorRef<'_>)> = args
            .iter()
            .enumerate()
            .filter_map(|(k, a)| match a {
                Arg::Tensor(t) => Some((k, *t)),
                Arg::Scalar(_) => None,
            })
            .collect();
        let Some(device) = device else {
            return Err(JitError::Shape {
                kernel: kernel.clone(),
                problem: "a reduction needs at least one tensor input".into(),
                shapes: String::new(),
            });
        };
        let shape = broadcast::broadcast(tensors.iter().map(|(_, t)| t.shape())).map_err(|p| {
            JitError::Shape {
                kernel: kernel.clone(),
                problem: format!("the inputs do not broadcast: {p}"),
                shapes: self.shapes(args),
            }
        })?;
        // Which dimensions are reduced.
        let rank = shape.len();
        let mut reduced = vec![axes.dims.is_none(); rank];
        for &a in axes.dims.iter().flatten() {
            let d = if a < 0 { a + rank as isize } else { a };
            if d < 0 || d >= rank as isize {
                return Err(JitError::Axis {
                    kernel: kernel.clone(),
                    axis: a,
                    shape: shape.clone(),
                    problem: format!("valid axes are -{rank}..{rank}"),
                });
            }
            if std::mem::replace(&mut reduced[d as usize], true) {
                return Err(JitError::Axis {
                    kernel: kernel.clone(),
                    axis: a,
                    shape: shape.clone(),
                    problem: "the axis is given twice".into(),
                });
            }
        }
        let kept: Vec<usize> = (0..rank).filter(|&d| !reduced[d]).collect();
        let red: Vec<usize> = (0..rank).filter(|&d| reduced[d]).collect();
        let out_shape: Vec<usize> = if axes.keepdims {
            (0..rank)
                .map(|d| if reduced[d] { 1 } else { shape[d] })
                .collect()
        } else {
            kept.iter().map(|&d| shape[d]).collect()
        };
        let m: usize = kept.iter().map(|&d| shape[d]).product();
        let k: usize = red.iter().map(|&d| shape[d]).product();
        if let Some(outs) = outs {
            for (o, p) in outs.iter().zip(&def.outputs) {
                if o.shape() != out_shape.as_slice() {
                    return Err(JitError::Shape {
                        kernel: kernel.clone(),
                        problem: format!(
                            "output `{}` has shape {:?} but the reduction gives {out_shape:?}",
                            p.name,
                            o.shape()
                        ),
                        shapes: self.shapes(args),
                    });
                }
            }
        }
        let strides_of = |t: &TensorRef<'_>| {
            with_tensor!(t, |t| broadcast::aligned_strides(
                t.shape(),
                t.strides(),
                &shape
            ))
        };
        let mut copies = Vec::new();
        let mut aligned: Vec<Vec<i64>> = tensors.iter().map(|(_, t)| strides_of(t)).collect();
        let (mut kdims, mut kstrides) = broadcast::merge(&shape, &kept, &aligned);
        let (mut rdims, mut rstrides) = broadcast::merge(&shape, &red, &aligned);
        if kdims.len() > MAX_DIMS || rdims.len() > MAX_DIMS {
            for (j, t) in &tensors {
                copies.push((*j, contiguous_copy(*t, Some(&shape))?));
            }
            aligned = copies
                .iter()
                .map(|(_, c)| strides_of(&c.as_ref()))
                .collect();
            (kdims, kstrides) = broadcast::merge(&shape, &kept, &aligned);
            (rdims, rstrides) = broadcast::merge(&shape, &red, &aligned);
            if kdims.len() > MAX_DIMS || rdims.len() > MAX_DIMS {
                return Err(JitError::Limit {
                    kernel: kernel.clone(),
                    problem: format!(
                        "the reduction needs more than {MAX_DIMS} kept or reduced dimensions \
                         after merging (shape {shape:?}); reshape the inputs"
                    ),
                });
            }
        }
        let mut key = SpecKey::new(device, [kdims.len() as u8, rdims.len() as u8]);
        for (j, &d) in typed.params.iter().enumerate() {
            let kind = u8::from(j < scalar.len() && scalar[j]);
            key.set(j, kind << 3 | types::code(d));
        }
        key.set(typed.params.len(), types::code(reduce_type));
        Ok(Bound {
            device,
            dtypes: typed.params,
            placeholder_types: typed.placeholders,
            reduce_type,
            scalar,
            out_shape,
            m,
            k,
            kdims,
            kstrides,
            rdims,
            rstrides,
            copies,
            key,
        })
    }

    fn run(
        &self,
        args: &[Arg<'_>],
        mut outs: Option<&mut [OutArg<'_>]>,
        axes: &Axes,
    ) -> Result<Vec<AnyTensor>> {
        let def = &self.def;
        let b = self.bind(args, outs.as_deref(), axes)?;
        let rt = cuda_stack_runtime::Runtime::get(b.device)?;
        let stream = cuda_stack_runtime::stream_for(b.device)?;
        let mut bufs = Vec::new();
        if outs.is_none() {
            for &d in &b.dtypes[def.inputs.len()..] {
                // SAFETY: the kernels write every output element (post_map runs once per
                // output); what post_map assigns is the promise made in `new`.
                bufs.push(unsafe { OutBuf::alloc(d, rt, &stream, b.m)? });
            }
        }
        if b.m == 0 {
            return bufs
                .into_iter()
                .map(|o| o.into_tensor(&b.out_shape))
                .collect();
        }
        let l = self.loaded(&b)?;
        let plan = plan(&l, &b);
        // Partials of the reduce type, when the elements of an output are split in chunks.
        let mut partial = if plan.p > 1 {
            // SAFETY: the main kernel writes every partial (one per (output, chunk) group)
            // before the finishing kernel, queued after it on the same stream, reads them.
            Some(unsafe { OutBuf::alloc(b.reduce_type, rt, &stream, b.m * plan.p)? })
        } else {
            None
        };
        let ni = def.inputs.len();
        {
            let mut list = ArgList::with_capacity(ni + def.outputs.len() + 8 + 2 * (ni + 1));
            for (j, a) in args.iter().enumerate() {
                match a {
                    Arg::Scalar(s) => push_scalar(&mut list, *s, b.dtypes[j]),
                    Arg::Tensor(t) => {
                        let t: TensorRef<'_> = match b.copies.iter().find(|(c, _)| *c == j) {
                            Some((_, c)) => c.as_ref(),
                            None => *t,
                        };
                        push_read(&mut list, t)?;
                    }
                }
            }
            let direct = plan.p == 1;
            if direct {
                match outs.as_deref_mut() {
                    Some(outs) => {
                        for o in outs.iter_mut() {
                            push_out(&mut list, o)?;
                        }
                    }
                    None => {
                        for buf in bufs.iter_mut() {
                            buf.push(&mut list);
                        }
                    }
                }
                list.scalar(0u64); // _partial: not written when _P == 1
            } else {
                // Outputs are written by the finishing kernel; null pointers here are never
                // dereferenced (the main kernel writes only _partial when _P > 1).
                for _ in &def.outputs {
                    list.scalar(0u64);
                }
                if let Some(p) = partial.as_mut() {
                    p.push(&mut list);
                }
            }
            list.scalar(b.m as i64)
                .scalar(b.k as i64)
                .scalar(plan.p as i64)
                .scalar(plan.chunk as i64)
                .scalar(plan.group as i32);
            if !b.kdims.is_empty() {
                list.bytes(bytemuck::cast_slice(&b.kdims));
                for s in &b.kstrides {
                    list.bytes(bytemuck::cast_slice(s));
                }
            }
            if !b.rdims.is_empty() {
                list.bytes(bytemuck::cast_slice(&b.rdims));
                for s in &b.rstrides {
                    list.bytes(bytemuck::cast_slice(s));
                }
            }
            let cfg = LaunchConfig::new(plan.grid, BLOCK);
            // SAFETY: the arguments follow the generated signature (checked against the
            // compiled kernel at load). Group `g < m * P` reads, for output `o = g / P` and
            // reduced index `r < k`, each tensor input at `offset + kept_offset(o) +
            // reduced_offset(r)`: coordinates inside the broadcast shape, which the tensor's
            // layout maps inside its storage (stride 0 where broadcast). It writes output
            // element `o < m` of each output (m elements each, exclusive) when P == 1, else
            // `_partial[g]`, `g < m * P` (the partial buffer holds m * P). The expressions are
            // the promise made in `new`.
            unsafe { l.functions[0].launch_args(&stream, &cfg, &list)? };
        }
        if let Some(p) = partial.as_ref() {
            let mut list = ArgList::with_capacity(def.outputs.len() + ni + 4);
            p.push_read(&mut list);
            match outs {
                Some(outs) => {
                    for o in outs.iter_mut() {
                        push_out(&mut list, o)?;
                    }
                }
                None => {
                    for buf in bufs.iter_mut() {
                        buf.push(&mut list);
                    }
                }
            }
            for (j, a) in args.iter().enumerate() {
                if let Arg::Scalar(s) = a {
                    push_scalar(&mut list, *s, b.dtypes[j]);
                }
            }
            list.scalar(b.m as i64)
                .scalar(b.k as i64)
                .scalar(plan.p as i64);
            let warps_per_block = (BLOCK / 32) as usize;
            let cap = (l.sm_count as usize) * 32;
            let grid = b.m.div_ceil(warps_per_block).clamp(1, cap.max(1)) as u32;
            // SAFETY: warp `o < m` reads `_partial[o * P .. (o + 1) * P]` (inside its m * P
            // elements, all written by the main kernel before this one on the same stream) and
            // writes element `o` of each output (m elements each, exclusive).
            unsafe { l.functions[1].launch_args(&stream, &LaunchConfig::new(grid, BLOCK), &list)? };
        }
        drop(partial);
        bufs.into_iter()
            .map(|o| o.into_tensor(&b.out_shape))
            .collect()
    }
}

/// How a reduction is spread over the GPU.
struct Plan {
    /// Threads per output group: 1, 32 or BLOCK.
    group: u32,
    /// Chunks per output.
    p: usize,
    /// Elements per chunk.
    chunk: usize,
    grid: u32,
}

/// Chooses the group size from the reduced length and the layout, and chunks when few outputs
/// would leave the GPU idle.
fn plan(l: &Loaded, b: &Bound) -> Plan {
    let resident = (l.sm_count as usize) * (l.blocks_per_sm as usize) * (BLOCK as usize);
    let (m, k) = (b.m, b.k);
    // Whether consecutive reduced elements of the first tensor input are adjacent in memory.
    let inner_contiguous = b.rstrides.first().and_then(|s| s.last()).copied() == Some(1);
    let group: usize = if k <= 32 || (!inner_contiguous && m >= resident) {
        1
    } else if k <= 4096 || m * 32 >= resident {
        32
    } else {
        BLOCK as usize
    };
    let groups_to_fill = (resident / group).max(1);
    let mut p = 1usize;
    if m < groups_to_fill / 2 {
        let by_fill = groups_to_fill.div_ceil(m.max(1));
        let by_work = (k / (group * 16)).max(1); // at least 16 elements per thread
        p = by_fill.min(by_work).max(1);
    }
    let chunk = k.div_ceil(p).max(1);
    let p = if k == 0 { 1 } else { k.div_ceil(chunk) };
    let threads = (m * p).saturating_mul(group);
    let cap = (l.sm_count as usize) * (l.blocks_per_sm as usize) * 8;
    let grid = threads.div_ceil(BLOCK as usize).clamp(1, cap.max(1)) as u32;
    Plan {
        group: group as u32,
        p,
        chunk,
        grid,
    }
}
