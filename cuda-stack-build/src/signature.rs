//! Reading kernel signatures from CUDA C: every `extern "C" __global__` declaration becomes a
//! [`KernelDecl`] whose parameters have a C type, a byte size and a Rust type.

use crate::error::BuildError;
use std::path::Path;

/// The Rust element or value type a C type maps to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RustType {
    /// A primitive, e.g. `f32`, `u64`.
    Prim(&'static str),
    /// `half::f16` (CUDA's `__half`).
    F16,
    /// `half::bf16` (CUDA's `__nv_bfloat16`).
    Bf16,
    /// A path the user registered, e.g. `crate::Params` (a `#[repr(C)]` `Pod` type).
    Custom(String),
}

/// How one parameter is passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A pointer to `elem`: `&DeviceSlice<elem>`, or `&mut DeviceSlice<elem>` when written.
    Pointer {
        /// The element type.
        elem: RustType,
        /// Whether the kernel may write through it: every non-`const` pointer, unless named in a
        /// `// @readonly: a, b` comment directly above the declaration.
        written: bool,
    },
    /// A value passed by value (a scalar or a registered struct).
    Value(RustType),
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name in the source.
    pub name: String,
    /// Its C type, normalised: `const float*`, `unsigned long long`, `StridedLayout`.
    pub c_type: String,
    /// Bytes in the kernel's parameter buffer.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
    /// How Rust passes it.
    pub kind: ParamKind,
}

impl Param {
    /// Whether this is a pointer the kernel writes.
    pub fn written(&self) -> bool {
        matches!(self.kind, ParamKind::Pointer { written: true, .. })
    }
}

/// One `extern "C" __global__` kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelDecl {
    /// The kernel's (unmangled) name.
    pub name: String,
    /// The line of its declaration.
    pub line: usize,
    /// Its parameters, in order.
    pub params: Vec<Param>,
}

impl KernelDecl {
    /// The byte size of each parameter, in order (what the PTX `.entry` must list).
    pub fn sizes(&self) -> Vec<usize> {
        self.params.iter().map(|p| p.size).collect()
    }
}

/// C types the parser maps to Rust, besides the built-in ones.
#[derive(Clone, Debug, Default)]
pub struct TypeMap {
    pub(crate) pointees: Vec<(String, RustType)>,
    pub(crate) structs: Vec<(String, RustType, usize, usize)>,
}

impl TypeMap {
    /// Maps pointers to the C type `c_name` (a typedef) to `&DeviceSlice<rust>`.
    pub fn pointee(&mut self, c_name: &str, rust: RustType) -> &mut Self {
        self.pointees.push((c_name.to_string(), rust));
        self
    }

    /// Maps the by-value C struct `c_name` (`size` bytes, aligned to `align`) to the Rust type
    /// at `rust_path`, which must be `#[repr(C)]`, `Pod`, and laid out the same.
    pub fn value_struct(
        &mut self,
        c_name: &str,
        rust_path: &str,
        size: usize,
        align: usize,
    ) -> &mut Self {
        self.structs.push((
            c_name.to_string(),
            RustType::Custom(rust_path.to_string()),
            size,
            align,
        ));
        self
    }

    fn scalar(&self, c: &str) -> Option<(RustType, usize, usize)> {
        if let Some((_, r, size, align)) = self.structs.iter().find(|s| s.0 == c) {
            return Some((r.clone(), *size, *align));
        }
        builtin(c).map(|(r, s)| (r, s, s))
    }

    fn element(&self, c: &str) -> Option<RustType> {
        if let Some((_, r)) = self.pointees.iter().find(|p| p.0 == c) {
            return Some(r.clone());
        }
        self.scalar(c).map(|(r, _, _)| r)
    }
}

