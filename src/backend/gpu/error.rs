//! Why the GPU backend failed: typed, the driver's (wgpu's) own words quoted, worded by the
//! catalogs.

/// Why the GPU backend failed, worded by the catalogs (`gpu-err-…`) in the reader's language
/// where the app shows it and in English through `Display` (the CLI's words). A payload is the
/// driver's (wgpu's) own words, or the thing that was too large, quoted as it came.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuError {
    NoAdapter(String),
    RequestDevice(String),
    /// An adapter that draws but cannot compute (a browser's WebGL, by its backend's name).
    NoCompute(String),
    ExceedsLimit {
        what: String,
        needed: u64,
        limit: u64,
        bytes: bool,
    },
    OutOfMemory(String),
    Validation(String),
    Readback(String),
    DeviceLost(String),
}

impl GpuError {
    /// The error in `t`'s language.
    pub fn text(&self, t: &crate::i18n::Catalog) -> String {
        self.worded().text(t)
    }

    /// Its catalog message: the key, and the driver's words (or the sizes) as arguments.
    pub fn worded(&self) -> crate::model::Worded {
        let (key, detail) = match self {
            GpuError::ExceedsLimit { what, needed, limit, bytes } => {
                let args = [
                    ("what", what.clone()),
                    ("needed", fmt_limit(*needed, *bytes)),
                    ("limit", fmt_limit(*limit, *bytes)),
                ];
                return crate::model::Worded::of("gpu-err-limit", &args);
            }
            GpuError::NoAdapter(d) => ("gpu-err-no-adapter", d),
            GpuError::RequestDevice(d) => ("gpu-err-device", d),
            GpuError::NoCompute(d) => ("gpu-err-no-compute", d),
            GpuError::OutOfMemory(d) => ("gpu-err-oom", d),
            GpuError::Validation(d) => ("gpu-err-validation", d),
            GpuError::Readback(d) => ("gpu-err-readback", d),
            GpuError::DeviceLost(d) => ("gpu-err-lost", d),
        };
        crate::model::Worded::of(key, &[("detail", detail.clone())])
    }
}

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::i18n::with_english(|en| self.text(en)))
    }
}

impl std::error::Error for GpuError {}

/// Byte quantities in PyTorch's units, counts as plain numbers.
fn fmt_limit(value: u64, bytes: bool) -> String {
    if bytes { crate::units::format_bytes(value) } else { value.to_string() }
}
