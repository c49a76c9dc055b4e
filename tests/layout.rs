//! The shape of the source tree (issue 12): every file small, no `too_many_arguments` allow,
//! and dependencies pointing one way: model → plan → memory → backend → app → cli, with `units`
//! and `i18n` below everything and the CPU and GPU backends apart.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each source file under src/ as (path relative to src/, its code lines without comments).
fn sources() -> Vec<(String, String, usize)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("a source file");
            let lines = text.lines().count();
            let code: String =
                text.lines().filter(|l| !l.trim_start().starts_with("//")).map(|l| format!("{l}\n")).collect();
            let rel = p.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
            (rel, code, lines)
        })
        .collect()
}

#[test]
fn every_source_file_is_small_and_has_no_too_many_arguments_allow() {
    let files = sources();
    assert!(files.len() > 50, "found only {} files", files.len());
    for (path, code, lines) in &files {
        assert!(*lines <= 600, "src/{path} has {lines} lines (at most 600)");
        assert!(!code.contains("too_many_arguments"), "src/{path} allows too_many_arguments");
    }
}

#[test]
fn dependencies_point_one_way() {
    // (folder or file prefix, the crate paths it must not use)
    let rules: &[(&str, &[&str])] = &[
        ("units.rs", &["crate::"]),
        ("i18n.rs", &["crate::"]),
        ("model/", &["crate::plan", "crate::memory", "crate::backend", "crate::app", "crate::cli"]),
        ("plan/", &["crate::memory", "crate::backend", "crate::app", "crate::cli"]),
        ("memory/", &["crate::backend", "crate::app", "crate::cli"]),
        ("backend/", &["crate::app", "crate::cli"]),
        ("backend/cpu", &["crate::backend::gpu", "super::gpu", "gpu::"]),
        ("backend/gpu", &["crate::backend::cpu", "super::cpu", "cpu::"]),
        ("app/", &["crate::cli"]),
    ];
    let files = sources();
    let mut checked = 0;
    for (path, code, _) in &files {
        for (prefix, banned) in rules {
            if path.starts_with(prefix) {
                checked += 1;
                for b in *banned {
                    assert!(!code.contains(b), "src/{path} uses {b}, against the layering");
                }
            }
        }
    }
    assert!(checked > 50, "the rules matched only {checked} files");
}
