//! The valid indices of a dimension, as error messages state them (`dim` may count from the end:
//! `-1` is the last dimension).

/// "[-r, r-1]", or a note that a 0-d tensor has no dimensions.
pub(crate) fn dim_range(rank: usize) -> String {
    if rank == 0 {
        "none: it is a 0-d tensor".to_string()
    } else {
        format!("[-{rank}, {}]", rank - 1)
    }
}
