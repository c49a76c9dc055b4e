//! Every `.wgsl` file in shaders/ parses and validates with naga, with no GPU; and every file
//! is one the crate builds (so none is forgotten).

use std::path::Path;

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
        let source = std::fs::read_to_string(&path).expect("readable shader");
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{name} does not parse:\n{}", e.emit_to_string(&source)));
        let mut validator =
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::default());
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
