//! The caching allocator's options, as PyTorch reads them from `PYTORCH_CUDA_ALLOC_CONF`:
//! `max_split_size_mb`, `garbage_collection_threshold` and `expandable_segments`, written the
//! same way (`expandable_segments:True,max_split_size_mb:128`). They are part of a step's
//! techniques — remedies for fragmentation, as checkpointing is one for activations — so that
//! the plan's prediction and every backend's real step use the same ones;
//! `crate::memory::allocator` carries them out.

use serde::{Deserialize, Serialize};

/// PyTorch's `kLargeBuffer` in MiB: `max_split_size_mb` must be larger.
pub const LARGE_BUFFER_MIB: u64 = 20;

/// What PyTorch's allocator options are set to. The default is PyTorch's: no option set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AllocatorConfig {
    /// `max_split_size_mb`, in bytes: free blocks this large or larger are never split, and a
    /// request under it never takes one. None: no limit (PyTorch's default).
    pub max_split_size: Option<u64>,
    /// `garbage_collection_threshold`, in (0, 1): before reserving a new segment, once reserved
    /// memory passes this share of the capacity, free cached blocks are released, oldest first.
    pub garbage_collection_threshold: Option<f64>,
    /// `expandable_segments`: one segment per pool that grows (and shrinks) in pages, instead
    /// of a new segment per request.
    pub expandable_segments: bool,
}

/// Why an options string (PyTorch's `PYTORCH_CUDA_ALLOC_CONF`) was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum AllocatorConfigError {
    NotKeyValue(String),
    Unknown(String),
    MaxSplit(String),
    Threshold(String),
    Expandable(String),
}

impl AllocatorConfigError {
    /// Its catalog message (`cfg-err-allocator-…`).
    pub fn worded(&self) -> crate::model::Worded {
        let (key, value) = match self {
            AllocatorConfigError::NotKeyValue(v) => ("cfg-err-allocator-not-key-value", format!("{v:?}")),
            AllocatorConfigError::Unknown(v) => ("cfg-err-allocator-unknown", format!("{v:?}")),
            AllocatorConfigError::MaxSplit(v) => ("cfg-err-allocator-max-split", v.clone()),
            AllocatorConfigError::Threshold(v) => ("cfg-err-allocator-threshold", v.clone()),
            AllocatorConfigError::Expandable(v) => ("cfg-err-allocator-expandable", v.clone()),
        };
        crate::model::Worded::new(key, vec![("value", crate::model::Arg::Text(value))])
    }

    /// The message in the catalog's language.
    pub fn text(&self, t: &crate::i18n::Catalog) -> String {
        self.worded().text(t)
    }
}

impl std::fmt::Display for AllocatorConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::i18n::with_english(|en| self.text(en)))
    }
}

impl std::error::Error for AllocatorConfigError {}

/// The largest `max_split_size_mb` kept as a number of bytes: the option's MiB times 2²⁰ fits
/// u64 with room to add a segment's size.
const MAX_SPLIT_MIB_CAP: u64 = 1 << 40;

