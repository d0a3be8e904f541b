//! What can be read from PTX text without a driver: its ISA version and its entries.

/// The `.version X.Y` of a PTX module, e.g. `"8.4"`.
pub fn isa_version(ptx: &str) -> Option<&str> {
    ptx.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(".version"))
        .map(str::trim)
}

/// The names of the `.entry` points.
pub fn entries(ptx: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in ptx.match_indices(".entry ") {
        let rest = &ptx[i + 7..];
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// The `.param` declarations of `.entry name`, in order (`".param .u64 name_param_0"`).
fn entry_param_decls<'a>(ptx: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let close = rest.find(')')?;
    let params = &rest[rest.find('(')? + 1..close];
    Some(
        params
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect(),
    )
}

/// The byte sizes of `.entry name`'s parameters, from their `.param` declarations.
pub fn entry_param_sizes(ptx: &str, name: &str) -> Option<Vec<usize>> {
    entry_param_decls(ptx, name)?
        .into_iter()
        .map(param_size)
        .collect()
}

/// The PTX types of `.entry name`'s parameters, without the dot (`"u64"`, `"f32"`, `"b8"` for
/// an aggregate), from their `.param` declarations.
pub fn entry_param_types(ptx: &str, name: &str) -> Option<Vec<String>> {
    entry_param_decls(ptx, name)?
        .into_iter()
        .map(|p| param_type(p).map(str::to_string))
        .collect()
}

/// `.param .u64 foo` → `"u64"`; `.param .align 8 .b8 foo[144]` → `"b8"`.
fn param_type(decl: &str) -> Option<&str> {
    decl.split_whitespace().find_map(|w| {
        let t = w.strip_prefix('.')?;
        matches!(t.as_bytes().first(), Some(b'u' | b's' | b'f' | b'b'))
            .then_some(t)
            .filter(|t| t[1..].parse::<usize>().is_ok())
    })
}

/// `.param .u64 foo` → 8; `.param .align 8 .b8 foo[144]` → 144.
fn param_size(decl: &str) -> Option<usize> {
    let words: Vec<&str> = decl.split_whitespace().collect();
    let ty = words.iter().find(|w| {
        w.starts_with(".u") || w.starts_with(".s") || w.starts_with(".f") || w.starts_with(".b")
    })?;
    let bits: usize = ty[2..].parse().ok()?;
    let count = match words.last()?.split_once('[') {
        Some((_, n)) => n.trim_end_matches(']').parse().ok()?,
        None => 1,
    };
    Some(bits / 8 * count)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "//\n.version 8.4\n.target sm_75\n.address_size 64\n\n\
        .visible .entry vector_add(\n\t.param .u64 vector_add_param_0,\n\t.param .u64 vector_add_param_1,\n\
        \t.param .u32 vector_add_param_2\n)\n{\n}\n\
        .visible .entry strided(\n\t.param .align 8 .b8 strided_param_0[144],\n\t.param .f32 strided_param_1\n)\n{\n}\n";

    #[test]
    fn reads_version_entries_and_params() {
        assert_eq!(isa_version(PTX), Some("8.4"));
        assert_eq!(entries(PTX), vec!["vector_add", "strided"]);
        assert_eq!(entry_param_sizes(PTX, "vector_add"), Some(vec![8, 8, 4]));
        assert_eq!(entry_param_sizes(PTX, "strided"), Some(vec![144, 4]));
        assert_eq!(entry_param_sizes(PTX, "nope"), None);
        assert_eq!(
            entry_param_types(PTX, "vector_add"),
            Some(vec!["u64".into(), "u64".into(), "u32".into()])
        );
        assert_eq!(
            entry_param_types(PTX, "strided"),
            Some(vec!["b8".into(), "f32".into()])
        );
    }
}
