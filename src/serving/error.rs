//! Why a serving run cannot start: typed, worded by the catalogs (`serving-err-…`).

use std::fmt;

use crate::backend::BackendError;
use crate::i18n::{Catalog, with_english};

/// Why a serving run cannot start.
#[derive(Debug)]
pub enum ServingError {
    /// A setting out of its range, named as its flag.
    Option { flag: &'static str, value: String, min: u64, max: u64 },
    /// The weights and the largest step's activations leave no room for one request's cache.
    BudgetTooSmall { budget: u64, needed: u64 },
    /// A cache of `cache` bytes holds no token: a growing cache's tensors need the caching
    /// allocator's smallest segment (2 MiB), a contiguous one a row of the whole context.
    CacheTooSmall { cache: u64, needed: u64 },
    /// The model's vocabulary is not the corpus's.
    Vocabulary { model: usize, corpus: usize },
    /// The backend could not open, or failed.
    Backend(BackendError),
}

impl From<BackendError> for ServingError {
    fn from(e: BackendError) -> Self {
        ServingError::Backend(e)
    }
}

impl From<crate::plan::ConfigError> for ServingError {
    fn from(e: crate::plan::ConfigError) -> Self {
        ServingError::Backend(e.into())
    }
}

impl ServingError {
    /// The message in the catalog's language.
    pub fn text(&self, t: &Catalog) -> String {
        let size = |b: &u64| crate::units::format_bytes(*b);
        match self {
            ServingError::Option { flag, value, min, max } => t.format_text(
                "serving-err-option",
                &[
                    ("flag", flag.to_string()),
                    ("value", value.clone()),
                    ("min", min.to_string()),
                    ("max", max.to_string()),
                ],
            ),
            ServingError::BudgetTooSmall { budget, needed } => {
                t.format_text("serving-err-budget", &[("budget", size(budget)), ("needed", size(needed))])
            }
            ServingError::CacheTooSmall { cache, needed } => {
                t.format_text("serving-err-cache", &[("cache", size(cache)), ("needed", size(needed))])
            }
            ServingError::Vocabulary { model, corpus } => {
                t.format_text("serving-err-vocab", &[("model", model.to_string()), ("corpus", corpus.to_string())])
            }
            ServingError::Backend(e) => e.text(t),
        }
    }
}

impl fmt::Display for ServingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for ServingError {}