/// The C types with a fixed Rust equivalent: (Rust type, size = alignment).
fn builtin(c: &str) -> Option<(RustType, usize)> {
    use RustType::Prim;
    Some(match c {
        "float" => (Prim("f32"), 4),
        "double" => (Prim("f64"), 8),
        "int" | "signed int" | "signed" | "int32_t" => (Prim("i32"), 4),
        "unsigned int" | "unsigned" | "uint32_t" => (Prim("u32"), 4),
        "long long" | "long long int" | "signed long long" | "int64_t" => (Prim("i64"), 8),
        "unsigned long long" | "unsigned long long int" | "uint64_t" | "size_t" => (Prim("u64"), 8),
        "short" | "short int" | "signed short" | "int16_t" => (Prim("i16"), 2),
        "unsigned short" | "unsigned short int" | "uint16_t" => (Prim("u16"), 2),
        "char" | "signed char" | "int8_t" => (Prim("i8"), 1),
        "unsigned char" | "uint8_t" => (Prim("u8"), 1),
        "__half" | "half" => (RustType::F16, 2),
        "__nv_bfloat16" | "nv_bfloat16" => (RustType::Bf16, 2),
        _ => return None,
    })
}

/// Every `extern "C" __global__` kernel declared in `src` (the text of `file`).
pub fn parse_kernels(
    file: &Path,
    src: &str,
    types: &TypeMap,
) -> Result<Vec<KernelDecl>, BuildError> {
    let code = strip_comments(src);
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(rel) = code[from..].find("extern") {
        let start = from + rel;
        from = start + 6;
        if !starts_word(&code, start) {
            continue;
        }
        let mut c = Cursor { s: &code, i: from };
        c.ws();
        if !c.eat("\"C\"") {
            continue;
        }
        c.ws();
        let line = code[..start].matches('\n').count() + 1;
        let sig_err = |kernel: &str, problem: String| BuildError::Signature {
            file: file.to_path_buf(),
            line,
            kernel: kernel.to_string(),
            problem,
        };
        if c.peek() == Some('{') {
            if code[c.i..]
                .split('}')
                .next()
                .unwrap_or("")
                .contains("__global__")
            {
                return Err(sig_err(
                    "(extern \"C\" block)",
                    "kernels inside an `extern \"C\" { … }` block are not read; write \
                     `extern \"C\" __global__ void name(…)` on each kernel"
                        .into(),
                ));
            }
            continue;
        }
        if !c.eat_word("__global__") {
            continue;
        }
        let mut name = None;
        while name.is_none() {
            c.ws();
            if c.eat_word("__launch_bounds__") || c.eat_word("__cluster_dims__") {
                c.ws();
                if !c.skip_parens() {
                    return Err(sig_err(
                        "?",
                        "unbalanced parentheses after __launch_bounds__".into(),
                    ));
                }
            } else if c.eat_word("void") || c.eat_word("static") || c.eat_word("inline") {
            } else {
                match c.ident() {
                    Some(id) => name = Some(id),
                    None => return Err(sig_err("?", "cannot read the kernel's name".into())),
                }
            }
        }
        let name = name.unwrap_or_default();
        c.ws();
        if c.peek() != Some('(') {
            return Err(sig_err(
                &name,
                "expected `(` after the kernel's name".into(),
            ));
        }
        let open = c.i;
        if !c.skip_parens() {
            return Err(sig_err(
                &name,
                "unbalanced parentheses in the parameter list".into(),
            ));
        }
        let params_text = &code[open + 1..c.i - 1];
        let readonly = readonly_names(&lines, line);
        let mut params = Vec::new();
        for p in params_text.split(',') {
            let p = p.trim();
            if p.is_empty() || p == "void" {
                continue;
            }
            params.push(parse_param(p, &readonly, types).map_err(|e| sig_err(&name, e))?);
        }
        for r in &readonly {
            match params.iter().find(|p| &p.name == r) {
                None => {
                    return Err(sig_err(
                        &name,
                        format!("`// @readonly: {r}` names no parameter"),
                    ))
                }
                Some(p) if !matches!(p.kind, ParamKind::Pointer { .. }) => {
                    return Err(sig_err(&name, format!("@readonly names non-pointer {r}")))
                }
                _ => {}
            }
        }
        out.push(KernelDecl { name, line, params });
        from = c.i;
    }
    Ok(out)
}

