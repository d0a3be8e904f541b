//! A character-level corpus as nanoGPT's `data/shakespeare_char/prepare.py` makes one: the
//! vocabulary is the sorted set of the text's characters, every character one token, the first
//! 90 % of the text the training split and the rest the validation split; and `train.py`'s
//! `get_batch`: `batch` windows of `block_size + 1` tokens at uniformly drawn offsets, the first
//! `block_size` the inputs and the last `block_size` the targets, from a seeded generator.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::path::Path;

/// The characters of a text, sorted (by code point, as Python sorts a `str`'s characters);
/// token `i` is character `i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharVocab {
    chars: Vec<char>,
}

impl CharVocab {
    /// The vocabulary of `text`.
    pub fn from_text(text: &str) -> CharVocab {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        CharVocab { chars }
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.chars.len()
    }

    /// Whether there is no token.
    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// The characters, in token order.
    pub fn chars(&self) -> &[char] {
        &self.chars
    }

    /// The tokens of `s`; an error naming the first character not in the vocabulary.
    pub fn encode(&self, s: &str) -> Result<Vec<i32>, String> {
        s.chars()
            .map(|ch| {
                self.chars
                    .binary_search(&ch)
                    .map(|i| i as i32)
                    .map_err(|_| format!("the character {ch:?} is not in the corpus's vocabulary"))
            })
            .collect()
    }

    /// The text of `ids` (an id outside the vocabulary is shown as `�`).
    pub fn decode(&self, ids: &[i32]) -> String {
        ids.iter()
            .map(|&i| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| self.chars.get(i).copied())
                    .unwrap_or('\u{fffd}')
            })
            .collect()
    }
}

/// A tokenised text split 90 / 10 into training and validation tokens.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// The vocabulary (of the whole text, as `prepare.py` makes it).
    pub vocab: CharVocab,
    /// The first `⌊0.9·n⌋` tokens.
    pub train: Vec<i32>,
    /// The rest.
    pub val: Vec<i32>,
}

impl Corpus {
    /// The corpus of `text`, whose splits must each hold at least `block_size + 1` tokens (one
    /// window of inputs and targets); `what` names the text in errors.
    pub fn from_text(text: &str, block_size: usize, what: &str) -> Result<Corpus, String> {
        if text.is_empty() {
            return Err(format!("{what} is empty: there is nothing to train on"));
        }
        let vocab = CharVocab::from_text(text);
        let ids = vocab.encode(text)?;
        let n = ids.len();
        let cut = n * 9 / 10;
        let need = block_size + 1;
        if cut < need || n - cut < need {
            return Err(format!(
                "{what} has {n} characters: its 90/10 split gives {cut} training and {} \
                 validation tokens, and each split needs at least block_size + 1 = {need} \
                 (a text of at least {} characters)",
                n - cut,
                min_chars(need)
            ));
        }
        let val = ids[cut..].to_vec();
        let mut train = ids;
        train.truncate(cut);
        Ok(Corpus { vocab, train, val })
    }

    /// The corpus of the UTF-8 text file `path` (errors name the file: missing, unreadable,
    /// not UTF-8, empty or too short).
    pub fn load(path: &Path, block_size: usize) -> Result<Corpus, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading the corpus {}: {e}", path.display()))?;
        Corpus::from_text(&text, block_size, &format!("the corpus {}", path.display()))
    }
}

/// The least `n` whose 90/10 split leaves at least `need` tokens on each side.
fn min_chars(need: usize) -> usize {
    let mut n = need * 10;
    while n * 9 / 10 < need || n - n * 9 / 10 < need {
        n += 1;
    }
    while n > 1 && (n - 1) * 9 / 10 >= need && (n - 1) - (n - 1) * 9 / 10 >= need {
        n -= 1;
    }
    n
}

/// Random windows of a split (`get_batch`), reproducible from the seed.
#[derive(Debug, Clone)]
pub struct Batcher {
    rng: Xoshiro256PlusPlus,
}

