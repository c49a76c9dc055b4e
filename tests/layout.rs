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
        ("backend/", &["crate::app", "crate::cli", "crate::serving"]),
        ("serving/", &["crate::app", "crate::cli"]),
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

/// `code` with comments removed and the insides of string and character literals blanked, so
/// that only code is read for paths.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let (mut out, mut i) = (String::with_capacity(text.len()), 0);
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            i += 2;
            while i < c.len() && !(c[i] == '*' && c.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if c[i] == 'r' && (next == Some('"') || next == Some('#')) && (i == 0 || !is_ident(c[i - 1])) {
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            i += hashes + 2;
            while i < c.len()
                && !(c[i] == '"' && c[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes)
            {
                i += 1;
            }
            i += hashes + 1;
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{..}'); a lifetime ('a) is left as it is.
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// Every module under `folder` of src/ (`""` for all of it): its path from the crate root
/// (`app::teaching::lessons`) and its code. `lib.rs` is the root; `main.rs`, the binary's root,
/// is left out (its only module, `cli`, keeps its path, as the binary declares it at its root).
fn modules_under(folder: &str) -> Vec<(Vec<String>, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join(folder), &mut files);
    files
        .into_iter()
        .filter(|p| !p.ends_with("main.rs"))
        .map(|p| {
            let rel = p.strip_prefix(&src).expect("under src").with_extension("");
            let mut module: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if module.last().is_some_and(|m| m == "mod" || m == "lib") {
                module.pop();
            }
            (module, code_only(&std::fs::read_to_string(&p).expect("a source file")))
        })
        .collect()
}

fn app_modules() -> Vec<(Vec<String>, String)> {
    modules_under("app")
}

/// The modules `code` (the file of module `here`) names by a path: `crate::…`, `super::…`,
/// `self::…`, a `use` group's items, and its own child modules (`mod x;` then `x::…`) — inline
/// modules (`mod tests { use super::*; }`) counted from where they sit. Each path is given as
/// module segments from the crate root, before resolving to a file.
fn named_paths(here: &[String], code: &str) -> Vec<Vec<String>> {
    let tokens = tokenize(code);
    let children: Vec<&str> =
        tokens.windows(3).filter(|w| w[0] == "mod" && w[2] == ";").map(|w| w[1].as_str()).collect();
    let (mut out, mut depth, mut inline): (Vec<Vec<String>>, usize, Vec<(String, usize)>) = (Vec::new(), 0, Vec::new());
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        match t {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|b| b == "{") => inline.push((tokens[i + 1].clone(), depth)),
            _ => {}
        }
        let after_colons = i > 0 && tokens[i - 1] == "::";
        let child = children.contains(&t);
        if (matches!(t, "crate" | "super" | "self" | "oomlab") || child)
            && !after_colons
            && tokens.get(i + 1).is_some_and(|n| n == "::")
        {
            let mut base: Vec<String> = here.iter().cloned().chain(inline.iter().map(|(m, _)| m.clone())).collect();
            let mut j = i;
            let mut segs = Vec::new();
            loop {
                match tokens[j].as_str() {
                    "crate" | "oomlab" if j == i => base.clear(),
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    s => segs.push(s.to_string()),
                }
                if tokens.get(j + 1).is_some_and(|n| n == "::") && tokens.get(j + 2).is_some_and(|n| is_ident_token(n))
                {
                    j += 2;
                } else {
                    break;
                }
            }
            let path: Vec<String> = base.into_iter().chain(segs).collect();
            // A group: `path::{a, b::C}` names each item's first segments too.
            if tokens.get(j + 1).is_some_and(|n| n == "::") && tokens.get(j + 2).is_some_and(|n| n == "{") {
                let mut k = j + 3;
                let mut item = Vec::new();
                while k < tokens.len() && tokens[k] != "}" {
                    match tokens[k].as_str() {
                        "," => out.push(path.iter().cloned().chain(item.drain(..)).collect()),
                        "::" | "{" => {}
                        s if is_ident_token(s) && tokens[k - 1] != "as" && s != "as" => item.push(s.to_string()),
                        _ => {}
                    }
                    k += 1;
                }
                out.push(path.iter().cloned().chain(item).collect());
            }
            out.push(path);
            i = j + 1;
            continue;
        }
        i += 1;
    }
    out
}

