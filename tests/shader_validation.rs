//! Every `.wgsl` file in shaders/, with the shared preamble (`common.wgsl`) prepended as the
//! crate loads it (and the file it is loaded after, where it says so), parses and validates with
//! naga, with no GPU; and every file is one the crate builds (so none is forgotten).

use std::path::Path;

/// Stripping comments keeps the code: a line's code and its indentation stay, a comment after
/// code goes, and so does a line that was only a comment.
#[test]
fn comments_go_and_code_stays() {
    use oomlab::backend::gpu::kernels::wgsl_text::without_comments;
    let text = "// a file\nfn f() -> f32 {\n    let x = 1.0; // one\n\n    // alone\n    return x;\n}\n";
    assert_eq!(without_comments(text), "fn f() -> f32 {\n    let x = 1.0;\n    return x;\n}\n");
    // Every shader keeps all its code lines (none of them is a comment's continuation).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let common = std::fs::read_to_string(dir.join("common.wgsl")).expect("common.wgsl");
    assert_eq!(oomlab::backend::gpu::kernels::COMMON, without_comments(&common));
    assert!(common.len() > oomlab::backend::gpu::kernels::COMMON.len(), "the preamble has comments to strip");
}

#[test]
fn every_shader_parses_and_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("shaders/ exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("wgsl") {
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        // The shared preamble is prepended to every shader, not a shader of its own.
        if name == "common.wgsl" {
            continue;
        }
        let own = std::fs::read_to_string(&path).expect("readable shader");
        assert!(!own.contains("fn flat_id"), "{name} redefines the preamble's flat_id");
        // A file that opens "// Loaded after X.wgsl" is loaded after X (whose declarations it uses).
        let after = own
            .strip_prefix("// Loaded after ")
            .and_then(|rest| rest.split_whitespace().next())
            .map(|base| std::fs::read_to_string(dir.join(base)).expect("the file it is loaded after"))
            .unwrap_or_default();
        // As the crate embeds it: each file without its comments.
        let strip = oomlab::backend::gpu::kernels::wgsl_text::without_comments;
        let source = format!("{}{}{}", oomlab::backend::gpu::kernels::COMMON, strip(&after), strip(&own));
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{name} does not parse:\n{}", e.emit_to_string(&source)));
        let mut validator = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities(&name));
        validator.validate(&module).unwrap_or_else(|e| panic!("{name} does not validate: {e:?}"));
        assert!(!module.entry_points.is_empty(), "{name} has no entry point");
        assert!(
            oomlab::backend::gpu::kernels::SHADERS.iter().any(|(n, src)| *n == name && *src == source),
            "{name} is not in kernels::SHADERS (or differs from it)"
        );
        count += 1;
    }
    assert_eq!(count, oomlab::backend::gpu::kernels::SHADERS.len(), "SHADERS lists a file that is not in shaders/");
}

/// What a shader may use: subgroup operations only in the subgroup GEMM (`matmul_sg8.wgsl`,
/// built only on devices with `SUBGROUP`); no other shader may need them.
fn capabilities(name: &str) -> naga::valid::Capabilities {
    if name == "matmul_sg8.wgsl" { naga::valid::Capabilities::SUBGROUP } else { naga::valid::Capabilities::default() }
}

/// Every shader's 16-bit variants validate too: all float bindings packed as fp16, as bf16, and
/// as native `f16` (the storage a mixed-precision step binds).
#[test]
fn every_16_bit_variant_validates() {
    use oomlab::backend::gpu::kernels::storage::{Storage, specialize};
    for (name, source) in oomlab::backend::gpu::kernels::SHADERS {
        let floats: Vec<u32> = source
            .lines()
            .filter(|l| l.trim_start().starts_with("@group(0) @binding(") && l.trim_end().ends_with("array<f32>;"))
            .filter_map(|l| l.split("@binding(").nth(1)?.split(')').next()?.parse().ok())
            .collect();
        assert!(!floats.is_empty(), "{name} has no float binding");
        for storage in [Storage::F16Packed, Storage::Bf16Packed, Storage::F16Native] {
            // All float bindings at once, and each alone (mixed fp32/16-bit dispatches).
            let mut sets: Vec<Vec<(u32, Storage)>> = vec![floats.iter().map(|&b| (b, storage)).collect()];
            sets.extend(floats.iter().map(|&b| vec![(b, storage)]));
            for set in sets {
                let text = specialize(source, &set);
                let module = naga::front::wgsl::parse_str(&text)
                    .unwrap_or_else(|e| panic!("{name} {set:?} does not parse:\n{}\n{text}", e.emit_to_string(&text)));
                let caps = naga::valid::Capabilities::SHADER_FLOAT16 | capabilities(name);
                naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
                    .validate(&module)
                    .unwrap_or_else(|e| panic!("{name} {set:?} does not validate: {e:?}\n{text}"));
            }
        }
    }
}
