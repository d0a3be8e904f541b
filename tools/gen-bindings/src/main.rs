//! Regenerates `cuda-stack-sys/src/generated/` from the pinned CUDA headers.
//!
//! Usage: `gen-bindings --include <dir> [--include <dir>]... --out <dir>`
//! (normally run through `tools/regen-bindings`, which fetches the pinned headers). Every
//! `--include` directory is searched for each library's header and passed to clang as `-I`.
//!
//! For each library (driver: `cuda.h`, NVRTC: `nvrtc.h`, cuBLAS: `cublas_v2.h`, cuBLASLt:
//! `cublasLt.h`, NCCL: `nccl.h`) it writes two files:
//! - `<lib>_types.rs`: bindgen's types and constants, untouched;
//! - `<lib>_table.rs`: the entry points as a table of `Option<fn>` slots resolved one symbol at a
//!   time at run time, plus one wrapper method per entry point that routes the call through the
//!   checked-call stratum (`crate::result`). bindgen's `extern "C"` block itself is not emitted:
//!   nothing is linked.
//!
//! A library can build on the types of libraries generated before it (`bases`): cuBLAS's
//! `cudaStream_t` is then `*mut CUstream_st` of the driver's module, the same type as `CUstream`,
//! and cuBLASLt shares cuBLAS's `cublasStatus_t`. Every item a base already defines is left out
//! of bindgen's output (blocklisted by name) and imported from the base's module instead.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};
use std::path::{Path, PathBuf};
use syn::{FnArg, ForeignItem, Item, Pat, ReturnType, Type};

struct Lib {
    /// Prefix of the output files.
    stem: &'static str,
    header: &'static str,
    /// Regex for bindgen's allowlists.
    functions: &'static str,
    types: &'static str,
    /// The handle type in `cuda-stack-sys` that owns the table (`Driver`, `Nvrtc`).
    owner: &'static str,
    /// Table struct name.
    table: &'static str,
    /// The status type whose non-success values become errors, and its error type.
    status: &'static str,
    error: &'static str,
    /// The newtype enum whose constant names become `status.name()`; `None` when a base library
    /// defines the status type (and its `name()`).
    status_enum: Option<&'static str>,
    /// Stems of earlier libraries whose types this one reuses (see the crate docs).
    bases: &'static [&'static str],
}

const LIBS: &[Lib] = &[
    Lib {
        stem: "driver",
        header: "cuda.h",
        functions: "cu[A-Z].*",
        types: "(CU|cu).*",
        owner: "Driver",
        table: "DriverTable",
        status: "CUresult",
        error: "DriverError",
        status_enum: Some("cudaError_enum"),
        bases: &[],
    },
    Lib {
        stem: "nvrtc",
        header: "nvrtc.h",
        functions: "nvrtc.*",
        types: "nvrtc.*",
        owner: "Nvrtc",
        table: "NvrtcTable",
        status: "nvrtcResult",
        error: "NvrtcError",
        status_enum: Some("nvrtcResult"),
        bases: &[],
    },
    Lib {
        stem: "cublas",
        header: "cublas_v2.h",
        // The `_v2` and `_64` names are the exported symbols (`cublas_v2.h` maps the plain
        // names to them with macros).
        functions: "cublas[A-Z].*",
        types: "(cublas|CUBLAS)[A-Z_].*",
        owner: "Cublas",
        table: "CublasTable",
        status: "cublasStatus_t",
        error: "CublasError",
        status_enum: Some("cublasStatus_t"),
        bases: &["driver"],
    },
    Lib {
        stem: "cublaslt",
        header: "cublasLt.h",
        functions: "cublasLt.*",
        types: "(cublasLt|CUBLASLT).*",
        owner: "CublasLt",
        table: "CublasLtTable",
        status: "cublasStatus_t",
        error: "CublasError",
        status_enum: None,
        bases: &["driver", "cublas"],
    },
    Lib {
        stem: "nccl",
        header: "nccl.h",
        functions: "nccl.*",
        types: "(nccl|NCCL).*",
        owner: "Nccl",
        table: "NcclTable",
        status: "ncclResult_t",
        error: "NcclError",
        status_enum: Some("ncclResult_t"),
        bases: &["driver"],
    },
];

