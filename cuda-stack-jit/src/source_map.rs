//! Generated sources as sections (prelude, typedefs, the user's preamble and body, the wrapper),
//! so NVRTC's messages can name the user's line instead of the generated file's.

/// A generated source, built section by section.
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceBuilder {
    text: String,
    line: usize,
    /// `(section name, first line (1-based), line count)` of the user's sections.
    sections: Vec<(&'static str, usize, usize)>,
}

/// Where each user section lies in a finished source.
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceMap {
    sections: Vec<(&'static str, usize, usize)>,
}

impl SourceBuilder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Appends generated text (ends with a newline if it does not).
    pub(crate) fn push(&mut self, s: &str) {
        self.text.push_str(s);
        if !s.ends_with('\n') {
            self.text.push('\n');
        }
        self.line += s.lines().count().max(1);
    }

    /// Appends the user's text of section `name` (`operation`, `preamble`, …), recording where
    /// it starts.
    pub(crate) fn push_user(&mut self, name: &'static str, s: &str) {
        let n = s.lines().count().max(1);
        self.sections.push((name, self.line + 1, n));
        self.push(s);
    }

    pub(crate) fn finish(self) -> (String, SourceMap) {
        (
            self.text,
            SourceMap {
                sections: self.sections,
            },
        )
    }
}

impl SourceMap {
    /// `operation line 2` for generated line 41, or `generated line 41` outside user sections.
    pub(crate) fn describe(&self, line: usize) -> String {
        for &(name, start, count) in &self.sections {
            if line >= start && line < start + count {
                return format!("{name} line {}", line - start + 1);
            }
        }
        format!("generated line {line}")
    }

    /// NVRTC's log with every `FILE(LINE)` of program `file` replaced by the user's position.
    pub(crate) fn map_log(&self, file: &str, log: &str) -> String {
        let pat = format!("{file}(");
        let mut out = String::with_capacity(log.len());
        let mut rest = log;
        while let Some(at) = rest.find(&pat) {
            out.push_str(&rest[..at]);
            let after = &rest[at + pat.len()..];
            let digits = after.chars().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 && after[digits..].starts_with(')') {
                let line: usize = after[..digits].parse().unwrap_or(0);
                out.push_str(&self.describe(line));
                rest = &after[digits + 1..];
            } else {
                out.push_str(&pat);
                rest = after;
            }
        }
        out.push_str(rest);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_map_to_user_sections() {
        let mut b = SourceBuilder::new();
        b.push("line1\nline2");
        b.push_user("preamble", "p1");
        b.push("gen");
        b.push_user("operation", "o1\no2\n");
        b.push("}");
        let (text, map) = b.finish();
        assert_eq!(text.lines().nth(2), Some("p1"));
        assert_eq!(text.lines().nth(5), Some("o2"));
        assert_eq!(map.describe(3), "preamble line 1");
        assert_eq!(map.describe(6), "operation line 2");
        assert_eq!(map.describe(7), "generated line 7");
        let log = "k.cu(6): error: identifier \"zz\" is undefined\nk.cu(x) k.cu(3): warning";
        assert_eq!(
            map.map_log("k.cu", log),
            "operation line 2: error: identifier \"zz\" is undefined\nk.cu(x) preamble line 1: warning"
        );
    }
}
