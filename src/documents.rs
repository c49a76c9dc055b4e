//! The corpus as documents — its speeches, separated by blank lines — and the ways to batch
//! them (`plan::Batching`): padded to the longest of the batch, bucketed by length, or packed into
//! full rows. A document of n tokens gives n − 1 (input, target) pairs; a row holds at most T.

use crate::data::{Batch, CORPUS, CharTokenizer, IGNORE};
use crate::model::ShapeError;
use crate::model::StepShape;
use crate::model::init::Rng;
use crate::plan::Batching;
use crate::plan::ConfigError;

/// The documents of a text, tokenized.
#[derive(Clone, Debug)]
pub struct Documents {
    pub docs: Vec<Vec<u32>>,
}

/// How much of a batch is padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PaddingShare {
    /// Positions in the batch (rows × T).
    pub positions: u64,
    /// Positions holding a document's token with a counted target.
    pub useful: u64,
}

impl PaddingShare {
    pub fn of(batch: &Batch) -> Self {
        Self { positions: batch.targets.len() as u64, useful: batch.counted_targets() as u64 }
    }
    /// Padding over all positions, 0 to 1.
    pub fn share(&self) -> f64 {
        if self.positions == 0 { 0.0 } else { 1.0 - self.useful as f64 / self.positions as f64 }
    }
}

impl Documents {
    /// The built-in corpus's 158 speeches.
    pub fn builtin() -> Self {
        Self::from_text(CORPUS, &CharTokenizer::builtin())
    }

    /// The built-in corpus's documents, tokenized once for the process (the app asks for a
    /// batch's length whenever it plans one).
    pub fn shared() -> &'static Documents {
        static DOCS: std::sync::OnceLock<Documents> = std::sync::OnceLock::new();
        DOCS.get_or_init(Documents::builtin)
    }

    /// `text` cut at blank lines; documents of fewer than two tokens (nothing to predict) left out.
    pub fn from_text(text: &str, tokenizer: &CharTokenizer) -> Self {
        let docs = text.split("\n\n").filter_map(|d| tokenizer.encode(d).ok()).filter(|d| d.len() >= 2).collect();
        Self { docs }
    }

    /// Document `i`'s (input, target) pairs, at most `t` of them.
    fn pairs(&self, i: usize, t: usize) -> (&[u32], &[u32]) {
        let d = self.docs.get(i).map_or(&[][..], Vec::as_slice);
        if d.len() < 2 {
            return (&[], &[]);
        }
        let n = (d.len() - 1).min(t);
        (&d[..n], &d[1..=n])
    }

    /// Pairs in document `i` (up to `t`).
    pub fn len_pairs(&self, i: usize, t: usize) -> usize {
        self.pairs(i, t).0.len()
    }

    fn rng(seed: u64, index: u64) -> Rng {
        Rng::new(seed.wrapping_mul(0x9E37_79B9).wrapping_add(index.wrapping_mul(0x2545_F491_4F6C_DD1D)) ^ 0xd0c5)
    }

    /// Batch `index` of the stream seeded by `seed`, made the `batching` way: `shape.batch` rows,
    /// of at most `shape.seq` positions (padded and bucketed: as long as the batch's longest
    /// document; packed: exactly `shape.seq`). Windows are [`crate::data::Dataset::batch`]'s.
    pub fn batch(&self, batching: Batching, shape: StepShape, seed: u64, index: u64) -> Result<Batch, ConfigError> {
        if self.docs.is_empty() || shape.batch == 0 || shape.seq == 0 {
            return Err(ConfigError::Shape(ShapeError::CorpusTooShort { tokens: self.docs.len(), seq: shape.seq }));
        }
        let ids = self.sample(batching, shape, seed, index);
        Ok(match batching {
            Batching::Packed => self.packed(&ids, shape.batch, shape.seq).0,
            _ => self.padded(&ids, shape.seq),
        })
    }

    /// The documents batch `index` draws, in order: `shape.batch` at random (padded), a run of
    /// neighbours by length (bucketed), or a random order to pack from (packed).
    pub fn sample(&self, batching: Batching, shape: StepShape, seed: u64, index: u64) -> Vec<usize> {
        let mut rng = Self::rng(seed, index);
        let n = self.docs.len().max(1);
        match batching {
            Batching::Windows | Batching::Padded => (0..shape.batch).map(|_| rng.below(n)).collect(),
            Batching::Bucketed => {
                // Documents sorted by length, cut into batches of neighbours: one picked.
                let mut order: Vec<usize> = (0..self.docs.len()).collect();
                order.sort_by_key(|&i| (self.len_pairs(i, shape.seq), i));
                let buckets = order.len().div_ceil(shape.batch).max(1);
                let k = rng.below(buckets);
                (0..shape.batch).map(|j| order[(k * shape.batch + j).min(order.len().saturating_sub(1))]).collect()
            }
            Batching::Packed => (0..n * 2).map(|_| rng.below(n)).collect(),
        }
    }

    /// The fewest rows of `t` positions that hold all of `ids`, packed (first fit).
    pub fn rows_to_pack(&self, ids: &[usize], t: usize) -> usize {
        (1..=ids.len().max(1)).find(|&rows| self.packed(ids, rows, t).1.len() == ids.len()).unwrap_or(ids.len())
    }

    /// One row per document of `ids`, as long as the longest (at most `t`), padded at the end
    /// (input token 0, target ignored).
    pub fn padded(&self, ids: &[usize], t: usize) -> Batch {
        let longest = ids.iter().map(|&i| self.len_pairs(i, t)).max().unwrap_or(1).max(1);
        let (mut inputs, mut targets) = (Vec::new(), Vec::new());
        for &i in ids {
            let (x, y) = self.pairs(i, t);
            inputs.extend_from_slice(x);
            targets.extend_from_slice(y);
            inputs.extend(std::iter::repeat_n(0, longest - x.len()));
            targets.extend(std::iter::repeat_n(IGNORE, longest - x.len()));
        }
        Batch { shape: StepShape { batch: ids.len(), seq: longest }, inputs, targets, doc_starts: Vec::new() }
    }

    /// `rows` rows of `t` positions filled with the documents of `order`, each whole (truncated
    /// to `t`) after the last document of the first row with room for it (first fit: short
    /// documents fill the gaps long ones leave); the rest of a row is padding. Returns the batch
    /// and the documents it holds, in the order placed. Every position records where its document
    /// starts in its row (`Batch::doc_starts`).
    pub fn packed(&self, order: &[usize], rows: usize, t: usize) -> (Batch, Vec<usize>) {
        let n = rows * t;
        let (mut inputs, mut targets, mut starts) = (vec![0u32; n], vec![IGNORE; n], vec![0u32; n]);
        let mut used = Vec::new();
        let mut fill = vec![0usize; rows];
        for &i in order {
            let (x, y) = self.pairs(i, t);
            let Some(row) = (0..rows).find(|&r| !x.is_empty() && fill[r] + x.len() <= t) else { continue };
            let at = fill[row];
            let base = row * t + at;
            inputs[base..base + x.len()].copy_from_slice(x);
            targets[base..base + y.len()].copy_from_slice(y);
            starts[base..base + x.len()].fill(at as u32);
            used.push(i);
            fill[row] += x.len();
        }
        // The padding after a row's last document starts a "document" of its own, so that no
        // real token's attention or position depends on it (causal: none does anyway).
        for r in 0..rows {
            let end = (0..t).rev().find(|&p| targets[r * t + p] != IGNORE).map_or(0, |p| p + 1);
            starts[r * t + end..(r + 1) * t].fill(end as u32);
        }
        let shape = StepShape { batch: rows, seq: t };
        (Batch { shape, inputs, targets, doc_starts: starts }, used)
    }
}

