//! The numbers the README and the book (`docs/src`) state about the code are counted from the
//! code, so that they cannot go stale: how many lesson chapters there are (in words, in both
//! languages), the range a teacher link's `lesson=` takes, which chapters judge a ratio within
//! which tolerance, how many messages each catalog holds, the fonts' sizes, and the modules the
//! architecture's layout names. Each test reads what the prose says and compares; a number the
//! prose rounds (`~650`, `about 235 kB`, `3.1 MB`) is compared at the rounding it is written with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use oomlab::app::teaching::{Question, chapters};
use oomlab::i18n::{Catalog, Lang};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The README and every chapter of the book, with their paths relative to the repository.
fn documents() -> Vec<(String, String)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("docs/src"))
        .expect("docs/src")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    paths.insert(0, root().join("README.md"));
    paths
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(root()).unwrap_or(&p).display().to_string();
            (name, read(&p))
        })
        .collect()
}

fn document(name: &str) -> String {
    read(&root().join(name))
}

/// A Markdown text's paragraphs outside fenced code blocks, each joined into one line (a
/// sentence the source wraps is one sentence here). List items and table rows are paragraphs
/// of their own.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_fence = false;
    let flush = |current: &mut String, out: &mut Vec<String>| {
        if !current.trim().is_empty() {
            out.push(current.trim().to_string());
        }
        current.clear();
    };
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            in_fence = !in_fence;
            flush(&mut current, &mut out);
            continue;
        }
        if in_fence {
            continue;
        }
        let starts_item = trimmed.starts_with("- ")
            || trimmed.starts_with("| ")
            || trimmed.starts_with('#')
            || trimmed.split_once(". ").is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if trimmed.is_empty() || starts_item {
            flush(&mut current, &mut out);
        }
        current.push(' ');
        current.push_str(trimmed);
        if trimmed.starts_with('|') || trimmed.starts_with('#') {
            flush(&mut current, &mut out);
        }
    }
    flush(&mut current, &mut out);
    out
}

/// A paragraph's sentences and clauses: split after `. `, `; ` and their Chinese forms.
fn clauses(paragraph: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = paragraph.chars().peekable();
    while let Some(c) = chars.next() {
        current.push(c);
        let ends = match c {
            '。' | '；' => true,
            '.' | ';' => chars.peek().is_none_or(|n| n.is_whitespace()),
            _ => false,
        };
        if ends {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

const ENGLISH: [&str; 21] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
];

/// An English number word's value (`Nine` → 9).
fn english_number(word: &str) -> Option<usize> {
    let word = word.to_lowercase();
    ENGLISH.iter().position(|w| *w == word)
}

/// A Chinese numeral's value, up to 99 (`九` → 9, `十二` → 12, `二十` → 20).
fn chinese_number(text: &str) -> Option<usize> {
    let digit = |c: char| "零一二三四五六七八九".chars().position(|d| d == c);
    let chars: Vec<char> = text.chars().collect();
    match chars.as_slice() {
        ['十'] => Some(10),
        [d] => digit(*d),
        ['十', d] => Some(10 + digit(*d)?),
        [t, '十'] => Some(10 * digit(*t)?),
        [t, '十', d] => Some(10 * digit(*t)? + digit(*d)?),
        _ => None,
    }
}

/// The words of a text, as runs of ASCII letters, digits and hyphens.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).filter(|w| !w.is_empty()).collect()
}

/// What a stated count counts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Counted {
    Chapters,
    /// "Six of the nine ask for a number": the ratio questions.
    Ratios,
    /// "… the other three": the choices.
    Choices,
}

