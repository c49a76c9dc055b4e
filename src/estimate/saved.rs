//! What a saved tensor is (its name, its source, its bytes, the part of the layer that makes
//! it), and the step's sizes every count of saved tensors starts from.

use super::Setup;
use super::states::words;

/// The step's sizes, in u128 so that no product overflows, and how a tensor splits over the
/// tensor-parallel GPUs.
pub(super) struct Sizes {
    /// s, h, the query width (heads · head size), a (heads), the key width, the value width,
    /// the attention output's width (the query's but with latent attention's values), f, t.
    pub(super) sq: u128,
    pub(super) h: u128,
    pub(super) q: u128,
    pub(super) heads: u128,
    pub(super) kv: u128,
    pub(super) v: u128,
    pub(super) o: u128,
    pub(super) f: u128,
    pub(super) t: u128,
    /// t with sequence parallelism, else 1: the LayerNorm/dropout region's split.
    pub(super) sp: u128,
    /// Bytes of an activation value.
    pub(super) p: u128,
    /// s·b, the rows.
    pub(super) sb: u128,
}

impl Sizes {
    pub(super) fn new(s: &Setup) -> Self {
        let a = &s.arch;
        let (sq, b) = (s.seq as u128, s.micro_batch as u128);
        let t = s.parallel.tensor as u128;
        Self {
            sq,
            h: a.hidden as u128,
            q: a.q_hidden() as u128,
            heads: a.heads as u128,
            kv: a.kv_hidden() as u128,
            v: a.v_hidden() as u128,
            o: a.attention_output() as u128,
            f: a.ffn as u128,
            t,
            sp: if s.parallel.sequence { t } else { 1 },
            p: s.precision.value_bytes() as u128,
            sb: sq * b,
        }
    }
    /// n values of `bytes` each in the tensor-parallel region (split by t).
    pub(super) fn tp(&self, n: u128, bytes: u128) -> u128 {
        words(n.div_ceil(self.t), bytes)
    }
    /// n values of `bytes` each in the LayerNorm/dropout region (split by t only with sequence
    /// parallelism).
    pub(super) fn rep(&self, n: u128, bytes: u128) -> u128 {
        words(n.div_ceil(self.sp), bytes)
    }
}

/// Where in a layer a saved tensor is made: checkpointing and the backward pass free them by part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// The block's input itself (the storage a checkpoint keeps too).
    BlockInput,
    /// Before the attention core: the first norm, q/k/v.
    BeforeCore,
    /// The attention core (scores, softmax, dropout).
    Core,
    /// After the core: the output projection's input, the second norm, the MLP.
    AfterCore,
    /// The MLP's down projection's input (freed when the MLP activation backward runs).
    DownInput,
}

/// One tensor a layer (or the model outside its layers) keeps for the backward pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Saved {
    /// Its name's catalog message (`saved-…`, in `i18n/`): [`Saved::name`].
    pub key: &'static str,
    /// Where it comes from: the paper, or the function of the real code path that saves it (a
    /// citation, in the code's own words).
    pub source: &'static str,
    /// Bytes on one GPU.
    pub bytes: u128,
    pub part: Part,
}

impl Saved {
    /// What it is, in the catalog's language ("GELU input", "RMSNorm's fp32 copy of its input").
    pub fn name(&self, t: &crate::i18n::Catalog) -> String {
        t.text(self.key)
    }
    /// Its name in English (the CLI's and the JSON's words).
    pub fn english(&self) -> String {
        super::Cite::new(self.key).english()
    }
}

impl serde::Serialize for Saved {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Saved", 4)?;
        st.serialize_field("name", &self.english())?;
        st.serialize_field("source", self.source)?;
        st.serialize_field("bytes", &self.bytes)?;
        st.serialize_field("part", &self.part)?;
        st.end()
    }
}

/// The paper the fused (Megatron-style) profile's tensors come from.
pub(super) const KORTHIKANTI: &str = "Korthikanti et al. 2022, §4.1";
/// What a linear layer keeps in the HF-eager profile.
pub(super) const HF_LINEAR: &str = "nn.Linear / Conv1D: addmm keeps its input";