fn is_ident_token(t: &str) -> bool {
    t.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') && t.chars().all(is_ident)
}

/// Identifiers, `::` and single punctuation characters.
fn tokenize(code: &str) -> Vec<String> {
    let c: Vec<char> = code.chars().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < c.len() {
        if is_ident(c[i]) {
            let start = i;
            while i < c.len() && is_ident(c[i]) {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            if !c[i].is_whitespace() {
                out.push(c[i].to_string());
            }
            i += 1;
        }
    }
    out
}

/// The modules each module under src/app imports, resolved to files: a path names the deepest
/// module of it that is a file.
fn app_imports() -> Vec<(String, Vec<String>)> {
    imports(app_modules())
}

/// The modules each of `modules` imports, resolved to files, as in [`app_imports`].
fn imports(modules: Vec<(Vec<String>, String)>) -> Vec<(String, Vec<String>)> {
    let known: Vec<Vec<String>> = modules.iter().map(|(m, _)| m.clone()).collect();
    let exported: Vec<Vec<(String, Vec<String>)>> = modules.iter().map(|(here, code)| reexports(here, code)).collect();
    modules
        .iter()
        .map(|(here, code)| {
            let mut to: Vec<String> = named_paths(here, code)
                .into_iter()
                .filter_map(|path| resolve(&path, &known, &exported, 0))
                .filter(|m| m != here)
                .map(|m| m.join("::"))
                .collect();
            to.sort();
            to.dedup();
            (here.join("::"), to)
        })
        .collect()
}

/// The file a path reaches: the deepest module of it that is a file, followed through that
/// module's re-exports (`pub use child::Item;`) to the file that holds the item.
fn resolve(
    path: &[String],
    known: &[Vec<String>],
    exported: &[Vec<(String, Vec<String>)>],
    depth: usize,
) -> Option<Vec<String>> {
    let k = (0..=path.len()).rev().find(|&k| known.iter().any(|m| m.as_slice() == &path[..k]))?;
    let module = known.iter().position(|m| m.as_slice() == &path[..k])?;
    if let Some(item) = path.get(k).filter(|_| depth < 8)
        && let Some((_, target)) = exported[module].iter().find(|(name, _)| name == item)
    {
        let longer: Vec<String> = target.iter().chain(&path[k + 1..]).cloned().collect();
        return resolve(&longer, known, exported, depth + 1);
    }
    Some(path[..k].to_vec())
}

/// The items a module re-exports (`pub use`, `pub(crate) use`, `pub(super) use`), each as
/// (the name it is known by here, the path it stands for from the crate root). Globs and
/// other crates' items are left out.
fn reexports(here: &[String], code: &str) -> Vec<(String, Vec<String>)> {
    let tokens = tokenize(code);
    let children: Vec<&str> =
        tokens.windows(3).filter(|w| w[0] == "mod" && w[2] == ";").map(|w| w[1].as_str()).collect();
    let mut out = Vec::new();
    for i in 1..tokens.len() {
        let public = tokens[i - 1] == "pub" || (tokens[i - 1] == ")" && i >= 4 && tokens[i - 4] == "pub");
        if tokens[i] == "use" && public {
            use_tree(&tokens, i + 1, Vec::new(), &mut out);
        }
    }
    out.into_iter()
        .filter_map(|(name, raw)| {
            let mut base = here.to_vec();
            let first = raw.first()?.as_str();
            match first {
                "crate" => base.clear(),
                "super" | "self" => {}
                c if children.contains(&c) => {}
                _ => return None,
            }
            for seg in &raw {
                match seg.as_str() {
                    "crate" => {}
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    s => base.push(s.to_string()),
                }
            }
            Some((name, base))
        })
        .collect()
}

/// Reads one use tree from `tokens[i]`, under `prefix`, into (name, raw path) pairs; returns
/// where it ended.
fn use_tree(tokens: &[String], mut i: usize, prefix: Vec<String>, out: &mut Vec<(String, Vec<String>)>) -> usize {
    let mut path = prefix;
    while let Some(t) = tokens.get(i) {
        match t.as_str() {
            "::" => i += 1,
            "{" => {
                i += 1;
                while tokens.get(i).is_some_and(|t| t != "}") {
                    i = use_tree(tokens, i, path.clone(), out);
                    if tokens.get(i).is_some_and(|t| t == ",") {
                        i += 1;
                    }
                }
                return i + 1;
            }
            "*" => return i + 1,
            "as" => {
                if let Some(alias) = tokens.get(i + 1) {
                    out.push((alias.clone(), path));
                }
                return i + 2;
            }
            "," | "}" | ";" => {
                let name = path.last().cloned().unwrap_or_default();
                if name != "self" && !name.is_empty() {
                    out.push((name, path));
                } else if name == "self" && path.len() > 1 {
                    out.push((path[path.len() - 2].clone(), path[..path.len() - 1].to_vec()));
                }
                return i;
            }
            s if is_ident_token(s) => {
                path.push(s.to_string());
                i += 1;
            }
            _ => return i + 1,
        }
    }
    i
}

/// The groups of modules that import each other in a loop (Tarjan's strongly connected
/// components of more than one module), among `nodes`.
fn loops(edges: &[(String, Vec<String>)], nodes: &[String]) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        graph: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        next: usize,
        groups: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            (self.index[v], self.low[v]) = (Some(self.next), self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in self.graph[v].iter() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    group.push(w);
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    self.groups.push(group);
                }
            }
        }
    }
    let graph: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            let to = edges.iter().find(|(m, _)| m == n).map(|(_, t)| t.clone()).unwrap_or_default();
            to.iter().filter_map(|t| nodes.iter().position(|x| x == t)).collect()
        })
        .collect();
    let n = nodes.len();
    let mut t = Tarjan {
        graph: &graph,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        next: 0,
        groups: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    t.groups.into_iter().map(|group| group.into_iter().map(|v| nodes[v].clone()).collect()).collect()
}

