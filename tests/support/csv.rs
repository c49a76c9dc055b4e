//! CSV helpers shared by the tests that read oomlab's CSV files.

/// The number of fields of a CSV line (commas inside double quotes do not split).
pub fn fields(line: &str) -> usize {
    let mut quoted = false;
    1 + line
        .chars()
        .filter(|&c| {
            quoted ^= c == '"';
            c == ',' && !quoted
        })
        .count()
}
