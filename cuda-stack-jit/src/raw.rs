//! [`RawModule`] and [`RawKernel`]: your own CUDA source (CuPy's `cupy.RawModule` /
//! `cupy.RawKernel`), compiled with NVRTC through the [`KernelCache`] for each device it runs
//! on, and launched on tensors with a typed signature.
//!
//! The signature is a tuple of parameter types: [`In<T>`] (a tensor the kernel reads, passed as
//! `const T*` to its first element; a non-contiguous view is copied to a contiguous tensor
//! first), [`Out<T>`] (a tensor it writes, as `T*`; made exclusive first, copy-on-write) and
//! scalars (`u32`, `f32`, any `DeviceRepr`), by value. A launch with the wrong argument types or
//! count does not compile; the parameter byte sizes are checked against the compiled kernel
//! when it is first loaded on a device.

use crate::cache::{CompileRequest, KernelCache, Target};
use crate::error::{JitError, Result};
use cuda_stack_driver::launch::ArgList;
use cuda_stack_driver::{DeviceRepr, Function, LaunchConfig, Module, ModuleImage};
use cuda_stack_runtime::{Tensor, TensorElement};
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

/// A tensor the kernel reads: `const T*` to its first element (contiguous, row-major).
pub struct In<T>(PhantomData<T>);
/// A tensor the kernel writes: `T*` to its first element (contiguous, exclusive).
pub struct Out<T>(PhantomData<T>);

/// One parameter of a [`RawKernel`] signature.
pub trait RawParam {
    /// What a launch passes for it.
    type Arg<'a>;
    /// What is kept alive while the launch is prepared (a contiguous copy, a borrow).
    #[doc(hidden)]
    type Held<'a>;
    /// Its byte size in the kernel's parameter list.
    const SIZE: usize;
    /// The device of a tensor argument.
    #[doc(hidden)]
    fn device(arg: &Self::Arg<'_>) -> Option<usize>;
    /// Prepares the argument.
    #[doc(hidden)]
    fn hold<'a>(arg: Self::Arg<'a>) -> Result<Self::Held<'a>>;
    /// Pushes it onto the launch's argument list.
    #[doc(hidden)]
    fn push<'a, 'b>(held: &'b mut Self::Held<'a>, list: &mut ArgList<'b>) -> Result<()>;
}

/// A read tensor, borrowed or copied to be contiguous.
#[doc(hidden)]
pub enum Held<'a, T: TensorElement> {
    Borrowed(&'a Tensor<T>),
    Owned(Tensor<T>),
}

impl<T: TensorElement> RawParam for In<T> {
    type Arg<'a> = &'a Tensor<T>;
    type Held<'a> = Held<'a, T>;
    const SIZE: usize = 8;
    fn device(arg: &Self::Arg<'_>) -> Option<usize> {
        Some(arg.device())
    }
    fn hold<'a>(arg: Self::Arg<'a>) -> Result<Self::Held<'a>> {
        Ok(if arg.is_contiguous() {
            Held::Borrowed(arg)
        } else {
            Held::Owned(arg.contiguous()?)
        })
    }
    fn push<'a, 'b>(held: &'b mut Self::Held<'a>, list: &mut ArgList<'b>) -> Result<()> {
        let t: &'b Tensor<T> = match held {
            Held::Borrowed(t) => t,
            Held::Owned(t) => t,
        };
        list.read_at(t.storage()?, t.offset())?;
        Ok(())
    }
}

impl<T: TensorElement> RawParam for Out<T> {
    type Arg<'a> = &'a mut Tensor<T>;
    type Held<'a> = &'a mut Tensor<T>;
    const SIZE: usize = 8;
    fn device(arg: &Self::Arg<'_>) -> Option<usize> {
        Some(arg.device())
    }
    fn hold<'a>(arg: Self::Arg<'a>) -> Result<Self::Held<'a>> {
        Ok(arg)
    }
    fn push<'a, 'b>(held: &'b mut Self::Held<'a>, list: &mut ArgList<'b>) -> Result<()> {
        list.write(held.as_mut_slice()?);
        Ok(())
    }
}

impl<T: DeviceRepr> RawParam for T {
    type Arg<'a> = T;
    type Held<'a> = T;
    const SIZE: usize = std::mem::size_of::<T>();
    fn device(_: &Self::Arg<'_>) -> Option<usize> {
        None
    }
    fn hold<'a>(arg: Self::Arg<'a>) -> Result<Self::Held<'a>> {
        Ok(arg)
    }
    fn push<'a, 'b>(held: &'b mut Self::Held<'a>, list: &mut ArgList<'b>) -> Result<()> {
        list.scalar(*held);
        Ok(())
    }
}