fn main() {
    let mut includes = Vec::new();
    let mut out = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--include" => includes.extend(args.next().map(PathBuf::from)),
            "--out" => out = args.next().map(PathBuf::from),
            other => fail(&format!("unknown argument {other}")),
        }
    }
    if includes.is_empty() {
        fail("--include <dir> is required");
    }
    let out = out.unwrap_or_else(|| fail("--out <dir> is required"));
    std::fs::create_dir_all(&out).unwrap_or_else(|e| fail(&format!("{}: {e}", out.display())));
    // Names each generated types module defines, for the libraries that build on it.
    let mut defined: Vec<(&str, Vec<String>)> = Vec::new();
    for lib in LIBS {
        let reused: Vec<(&str, &[String])> = lib
            .bases
            .iter()
            .map(|b| {
                let names = defined
                    .iter()
                    .find(|(stem, _)| stem == b)
                    .unwrap_or_else(|| {
                        fail(&format!(
                            "{}: base {b} is not generated before it",
                            lib.stem
                        ))
                    });
                (*b, names.1.as_slice())
            })
            .collect();
        let (types, table, names) = generate(lib, &includes, &reused);
        write(&out.join(format!("{}_types.rs", lib.stem)), &types);
        write(&out.join(format!("{}_table.rs", lib.stem)), &table);
        defined.push((lib.stem, names));
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("gen-bindings: {msg}");
    std::process::exit(2)
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
    eprintln!("wrote {}", path.display());
}

fn banner(lib: &Lib, what: &str) -> String {
    format!(
        "// @generated by tools/gen-bindings from {} ({what}). Do not edit by hand:\n\
         // run tools/regen-bindings instead (see README, \"Regenerating the bindings\").\n\n",
        lib.header
    )
}

