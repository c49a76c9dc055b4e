//! How the step's batch is made from text: fixed windows of the corpus (every position a real
//! token), or whole documents — padded to the longest of the batch, bucketed by length, or packed
//! into full rows with attention masked at the documents' boundaries (`crate::documents`).

use serde::{Deserialize, Serialize};

use crate::model::UnknownName;
use crate::plan::ConfigError;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Batching {
    /// Windows of `--seq-len` tokens at random places of the corpus, cut across documents
    /// (nanoGPT's way): no padding, no boundaries.
    #[default]
    Windows,
    /// Whole documents (the corpus's speeches), each row one document, padded to the longest of
    /// the batch with ignored targets.
    Padded,
    /// Whole documents of similar lengths batched together (dynamic batching): less padding.
    Bucketed,
    /// Whole documents packed one after another into full rows; attention stops at each
    /// document's start and positions restart there (varlen / block-diagonal masking).
    Packed,
}

impl Batching {
    pub const ALL: [Batching; 4] = [Batching::Windows, Batching::Padded, Batching::Bucketed, Batching::Packed];

    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "windows" | "window" => Ok(Batching::Windows),
            "padded" | "pad" => Ok(Batching::Padded),
            "bucketed" | "buckets" | "dynamic" => Ok(Batching::Bucketed),
            "packed" | "pack" => Ok(Batching::Packed),
            other => {
                Err(ConfigError::Name(UnknownName { what: crate::model::Setting::Batching, got: other.to_string() }))
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Batching::Windows => "windows",
            Batching::Padded => "padded",
            Batching::Bucketed => "bucketed",
            Batching::Packed => "packed",
        }
    }

    /// Whether rows hold several documents (the plan then has the documents' starts).
    pub fn is_packed(self) -> bool {
        self == Batching::Packed
    }

    /// Whether each batch has its own length (its documents' longest).
    pub fn varies_in_length(self) -> bool {
        matches!(self, Batching::Padded | Batching::Bucketed)
    }
}
