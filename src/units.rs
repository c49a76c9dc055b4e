//! Byte sizes as PyTorch prints them: bytes up to 1024, then KiB, MiB or GiB with two decimals
//! (`format_size` in c10/cuda/CUDACachingAllocator.cpp).

/// "512 bytes", "1.50 KiB", "20.00 MiB", "3.25 GiB".
pub fn format_bytes(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if bytes <= 1024 {
        format!("{bytes} bytes")
    } else if b < KIB * KIB {
        format!("{:.2} KiB", b / KIB)
    } else if b < KIB * KIB * KIB {
        format!("{:.2} MiB", b / (KIB * KIB))
    } else {
        format!("{:.2} GiB", b / (KIB * KIB * KIB))
    }
}

/// A plan size as a host index. Saturates rather than wraps: a plan whose sizes pass `usize`
/// (wasm32: 2³²) is refused before an executor holds it (the host-memory and adapter-limit
/// checks), so a saturated value never reaches an executing op.
pub fn ix(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::format_bytes;

    #[test]
    fn formats_like_pytorch() {
        assert_eq!(format_bytes(1), "1 bytes");
        assert_eq!(format_bytes(1024), "1024 bytes");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(20 * 1024 * 1024), "20.00 MiB");
        assert_eq!(format_bytes(3 * 1024 * 1024 * 1024 + 256 * 1024 * 1024), "3.25 GiB");
    }
}

/// 6738415616 → "6,738,415,616".
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Why a size was not read (its English words are the CLI's; the app words it from the
/// catalogs).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("cannot read {text:?} as a size (try 64MiB or 1GiB)")]
    NotANumber { text: String },
    #[error("unknown size unit {unit:?} in {text:?} (use KiB, MiB, GiB)")]
    UnknownUnit { unit: String, text: String },
    #[error("size {text:?} is out of range")]
    OutOfRange { text: String },
}

/// Parses "64MiB", "1 GiB", "512KiB", "2.5GB", "1000000" (bytes). Decimal units (KB, MB, GB)
/// are powers of 1000, binary ones (KiB, MiB, GiB) powers of 1024.
pub fn parse_bytes(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| SizeError::NotANumber { text: text.to_string() })?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => return Err(SizeError::UnknownUnit { unit: other.to_string(), text: text.to_string() }),
    };
    let bytes = value * scale;
    if !(1.0..=1e18).contains(&bytes) {
        return Err(SizeError::OutOfRange { text: text.to_string() });
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod parse_tests {
    use super::parse_bytes;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("1 GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5kib"), Ok(1536));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(matches!(parse_bytes("lots"), Err(super::SizeError::NotANumber { .. })));
        assert!(matches!(parse_bytes("-5MiB"), Err(super::SizeError::NotANumber { .. })));
        assert!(matches!(parse_bytes("0"), Err(super::SizeError::OutOfRange { .. })));
        let parsecs = parse_bytes("12 parsecs").expect_err("no such unit");
        assert_eq!(parsecs.to_string(), "unknown size unit \"parsecs\" in \"12 parsecs\" (use KiB, MiB, GiB)");
        assert_eq!(super::group_digits(6_738_415_616), "6,738,415,616");
        assert_eq!(super::group_digits(999), "999");
        assert_eq!(super::group_digits(1000), "1,000");
    }
}