/// A whole kernel signature: a tuple of [`RawParam`]s.
pub trait RawSignature {
    /// The arguments of a launch.
    type Args<'a>;
    /// Parameter byte sizes.
    const SIZES: &'static [usize];
    /// Prepares the arguments and launches.
    #[doc(hidden)]
    fn launch_with(
        f: &dyn Fn(usize) -> Result<Function>,
        cfg: &LaunchConfig,
        args: Self::Args<'_>,
    ) -> Result<()>;
}

macro_rules! raw_signature {
    ($($A:ident $a:ident $h:ident),*) => {
        impl<$($A: RawParam),*> RawSignature for ($($A,)*) {
            type Args<'a> = ($($A::Arg<'a>,)*);
            const SIZES: &'static [usize] = &[$($A::SIZE),*];
            #[allow(unused_mut, unused_variables, non_snake_case)]
            fn launch_with(
                f: &dyn Fn(usize) -> Result<Function>,
                cfg: &LaunchConfig,
                args: Self::Args<'_>,
            ) -> Result<()> {
                let ($($a,)*) = args;
                let mut device: Option<usize> = None;
                $(
                    if let Some(d) = $A::device(&$a) {
                        match device {
                            None => device = Some(d),
                            Some(e) if e != d => return Err(JitError::DeviceMismatch {
                                kernel: "raw kernel".into(),
                                param: stringify!($a).into(),
                                expected: e,
                                found: d,
                            }),
                            Some(_) => {}
                        }
                    }
                )*
                let device = match device {
                    Some(d) => d,
                    None => cuda_stack_runtime::current_device()?,
                };
                let func = f(device)?;
                let stream = cuda_stack_runtime::stream_for(device)?;
                $( let mut $h = $A::hold($a)?; )*
                let mut list = ArgList::with_capacity(Self::SIZES.len());
                $( $A::push(&mut $h, &mut list)?; )*
                // SAFETY: the signature was promised to match the kernel (`get_function`) and
                // its sizes were checked at load; the bounds are promised by the caller of
                // `RawKernel::launch`.
                unsafe { func.launch_args(&stream, cfg, &list)? };
                Ok(())
            }
        }
    };
}
raw_signature!();
raw_signature!(A0 a0 h0);
raw_signature!(A0 a0 h0, A1 a1 h1);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2, A3 a3 h3);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2, A3 a3 h3, A4 a4 h4);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2, A3 a3 h3, A4 a4 h4, A5 a5 h5);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2, A3 a3 h3, A4 a4 h4, A5 a5 h5, A6 a6 h6);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2, A3 a3 h3, A4 a4 h4, A5 a5 h5, A6 a6 h6, A7 a7 h7);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2, A3 a3 h3, A4 a4 h4, A5 a5 h5, A6 a6 h6, A7 a7 h7, A8 a8 h8);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2, A3 a3 h3, A4 a4 h4, A5 a5 h5, A6 a6 h6, A7 a7 h7, A8 a8 h8, A9 a9 h9);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2, A3 a3 h3, A4 a4 h4, A5 a5 h5, A6 a6 h6, A7 a7 h7, A8 a8 h8, A9 a9 h9, A10 a10 h10);
raw_signature!(A0 a0 h0, A1 a1 h1, A2 a2 h2, A3 a3 h3, A4 a4 h4, A5 a5 h5, A6 a6 h6, A7 a7 h7, A8 a8 h8, A9 a9 h9, A10 a10 h10, A11 a11 h11);

/// CUDA source compiled with NVRTC for each device it is used on (`cupy.RawModule`). The
/// kernels must be `extern "C"` (unmangled names).
#[derive(Clone)]
pub struct RawModule {
    inner: Arc<ModuleInner>,
}

struct ModuleInner {
    source: String,
    options: Vec<String>,
    cache: Arc<KernelCache>,
    modules: RwLock<Vec<(usize, Module)>>,
}

impl std::fmt::Debug for RawModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawModule")
            .field("options", &self.inner.options)
            .finish()
    }
}

impl RawModule {
    /// Compiles `source` with NVRTC `options` for the current device (a compile error is
    /// returned now, with NVRTC's log), through the global cache.
    pub fn new(source: &str, options: &[&str]) -> Result<RawModule> {
        Self::with_cache(source, options, KernelCache::global())
    }

    /// [`RawModule::new`] through `cache`.
    pub fn with_cache(
        source: &str,
        options: &[&str],
        cache: Arc<KernelCache>,
    ) -> Result<RawModule> {
        let m = RawModule {
            inner: Arc::new(ModuleInner {
                source: source.to_string(),
                options: options.iter().map(|s| s.to_string()).collect(),
                cache,
                modules: RwLock::new(Vec::new()),
            }),
        };
        m.module(cuda_stack_runtime::current_device()?)?;
        Ok(m)
    }

