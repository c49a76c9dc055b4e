//! The README and the book (`docs/`, an mdBook) stay true: every chapter is in the book's
//! summary, every link between them resolves (files and `#anchors`), the teacher's guide gives
//! the answers the app computes, and the references name every subcommand and every control a
//! teacher link can lock. `OOMLAB_UPDATE_DOCS=1` writes the computed answers into the guides.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use oomlab::app::Settings;
use oomlab::app::teaching::Control;
use oomlab::app::teaching::{Facts, Guess, Question, Verdict, chapters, judge};
use oomlab::i18n::{Catalog, Lang};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn book() -> PathBuf {
    root().join("docs/src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The book's chapters (every `.md` under docs/src but the summary).
fn chapter_files() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(book())
        .expect("docs/src")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md") && !p.ends_with("SUMMARY.md"))
        .collect();
    out.sort();
    out
}

/// A Markdown text's lines outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut in_fence = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                return false;
            }
            !in_fence
        })
        .collect()
}

/// The targets of a Markdown text's inline links and images, `[text](target)`, outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        // Inline code spans hold no links.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("").to_string();
            out.push(target);
            rest = &after[end..];
        }
    }
    out
}

/// The ids mdBook gives a file's headings: lower case, spaces as hyphens, only letters, digits,
/// `-` and `_` kept; a repeated id gets `-1`, `-2`, ….
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for line in prose_lines(text) {
        if !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let title: String = title.replace('`', "");
        let base: String = title
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_lowercase().next().unwrap_or(c)),
                _ => None,
            })
            .collect();
        let mut id = base.clone();
        let mut n = 1;
        while ids.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        ids.insert(id);
    }
    ids
}

#[test]
fn every_chapter_is_in_the_summary_and_every_link_resolves() {
    let summary = read(&book().join("SUMMARY.md"));
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    for file in chapter_files() {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        assert!(listed.contains(&name), "docs/src/{name} is not in SUMMARY.md");
    }
    let mut files = chapter_files();
    files.push(book().join("SUMMARY.md"));
    files.push(root().join("README.md"));
    let mut checked = 0;
    for file in &files {
        let text = read(file);
        let dir = file.parent().expect("a folder");
        for target in links(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
            let linked = if path.is_empty() { file.clone() } else { dir.join(path) };
            assert!(linked.exists(), "{}: the link {target} points at nothing", file.display());
            if !anchor.is_empty() {
                assert!(linked.extension().is_some_and(|e| e == "md"), "{}: {target}", file.display());
                let ids = heading_ids(&read(&linked));
                assert!(ids.contains(anchor), "{}: no heading #{anchor} in {} ({ids:?})", file.display(), path);
            }
            checked += 1;
        }
    }
    assert!(checked > 30, "only {checked} links checked");
}

#[test]
fn the_readme_is_short_and_starts_with_the_two_commands() {
    let readme = read(&root().join("README.md"));
    let lines: Vec<&str> = readme.lines().collect();
    assert!(lines.len() <= 200, "the README has {} lines (at most 200)", lines.len());
    let top = lines.iter().take(6).copied().collect::<Vec<_>>().join("\n");
    assert!(top.contains("scripts/app.sh") && top.contains("scripts/test.sh"), "{top}");
    assert!(readme.contains("docs/src/images/app.png"), "the README shows the app");
}

/// Each chapter's answer as the app computes it for the chapter's starting settings: a ratio
/// to two decimals, or the option's words in `lang`.
fn answers(lang: Lang) -> Vec<(&'static str, String)> {
    let vocab = oomlab::data::Dataset::builtin().tokenizer.vocab_size();
    let t = Catalog::new(lang);
    chapters()
        .into_iter()
        .map(|c| {
            let mut settings = Settings::default();
            (c.setup)(&mut settings);
            let facts = Facts::new(&settings, vocab).expect("every chapter's settings have a plan");
            let guess = match c.question {
                Question::Ratio { .. } => Guess::Ratio(1.0),
                Question::Choice { .. } => Guess::Choice(None),
            };
            let answer = match (judge(&c, &facts, &guess), &c.question) {
                (Some(Verdict::Ratio { answer, .. }), _) => format!("{answer:.2}×"),
                (Some(Verdict::Choice { answer, .. }), Question::Choice { options, .. }) => t.text(options[answer]),
                _ => panic!("chapter {} has no answer", c.id),
            };
            (c.id, answer)
        })
        .collect()
}

/// The teacher's guides give each chapter's answer next to `<!-- answer:ID -->`, as the app
/// computes it; `OOMLAB_UPDATE_DOCS=1` writes them in.
#[test]
fn the_teachers_answers_are_the_apps() {
    let update = std::env::var_os("OOMLAB_UPDATE_DOCS").is_some();
    for (file, lang) in [("teacher.md", Lang::En), ("teacher.zh.md", Lang::Zh)] {
        let path = book().join(file);
        let mut text = read(&path);
        for (id, answer) in answers(lang) {
            let marker = format!("<!-- answer:{id} -->");
            let at = text.find(&marker).unwrap_or_else(|| panic!("{file}: no {marker}"));
            let start = at + marker.len();
            let end = start + text[start..].find('|').unwrap_or_else(|| panic!("{file}: {marker} outside a table"));
            let written = text[start..end].trim().trim_matches('*').to_string();
            if update {
                text.replace_range(start..end, &format!(" **{answer}** "));
            } else {
                assert_eq!(written, answer, "{file}: chapter {id}'s answer");
            }
        }
        if update {
            std::fs::write(&path, text).expect("writes the guide");
        }
    }
}

/// The CLI reference names every subcommand `oomlab --help` lists.
#[test]
fn the_cli_reference_names_every_subcommand() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oomlab")).arg("--help").output().expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 9, "{help}");
    let cli = read(&book().join("cli.md"));
    for c in commands {
        assert!(cli.contains(&format!("oomlab {c}")), "docs/src/cli.md does not describe `oomlab {c}`");
    }
}

/// The teacher's guides name every control a link can lock or hide, and every field of a link.
#[test]
fn the_teacher_link_table_is_complete() {
    for file in ["teacher.md", "teacher.zh.md"] {
        let text = read(&book().join(file));
        for c in Control::ALL {
            assert!(text.contains(&format!("`{}`", c.id())), "{file} does not name the control {}", c.id());
        }
        for field in ["s=", "lang=", "lesson=", "challenge=", "lock=", "hide=", "train=", "tab="] {
            assert!(text.contains(&format!("`{field}")), "{file} does not explain `{field}`");
        }
    }
}
