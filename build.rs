//! Writes each shader of `shaders/` into `$OUT_DIR/shaders/` without its comments, as the crate
//! embeds them (`src/backend/gpu/kernels/wgsl_text.rs` says how, and why).

#[path = "src/backend/gpu/kernels/wgsl_text.rs"]
mod wgsl_text;
use wgsl_text::without_comments;

fn main() {
    println!("cargo::rerun-if-changed=shaders");
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
}