    /// The module loaded on `device` (compiled, or read from the cache, on first use).
    pub fn module(&self, device: usize) -> Result<Module> {
        let i = &self.inner;
        if let Some((_, m)) = i
            .modules
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|(d, _)| *d == device)
        {
            return Ok(m.clone());
        }
        let ctx = cuda_stack_runtime::Runtime::get(device)?.context();
        let target = Target::for_context(ctx)?;
        let fetched = i
            .cache
            .get_or_compile(&CompileRequest {
                name: "raw_module.cu",
                source: &i.source,
                options: &i.options,
                target,
            })
            .map_err(|e| match e {
                cuda_stack_driver::Error::Compile { options, log, .. } => JitError::Compile {
                    kernel: "raw module".into(),
                    options,
                    log,
                    hint: "the source given to RawModule::new".into(),
                },
                e => e.into(),
            })?;
        let image = match target {
            Target::Cubin(_) => ModuleImage::Cubin(&fetched.binary.bytes),
            Target::Ptx(_) => {
                ModuleImage::Ptx(std::str::from_utf8(&fetched.binary.bytes).map_err(|_| {
                    cuda_stack_driver::Error::Unsupported {
                        what: "a cached PTX entry",
                        why: "it is not UTF-8".into(),
                    }
                })?)
            }
        };
        let m = ctx.load_module(image, &Default::default())?;
        let mut all = i.modules.write().unwrap_or_else(|p| p.into_inner());
        if let Some((_, old)) = all.iter().find(|(d, _)| *d == device) {
            return Ok(old.clone());
        }
        all.push((device, m.clone()));
        Ok(m)
    }

    /// The kernel `name` with the signature `Sig` (e.g. `(In<f32>, Out<f32>, u32)`).
    ///
    /// # Safety
    /// The kernel's CUDA declaration must match `Sig`: `const T*` for each [`In<T>`], `T*` for
    /// each [`Out<T>`] (only these are written), and the exact C type of each scalar.
    pub unsafe fn get_function<Sig: RawSignature>(&self, name: &str) -> Result<RawKernel<Sig>> {
        let k = RawKernel {
            module: self.clone(),
            name: name.to_string(),
            functions: RwLock::new(Vec::new()),
            _sig: PhantomData,
        };
        k.function(cuda_stack_runtime::current_device()?)?;
        Ok(k)
    }
}

/// One kernel of a [`RawModule`] with its typed signature (`cupy.RawKernel`).
pub struct RawKernel<Sig: RawSignature> {
    module: RawModule,
    name: String,
    functions: RwLock<Vec<(usize, Function)>>,
    _sig: PhantomData<fn(Sig)>,
}

impl<Sig: RawSignature> std::fmt::Debug for RawKernel<Sig> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawKernel")
            .field("name", &self.name)
            .finish()
    }
}

impl<Sig: RawSignature> RawKernel<Sig> {
    /// Compiles `source` and takes its kernel `name` (`cupy.RawKernel(code, name)`).
    ///
    /// # Safety
    /// As for [`RawModule::get_function`].
    pub unsafe fn new(source: &str, name: &str, options: &[&str]) -> Result<RawKernel<Sig>> {
        // SAFETY: forwarded to the caller.
        unsafe { RawModule::new(source, options)?.get_function(name) }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel on `device` (loaded on first use; its parameter sizes checked against `Sig`).
    pub fn function(&self, device: usize) -> Result<Function> {
        if let Some((_, f)) = self
            .functions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|(d, _)| *d == device)
        {
            return Ok(f.clone());
        }
        let f = self.module.module(device)?.function(&self.name)?;
        let found = f.param_sizes()?;
        if found != Sig::SIZES {
            return Err(cuda_stack_driver::Error::SignatureMismatch {
                kernel: self.name.clone(),
                expected: Sig::SIZES.to_vec(),
                found,
            }
            .into());
        }
        self.functions
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push((device, f.clone()));
        Ok(f)
    }

    /// Launches on the tensors' device (the current device when no tensor is passed), on its
    /// current stream, with `cfg` (validated against the device). Tensors are ordered and
    /// tracked like any tensor op's.
    ///
    /// # Safety
    /// With `cfg`'s grid and block and these scalar values, every access the kernel makes must
    /// stay inside the elements of the tensors passed (an [`In<T>`] or [`Out<T>`] has
    /// `numel()` elements from the pointer), and the kernel must access no other device memory
    /// — check every length scalar against the tensors first, as for
    /// `cuda_stack_driver::Kernel::launch`.
    pub unsafe fn launch(&self, cfg: &LaunchConfig, args: Sig::Args<'_>) -> Result<()> {
        Sig::launch_with(&|d| self.function(d), cfg, args)
    }
}
