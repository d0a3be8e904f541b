//! [`ElementwiseKernel`]: CuPy's elementwise kernel template. The user writes what happens to
//! one element; the library writes the kernel, picks the launch configuration and handles the
//! tensors (broadcasting, strided views, output allocation, in-place outputs, dtype dispatch).

mod codegen;
mod errors;
mod plan_memo;

use crate::args::{with_tensor, AnyTensor, Arg, OutArg, TensorRef};
use crate::broadcast::{self, MAX_DIMS};
use crate::buffers::{contiguous_copy, push_out, push_read, push_scalar, OutBuf};
use crate::cache::{KernelCache, Origin, Target};
use crate::error::{JitError, Result};
use crate::loaded::{self, Build, Loaded, SpecKey, SpecTable, BLOCK, MAX_PARAMS};
use crate::options::KernelOptions;
use crate::params::{self, Param};
use crate::types;
use crate::typing;
use cuda_stack_driver::launch::ArgList;
use cuda_stack_driver::LaunchConfig;
use cuda_stack_runtime::DType;
use smallvec::SmallVec;
use std::sync::Arc;
use std::time::Duration;

/// A call's outputs, on the stack for up to two (`call1` takes its tensor without a heap
/// allocation; `call` returns them as a `Vec`).
/// The buffers a call allocated for its outputs (none for `call_into`).
type NewOutputs = SmallVec<[OutBuf; 2]>;

/// How a parameter reaches the kernel in one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A tensor whose elements are contiguous and not broadcast: indexed by `i` directly.
    Flat,
    /// A strided or broadcast view: its offset is computed from the merged shape and strides.
    Strided,
    /// A `raw` parameter: the whole tensor, indexed by the body.
    Raw,
    /// A scalar passed by value.
    Scalar,
}

/// A user-defined elementwise kernel (CuPy's `cupy.ElementwiseKernel`).
///
/// ```no_run
/// use cuda_stack_jit::ElementwiseKernel;
/// use cuda_stack_runtime::Tensor;
/// # fn main() -> cuda_stack_jit::Result<()> {
/// // SAFETY: the operation touches only its own elements `x` and `y`.
/// let square = unsafe {
///     ElementwiseKernel::new("float32 x", "float32 y", "y = x * x;", "square_kernel")?
/// };
/// let x = Tensor::<f32>::arange(0.0, 10.0, 1.0)?;
/// let y = square.call1::<f32>(&[(&x).into()])?;
/// assert_eq!(y.to_vec()?, [0.0, 1.0, 4.0, 9.0, 16.0, 25.0, 36.0, 49.0, 64.0, 81.0]);
/// # Ok(()) }
/// ```
///
/// **Parameters** are CuPy's lists: `"float32 x, T y"` with NumPy type names (`float32`,
/// `float64`, `int32`, `int64`, `float16`, `bfloat16`; Rust's `f32` … also work) or
/// placeholders (`T`), which take the dtype of the tensors passed for them (all tensors of
/// one placeholder must agree); `raw` parameters (`raw T table`) get the whole tensor, indexed
/// in the body as `table[j]` (bounds-checked) with `table.size()`. In the operation, `i` is the
/// element's index (row-major over the broadcast shape) and `_ind.size()` the element count.
///
/// **Calls**: [`ElementwiseKernel::call`] allocates the outputs (contiguous, of the broadcast
/// shape), [`ElementwiseKernel::call_into`] writes given ones in place (an output may be read
/// in the body: `y += x`). Inputs broadcast against each other (NumPy's rules); strided and
/// broadcast views are read where they are, without copies. A scalar argument is passed by
/// value, converted to its parameter's type. One kernel is compiled per combination of dtypes
/// (and argument kinds) on first use, through the [`KernelCache`]; later calls with the same
/// combination look it up in a small per-kernel table, and a call whose arguments have the same
/// dtypes, devices, shapes and strides as the last one reuses its whole binding (a loop over
/// same-shaped tensors binds once).
///
/// **Launch**: a grid-stride loop, 256 threads per block. When every operand is contiguous:
/// one thread per 16-byte packet over the whole array (vector loads and stores where the
/// pointers are aligned, a scalar tail); otherwise one thread per element, at most 4 waves of
/// the device's resident blocks ([`ElementwiseKernel::launch_info`] shows what a call gets).
#[derive(Clone)]
pub struct ElementwiseKernel {
    def: Arc<Def>,
}