impl AllocatorConfig {
    /// Parses PyTorch's syntax: comma-separated `key:value` pairs, later pairs overriding
    /// earlier ones; an empty string is the default. Values are checked as PyTorch checks them.
    pub fn parse(text: &str) -> Result<Self, AllocatorConfigError> {
        let mut c = Self::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once(':').ok_or_else(|| AllocatorConfigError::NotKeyValue(pair.into()))?;
            let (key, value) = (key.trim(), value.trim());
            match key {
                "max_split_size_mb" => {
                    let mib: u64 = value.parse().map_err(|_| AllocatorConfigError::MaxSplit(value.into()))?;
                    if mib <= LARGE_BUFFER_MIB {
                        return Err(AllocatorConfigError::MaxSplit(value.into()));
                    }
                    c.max_split_size = Some(mib.min(MAX_SPLIT_MIB_CAP) << 20);
                }
                "garbage_collection_threshold" => {
                    let t: f64 = value.parse().map_err(|_| AllocatorConfigError::Threshold(value.into()))?;
                    if !(t > 0.0 && t < 1.0) {
                        return Err(AllocatorConfigError::Threshold(value.into()));
                    }
                    c.garbage_collection_threshold = Some(t);
                }
                "expandable_segments" => {
                    c.expandable_segments = match value {
                        "True" | "true" => true,
                        "False" | "false" => false,
                        _ => return Err(AllocatorConfigError::Expandable(value.into())),
                    }
                }
                _ => return Err(AllocatorConfigError::Unknown(key.into())),
            }
        }
        Ok(c)
    }

    /// The options in PyTorch's syntax (empty for the default); [`Self::parse`] reads it back.
    pub fn to_conf_string(&self) -> String {
        let mut parts = Vec::new();
        if self.expandable_segments {
            parts.push("expandable_segments:True".to_string());
        }
        if let Some(s) = self.max_split_size {
            parts.push(format!("max_split_size_mb:{}", s >> 20));
        }
        if let Some(t) = self.garbage_collection_threshold {
            parts.push(format!("garbage_collection_threshold:{t}"));
        }
        parts.join(",")
    }

    /// Checks values that did not come through [`Self::parse`] (JSON, a link) as it checks them.
    pub fn validate(&self) -> Result<(), AllocatorConfigError> {
        if let Some(s) = self.max_split_size
            && (s >> 20 <= LARGE_BUFFER_MIB || s >> 20 > MAX_SPLIT_MIB_CAP)
        {
            return Err(AllocatorConfigError::MaxSplit(format!("{} B", s)));
        }
        if let Some(t) = self.garbage_collection_threshold
            && !(t > 0.0 && t < 1.0)
        {
            return Err(AllocatorConfigError::Threshold(t.to_string()));
        }
        Ok(())
    }

    /// The split limit in bytes (u64::MAX when none is set, as PyTorch's `max_split_size()`).
    pub fn split_limit(&self) -> u64 {
        self.max_split_size.unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_read_as_pytorch_writes_them() {
        assert_eq!(AllocatorConfig::parse(""), Ok(AllocatorConfig::default()));
        let c =
            AllocatorConfig::parse("expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.6")
                .expect("valid");
        assert_eq!(c.max_split_size, Some(128 << 20));
        assert_eq!(c.garbage_collection_threshold, Some(0.6));
        assert!(c.expandable_segments);
        assert_eq!(AllocatorConfig::parse(&c.to_conf_string()), Ok(c));
        // Later pairs win, as PyTorch reads them.
        let c = AllocatorConfig::parse("expandable_segments:True,expandable_segments:False").expect("valid");
        assert!(!c.expandable_segments);
        assert_eq!(c.to_conf_string(), "");
    }

    #[test]
    fn bad_options_are_named() {
        let e = |s: &str| AllocatorConfig::parse(s).expect_err(s).to_string();
        assert!(e("max_split_size_mb:20").contains("greater than 20"), "PyTorch refuses 20 and under");
        assert!(e("max_split_size_mb:-5").contains("max_split_size_mb:-5"));
        assert!(e("max_split_size_mb:99999999999999999999999").contains("whole number"));
        assert!(e("garbage_collection_threshold:1").contains("between 0 and 1"));
        assert!(e("garbage_collection_threshold:NaN").contains("between 0 and 1"));
        assert!(e("garbage_collection_threshold:0").contains("between 0 and 1"));
        assert!(e("expandable_segments:yes").contains("True or False"));
        assert!(e("roundup_power2_divisions:4").contains("unknown allocator option"));
        assert!(e("expandable_segments").contains("key:value"));
        // An absurd but valid size keeps its bytes inside u64.
        let c = AllocatorConfig::parse("max_split_size_mb:18446744073709551615").expect("valid");
        assert_eq!(c.max_split_size, Some(MAX_SPLIT_MIB_CAP << 20));
    }
}