/// Every count of lesson chapters a text states, with the phrase for the failure message: an
/// English number word before "lesson chapters" or "short chapters", or after "the" or "all"
/// before "chapters"; "N of the M ask"
/// (N ratios of M chapters) and, after it in the paragraph, "the other K" (K choices); the
/// Chinese 共N章 and N个章节 / N个短章节.
fn chapter_counts(text: &str) -> Vec<(usize, Counted, String)> {
    let mut out = Vec::new();
    for paragraph in paragraphs(text) {
        let w = words(&paragraph);
        let phrase = |i: usize| w[i.saturating_sub(3)..(i + 4).min(w.len())].join(" ");
        let mut asked = false;
        for (i, word) in w.iter().enumerate() {
            let Some(n) = english_number(word) else { continue };
            let next: Vec<String> = w[i + 1..].iter().take(3).map(|s| s.to_lowercase()).collect();
            let next: Vec<&str> = next.iter().map(String::as_str).collect();
            let lower = |j: usize| w.get(j).map(|s| s.to_lowercase()).unwrap_or_default();
            // "the nine chapters", "all nine chapters", "nine lesson chapters" — not "three
            // chapters, each in two rounds", which a lesson plan picks.
            let counted_before = i >= 1 && matches!(lower(i - 1).as_str(), "the" | "all");
            if matches!(next.as_slice(), ["lesson" | "short", "chapters", ..])
                || (counted_before && next.first() == Some(&"chapters"))
            {
                out.push((n, Counted::Chapters, phrase(i)));
            } else if i >= 3 && lower(i - 2) == "of" && lower(i - 1) == "the" && next.first() == Some(&"ask") {
                out.push((n, Counted::Chapters, phrase(i)));
                if let Some(r) = english_number(w[i - 3]) {
                    out.push((r, Counted::Ratios, phrase(i - 3)));
                }
                asked = true;
            } else if asked && i >= 2 && lower(i - 2) == "the" && lower(i - 1) == "other" {
                out.push((n, Counted::Choices, phrase(i)));
            }
        }
        // Chinese: 共九章, 九个章节, 九个短章节 (not 第九章, the ninth).
        let chars: Vec<char> = paragraph.chars().collect();
        let numeral_before = |j: usize| -> Option<(usize, usize)> {
            let start = (0..j).rev().take_while(|&k| "零一二三四五六七八九十".contains(chars[k])).last()?;
            Some((chinese_number(&chars[start..j].iter().collect::<String>())?, start))
        };
        for (i, c) in chars.iter().enumerate() {
            let found = match c {
                '章' => numeral_before(i).filter(|&(_, start)| start > 0 && chars[start - 1] == '共'),
                '个' if chars[i + 1..].starts_with(&['章', '节'])
                    || chars[i + 1..].starts_with(&['短', '章', '节']) =>
                {
                    numeral_before(i)
                }
                _ => None,
            };
            if let Some((n, start)) = found {
                let shown: String = chars[start.saturating_sub(1)..(i + 4).min(chars.len())].iter().collect();
                out.push((n, Counted::Chapters, shown));
            }
        }
    }
    out
}

/// The chapters' count, in words, is the app's, wherever the README, the book or the app's own
/// catalogs state it; so are the counts of ratio and choice questions where they are given.
#[test]
fn every_stated_chapter_count_is_the_apps() {
    let all = chapters();
    let ratios = all.iter().filter(|c| matches!(c.question, Question::Ratio { .. })).count();
    let expected = |what: Counted| match what {
        Counted::Chapters => all.len(),
        Counted::Ratios => ratios,
        Counted::Choices => all.len() - ratios,
    };
    let mut found = Vec::new();
    let catalogs = ["i18n/en.ftl", "i18n/zh.ftl"].map(|c| (c.to_string(), document(c)));
    for (name, text) in documents().into_iter().chain(catalogs) {
        for (count, what, phrase) in chapter_counts(&text) {
            assert_eq!(
                count,
                expected(what),
                "{name}: \"{phrase}\" says {count} ({what:?}); the app has {} chapters, {ratios} of them ratios",
                all.len()
            );
            found.push(what);
        }
    }
    // The README, both student guides and the class page state them.
    let chapters_found = found.iter().filter(|w| **w == Counted::Chapters).count();
    assert!(chapters_found >= 4, "only {chapters_found} chapter counts found: the test no longer reads the prose");
    assert!(found.contains(&Counted::Ratios) && found.contains(&Counted::Choices), "{found:?}");
}

/// The student guides list every chapter, in order, by the title the app gives it.
#[test]
fn the_student_guides_list_every_chapter_by_its_title() {
    for (file, lang) in [("docs/src/student.md", Lang::En), ("docs/src/student.zh.md", Lang::Zh)] {
        let t = Catalog::new(lang);
        let text = document(file);
        for (i, c) in chapters().iter().enumerate() {
            let title = t.text(&format!("lesson-{}-title", c.id));
            let item = format!("{}. {title}", i + 1);
            assert!(text.lines().any(|l| l.starts_with(&item)), "{file} does not list chapter \"{item}\"");
        }
        let next = format!("{}. ", chapters().len() + 1);
        let after_last =
            text.lines().skip_while(|l| !l.starts_with(&format!("{}. ", chapters().len()))).nth(1).unwrap_or_default();
        assert!(!after_last.starts_with(&next), "{file} lists a chapter the app does not have: {after_last}");
    }
}