/// Names listed in `// @readonly: a, b` comment lines directly above line `decl_line`
/// (1-based); a blank line or code ends the block.
fn readonly_names(lines: &[&str], decl_line: usize) -> Vec<String> {
    let mut names = Vec::new();
    for l in lines[..decl_line.saturating_sub(1).min(lines.len())]
        .iter()
        .rev()
    {
        let s = l.trim();
        if let Some(rest) = s.strip_prefix("// @readonly:") {
            names.extend(
                rest.split(',')
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(String::from),
            );
        } else if s.is_empty() || !s.starts_with("//") {
            break;
        }
    }
    names
}

fn parse_param(text: &str, readonly: &[String], types: &TypeMap) -> Result<Param, String> {
    let spaced = text.replace('*', " * ").replace('&', " & ");
    let mut words: Vec<&str> = spaced
        .split_whitespace()
        // `__grid_constant__` (a by-value parameter the kernel may take the address of, such as a
        // TMA tensor map) changes nothing for the caller either.
        .filter(|w| {
            !matches!(
                *w,
                "__restrict__" | "__restrict" | "restrict" | "__grid_constant__"
            )
        })
        .collect();
    let name = match words.pop() {
        Some(n) if n.chars().all(|c| c.is_alphanumeric() || c == '_') && !words.is_empty() => n,
        _ => {
            return Err(format!(
                "cannot read parameter `{text}` (give every parameter a name)"
            ))
        }
    };
    if words.contains(&"&") {
        return Err(format!(
            "parameter `{text}` is a reference; kernels take pointers or values"
        ));
    }
    // `T* const p`: the pointer itself is const, which changes nothing for the caller.
    while words.len() > 1 && words.last() == Some(&"const") && words[words.len() - 2] == "*" {
        words.pop();
    }
    let stars = words.iter().filter(|w| **w == "*").count();
    let base: Vec<&str> = words.iter().copied().filter(|w| *w != "*").collect();
    let is_const = base.contains(&"const");
    let base_ty = base
        .iter()
        .copied()
        .filter(|w| *w != "const" && *w != "volatile" && *w != "struct")
        .collect::<Vec<_>>()
        .join(" ");
    match stars {
        0 => {
            let (rust, size, align) = types.scalar(&base_ty).ok_or_else(|| {
                format!(
                    "parameter `{name}` has type `{base_ty}`, which has no Rust equivalent here"
                )
            })?;
            if matches!(rust, RustType::Custom(_)) || builtin(&base_ty).is_some() {
                Ok(Param {
                    name: name.into(),
                    c_type: base_ty,
                    size,
                    align,
                    kind: ParamKind::Value(rust),
                })
            } else {
                Err(format!(
                    "parameter `{name}` has unsupported type `{base_ty}`"
                ))
            }
        }
        1 => {
            if base_ty == "void" {
                return Err(format!(
                    "parameter `{name}` is `void*`: a typed handle needs the element type (write `float*`, …)"
                ));
            }
            let elem = types.element(&base_ty).ok_or_else(|| {
                format!(
                    "parameter `{name}` points to `{base_ty}`, which has no Rust equivalent here"
                )
            })?;
            let written = !is_const && !readonly.iter().any(|r| r == name);
            Ok(Param {
                name: name.into(),
                c_type: format!("{}{}*", if is_const { "const " } else { "" }, base_ty),
                size: 8,
                align: 8,
                kind: ParamKind::Pointer { elem, written },
            })
        }
        _ => Err(format!(
            "parameter `{name}` is a pointer to a pointer, which a typed handle cannot check"
        )),
    }
}