impl Batcher {
    /// A batcher drawing from `seed`.
    pub fn new(seed: u64) -> Batcher {
        Batcher {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// `batch` windows of `data`: inputs `data[i .. i + block]` and targets
    /// `data[i + 1 .. i + 1 + block]` for offsets `i` uniform in `0 .. len − block`, each
    /// row-major `[batch, block]`. An error if `data` is shorter than `block + 1`.
    pub fn batch(
        &mut self,
        data: &[i32],
        batch: usize,
        block: usize,
    ) -> Result<(Vec<i32>, Vec<i32>), String> {
        if data.len() <= block || block == 0 {
            return Err(format!(
                "windows of {block} + 1 tokens from {} tokens",
                data.len()
            ));
        }
        let (mut x, mut y) = (
            Vec::with_capacity(batch * block),
            Vec::with_capacity(batch * block),
        );
        for _ in 0..batch {
            let i = self.rng.random_range(0..data.len() - block);
            x.extend_from_slice(&data[i..i + block]);
            y.extend_from_slice(&data[i + 1..i + 1 + block]);
        }
        Ok((x, y))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_is_the_sorted_characters() {
        let v = CharVocab::from_text("hello, world\n");
        assert_eq!(
            v.chars(),
            ['\n', ' ', ',', 'd', 'e', 'h', 'l', 'o', 'r', 'w']
        );
        assert_eq!(v.encode("hold").unwrap(), [5, 7, 6, 3]);
        assert_eq!(v.decode(&[5, 4, 6, 6, 7]), "hello");
        assert_eq!(v.decode(&[99, -1]), "\u{fffd}\u{fffd}");
        let e = v.encode("hat").unwrap_err();
        assert!(e.contains("'a'"), "{e}");
        // Non-ASCII characters are single tokens, ordered by code point.
        let u = CharVocab::from_text("é a Z");
        assert_eq!(u.chars(), [' ', 'Z', 'a', 'é']);
        assert_eq!(u.decode(&u.encode("aé").unwrap()), "aé");
    }

    #[test]
    fn split_is_ninety_ten_and_short_texts_are_errors() {
        let text: String = (0..1000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        let c = Corpus::from_text(&text, 8, "t").unwrap();
        assert_eq!((c.train.len(), c.val.len()), (900, 100));
        assert_eq!(c.vocab.len(), 26);
        assert_eq!(c.vocab.decode(&c.train[..3]), "abc");
        assert_eq!(c.val[0], 900 % 26);
        // Odd length: prepare.py's int(n * 0.9).
        let c = Corpus::from_text(&text[..999], 8, "t").unwrap();
        assert_eq!((c.train.len(), c.val.len()), (899, 100));
        assert!(Corpus::from_text("", 8, "t").unwrap_err().contains("empty"));
        // Each split needs block_size + 1 = 100 tokens: 1000 characters are just enough.
        assert!(Corpus::from_text(&text, 99, "t").is_ok());
        let e = Corpus::from_text(&text, 100, "the corpus x.txt").unwrap_err();
        assert!(e.contains("x.txt") && e.contains("101"), "{e}");
        assert_eq!(min_chars(101), 1001);
        let missing = Corpus::load(Path::new("/no/such/corpus.txt"), 8).unwrap_err();
        assert!(missing.contains("/no/such/corpus.txt"), "{missing}");
    }

    #[test]
    fn tiny_shakespeare_splits_as_nanogpt_prepares_it() {
        // nanoGPT's prepare.py prints: length of dataset in characters: 1,115,394; vocab size:
        // 65; train has 1,003,854 tokens; val has 111,540 tokens.
        let text = include_str!("../../data/tinyshakespeare.txt");
        let c = Corpus::from_text(text, 256, "tiny-shakespeare").unwrap();
        assert_eq!(c.vocab.len(), 65);
        assert_eq!((c.train.len(), c.val.len()), (1_003_854, 111_540));
        assert_eq!(c.vocab.chars()[..3], ['\n', ' ', '!']);
        assert_eq!(c.vocab.decode(&c.train[..14]), "First Citizen:");
    }

    #[test]
    fn batches_are_shifted_windows_and_reproducible() {
        let data: Vec<i32> = (0..50).collect();
        let (x, y) = Batcher::new(3).batch(&data, 4, 10).unwrap();
        assert_eq!((x.len(), y.len()), (40, 40));
        for r in 0..4 {
            let (xr, yr) = (&x[r * 10..r * 10 + 10], &y[r * 10..r * 10 + 10]);
            assert!(xr[0] < 40, "offset {} past len − block", xr[0]);
            for j in 0..10 {
                assert_eq!(xr[j], xr[0] + j as i32);
                assert_eq!(yr[j], xr[j] + 1);
            }
        }
        assert_eq!(Batcher::new(3).batch(&data, 4, 10).unwrap(), (x, y));
        assert_ne!(
            Batcher::new(4).batch(&data, 4, 10).unwrap().0,
            Batcher::new(3).batch(&data, 4, 10).unwrap().0
        );
        // Exactly block + 1 tokens: the one window there is.
        let (x, y) = Batcher::new(0).batch(&data[..11], 2, 10).unwrap();
        assert_eq!(x[..10], data[..10]);
        assert_eq!(y[..10], data[1..11]);
        assert!(Batcher::new(0).batch(&data[..10], 1, 10).is_err());
    }
}
