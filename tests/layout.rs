//! The shape of the source tree: every file small, no `too_many_arguments` allow, dependencies
//! pointing one way — model → plan → memory (and the estimator beside it) → backend → app → cli,
//! with `units` and `i18n` below everything and the CPU and GPU backends apart — the app's state
//! in parts of a size a reader can hold, and comments that explain themselves.

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
        ("memory/", &["crate::backend", "crate::app", "crate::cli", "crate::estimate"]),
        ("estimate/", &["crate::memory", "crate::backend", "crate::app", "crate::cli"]),
        ("backend/", &["crate::app", "crate::cli"]),
        ("backend/cpu", &["crate::backend::gpu", "super::gpu", "gpu::"]),
        ("backend/gpu", &["crate::backend::cpu", "super::cpu", "cpu::"]),
        ("app/", &["crate::cli"]),
        // The classroom's contract is plain data; its server knows nothing of the app or a GPU.
        ("class/", &["crate::", "egui", "wgpu", "axum", "tokio", "rusqlite"]),
        ("serve/", &["crate::app", "crate::backend", "crate::cli", "egui", "wgpu"]),
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

/// The fields of every struct declared in `code` (braced structs): (name, field count).
fn struct_fields(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let Some(rest) = t
            .strip_prefix("pub struct ")
            .or_else(|| t.strip_prefix("struct "))
            .or_else(|| t.strip_prefix("pub(super) struct ").or_else(|| t.strip_prefix("pub(crate) struct ")))
        else {
            continue;
        };
        if !t.ends_with('{') {
            continue;
        }
        let name = rest.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or("").to_string();
        let (mut depth, mut fields) = (1i32, 0);
        for l in &lines[i + 1..] {
            let l = l.trim();
            if depth == 1 && !l.starts_with('#') && !l.starts_with("//") {
                let field =
                    l.trim_start_matches("pub(super) ").trim_start_matches("pub(crate) ").trim_start_matches("pub ");
                let ident: String = field.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !ident.is_empty() && field[ident.len()..].starts_with(':') && !field[ident.len()..].starts_with("::")
                {
                    fields += 1;
                }
            }
            depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
            if depth <= 0 {
                break;
            }
        }
        out.push((name, fields));
    }
    out
}

/// The app's state is a few parts, each owning its own: no struct in `src/app` holds more than
/// 15 fields, and only `src/app/mod.rs` adds methods to the app itself.
#[test]
fn the_app_state_is_in_parts() {
    let files = sources();
    let mut structs = 0;
    for (path, code, _) in files.iter().filter(|(p, _, _)| p.starts_with("app/")) {
        for (name, fields) in struct_fields(code) {
            structs += 1;
            assert!(fields <= 15, "src/{path}: struct {name} has {fields} fields (at most 15)");
        }
        if path != "app/mod.rs" {
            assert!(
                !code.contains("impl OomlabApp") && !code.contains("impl super::OomlabApp"),
                "src/{path} adds to OomlabApp"
            );
        }
    }
    assert!(structs > 20, "found only {structs} structs in src/app");
    // The counter itself, on a struct of known shape.
    let sample =
        "pub struct A {\n    pub x: u8,\n    #[cfg(test)]\n    y: Vec<u8>,\n    // z: no\n    f: fn(u8) -> u8,\n}\n";
    assert_eq!(struct_fields(sample), vec![("A".to_string(), 3)]);
}

/// Comments say the reason in place: none points at a file outside the repository (the
/// guide's sections) or at an issue number.
#[test]
fn comments_stand_on_their_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for p in files {
        let text = std::fs::read_to_string(&p).expect("a source file");
        for (n, line) in text.lines().enumerate() {
            let Some(at) = line.find("//") else { continue };
            let comment = &line[at..];
            let lower = comment.to_lowercase();
            let issue = lower.match_indices("issue").any(|(i, _)| {
                let after = lower[i + 5..].trim_start_matches([' ', '#']);
                after.starts_with(|c: char| c.is_ascii_digit())
            });
            let outside = comment.contains("GUIDE") || comment.contains("../shared");
            assert!(!issue && !outside, "{}:{}: {}", p.display(), n + 1, comment.trim());
        }
    }
}
