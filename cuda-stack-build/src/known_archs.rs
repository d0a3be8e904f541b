//! The compute capabilities CUDA releases have had: the table [`Arch::parse`](crate::Arch::parse)
//! checks names against, and its text for error messages.

/// Compute capabilities some CUDA release has supported (a compiler may still refuse one: CUDA 13
/// dropped everything below 7.5, CUDA 12.4 knows nothing above 9.0).
pub const KNOWN: &[(u32, u32)] = &[
    (5, 0),
    (5, 2),
    (5, 3),
    (6, 0),
    (6, 1),
    (6, 2),
    (7, 0),
    (7, 2),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 8),
    (8, 9),
    (9, 0),
    (10, 0),
    (10, 1),
    (10, 3),
    (11, 0),
    (12, 0),
    (12, 1),
];

/// The known architectures as `sm_XX` names, for error messages.
pub(crate) fn known_list() -> String {
    let mut v: Vec<String> = KNOWN.iter().map(|(a, b)| format!("{a}{b}")).collect();
    v.push("90a, 100a, 120a (arch-specific), 100f, 120f (family)".into());
    v.join(", ")
}
