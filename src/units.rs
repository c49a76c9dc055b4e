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
