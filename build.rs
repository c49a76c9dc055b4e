//! Writes each shader of `shaders/` into `$OUT_DIR/shaders/` without its comments, as the crate
//! embeds them (`src/backend/gpu/kernels/wgsl_text.rs` says how, and why); and each catalog of
//! `i18n/` into `$OUT_DIR/i18n/` without its comment lines (the web module carries the English
//! one: its comments were a kilobyte of it, gzipped).

#[path = "src/backend/gpu/kernels/wgsl_text.rs"]
mod wgsl_text;
use wgsl_text::without_comments;

fn main() {
    println!("cargo::rerun-if-changed=shaders");
    println!("cargo::rerun-if-changed=i18n/en.ftl");
    println!("cargo::rerun-if-changed=i18n/zh.ftl");
    println!("cargo::rerun-if-changed=src/backend/gpu/kernels/wgsl_text.rs");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("shaders");
    std::fs::create_dir_all(&out).expect("OUT_DIR/shaders");
    for entry in std::fs::read_dir("shaders").expect("shaders/") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "wgsl") {
            let text = std::fs::read_to_string(&path).expect("a readable shader");
            let name = path.file_name().expect("a file name");
            std::fs::write(out.join(name), without_comments(&text)).expect("written");
        }
    }
    // A Fluent comment is a line that starts with `#` (a message's continuation lines are
    // indented), so dropping those lines keeps every message as it is.
    let i18n = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("i18n");
    std::fs::create_dir_all(&i18n).expect("OUT_DIR/i18n");
    for name in ["en.ftl", "zh.ftl"] {
        let text = std::fs::read_to_string(std::path::Path::new("i18n").join(name)).expect("a readable catalog");
        std::fs::write(i18n.join(name), without_comment_lines(&text, &[])).expect("written");
    }
    // The web module's English also leaves out what only native code says: the class server's
    // student page (`student-…`, served by `oomlab serve`), the toy CLI's refusals (`cli-…`) and
    // the serving estimate's (`serve-…`, the CLI's only until the app shows serving).
    let en = std::fs::read_to_string("i18n/en.ftl").expect("a readable catalog");
    std::fs::write(i18n.join("en-web.ftl"), without_comment_lines(&en, NATIVE_ONLY)).expect("written");
}

/// The message prefixes only native code (the server, the CLI) words: `src/i18n.rs` names them
/// too, and `tests/i18n.rs` checks no code the web build compiles uses one.
const NATIVE_ONLY: &[&str] = &["student-", "cli-", "serve-", "serving-"];

/// `text` without its comment lines, and without the messages whose id starts with one of
/// `dropped` (a message's continuation lines are indented: they go with it).
fn without_comment_lines(text: &str, dropped: &[&str]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut dropping = false;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if !line.starts_with(' ') && !line.is_empty() {
            dropping = dropped.iter().any(|p| line.starts_with(p));
        }
        if !dropping {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