/// Each teacher's guide has a section per chapter, `### N. … (`id`)`.
#[test]
fn the_teachers_guides_have_a_section_per_chapter() {
    for file in ["docs/src/teacher.md", "docs/src/teacher.zh.md"] {
        let text = document(file);
        for (i, c) in chapters().iter().enumerate() {
            let heading = format!("### {}. ", i + 1);
            let found = text.lines().any(|l| {
                l.starts_with(&heading)
                    && (l.contains(&format!("(`{}`)", c.id)) || l.contains(&format!("（`{}`）", c.id)))
            });
            assert!(found, "{file} has no section \"{heading}… (`{}`)\"", c.id);
        }
    }
}

/// `lesson=` takes 1 to the number of chapters, wherever a range is given for it.
#[test]
fn the_lesson_link_range_is_the_apps() {
    let n = chapters().len();
    let mut found = 0;
    for (name, text) in documents() {
        for line in text.lines().filter(|l| l.contains("`lesson=`")) {
            for dash in ['–', '-'] {
                let mut rest = line;
                while let Some(at) = rest.find(&format!("1{dash}")) {
                    let before = rest[..at].chars().last();
                    let after = &rest[at + 1 + dash.len_utf8()..];
                    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
                    if !before.is_some_and(|c| c.is_ascii_alphanumeric()) && !digits.is_empty() {
                        assert_eq!(digits.parse::<usize>().ok(), Some(n), "{name}: `lesson=` 1{dash}{digits}: {line}");
                        found += 1;
                    }
                    rest = after;
                }
            }
        }
    }
    assert!(found >= 2, "both teacher's guides give `lesson=`'s range ({found} found)");
}

/// The ratio chapters' tolerances: (per cent, 1-based chapter numbers), the most common first.
fn tolerances() -> Vec<(u32, BTreeSet<usize>)> {
    let mut by: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::new();
    for (i, c) in chapters().iter().enumerate() {
        if let Question::Ratio { tolerance, .. } = c.question {
            by.entry((tolerance * 100.0).round() as u32).or_default().insert(i + 1);
        }
    }
    let mut out: Vec<_> = by.into_iter().collect();
    out.sort_by_key(|(_, chapters)| std::cmp::Reverse(chapters.len()));
    out
}