struct Def {
    name: String,
    inputs: Vec<Param>,
    outputs: Vec<Param>,
    all: Vec<Param>,
    placeholders: Vec<String>,
    operation: String,
    preamble: String,
    options: Vec<String>,
    cache: Arc<KernelCache>,
    specs: SpecTable,
    memo: plan_memo::PlanMemo,
}

impl std::fmt::Debug for ElementwiseKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElementwiseKernel")
            .field("name", &self.def.name)
            .field("in_params", &params::list(&self.def.inputs))
            .field("out_params", &params::list(&self.def.outputs))
            .field("specializations", &self.def.specs.len())
            .finish()
    }
}

/// What one call's launch looks like (for learners and benchmarks).
#[derive(Debug, Clone)]
pub struct LaunchInfo {
    /// The kernel's name.
    pub kernel: String,
    /// Elements processed.
    pub n: usize,
    /// Blocks.
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
    /// The device's streaming multiprocessors.
    pub sm_count: u32,
    /// Blocks of `block` threads one SM holds at once for this kernel (occupancy).
    pub blocks_per_sm: u32,
    /// The argument kinds: `x: contiguous`, `b: strided over 2 dims`, …
    pub arguments: Vec<String>,
    /// What the specialization was compiled for.
    pub target: Target,
    /// Where its binary came from when it was first loaded, and how long that took.
    pub origin: Origin,
    /// Compile (or disk-cache load) time.
    pub compile_time: Duration,
    /// The generated source.
    pub source: Arc<str>,
}

/// One call's arguments, bound to the definition.
struct Bound {
    device: usize,
    dtypes: Vec<DType>,
    placeholder_types: Vec<DType>,
    kinds: Vec<Kind>,
    shape: Vec<usize>,
    n: usize,
    dims: Vec<i64>,
    /// Merged strides of each `Strided` input, in parameter order.
    strides: Vec<Vec<i64>>,
    /// Inputs replaced by a contiguous copy (raw views, or too many dimensions).
    copies: Vec<(usize, AnyTensor)>,
    /// The outputs were given (`call_into`): the operation may read them.
    outputs_read: bool,
    key: SpecKey,
}

impl ElementwiseKernel {
    /// Defines a kernel: input and output parameter lists, the operation (CUDA C for one
    /// element) and a name (a C identifier: the kernel's name in profilers). Nothing is
    /// compiled until the first call. Errors: a list, type or name that does not parse.
    ///
    /// # Safety
    /// The operation (and any preamble) is CUDA C that runs as it is written: it must access
    /// device memory only through its parameters — its own elements of non-`raw` parameters,
    /// and `raw` parameters through `[]` (which traps on an index outside the tensor) — never
    /// through pointers it forms itself (`&x + 1`, casts of integers, other globals). Output
    /// elements the operation does not assign hold unspecified (but valid) values, as in
    /// `cupy.empty`.
    pub unsafe fn new(
        in_params: &str,
        out_params: &str,
        operation: &str,
        name: &str,
    ) -> Result<ElementwiseKernel> {
        // SAFETY: forwarded to the caller.
        unsafe { Self::with_options(in_params, out_params, operation, name, KernelOptions::new()) }
    }