/// The module graph of src/app less its root (every module's parent, which names each child
/// in its `mod` lines and re-exports).
fn app_graph() -> (Vec<(String, Vec<String>)>, Vec<String>) {
    let edges = app_imports();
    let nodes = edges.iter().map(|(m, _)| m.clone()).filter(|m| m != "app").collect();
    (edges, nodes)
}

#[test]
fn the_import_graph_is_read_right() {
    // The resolver sees what the files say: `super::Teaching` from a panel, a `pub use` of a
    // child, and `crate::app::run::StepRecord`.
    let (edges, nodes) = app_graph();
    let to = |m: &str| edges.iter().find(|(n, _)| n == m).map(|(_, t)| t.clone()).unwrap_or_default();
    assert!(nodes.len() > 40, "only {} modules found under src/app", nodes.len());
    assert!(to("app::teaching::lesson_panel").contains(&"app::teaching".to_string()));
    assert!(to("app::teaching").contains(&"app::teaching::lessons".to_string()));
    assert!(to("app::teaching").contains(&"app::run".to_string()));
    // Re-exports are followed to the file that holds the item: the snapshot tab names
    // `explain::Guess`, which `explain` re-exports from `kind`.
    let (crate_edges, _) = crate_graph();
    let of = |m: &str| crate_edges.iter().find(|(n, _)| n == m).map(|(_, t)| t.clone()).unwrap_or_default();
    assert!(of("app::snapshot_view::holding").contains(&"memory::snapshot::kind".to_string()));
    // The binary's `oomlab::` paths are the library's, and a child's use of its folder is no edge.
    assert!(of("cli::snapshot").iter().any(|t| t.starts_with("memory::snapshot")));
    assert!(!of("estimate::hf").contains(&"estimate".to_string()));
    // And a loop, where there is one, is found.
    let made = vec![
        ("a".to_string(), vec!["b".to_string()]),
        ("b".to_string(), vec!["c".to_string()]),
        ("c".to_string(), vec!["a".to_string()]),
        ("d".to_string(), vec!["a".to_string()]),
    ];
    let names: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
    let found = loops(&made, &names);
    assert_eq!(found.len(), 1);
    let mut group = found[0].clone();
    group.sort();
    assert_eq!(group, ["a", "b", "c"]);
}