/// The integers in a text (`1, 7 and 9` → 1, 7, 9).
fn integers(text: &str) -> Vec<usize> {
    text.split(|c: char| !c.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect()
}

/// The guides say how close a ratio must be: the usual tolerance, and each other tolerance with
/// the chapters that use it, `(15 % in chapters 1, 7 and 9)`, as `lessons.rs` has them; and a
/// chapter's own section names only its own tolerance (a choice has none).
#[test]
fn the_tolerances_the_guides_name_are_the_lessons() {
    let tolerances = tolerances();
    let (usual, _) = tolerances[0];
    for file in ["docs/src/student.md", "docs/src/student.zh.md", "docs/src/teacher.md", "docs/src/teacher.zh.md"] {
        let text = document(file);
        let statements: Vec<String> =
            paragraphs(&text).into_iter().filter(|p| p.contains(&format!("{usual} %"))).collect();
        assert!(!statements.is_empty(), "{file} does not say a ratio is close within {usual} %");
        for (percent, expected) in &tolerances[1..] {
            let pct = format!("{percent} %");
            let statement = statements
                .iter()
                .find(|p| p.contains(&pct))
                .unwrap_or_else(|| panic!("{file} does not name the chapters judged within {pct}"));
            // The parenthesis around "15 %" names those chapters by number.
            let at = statement.find(&pct).unwrap_or_default();
            let open = statement[..at].rfind(['(', '（']).unwrap_or_else(|| panic!("{file}: no ( before {pct}"));
            let close = statement[at..].find([')', '）']).map_or(statement.len(), |c| at + c);
            let named: BTreeSet<usize> =
                integers(&statement[open..close]).into_iter().filter(|n| *n != *percent as usize).collect();
            assert_eq!(&named, expected, "{file}: the chapters judged within {pct}: {}", &statement[open..close]);
        }
    }
    // A chapter's section in the teacher's guides: "within N %" / "不超过 N %" is its own.
    for file in ["docs/src/teacher.md", "docs/src/teacher.zh.md"] {
        let text = document(file);
        for (i, c) in chapters().iter().enumerate() {
            let heading = format!("### {}. ", i + 1);
            let section: String = text
                .lines()
                .skip_while(|l| !l.starts_with(&heading))
                .skip(1)
                .take_while(|l| !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join(" ");
            for marker in ["within ", "不超过 "] {
                for piece in section.split(marker).skip(1) {
                    let digits: String = piece.chars().take_while(char::is_ascii_digit).collect();
                    if digits.is_empty() || !piece[digits.len()..].starts_with(" %") {
                        continue;
                    }
                    let stated: u32 = digits.parse().unwrap_or_default();
                    match c.question {
                        Question::Ratio { tolerance, .. } => assert_eq!(
                            stated,
                            (tolerance * 100.0).round() as u32,
                            "{file}: chapter {} (`{}`) says within {stated} %",
                            i + 1,
                            c.id
                        ),
                        Question::Choice { .. } => {
                            panic!("{file}: chapter {} (`{}`) is a choice, with no tolerance", i + 1, c.id)
                        }
                    }
                }
            }
        }
    }
}

/// The messages of a catalog: its `key = …` lines.
fn messages(file: &str) -> usize {
    document(file)
        .lines()
        .filter(|l| {
            let Some((key, _)) = l.split_once(" =") else { return false };
            let mut chars = key.chars();
            chars.next().is_some_and(|c| c.is_ascii_lowercase())
                && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
        .count()
}

/// A number as the prose writes it before `at` (digits, with `,` between thousands and one `.`),
/// whether it is marked approximate (`~`, `about`, `around`, `约`), and its text.
fn number_before(text: &str, at: usize) -> Option<(f64, bool, String)> {
    let head = text[..at].trim_end();
    let start = head
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_digit() || *c == ',' || *c == '.')
        .last()
        .map(|(i, _)| i)?;
    let written = head[start..].trim_start_matches([',', '.']).to_string();
    let value: f64 = written.replace(',', "").parse().ok()?;
    let before = head[..start].trim_end();
    let approximate = before.ends_with('~')
        || before.ends_with('约')
        || before.to_lowercase().ends_with("about")
        || before.to_lowercase().ends_with("around");
    Some((value, approximate, written))
}

/// Whether `actual` is what `written` says at its rounding: exact for an exact whole number;
/// for a decimal, to its decimals; for an approximate whole number, to its last non-zero digit.
fn agrees(written: &str, approximate: bool, actual: f64) -> bool {
    let value: f64 = written.replace(',', "").parse().unwrap_or(f64::NAN);
    let unit = match written.split_once('.') {
        Some((_, decimals)) => 10f64.powi(-(decimals.len() as i32)),
        None if approximate => {
            let digits = written.replace(',', "");
            10f64.powi(digits.len() as i32 - digits.trim_end_matches('0').len() as i32)
        }
        None => 1.0,
    };
    if !approximate && !written.contains('.') {
        return value == actual;
    }
    (actual - value).abs() <= unit / 2.0 + 1e-9
}

/// Wherever the prose counts a catalog's messages, the count is the catalogs' (both hold the
/// same keys).
#[test]
fn the_catalogs_message_counts_are_counted() {
    let (en, zh) = (messages("i18n/en.ftl"), messages("i18n/zh.ftl"));
    assert_eq!(en, zh, "en.ftl has {en} messages, zh.ftl {zh}");
    let mut found = 0;
    for (name, text) in documents() {
        for clause in paragraphs(&text).iter().flat_map(|p| clauses(p)) {
            for marker in [" messages", " 条消息"] {
                let mut from = 0;
                while let Some(at) = clause[from..].find(marker).map(|a| from + a) {
                    from = at + marker.len();
                    let Some((_, approximate, written)) = number_before(&clause, at) else { continue };
                    if !(clause.contains("catalog") || clause.contains("目录") || clause.contains(".ftl")) {
                        continue;
                    }
                    assert!(
                        agrees(&written, approximate, en as f64),
                        "{name}: \"{}{written}{marker}\", but each catalog holds {en}: {clause}",
                        if approximate { "~" } else { "" }
                    );
                    found += 1;
                }
            }
        }
    }
    assert!(found >= 1, "no catalog count found: the test no longer reads the prose");
}

/// Which font a clause's size is about: the names font (GB2312's hanzi), else the Chinese
/// catalog's font.
fn font_of(clause: &str) -> Option<&'static str> {
    let lower = clause.to_lowercase();
    if lower.contains("gb2312") || lower.contains("names font") || clause.contains("名字字体") {
        Some("i18n/fonts/NotoSansSC-names-oomlab.otf")
    } else if lower.contains("chinese font")
        || lower.contains("noto sans cjk")
        || lower.contains("chinese catalog's characters")
        || clause.contains("中文字体")
    {
        Some("i18n/fonts/NotoSansSC-oomlab.otf")
    } else {
        None
    }
}

/// The sizes the prose gives the two Chinese fonts are the files' (kB = 1000 bytes, MB =
/// 1,000,000, KiB and MiB binary), at the rounding they are written with. A gzipped size is
/// another figure, not checked here.
#[test]
fn the_font_sizes_stated_are_the_files() {
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, text) in documents() {
        for clause in paragraphs(&text).iter().flat_map(|p| clauses(p)) {
            let Some(font) = font_of(&clause) else { continue };
            if clause.contains("gzip") {
                continue;
            }
            let bytes = std::fs::metadata(root().join(font)).map(|m| m.len()).unwrap_or_else(|e| panic!("{font}: {e}"));
            for (unit, scale) in [(" kB", 1e3), (" KiB", 1024.0), (" MB", 1e6), (" MiB", 1024.0 * 1024.0)] {
                let mut from = 0;
                while let Some(at) = clause[from..].find(unit).map(|a| from + a) {
                    from = at + unit.len();
                    let Some((_, approximate, written)) = number_before(&clause, at) else { continue };
                    let actual = bytes as f64 / scale;
                    // Sizes are rounded in any case: "3 MB" is 2.5 to 3.5 MB.
                    let whole_is_rounding = !written.contains('.');
                    assert!(
                        agrees(&written, approximate || whole_is_rounding, actual),
                        "{name}: {font} is {bytes} bytes ({actual:.3}{unit}), not {written}{unit}: {clause}"
                    );
                    *checked.entry(font).or_default() += 1;
                }
            }
        }
    }
    for font in ["i18n/fonts/NotoSansSC-oomlab.otf", "i18n/fonts/NotoSansSC-names-oomlab.otf"] {
        assert!(checked.get(font).is_some_and(|n| *n > 0), "no stated size of {font} found ({checked:?})");
    }
}

/// The entries of the architecture page's layout: each line that starts a path (`src/app/ …`)
/// with the indented lines under it.
fn layout_entries() -> BTreeMap<String, String> {
    let text = document("docs/src/architecture.md");
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "## Layout")
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect();
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut current = String::new();
    for line in block {
        if !line.starts_with(' ') {
            current = line.split_whitespace().next().unwrap_or_default().to_string();
        }
        let entry = out.entry(current.clone()).or_default();
        entry.push(' ');
        entry.push_str(line.trim());
    }
    out
}