/// Generates one library's two files; also returns the names its types module defines.
fn generate(
    lib: &Lib,
    includes: &[PathBuf],
    bases: &[(&str, &[String])],
) -> (String, String, Vec<String>) {
    let header = includes
        .iter()
        .map(|dir| dir.join(lib.header))
        .find(|h| h.exists())
        .unwrap_or_else(|| {
            fail(&format!(
                "{} not found in any --include directory",
                lib.header
            ))
        });
    let mut builder = bindgen::Builder::default().header(header.to_string_lossy());
    for dir in includes {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    for (_, names) in bases {
        for name in names.iter() {
            builder = builder.blocklist_item(format!("^{name}$"));
        }
    }
    // C's `FILE` (cuBLASLt's logger takes one) differs between C libraries: keep it opaque
    // rather than commit glibc's `_IO_FILE` layout (see `opaque_file`).
    builder = builder.blocklist_type("FILE|_IO_.*|__off_t|__off64_t");
    let bindings = builder
        .allowlist_function(lib.functions)
        .allowlist_type(lib.types)
        .allowlist_var(lib.types)
        .default_enum_style(bindgen::EnumVariation::NewType {
            is_bitfield: false,
            is_global: false,
        })
        .prepend_enum_name(false)
        .derive_debug(true)
        .derive_copy(true)
        .derive_eq(true)
        .derive_hash(true)
        .derive_default(true)
        .impl_debug(false)
        .generate_comments(false)
        .layout_tests(true)
        .use_core()
        .formatter(bindgen::Formatter::None)
        .generate()
        .unwrap_or_else(|e| fail(&format!("bindgen on {}: {e}", lib.header)));
    let file: syn::File = syn::parse_str(&bindings.to_string())
        .unwrap_or_else(|e| fail(&format!("parsing bindgen output: {e}")));

    let mut kept: Vec<Item> = bases
        .iter()
        .map(|(stem, _)| {
            let module = format_ident!("{stem}_types");
            syn::parse_quote! {
                #[allow(unused_imports)]
                use crate::#module::*;
            }
        })
        .collect();
    let mut fns = Vec::new();
    let mut status_names: Vec<(String, String)> = Vec::new();
    for item in file.items {
        match item {
            Item::ForeignMod(m) => {
                for fi in m.items {
                    if let ForeignItem::Fn(f) = fi {
                        fns.push(f);
                    }
                }
            }
            other => {
                collect_status_names(lib, &other, &mut status_names);
                kept.push(other);
            }
        }
    }
    fns.sort_by(|a, b| a.sig.ident.cmp(&b.sig.ident));
    if fns.iter().any(|f| mentions(&f.sig.inputs, "FILE")) {
        kept.push(opaque_file());
    }
    let names = kept.iter().filter_map(defined_name).collect();

    let types_file = syn::File {
        shebang: None,
        attrs: vec![],
        items: kept,
    };
    let types = banner(lib, "types and constants") + &prettyplease::unparse(&types_file);
    let table = banner(lib, "run-time-resolved entry points")
        + &prettyplease::unparse(&syn::parse2(table_tokens(lib, &fns, &status_names)).unwrap());
    (types, table, names)
}

/// Whether the tokens of `t` contain the identifier `name`.
fn mentions(t: &impl quote::ToTokens, name: &str) -> bool {
    fn walk(ts: TokenStream, name: &str) -> bool {
        ts.into_iter().any(|tt| match tt {
            proc_macro2::TokenTree::Ident(i) => i == name,
            proc_macro2::TokenTree::Group(g) => walk(g.stream(), name),
            _ => false,
        })
    }
    walk(t.to_token_stream(), name)
}

/// C's `FILE`, declared opaque: only ever handled through a pointer from the C library.
fn opaque_file() -> Item {
    syn::parse_quote! {
        /// C's `FILE` (opaque: only ever used through a pointer obtained from the C library).
        #[repr(C)]
        #[derive(Debug)]
        pub struct FILE {
            _unused: [u8; 0],
        }
    }
}

/// The name an item defines in its module, if it defines one.
fn defined_name(item: &Item) -> Option<String> {
    let ident = match item {
        Item::Struct(i) => &i.ident,
        Item::Union(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Const(i) => &i.ident,
        Item::Static(i) => &i.ident,
        // bindgen's `pub use self::cudaDataType_t as cudaDataType;` for enum typedefs.
        Item::Use(syn::ItemUse {
            tree: syn::UseTree::Path(p),
            ..
        }) => match &*p.tree {
            syn::UseTree::Rename(r) => &r.rename,
            _ => return None,
        },
        _ => return None,
    };
    Some(ident.to_string())
}

/// Collects `impl <status_enum> { pub const NAME: <status_enum> = <status_enum>(N); }` constants.
fn collect_status_names(lib: &Lib, item: &Item, out: &mut Vec<(String, String)>) {
    let Some(status_enum) = lib.status_enum else {
        return;
    };
    let Item::Impl(imp) = item else { return };
    let Type::Path(tp) = &*imp.self_ty else {
        return;
    };
    if !tp.path.is_ident(status_enum) {
        return;
    }
    for ii in &imp.items {
        if let syn::ImplItem::Const(c) = ii {
            if let syn::Expr::Call(call) = &c.expr {
                if let Some(syn::Expr::Lit(lit)) = call.args.first() {
                    if let syn::Lit::Int(v) = &lit.lit {
                        let value = v.base10_digits().to_string();
                        // Keep the first name for a value: later ones are aliases.
                        if !out.iter().any(|(_, existing)| *existing == value) {
                            out.push((c.ident.to_string(), value));
                        }
                    }
                }
            }
        }
    }
}

fn table_tokens(
    lib: &Lib,
    fns: &[syn::ForeignItemFn],
    status_names: &[(String, String)],
) -> TokenStream {
    let table = Ident::new(lib.table, Span::call_site());
    let owner = Ident::new(lib.owner, Span::call_site());
    let status = Ident::new(lib.status, Span::call_site());
    let error = Ident::new(lib.error, Span::call_site());
    let types_mod = format_ident!("{}_types", lib.stem);
    let base_mods = lib.bases.iter().map(|b| format_ident!("{b}_types"));

    let mut fields = Vec::new();
    let mut resolves = Vec::new();
    let mut names = Vec::new();
    let mut counts = Vec::new();
    let mut wrappers = Vec::new();
    for f in fns {
        let name = &f.sig.ident;
        let name_str = name.to_string();
        let cname = syn::LitByteStr::new(format!("{name_str}\0").as_bytes(), Span::call_site());
        let inputs = &f.sig.inputs;
        let output = &f.sig.output;
        let arg_names: Vec<&Ident> = inputs
            .iter()
            .map(|a| match a {
                FnArg::Typed(pt) => match &*pt.pat {
                    Pat::Ident(pi) => &pi.ident,
                    _ => fail(&format!("{name_str}: unnamed parameter")),
                },
                FnArg::Receiver(_) => fail("receiver in extern fn"),
            })
            .collect();
        let fn_ty = quote! { unsafe extern "C" fn(#inputs) #output };
        let field_doc =
            format!("`{name_str}`, or `None` when the loaded library does not export it.");
        fields.push(quote! { #[doc = #field_doc] pub #name: Option<#fn_ty>, });
        resolves.push(quote! { #name: crate::loader::resolve(lib, #cname), });
        names.push(quote! { #name_str, });
        counts.push(quote! { self.#name.is_some() as usize });

        let returns_status = matches!(output, ReturnType::Type(_, t) if is_ident(t, lib.status));
        let doc_lines = [
            format!(" Calls `{name_str}` through the checked-call stratum."),
            String::new(),
            " # Safety".to_string(),
            format!(" The arguments must satisfy the contract of `{name_str}` in NVIDIA's"),
            " documentation (valid pointers of the right size, live handles).".to_string(),
        ];
        let doc = quote! { #(#[doc = #doc_lines])* };
        if returns_status {
            wrappers.push(quote! {
                #doc
                #[inline]
                pub unsafe fn #name(&self, #inputs) -> Result<(), crate::#error> {
                    match self.table.#name {
                        // SAFETY: the caller upholds the entry point's contract (see # Safety).
                        Some(entry_point__) => self.checked(#name_str, || unsafe { entry_point__(#(#arg_names),*) }),
                        None => Err(self.missing(#name_str).into()),
                    }
                }
            });
        } else {
            let ret = match output {
                ReturnType::Default => quote! { () },
                ReturnType::Type(_, t) => quote! { #t },
            };
            wrappers.push(quote! {
                #doc
                #[inline]
                pub unsafe fn #name(&self, #inputs) -> Result<#ret, crate::MissingSymbol> {
                    match self.table.#name {
                        // SAFETY: the caller upholds the entry point's contract (see # Safety).
                        Some(entry_point__) => Ok(unsafe { entry_point__(#(#arg_names),*) }),
                        None => Err(self.missing(#name_str)),
                    }
                }
            });
        }
    }
    let n = fns.len();
    let name_arms = status_names.iter().map(|(name, value)| {
        let v: syn::LitInt = syn::parse_str(value).unwrap();
        quote! { #v => Some(#name), }
    });
    let status_name_impl = lib.status_enum.map(|_| {
        quote! {
            impl #status {
                /// The constant's name in the header (`CUDA_ERROR_OUT_OF_MEMORY`, …), or `None` for a
                /// value this header does not know (a newer library may return one).
                pub const fn name(self) -> Option<&'static str> {
                    match self.0 { #(#name_arms)* _ => None }
                }
            }
        }
    });
    let table_doc = format!(
        "Every entry point `{}` declares, each resolved on its own when the library is loaded. \
         A symbol the library lacks is `None`: calling it through [`crate::{owner}`] returns an \
         error naming it, never a panic.",
        lib.header
    );
    quote! {
        #![allow(non_snake_case, clippy::too_many_arguments, clippy::missing_safety_doc)]
        #(#[allow(unused_imports)] use crate::#base_mods::*;)*
        use crate::#types_mod::*;

        #[doc = #table_doc]
        #[derive(Clone, Copy)]
        pub struct #table { #(#fields)* }

        impl #table {
            /// Names of every entry point in the table, in table order.
            pub const SYMBOLS: [&'static str; #n] = [#(#names)*];

            /// Resolves each entry point in `lib`; a missing one is left `None`.
            ///
            /// # Safety
            /// `lib` must be the library these declarations describe: each symbol found is
            /// trusted to have the signature the header gives it.
            pub(crate) unsafe fn resolve(lib: &libloading::Library) -> Self {
                Self { #(#resolves)* }
            }

            /// How many entry points the library exported.
            pub fn resolved_count(&self) -> usize { 0 #(+ #counts)* }
        }

        #status_name_impl

        impl crate::#owner { #(#wrappers)* }
    }
}

fn is_ident(t: &Type, name: &str) -> bool {
    matches!(t, Type::Path(tp) if tp.path.is_ident(name))
}
