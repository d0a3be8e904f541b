//! The `.entry` points of PTX text and the byte size of each parameter.

use std::collections::BTreeMap;

/// Every `.entry` of `ptx` with its parameters' byte sizes (`.param .u64 p` → 8,
/// `.param .align 8 .b8 p[144]` → 144). `None` if a parameter cannot be read.
pub fn entries(ptx: &str) -> Option<BTreeMap<String, Vec<usize>>> {
    let mut out = BTreeMap::new();
    let mut rest = ptx;
    while let Some(i) = rest.find(".entry") {
        let after = &rest[i + ".entry".len()..];
        rest = after;
        if !after.starts_with(char::is_whitespace) {
            continue;
        }
        let after = after.trim_start();
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        if name.is_empty() {
            continue;
        }
        let tail = after[name.len()..].trim_start();
        let mut sizes = Vec::new();
        if let Some(list) = tail.strip_prefix('(') {
            let close = list.find(')')?;
            for p in list[..close]
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
            {
                sizes.push(param_size(p)?);
            }
        }
        out.insert(name, sizes);
    }
    Some(out)
}

/// `.param .u64 foo` → 8; `.param .align 8 .b8 foo[144]` → 144.
fn param_size(decl: &str) -> Option<usize> {
    let words: Vec<&str> = decl.split_whitespace().collect();
    let ty = words.iter().skip(1).find(|w| {
        let b = w.as_bytes();
        b.len() > 2
            && b[0] == b'.'
            && matches!(b[1], b'u' | b's' | b'b' | b'f')
            && w[2..].chars().all(|c| c.is_ascii_digit())
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

    #[test]
    fn reads_entries() {
        let ptx = ".version 8.4\n.target sm_75\n\n.visible .entry vector_add(\n\t.param .u64 vector_add_param_0,\n\
                   \t.param .u32 vector_add_param_1\n)\n{\n}\n.visible .entry strided(\n\t.param .align 8 .b8 s_param_0[144],\n\
                   \t.param .f32 s_param_1\n)\n{\n}\n.visible .entry none()\n{\n}\n.visible .entry bare\n{\n}\n";
        let e = entries(ptx).unwrap();
        assert_eq!(e["vector_add"], [8, 4]);
        assert_eq!(e["strided"], [144, 4]);
        assert_eq!(e["none"], Vec::<usize>::new());
        assert_eq!(e["bare"], Vec::<usize>::new());
        assert_eq!(e.len(), 4);
    }
}