/// Whether `text` names `file` as a word of its own (`run.rs`, not `prerun.rs`).
fn names(text: &str, file: &str) -> bool {
    text.match_indices(file).any(|(at, _)| {
        let before = text[..at].chars().last();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The architecture's layout names every top-level module of `src/` as an entry of its own, and
/// every file and folder at every depth of each top-level folder (`mod.rs` aside) within that
/// entry.
#[test]
fn the_architecture_layout_names_every_module() {
    let entries = layout_entries();
    let src = root().join("src");
    let mut top: Vec<_> = std::fs::read_dir(&src).expect("src").flatten().map(|e| e.path()).collect();
    top.sort();
    for path in top {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let key = if path.is_dir() { format!("src/{name}/") } else { format!("src/{name}") };
        let Some(entry) = entries.get(&key) else {
            panic!("docs/src/architecture.md's layout has no entry {key} (it has {:?})", entries.keys())
        };
        if !path.is_dir() {
            continue;
        }
        // Every file and folder at every depth below it.
        let mut folders = vec![path.clone()];
        while let Some(folder) = folders.pop() {
            let mut children: Vec<_> =
                std::fs::read_dir(&folder).expect("a folder").flatten().map(|e| e.path()).collect();
            children.sort();
            for child in children {
                let file = child.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
                if file == "mod.rs" {
                    continue;
                }
                let named = if child.is_dir() { format!("{file}/") } else { file.clone() };
                let at = child.strip_prefix(&src).unwrap_or(&child).display().to_string();
                assert!(
                    names(entry, &named),
                    "docs/src/architecture.md: the layout's {key} does not name {named} (src/{at})"
                );
                if child.is_dir() {
                    folders.push(child);
                }
            }
        }
    }
}