/// Batch `index` of `seed` for a run batched the `batching` way: windows of `dataset` of
/// `shape`, rows packed with its documents (`shape`), or its documents one to a row, padded to
/// the batch's longest (at most `max_t` positions, so the batch's length is its own).
pub fn batch_for(
    dataset: &crate::data::Dataset,
    batching: Batching,
    shape: StepShape,
    max_t: usize,
    seed: u64,
    index: u64,
) -> Result<Batch, ConfigError> {
    let docs = || Documents::from_text(&dataset.tokenizer.decode(&dataset.tokens), &dataset.tokenizer);
    match batching {
        Batching::Windows => dataset.batch(shape, seed, index).map_err(ConfigError::from),
        Batching::Packed => docs().batch(batching, shape, seed, index),
        Batching::Padded | Batching::Bucketed => {
            docs().batch(batching, StepShape { batch: shape.batch, seq: max_t }, seed, index)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_is_its_speeches_and_each_way_batches_them() {
        let d = Documents::builtin();
        assert_eq!(d.docs.len(), 158);
        let shape = StepShape { batch: 4, seq: 128 };
        let padded = d.batch(Batching::Padded, shape, 1, 0).expect("padded");
        let bucketed = d.batch(Batching::Bucketed, shape, 1, 0).expect("bucketed");
        let packed = d.batch(Batching::Packed, shape, 1, 0).expect("packed");
        assert!(padded.shape.seq <= 128 && bucketed.shape.seq <= 128);
        assert_eq!(packed.shape, shape);
        assert_eq!(packed.doc_starts.len(), 4 * 128);
        for b in [&padded, &bucketed, &packed] {
            assert_eq!(b.inputs.len(), b.shape.batch * b.shape.seq);
            assert_eq!(b.targets.len(), b.inputs.len());
        }
        // Every start is at or before its position, and a document's positions share it.
        for (p, &s) in packed.doc_starts.iter().enumerate() {
            assert!(s as usize <= p % 128);
        }
        assert!(PaddingShare::of(&packed).share() <= PaddingShare::of(&padded).share());
        assert_eq!(d.batch(Batching::Packed, shape, 1, 0).expect("again"), packed, "deterministic");
    }
}
