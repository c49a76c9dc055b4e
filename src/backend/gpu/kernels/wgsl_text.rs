//! What of a `.wgsl` file the crate embeds: the code without its comments. The build script
//! writes each file of `shaders/` so (the web module carries no comment text: ~5 kB gzipped),
//! and the shader test applies the same function to the files it validates. WGSL has no string
//! literals, so `//` always starts a comment. Self-contained: `build.rs` uses this file too.

/// `text` without `//` comments, without the lines left blank and without trailing spaces; the
/// code's lines, and their indentation, as written.
pub fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let code = line.find("//").map_or(line, |at| &line[..at]).trim_end();
        if !code.is_empty() {
            out.push_str(code);
            out.push('\n');
        }
    }
    out
}