    /// [`ElementwiseKernel::new`] with a preamble, NVRTC options or another cache.
    ///
    /// # Safety
    /// As for [`ElementwiseKernel::new`], for the operation and the preamble.
    pub unsafe fn with_options(
        in_params: &str,
        out_params: &str,
        operation: &str,
        name: &str,
        options: KernelOptions,
    ) -> Result<ElementwiseKernel> {
        if !types::is_identifier(name) || name.starts_with('_') {
            return Err(JitError::Parse {
                kernel: name.to_string(),
                what: "name",
                text: name.to_string(),
                problem: "a kernel name is a C identifier not starting with `_`".into(),
            });
        }
        let inputs = params::parse(name, "in_params", in_params, false, &[])?;
        let outputs = params::parse(name, "out_params", out_params, true, &[])?;
        let all: Vec<Param> = inputs.iter().chain(&outputs).cloned().collect();
        params::check_unique(name, &all)?;
        if outputs.is_empty() {
            return Err(JitError::Parse {
                kernel: name.to_string(),
                what: "out_params",
                text: out_params.to_string(),
                problem: "an elementwise kernel needs at least one output".into(),
            });
        }
        if all.len() > MAX_PARAMS {
            return Err(JitError::Limit {
                kernel: name.to_string(),
                problem: format!(
                    "{} parameters; at most {MAX_PARAMS} are supported",
                    all.len()
                ),
            });
        }
        Ok(ElementwiseKernel {
            def: Arc::new(Def {
                name: name.to_string(),
                placeholders: typing::placeholders(all.iter()),
                inputs,
                outputs,
                all,
                operation: operation.to_string(),
                preamble: options.preamble.clone(),
                options: options.nvrtc_options.clone(),
                cache: options.cache_or_global(),
                specs: SpecTable::default(),
                memo: Default::default(),
            }),
        })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// Runs the kernel on `args` (one per input parameter: tensors or scalars) and returns the
    /// outputs, newly allocated (contiguous, of the inputs' broadcast shape), in parameter
    /// order. The work is queued on the tensors' device's current stream.
    pub fn call(&self, args: &[Arg<'_>]) -> Result<Vec<AnyTensor>> {
        self.run(args, None, None, collect_outputs)
    }

    /// [`ElementwiseKernel::call`] for a kernel with one output of type `T`.
    pub fn call1<T>(&self, args: &[Arg<'_>]) -> Result<cuda_stack_runtime::Tensor<T>>
    where
        T: cuda_stack_runtime::TensorElement,
        cuda_stack_runtime::Tensor<T>: TryFrom<AnyTensor, Error = JitError>,
    {
        self.run(args, None, None, |bufs, shape| {
            let n = bufs.len();
            match (bufs.into_iter().next(), n) {
                (Some(b), 1) => b
                    .into_tensor(shape)?
                    .into_typed::<T>()
                    .map_err(|e| self.named(e)),
                _ => Err(JitError::ArgCount {
                    kernel: self.def.name.clone(),
                    what: "outputs (call1 returns one)",
                    expected: 1,
                    found: n,
                    params: params::list(&self.def.outputs),
                }),
            }
        })
    }

    /// Runs the kernel with `n` elements when no (non-raw) tensor argument gives the size
    /// (CuPy's `size=`): outputs are 1-D of length `n`.
    pub fn call_sized(&self, args: &[Arg<'_>], n: usize) -> Result<Vec<AnyTensor>> {
        self.run(args, None, Some(n), collect_outputs)
    }

    /// Runs the kernel writing into `outputs` (one per output parameter), in place: each is
    /// made exclusive first (a private copy if it shares its storage, see
    /// `Tensor::is_exclusive`), must have the broadcast shape (raw outputs: any shape), and may
    /// be read by the operation.
    pub fn call_into(&self, args: &[Arg<'_>], outputs: &mut [OutArg<'_>]) -> Result<()> {
        self.run(args, Some(outputs), None, |_, _| Ok(()))
    }

    /// The generated CUDA source for these arguments (the specialization a call with them
    /// compiles), without compiling it.
    pub fn source_for(&self, args: &[Arg<'_>]) -> Result<String> {
        let b = self.bind(args, None, None)?;
        Ok(self.generate(&b).0)
    }

    /// The generated source for contiguous tensors of `dtypes` (one per input parameter);
    /// needs no GPU.
    pub fn source_for_dtypes(&self, dtypes: &[DType]) -> Result<String> {
        self.source_for_layout(dtypes, &[], 0, false)
    }

    /// [`ElementwiseKernel::source_for_dtypes`] with the inputs flagged in `strided` read as
    /// strided views over `ndim` merged dimensions; `outputs_read`: as for `call_into`.
    pub(crate) fn source_for_layout(
        &self,
        dtypes: &[DType],
        strided: &[bool],
        ndim: usize,
        outputs_read: bool,
    ) -> Result<String> {
        let def = &self.def;
        self.check_count("inputs", def.inputs.len(), dtypes.len())?;
        let raw = def.inputs.iter().map(|p| p.raw);
        let mut kinds: Vec<Kind> = raw
            .chain(def.outputs.iter().map(|p| p.raw))
            .map(|r| if r { Kind::Raw } else { Kind::Flat })
            .collect();
        for (k, &s) in strided.iter().enumerate() {
            if s && k < def.inputs.len() && kinds[k] == Kind::Flat {
                kinds[k] = Kind::Strided;
            }
        }
        let ndim = if kinds.contains(&Kind::Strided) {
            ndim.max(1)
        } else {
            0
        };
        let typed = typing::resolve_dtypes(
            &def.name,
            &def.placeholders,
            &def.inputs,
            &def.outputs,
            dtypes,
        )?;
        Ok(codegen::generate(&codegen::Spec {
            name: &def.name,
            params: &def.all,
            placeholders: &def.placeholders,
            placeholder_types: &typed.placeholders,
            dtypes: &typed.params,
            kinds: &kinds,
            ndim,
            outputs_read,
            preamble: &def.preamble,
            operation: &def.operation,
        })
        .0)
    }

    /// How a call with `args` is launched: grid, block, occupancy, argument kinds, where the
    /// binary came from and the source. Compiles (or loads) the specialization if needed.
    pub fn launch_info(&self, args: &[Arg<'_>]) -> Result<LaunchInfo> {
        let b = self.bind(args, None, None)?;
        let l = self.loaded(&b)?;
        let grid = grid_for(&l, b.n, codegen::packet_elements(&b.kinds, &b.dtypes));
        let arguments = self
            .def
            .all
            .iter()
            .zip(&b.kinds)
            .map(|(p, k)| match k {
                Kind::Strided => format!("{}: strided over {} dims", p.name, b.dims.len()),
                k => format!("{}: {}", p.name, format!("{k:?}").to_lowercase()),
            })
            .collect();
        Ok(LaunchInfo {
            kernel: self.def.name.clone(),
            n: b.n,
            grid,
            block: BLOCK,
            sm_count: l.sm_count,
            blocks_per_sm: l.blocks_per_sm,
            arguments,
            target: l.target,
            origin: l.origin,
            compile_time: l.took,
            source: l.source.clone(),
        })
    }

    /// What `b` compiles: the specialization's description.
    fn spec<'a>(&'a self, b: &'a Bound) -> codegen::Spec<'a> {
        let def = &self.def;
        codegen::Spec {
            name: &def.name,
            params: &def.all,
            placeholders: &def.placeholders,
            placeholder_types: &b.placeholder_types,
            dtypes: &b.dtypes,
            kinds: &b.kinds,
            ndim: b.dims.len(),
            outputs_read: b.outputs_read,
            preamble: &def.preamble,
            operation: &def.operation,
        }
    }

    fn generate(&self, b: &Bound) -> (String, crate::source_map::SourceMap) {
        codegen::generate(&self.spec(b))
    }

    /// The loaded specialization for `b`, compiled on first use.
    fn loaded(&self, b: &Bound) -> Result<Arc<Loaded>> {
        if let Some(l) = self.def.specs.get(&b.key) {
            return Ok(l);
        }
        let (source, map) = self.generate(b);
        let sizes = codegen::param_sizes(&self.spec(b));
        let l = loaded::load(
            &self.def.cache,
            b.device,
            Build {
                kernel: &self.def.name,
                source,
                map,
                options: &self.def.options,
                entries: vec![(self.def.name.clone(), sizes)],
            },
        )?;
        Ok(self.def.specs.insert(b.key, Arc::new(l)))
    }

    /// Checks and classifies the arguments of a call.
    fn bind(
        &self,
        args: &[Arg<'_>],
        outs: Option<&[OutArg<'_>]>,
        size: Option<usize>,
    ) -> Result<Bound> {
        let def = &self.def;
        let kernel = &def.name;
        self.check_count("inputs", def.inputs.len(), args.len())?;
        if let Some(o) = outs {
            self.check_count("outputs", def.outputs.len(), o.len())?;
        }
        // The device: the first tensor's; every other must be there too.
        let tensor_devices = args
            .iter()
            .zip(&def.inputs)
            .filter_map(|(a, p)| match a {
                Arg::Tensor(t) => Some((p, t.device())),
                Arg::Scalar(_) => None,
            })
            .chain(
                outs.into_iter()
                    .flatten()
                    .zip(&def.outputs)
                    .map(|(o, p)| (p, o.device())),
            );
        let mut device = None;
        for (p, d) in tensor_devices {
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
        let device = match device {
            Some(d) => d,
            None => cuda_stack_runtime::current_device()?,
        };
        let typed = typing::resolve(
            kernel,
            &def.placeholders,
            &def.inputs,
            &def.outputs,
            args,
            outs,
        )?;

        // Kinds, and the broadcast shape of the non-raw tensors.
        let mut kinds = Vec::with_capacity(def.all.len());
        for (p, a) in def.inputs.iter().zip(args) {
            kinds.push(match (a, p.raw) {
                (Arg::Scalar(_), true) => {
                    return Err(JitError::ArgKind {
                        kernel: kernel.clone(),
                        param: p.name.clone(),
                        problem: "a raw parameter needs a tensor, but the call passed a scalar"
                            .into(),
                    })
                }
                (Arg::Scalar(_), false) => Kind::Scalar,
                (Arg::Tensor(_), true) => Kind::Raw,
                (Arg::Tensor(_), false) => Kind::Flat,
            });
        }
        kinds.extend(
            def.outputs
                .iter()
                .map(|p| if p.raw { Kind::Raw } else { Kind::Flat }),
        );
        let in_shapes = def.inputs.iter().zip(args).filter_map(|(p, a)| match a {
            Arg::Tensor(t) if !p.raw => Some(t.shape()),
            _ => None,
        });
        let out_shapes = outs
            .into_iter()
            .flatten()
            .zip(&def.outputs)
            .filter(|(_, p)| !p.raw)
            .map(|(o, _)| o.shape());
        let mut any_tensor = false;
        let shape =
            broadcast::broadcast(in_shapes.chain(out_shapes).inspect(|_| any_tensor = true))
                .map_err(|problem| self.shape_error(problem, args, outs))?;
        let shape = match (any_tensor, size) {
            (false, Some(n)) => vec![n],
            (false, None) => {
                return Err(JitError::Shape {
                    kernel: kernel.clone(),
                    problem: "no non-raw tensor argument gives the size of the call; pass one, \
                              or use call_sized"
                        .into(),
                    shapes: self.describe_shapes(args, outs),
                })
            }
            (true, Some(n)) if shape.iter().product::<usize>() != n => {
                return Err(JitError::Shape {
                    kernel: kernel.clone(),
                    problem: format!(
                        "the size {n} differs from the arguments' {}",
                        shape.iter().product::<usize>()
                    ),
                    shapes: self.describe_shapes(args, outs),
                })
            }
            (true, _) => shape,
        };
        if let Some(outs) = outs {
            for (o, p) in outs.iter().zip(&def.outputs) {
                if !p.raw && o.shape() != shape.as_slice() {
                    return Err(JitError::Shape {
                        kernel: kernel.clone(),
                        problem: format!(
                            "output `{}` has shape {:?} but the call's broadcast shape is {shape:?}",
                            p.name,
                            o.shape()
                        ),
                        shapes: self.describe_shapes(args, Some(outs)),
                    });
                }
            }
        }
        let n: usize = shape.iter().product();

        // Layouts: contiguous non-broadcast inputs are flat; the others strided.
        let mut copies = Vec::new();
        let mut strided_idx = Vec::new();
        let mut aligned = Vec::new();
        for (k, (p, a)) in def.inputs.iter().zip(args).enumerate() {
            let Arg::Tensor(t) = a else { continue };
            let (contig, numel) = with_tensor!(t, |t| (t.is_contiguous(), t.numel()));
            if p.raw {
                if !contig {
                    copies.push((k, contiguous_copy(*t, None)?));
                }
            } else if !(contig && numel == n) && n > 0 {
                strided_idx.push(k);
                aligned.push(with_tensor!(t, |t| broadcast::aligned_strides(
                    t.shape(),
                    t.strides(),
                    &shape
                )));
            }
        }
        let (mut dims, mut strides) = if strided_idx.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            let all_dims: Vec<usize> = (0..shape.len()).collect();
            broadcast::merge(&shape, &all_dims, &aligned)
        };
        if dims.len() > MAX_DIMS {
            // Too many dimensions to index: read copies instead.
            for &k in &strided_idx {
                if let Arg::Tensor(t) = &args[k] {
                    copies.push((k, contiguous_copy(*t, Some(&shape))?));
                }
            }
            strided_idx.clear();
            dims.clear();
            strides.clear();
        }
        for &k in &strided_idx {
            kinds[k] = Kind::Strided;
        }
        if strided_idx.is_empty() {
            dims.clear();
        }
        let mut key = SpecKey::new(device, [dims.len() as u8, u8::from(outs.is_some())]);
        for (k, (&kind, &d)) in kinds.iter().zip(&typed.params).enumerate() {
            key.set(k, (kind as u8) << 3 | types::code(d));
        }
        Ok(Bound {
            device,
            dtypes: typed.params,
            placeholder_types: typed.placeholders,
            kinds,
            shape,
            n,
            dims,
            strides,
            copies,
            outputs_read: outs.is_some(),
            key,
        })
    }

    /// Binds, looks up and launches the call, then hands the new output buffers and their shape
    /// to `finish` (each caller builds its own return value from them, without an intermediate
    /// collection on the per-call path).
    fn run<R>(
        &self,
        args: &[Arg<'_>],
        outs: Option<&mut [OutArg<'_>]>,
        size: Option<usize>,
        finish: impl FnOnce(NewOutputs, &[usize]) -> Result<R>,
    ) -> Result<R> {
        // A call like the last remembered one reuses its plan (see `plan_memo`).
        let rememberable = outs.is_none() && size.is_none();
        if rememberable {
            if let Some(plan) = self.def.memo.get(args) {
                return self.execute(&plan.bound, Some(&plan.loaded), args, None, finish);
            }
        }
        let b = self.bind(args, outs.as_deref(), size)?;
        if rememberable && b.n > 0 && b.copies.is_empty() {
            let loaded = self.loaded(&b)?;
            let plan = Arc::new(plan_memo::Plan { bound: b, loaded });
            self.def
                .memo
                .put(plan_memo::Signature::of(args), plan.clone());
            return self.execute(&plan.bound, Some(&plan.loaded), args, None, finish);
        }
        self.execute(&b, None, args, outs, finish)
    }

    /// Allocates the outputs (unless given), fills the argument list and launches the bound
    /// call `b` (its specialization `loaded`, when already looked up); then `finish` as in
    /// [`ElementwiseKernel::run`].
    fn execute<R>(
        &self,
        b: &Bound,
        loaded: Option<&Arc<Loaded>>,
        args: &[Arg<'_>],
        outs: Option<&mut [OutArg<'_>]>,
        finish: impl FnOnce(NewOutputs, &[usize]) -> Result<R>,
    ) -> Result<R> {
        let def = &self.def;
        let rt = cuda_stack_runtime::Runtime::get(b.device)?;
        let stream = rt.current_stream();
        // New outputs. SAFETY: the kernel writes every element the operation assigns; the
        // others are unspecified valid values (`new`'s documented contract).
        let mut bufs = NewOutputs::new();
        if outs.is_none() {
            for &d in &b.dtypes[def.inputs.len()..] {
                bufs.push(unsafe { OutBuf::alloc(d, rt, &stream, b.n)? });
            }
        }
        if b.n == 0 {
            return finish(bufs, &b.shape);
        }
        let looked_up;
        let l: &Loaded = match loaded {
            Some(l) => l,
            None => {
                looked_up = self.loaded(b)?;
                &looked_up
            }
        };
        let mut list = ArgList::with_capacity(def.all.len() + 2 + b.strides.len());
        for (k, (p, a)) in def.inputs.iter().zip(args).enumerate() {
            match a {
                Arg::Scalar(s) => push_scalar(&mut list, *s, b.dtypes[k]),
                Arg::Tensor(t) => {
                    let t: TensorRef<'_> = match b.copies.iter().find(|(j, _)| *j == k) {
                        Some((_, c)) => c.as_ref(),
                        None => *t,
                    };
                    push_read(&mut list, t)?;
                    if p.raw {
                        list.scalar(with_tensor!(t, |t| t.numel()) as i64);
                    }
                }
            }
        }
        match outs {
            Some(outs) => {
                for (o, p) in outs.iter_mut().zip(&def.outputs) {
                    let numel = o.shape().iter().product::<usize>() as i64;
                    push_out(&mut list, o)?;
                    if p.raw {
                        list.scalar(numel);
                    }
                }
            }
            None => {
                for (buf, p) in bufs.iter_mut().zip(&def.outputs) {
                    buf.push(&mut list);
                    if p.raw {
                        list.scalar(b.n as i64);
                    }
                }
            }
        }
        list.scalar(b.n as i64);
        if !b.strides.is_empty() {
            list.bytes(bytemuck::cast_slice(&b.dims));
            for s in &b.strides {
                list.bytes(bytemuck::cast_slice(s));
            }
        }
        let packet = codegen::packet_elements(&b.kinds, &b.dtypes);
        let cfg = LaunchConfig::new(grid_for(l, b.n, packet), BLOCK);
        // SAFETY: the arguments follow the generated signature (`param_sizes`, checked against
        // the compiled kernel when it was loaded). The generated loop visits indices
        // `_j < _n = n` only: flat inputs and outputs hold exactly `n` elements from the
        // pointer pushed; strided inputs read `offset + Σ c_d·stride_d` with coordinates inside
        // the broadcast shape, which their layout maps inside their storage (stride 0 where
        // broadcast); raw parameters check every index against the size pushed with them
        // (their whole contiguous tensor). What the operation itself does is the promise made
        // in `ElementwiseKernel::new`. Outputs are exclusive (new, or made exclusive by
        // `as_mut_slice`), so no other tensor observes the writes.
        unsafe { l.functions[0].launch_args(&stream, &cfg, &list)? };
        drop(list);
        finish(bufs, &b.shape)
    }
}

/// The new output buffers as tensors of `shape`, in parameter order.
fn collect_outputs(bufs: NewOutputs, shape: &[usize]) -> Result<Vec<AnyTensor>> {
    bufs.into_iter().map(|o| o.into_tensor(shape)).collect()
}

/// Blocks for `n` elements. A contiguous-only kernel (`packet` > 1 elements per packet): one
/// thread per packet, the whole array in one step of its loop (kernels/TUNING.md, round 1: one
/// 16-byte packet per thread over a full grid moved 5% more bytes per second than a grid-stride
/// loop over a capped grid). Others: one thread per element, capped at 4 waves of resident
/// blocks (the loop strides over the rest).
fn grid_for(l: &Loaded, n: usize, packet: usize) -> u32 {
    let blocks = n.div_ceil(packet.max(1)).div_ceil(BLOCK as usize);
    let cap = if packet > 1 {
        i32::MAX as usize
    } else {
        (l.sm_count as usize) * (l.blocks_per_sm as usize) * 4
    };
    blocks.clamp(1, cap.max(1)) as u32
}