#[test]
fn no_teaching_file_is_in_an_import_loop() {
    let (edges, nodes) = app_graph();
    let teaching: Vec<String> = nodes.iter().filter(|m| m.starts_with("app::teaching")).cloned().collect();
    assert!(teaching.len() >= 10, "the teaching files are not under src/app/teaching: {teaching:?}");
    assert_eq!(loops(&edges, &teaching), Vec::<Vec<String>>::new(), "the teaching files import each other in a loop");
    // Nor through the rest of the app: the announcer, the title bar and the languages included.
    let room =
        |m: &String| m.starts_with("app::teaching") || ["app::a11y", "app::chrome", "app::lang"].contains(&m.as_str());
    for group in loops(&edges, &nodes) {
        assert!(!group.iter().any(room), "an import loop runs through the teaching: {group:?}");
    }
    // The announcer is handed the revealed text; it does not read the lesson.
    let a11y = edges.iter().find(|(m, _)| m == "app::a11y").map(|(_, t)| t.clone()).unwrap_or_default();
    assert!(!a11y.iter().any(|m| m.starts_with("app::teaching")), "a11y imports {a11y:?}");
    for (m, to) in &edges {
        if m.starts_with("app::teaching") {
            assert!(!to.contains(&"app::chrome".to_string()), "{m} borrows from the title bar");
        }
    }
}

#[test]
fn the_rest_of_the_app_sees_the_teaching_through_one_file() {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let facade = code_only(&read("src/app/teaching/mod.rs"));
    let tokens = tokenize(&facade);
    let mods: Vec<&[String]> = tokens.windows(3).filter(|w| w[1] == "mod" && w[2] != "{").collect();
    assert!(mods.len() >= 9, "teaching/mod.rs declares {} modules", mods.len());
    for w in tokens.windows(4).filter(|w| w[2] == "mod") {
        assert!(w[1] != "pub" && w[0] != "pub", "teaching/mod.rs makes a module public: {w:?}");
    }
    // Its state is its own: no field of `Teaching` is public.
    let start = facade.find("pub struct Teaching {").expect("teaching/mod.rs defines Teaching");
    let body = &facade[start..];
    let body = &body[..body.find('}').unwrap_or(body.len())];
    let fields = body.lines().skip(1).filter(|l| l.contains(':')).count();
    assert!(fields >= 10, "Teaching has {fields} fields");
    for line in body.lines().skip(1) {
        assert!(!line.trim_start().starts_with("pub"), "Teaching's field is public: {line}");
    }
}

/// The import graph of the whole crate, file by file, without the edges from a module to its
/// own ancestors: a folder's `mod.rs` names its children and re-exports them, and a child using
/// what its folder declares is the folder's own business. Every other edge counts, re-exports
/// followed to the file that holds the item.
fn crate_graph() -> (Vec<(String, Vec<String>)>, Vec<String>) {
    let edges: Vec<(String, Vec<String>)> = imports(modules_under(""))
        .into_iter()
        .map(|(m, to)| {
            let to = to.into_iter().filter(|t| !t.is_empty() && !m.starts_with(&format!("{t}::"))).collect();
            (m, to)
        })
        .collect();
    let nodes = edges.iter().map(|(m, _)| m.clone()).filter(|m| !m.is_empty()).collect();
    (edges, nodes)
}