/// `src` with `//` and `/* */` comments (not string contents) blanked out, newlines kept, so
/// offsets and line numbers stay the same.
pub(crate) fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
            out.push_str(&src[start..i]);
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(' ');
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let end = src[i + 2..]
                .find("*/")
                .map(|e| i + 2 + e + 2)
                .unwrap_or(b.len());
            for ch in src[i..end].chars() {
                out.push(if ch == '\n' { '\n' } else { ' ' });
            }
            i = end;
        } else {
            let ch = src[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn starts_word(s: &str, i: usize) -> bool {
    i == 0 || !s[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_')
}

struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl Cursor<'_> {
    fn ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<char> {
        self.s[self.i..].chars().next()
    }
    fn eat(&mut self, t: &str) -> bool {
        if self.s[self.i..].starts_with(t) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    fn eat_word(&mut self, w: &str) -> bool {
        let rest = &self.s[self.i..];
        if rest.starts_with(w)
            && !rest[w.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        {
            self.i += w.len();
            true
        } else {
            false
        }
    }
    fn ident(&mut self) -> Option<String> {
        let rest = &self.s[self.i..];
        let n = rest
            .char_indices()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        if n == 0 || rest.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        self.i += n;
        Some(rest[..n].to_string())
    }
    /// Skips a balanced `( … )` starting at the cursor.
    fn skip_parens(&mut self) -> bool {
        if self.peek() != Some('(') {
            return false;
        }
        let mut depth = 0usize;
        for (off, ch) in self.s[self.i..].char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        self.i += off + 1;
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<Vec<KernelDecl>, BuildError> {
        parse_kernels(Path::new("t.cu"), src, &TypeMap::default())
    }

    #[test]
    fn reads_declarations() {
        let src = r#"
// a helper, not a kernel
__device__ float f(float x) { return x; }
/* extern "C" __global__ void commented_out(int n) {} */
// @readonly: a
extern "C" __global__ void __launch_bounds__(256, 2)
vector_add(float *a, const float * __restrict__ b, float* const out,
           unsigned long long n) {}
extern "C" __global__ __launch_bounds__(128) void k2(const __half* x, double s, uint8_t* y) {}
extern "C" __global__ void empty(void) {}
template <typename T> __global__ void templ(T* x) {}
"#;
        let k = parse(src).unwrap();
        assert_eq!(k.len(), 3, "{k:?}");
        assert_eq!(k[0].name, "vector_add");
        assert_eq!(k[0].line, 6);
        assert_eq!(k[0].sizes(), [8, 8, 8, 8]);
        assert_eq!(k[0].params[0].c_type, "float*");
        assert!(!k[0].params[0].written(), "a is @readonly");
        assert_eq!(k[0].params[1].c_type, "const float*");
        assert!(!k[0].params[1].written());
        assert!(k[0].params[2].written());
        assert_eq!(k[0].params[3].c_type, "unsigned long long");
        assert_eq!(k[1].name, "k2");
        assert_eq!(k[1].sizes(), [8, 8, 8]);
        assert_eq!(
            k[1].params[0].kind,
            ParamKind::Pointer {
                elem: RustType::F16,
                written: false
            }
        );
        assert!(k[1].params[2].written());
        assert_eq!(k[2].params.len(), 0);
    }

    #[test]
    fn refuses_what_it_cannot_type() {
        for (src, what) in [
            (r#"extern "C" __global__ void k(void* p) {}"#, "void*"),
            (r#"extern "C" __global__ void k(MyT x) {}"#, "MyT"),
            (
                r#"extern "C" __global__ void k(float** p) {}"#,
                "pointer to a pointer",
            ),
            (
                r#"extern "C" { __global__ void k(float* p) {} }"#,
                "extern \"C\" { … }",
            ),
            (
                "// @readonly: q\nextern \"C\" __global__ void k(float* p) {}",
                "names no parameter",
            ),
        ] {
            let e = parse(src).unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
            assert!(e.contains("t.cu:"), "{e}");
        }
    }

    #[test]
    fn registered_types() {
        let mut t = TypeMap::default();
        t.pointee("f16_t", RustType::F16)
            .value_struct("StridedLayout", "StridedLayout", 144, 8);
        let k = parse_kernels(
            Path::new("t.cu"),
            r#"extern "C" __global__ void k(const f16_t* x, StridedLayout l) {}"#,
            &t,
        )
        .unwrap();
        assert_eq!(k[0].sizes(), [8, 144]);
        assert_eq!(k[0].params[0].c_type, "const f16_t*");
    }
}
