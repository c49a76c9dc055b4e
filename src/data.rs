//! The built-in corpus, a character-level tokenizer and deterministic batches.

use crate::model::init::Rng;
use crate::model::{ModelConfig, ShapeError, StepShape};

/// Public-domain text shipped with the crate: the opening of Shakespeare's *Coriolanus*
/// (as in the "tiny Shakespeare" corpus), about 21 KB.
pub const CORPUS: &str = include_str!("../data/corpus.txt");

/// Character-level tokenizer: one id per distinct character, in sorted order.
#[derive(Clone, Debug, PartialEq)]
pub struct CharTokenizer {
    chars: Vec<char>,
}

impl CharTokenizer {
    pub fn from_text(text: &str) -> Self {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        Self { chars }
    }

    /// The tokenizer of the built-in corpus.
    pub fn builtin() -> Self {
        Self::from_text(CORPUS)
    }

    pub fn vocab_size(&self) -> usize {
        self.chars.len()
    }

    /// Ids of `text`; characters not in the vocabulary are an error.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, ShapeError> {
        text.chars()
            .map(|ch| self.chars.binary_search(&ch).map(|i| i as u32).map_err(|_| ShapeError::NotInVocabulary(ch)))
            .collect()
    }

    /// Text of `ids`; unknown ids become U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        ids.iter().map(|&i| self.chars.get(i as usize).copied().unwrap_or('\u{FFFD}')).collect()
    }
}

/// A token stream to draw batches from.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub tokenizer: CharTokenizer,
    pub tokens: Vec<u32>,
}

impl Dataset {
    pub fn builtin() -> Self {
        let tokenizer = CharTokenizer::builtin();
        // Every character of the corpus is in its own vocabulary.
        let tokens = tokenizer.encode(CORPUS).unwrap_or_default();
        Self { tokenizer, tokens }
    }

    /// Batch number `index` of the stream seeded by `seed`: B windows of T+1 tokens starting at
    /// random offsets. The same (seed, index) always gives the same batch.
    pub fn batch(&self, shape: StepShape, seed: u64, index: u64) -> Result<Batch, ShapeError> {
        let t = shape.seq;
        if self.tokens.len() < t + 2 {
            return Err(ShapeError::CorpusTooShort { tokens: self.tokens.len(), seq: t });
        }
        let mut rng =
            Rng::new(seed.wrapping_mul(0x9E37_79B9).wrapping_add(index.wrapping_mul(0x2545_F491_4F6C_DD1D)) ^ 0xba7c4);
        // The batch lives in host memory: a size the host cannot give is an error, not an abort.
        let rows = usize::try_from(shape.rows()).ok();
        let mut inputs = Vec::new();
        let mut targets = Vec::new();
        for v in [&mut inputs, &mut targets] {
            rows.and_then(|n| v.try_reserve_exact(n).ok())
                .ok_or(ShapeError::BatchTooLargeForHost { rows: shape.rows() })?;
        }
        for _ in 0..shape.batch {
            let start = rng.below(self.tokens.len() - t - 1);
            inputs.extend_from_slice(&self.tokens[start..start + t]);
            targets.extend_from_slice(&self.tokens[start + 1..start + t + 1]);
        }
        Ok(Batch { shape, inputs, targets, doc_starts: Vec::new() })
    }
}

/// One batch: `inputs` and `targets` are (B, T) row-major; `targets[b, t]` is the token after
/// `inputs[b, t]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub shape: StepShape,
    pub inputs: Vec<u32>,
    pub targets: Vec<u32>,
    /// Packed rows (`Batching::Packed`): for each position, where its document starts in its row;
    /// attention looks no further back and positions count from there. Empty otherwise.
    pub doc_starts: Vec<u32>,
}

/// A target that takes no part in the loss (PyTorch's `ignore_index`, which is −100 there): a
/// padded position. Its loss is 0, its logits get no gradient, and the step's mean loss and
/// gradient scale count only the other targets.
pub const IGNORE: u32 = u32::MAX;

impl Batch {
    /// The targets that count in the loss (not [`IGNORE`]).
    pub fn counted_targets(&self) -> usize {
        self.targets.iter().filter(|&&t| t != IGNORE).count()
    }

    /// Checks shapes and that every id is below the model's vocabulary (a target may also be
    /// [`IGNORE`]).
    pub fn validate(&self, model: &ModelConfig) -> Result<(), ShapeError> {
        self.shape.validate(model)?;
        let n = self.shape.rows();
        if self.inputs.len() as u64 != n || self.targets.len() as u64 != n {
            return Err(ShapeError::BatchLength {
                inputs: self.inputs.len(),
                targets: self.targets.len(),
                expected: n,
            });
        }
        let ignored = self.targets.iter().map(|&t| t == IGNORE);
        for (position, (&id, ignore)) in
            self.inputs.iter().zip(std::iter::repeat(false)).chain(self.targets.iter().zip(ignored)).enumerate()
        {
            if id as usize >= model.vocab && !ignore {
                return Err(ShapeError::TokenOutOfRange {
                    id: id as i64,
                    position: position % self.inputs.len().max(1),
                    vocab: model.vocab,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_round_trips_and_batches_are_deterministic() {
        let ds = Dataset::builtin();
        assert!(CORPUS.len() > 20_000);
        assert_eq!(ds.tokenizer.decode(&ds.tokens), CORPUS);
        let shape = StepShape { batch: 3, seq: 16 };
        let a = ds.batch(shape, 1, 0).unwrap();
        assert_eq!(a, ds.batch(shape, 1, 0).unwrap());
        assert_ne!(a, ds.batch(shape, 1, 1).unwrap());
        // targets are inputs shifted by one
        assert_eq!(a.inputs[1..16], a.targets[..15]);
        let cfg = ModelConfig::toy(ds.tokenizer.vocab_size());
        assert!(a.validate(&cfg).is_ok());
        let small = ModelConfig { vocab: 5, ..cfg };
        assert!(matches!(a.validate(&small), Err(ShapeError::TokenOutOfRange { .. })));
    }
}

/// The positions of each token in `tokens`, grouped by token: `offsets[v]..offsets[v+1]` index
/// `positions`. A counting sort, so positions of one token stay in increasing order.
pub fn token_index(tokens: &[u32], vocab: usize) -> (Vec<u32>, Vec<u32>) {
    let mut offsets = vec![0u32; vocab + 1];
    for &tok in tokens {
        if let Some(slot) = offsets.get_mut(tok as usize + 1) {
            *slot += 1;
        }
    }
    for i in 0..vocab {
        offsets[i + 1] += offsets[i];
    }
    let mut cursor = offsets.clone();
    let mut positions = vec![0u32; tokens.len()];
    for (pos, &tok) in tokens.iter().enumerate() {
        if let Some(slot) = cursor.get_mut(tok as usize) {
            positions[*slot as usize] = pos as u32;
            *slot += 1;
        }
    }
    (offsets, positions)
}

#[cfg(test)]
mod token_index_tests {
    use super::token_index;

    #[test]
    fn token_index_groups_repeated_tokens() {
        let (off, pos) = token_index(&[2, 0, 2, 2, 1], 4);
        assert_eq!(off, vec![0, 1, 2, 5, 5]);
        assert_eq!(pos, vec![1, 4, 0, 2, 3]);
    }
}