#[test]
fn no_file_in_src_is_in_an_import_loop() {
    let (edges, nodes) = crate_graph();
    assert!(nodes.len() > 200, "only {} modules found under src", nodes.len());
    let found = loops(&edges, &nodes);
    let shown: Vec<String> = found
        .iter()
        .map(|group| {
            let inner: Vec<String> = edges
                .iter()
                .filter(|(m, _)| group.contains(m))
                .flat_map(|(m, to)| to.iter().filter(|t| group.contains(t)).map(move |t| format!("{m} → {t}")))
                .collect();
            inner.join(", ")
        })
        .collect();
    assert!(found.is_empty(), "files that import each other in a loop:\n{}", shown.join("\n"));
}

/// The rooms of src/ in their order: a room imports only rooms below it. The engine's rooms
/// import no app or CLI; the classroom's contract and its server import no app.
#[test]
fn the_rooms_import_only_downwards() {
    let rank = |room: &str| -> Option<u8> {
        Some(match room {
            "units" | "i18n" => 0,
            "model" | "class" => 1,
            "plan" | "data" => 2,
            "memory" | "estimate" | "documents" | "dump" => 3,
            "backend" | "serve" => 4,
            "serving" => 5,
            "app" => 6,
            "web_worker" | "cli" => 7,
            "web" => 8,
            _ => return None,
        })
    };
    let (edges, _) = crate_graph();
    let mut checked = 0;
    for (m, to) in edges.iter().filter(|(m, _)| !m.is_empty()) {
        let room = m.split("::").next().unwrap_or_default();
        let Some(r) = rank(room) else { panic!("src/{room} is in no room of this test's order") };
        for t in to {
            let other = t.split("::").next().unwrap_or_default();
            if other != room {
                checked += 1;
                let o = rank(other).unwrap_or(u8::MAX);
                assert!(o < r, "{m} imports {t}: {room} may import only rooms below it");
            }
        }
    }
    assert!(checked > 300, "only {checked} imports between rooms");
}

/// Where a `Result`'s error type is a `String`, in `tokens` (the type arguments at depth 1).
fn string_errors(tokens: &[String]) -> usize {
    let mut found = 0;
    for (i, _) in tokens.iter().enumerate().filter(|(_, t)| *t == "Result") {
        if tokens.get(i + 1).map(String::as_str) != Some("<") {
            continue;
        }
        let (mut depth, mut args, mut arg) = (0usize, Vec::new(), Vec::new());
        for t in &tokens[i + 1..] {
            match t.as_str() {
                "<" | "(" | "[" => depth += 1,
                ">" | ")" | "]" => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth == 0 {
                break;
            }
            if depth == 1 && t == "," {
                args.push(std::mem::take(&mut arg));
            } else if !(depth == 1 && t == "<") {
                arg.push(t.clone());
            }
        }
        args.push(arg);
        let string = |a: &Vec<String>| a.last().is_some_and(|t| t == "String") && a.iter().all(|t| t != "<");
        if args.len() == 2 && string(&args[1]) {
            found += 1;
        }
    }
    found
}

/// Errors are typed end to end: no `Result<_, String>` anywhere in src/ (issue 57).
#[test]
fn no_result_in_src_has_a_string_for_its_error() {
    let sample =
        tokenize("fn f() -> Result<Vec<(u8, String)>, String> {} type A = Option<Result<u8, std::string::String>>;");
    assert_eq!(string_errors(&sample), 2, "the check finds both");
    assert_eq!(string_errors(&tokenize("fn g() -> Result<String, Error> {}")), 0, "a String value is fine");
    let found: Vec<String> = sources()
        .into_iter()
        .filter(|(_, code, _)| string_errors(&tokenize(&code_only(code))) > 0)
        .map(|(file, _, _)| file)
        .collect();
    assert!(found.is_empty(), "a Result whose error is a String in: {found:?}");
}
