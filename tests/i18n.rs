//! The two catalogs stay in step: they parse, hold the same messages with the same arguments,
//! use the glossary's terms, and the app's catalog never shows a blank label.

use std::collections::{BTreeMap, BTreeSet};

use fluent_syntax::ast;
use oomlab::i18n::{Catalog, EN_FTL, Lang, ZH_FTL};

/// Every message of a catalog: its id, its text as written, and the variables it uses.
fn messages(name: &str, source: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let resource = match fluent_syntax::parser::parse(source) {
        Ok(r) => r,
        Err((_, errors)) => panic!("{name} does not parse: {errors:?}"),
    };
    let mut out = BTreeMap::new();
    for entry in resource.body {
        if let ast::Entry::Message(m) = entry {
            let pattern = m.value.unwrap_or_else(|| panic!("{name}: {} has no value", m.id.name));
            let (mut text, mut vars) = (String::new(), BTreeSet::new());
            walk(&pattern, &mut text, &mut vars);
            assert!(out.insert(m.id.name.to_string(), (text, vars)).is_none(), "{name}: {} twice", m.id.name);
        }
    }
    out
}

fn walk(pattern: &ast::Pattern<&str>, text: &mut String, vars: &mut BTreeSet<String>) {
    for element in &pattern.elements {
        match element {
            ast::PatternElement::TextElement { value } => text.push_str(value),
            ast::PatternElement::Placeable { expression } => expression_vars(expression, text, vars),
        }
    }
}

fn expression_vars(e: &ast::Expression<&str>, text: &mut String, vars: &mut BTreeSet<String>) {
    match e {
        ast::Expression::Select { selector, variants } => {
            inline_vars(selector, vars);
            for v in variants {
                walk(&v.value, text, vars);
            }
        }
        ast::Expression::Inline(i) => inline_vars(i, vars),
    }
}

fn inline_vars(e: &ast::InlineExpression<&str>, vars: &mut BTreeSet<String>) {
    match e {
        ast::InlineExpression::VariableReference { id } => {
            vars.insert(id.name.to_string());
        }
        ast::InlineExpression::Placeable { expression } => expression_vars(expression, &mut String::new(), vars),
        _ => {}
    }
}

#[test]
fn both_catalogs_hold_the_same_messages_with_the_same_arguments() {
    let en = messages("en.ftl", EN_FTL);
    let zh = messages("zh.ftl", ZH_FTL);
    assert!(en.len() >= 20, "the English catalog lost its messages: {}", en.len());
    let en_keys: BTreeSet<_> = en.keys().collect();
    let zh_keys: BTreeSet<_> = zh.keys().collect();
    assert_eq!(
        en_keys,
        zh_keys,
        "only in one catalog: {:?}",
        en_keys.symmetric_difference(&zh_keys).collect::<Vec<_>>()
    );
    for (key, (en_text, en_vars)) in &en {
        let (zh_text, zh_vars) = &zh[key];
        assert_eq!(en_vars, zh_vars, "{key}: English uses {en_vars:?}, Chinese {zh_vars:?}");
        assert!(!en_text.trim().is_empty() && !zh_text.trim().is_empty(), "{key} is blank in a catalog");
        // A Chinese message is Chinese: it holds a CJK character, unless it is only terms kept
        // in English (none yet).
        assert!(
            zh_text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
            "{key} is not translated: {zh_text:?}"
        );
    }
}

/// The glossary's table: (English term, Chinese term).
fn glossary() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/i18n/GLOSSARY.md")).expect("the glossary");
    let rows: Vec<(String, String)> = text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| English") && !l.starts_with("|---"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells.len() >= 2 && !cells[0].is_empty()).then(|| (cells[0].to_lowercase(), cells[1].to_string()))
        })
        .collect();
    assert!(rows.len() >= 20, "the glossary table lost its rows: {}", rows.len());
    rows
}

/// The glossary terms an English text uses: whole words, longest first, each word counted once
/// (a word inside a code identifier, `interleave_moe_layer_step`, is no term).
fn terms_in(text: &str, glossary: &[(String, String)]) -> Vec<(String, String)> {
    let lower = text.to_lowercase();
    let mut used = vec![false; lower.len()];
    let mut by_length = glossary.to_vec();
    by_length.sort_by_key(|(en, _)| std::cmp::Reverse(en.len()));
    let mut found = Vec::new();
    for (en, zh) in by_length {
        for (start, _) in lower.match_indices(en.as_str()) {
            let end = start + en.len();
            let boundary = |i: Option<char>| i.is_none_or(|c| !c.is_alphanumeric() && c != '_');
            if boundary(lower[..start].chars().next_back())
                && boundary(lower[end..].chars().next())
                && !used[start..end].iter().any(|&u| u)
            {
                used[start..end].iter_mut().for_each(|u| *u = true);
                found.push((en.clone(), zh.clone()));
            }
        }
    }
    found
}

#[test]
fn the_chinese_catalog_uses_the_glossary_terms() {
    let glossary = glossary();
    assert_eq!(terms_in("Out of memory: host memory", &glossary).len(), 2, "longest terms first");
    let en = messages("en.ftl", EN_FTL);
    let zh = messages("zh.ftl", ZH_FTL);
    let mut checked = 0;
    for (key, (en_text, _)) in &en {
        for (term, chinese) in terms_in(en_text, &glossary) {
            assert!(
                zh[key].0.contains(&chinese),
                "{key}: English says {term:?}, so Chinese must say {chinese:?}: {:?}",
                zh[key].0
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} glossary uses checked");
}

#[test]
fn messages_format_with_their_arguments_and_never_blank() {
    let en = Catalog::new(Lang::En);
    let zh = Catalog::new(Lang::Zh);
    assert_eq!(en.text("tab-timeline"), "Step timeline");
    assert_eq!(zh.text("tab-timeline"), "单步时间线");
    let args = |n: i64| [("count", n.into())];
    assert_eq!(en.format("steps-taken", &args(1)), "1 step");
    assert_eq!(en.format("steps-taken", &args(3)), "3 steps");
    assert_eq!(zh.format("steps-taken", &args(3)), "3 步");
    // Arguments sit in the text with no Unicode isolation marks (egui draws them as boxes).
    let heading = zh.format("oom-heading", &[("op", "h.0.attn".into())]);
    assert_eq!(heading, "在 h.0.attn 处显存溢出");
    assert!(zh.has("oom-plain") && !zh.has("no-such-message"));
    // A key no catalog has, or an argument a message uses and the caller left out: a test build
    // stops there (the tests render every view, so no view can ship one); a release shows the
    // key, or Fluent's `{$name}`, never a blank.
    let key = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| zh.text("no-such-message")));
    let arg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| zh.format("oom-heading", &[])));
    if cfg!(debug_assertions) {
        assert!(key.is_err() && arg.is_err(), "a missing key or argument must fail a test build");
    } else {
        assert_eq!(key.ok().as_deref(), Some("no-such-message"));
        assert!(arg.ok().is_some_and(|t| t.contains("$op")));
    }
}

#[test]
fn locales_map_to_languages() {
    for (locale, lang) in [
        ("zh-CN", Some(Lang::Zh)),
        ("zh_CN.UTF-8", Some(Lang::Zh)),
        ("zh-Hans-SG", Some(Lang::Zh)),
        ("ZH", Some(Lang::Zh)),
        ("en-US", Some(Lang::En)),
        ("en_GB.UTF-8", Some(Lang::En)),
        ("C.UTF-8", None),
        ("fr-FR", None),
        ("", None),
    ] {
        assert_eq!(Lang::from_locale(locale), lang, "{locale:?}");
    }
    assert_eq!(Lang::ALL.map(Lang::code), ["en", "zh"]);
}

/// A shared link carries the language beside the settings; only the codes a link writes count.
#[test]
fn links_carry_the_language() {
    for (hash, lang) in [
        ("#s=eyJ9&lang=zh", Some(Lang::Zh)),
        ("lang=en&s=eyJ9", Some(Lang::En)),
        ("#lang=zh", Some(Lang::Zh)),
        ("#train=2&lang=zh", Some(Lang::Zh)),
        ("#s=eyJ9", None),
        ("#lang=fr", None),
        ("#lang=zh_CN", None),
        ("#lang=", None),
        ("#slang=zh", None),
        ("", None),
    ] {
        assert_eq!(Lang::from_url_hash(hash), lang, "{hash:?}");
    }
}

/// The subset CJK font (`scripts/subset-font.sh`) holds every character the Chinese catalog
/// shows, so no label turns into missing-glyph boxes.
#[test]
fn the_cjk_font_covers_the_chinese_catalog() {
    use skrifa::MetadataProvider;
    let bytes =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/i18n/fonts/NotoSansSC-oomlab.otf")).expect("the font");
    let font = skrifa::FontRef::new(&bytes).expect("an OpenType font");
    let charmap = font.charmap();
    let sans_bytes =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/i18n/fonts/UbuntuLight-derivative-oomlab.ttf"))
            .expect("sans");
    let sans_font = skrifa::FontRef::new(&sans_bytes).expect("sans");
    let sans = sans_font.charmap();
    let zh = messages("zh.ftl", ZH_FTL);
    let missing: BTreeSet<char> = zh
        .iter()
        // The students' page (student-*) is HTML in the phone's browser, with its own fonts; the
        // CLI's (cli-*) is printed in a terminal.
        .filter(|(key, _)| !oomlab::i18n::NATIVE_ONLY.iter().any(|p| key.starts_with(p)))
        .flat_map(|(_, (text, _))| text.chars())
        // Latin characters and symbols come from the sans font, first in the app's chain.
        .filter(|c| !c.is_whitespace() && charmap.map(*c).is_none() && sans.map(*c).is_none())
        .collect();
    assert!(missing.is_empty(), "run scripts/subset-font.sh: the font lacks {missing:?}");
    // The check itself: a character outside the subset is reported missing.
    assert!(charmap.map('龘').is_none() && charmap.map('显').is_some());
    assert!(bytes.len() < 400_000, "the subset grew to {} bytes", bytes.len());
}

/// The app's Latin fonts (subsets of egui's Ubuntu Light and Hack, `scripts/subset-font.sh`)
/// hold printable ASCII and every character of the English catalog, the sans Latin-1 too. The app tests
/// render every view with kittest's missing-glyph policy set to panic, which covers the text
/// the code formats itself.
#[test]
fn the_latin_fonts_cover_the_english_catalog() {
    use skrifa::MetadataProvider;
    let read = |name: &str| std::fs::read(format!("{}/i18n/fonts/{name}", env!("CARGO_MANIFEST_DIR"))).expect(name);
    // The desktop's fonts, and the web build's copies without their hinting programs.
    for (sans_file, mono_file) in [
        ("UbuntuLight-derivative-oomlab.ttf", "Hack-oomlab.ttf"),
        ("UbuntuLight-derivative-oomlab-web.ttf", "Hack-oomlab-web.ttf"),
    ] {
        let (sans, mono) = (read(sans_file), read(mono_file));
        // Hack is cut to ASCII, the figures' Latin-1 signs and punctuation (46 kB of the web
        // build's gzipped budget).
        assert!(mono.len() < 40_000, "the monospace subset grew to {} bytes", mono.len());
        let sans = skrifa::FontRef::new(&sans).expect("sans");
        let mono = skrifa::FontRef::new(&mono).expect("mono");
        let en = messages("en.ftl", EN_FTL);
        let wanted: BTreeSet<char> = (' '..='~')
            .chain('\u{a0}'..='\u{ff}')
            .chain(en.values().flat_map(|(text, _)| text.chars()).filter(|c| !c.is_whitespace()))
            .collect();
        // Proportional text is all sans; monospace (PyTorch's message, byte columns) falls back
        // to sans for the symbols Hack lacks, so it holds ASCII and the signs figures use itself,
        // and those columns stay aligned.
        let figures: BTreeSet<char> = (' '..='~').chain("\u{a0}°±²³µ·×÷–—…".chars()).collect();
        for (name, font, wanted) in [("sans", &sans, &wanted), ("mono", &mono, &figures)] {
            let missing: BTreeSet<&char> = wanted.iter().filter(|c| font.charmap().map(**c).is_none()).collect();
            assert!(missing.is_empty(), "the {name} font {sans_file} lacks {missing:?}: run scripts/subset-font.sh");
        }
        // Cut down: no Cyrillic, no CJK; and renamed, as the fonts' licences ask of a modified font.
        assert!(sans.charmap().map('Ж').is_none() && sans.charmap().map('显').is_none());
        for (font, name) in [(&sans, "Ubuntu Light derivative oomlab"), (&mono, "Hack oomlab")] {
            let family = font.localized_strings(skrifa::string::StringId::FAMILY_NAME).english_or_first();
            assert_eq!(family.map(|s| s.to_string()).as_deref(), Some(name));
        }
        // The web copies carry no hinting programs (the desktop's do).
        let web = sans_file.ends_with("-web.ttf");
        for font in [&sans, &mono] {
            let fpgm = font.table_data(skrifa::raw::types::Tag::new(b"fpgm")).is_some();
            assert_eq!(fpgm, !web, "{sans_file}: hinting programs");
        }
    }
    // The same glyphs in both: the web's text is the desktop's, only grid-fitted by egui.
    for (desktop, web) in [
        ("UbuntuLight-derivative-oomlab.ttf", "UbuntuLight-derivative-oomlab-web.ttf"),
        ("Hack-oomlab.ttf", "Hack-oomlab-web.ttf"),
    ] {
        let (a, b) = (read(desktop), read(web));
        let (a, b) = (skrifa::FontRef::new(&a).expect(desktop), skrifa::FontRef::new(&b).expect(web));
        let map = |f: &skrifa::FontRef<'_>| f.charmap().mappings().map(|(c, _)| c).collect::<Vec<_>>();
        assert_eq!(map(&a), map(&b), "{web} maps what {desktop} maps");
    }
}

/// Every call in the source that names a message literally — `text("key")`, `tr("key")`,
/// `format("key", &[("arg", …), …])`, `Notice::msg("key", &[…])` — names one the English
/// catalog has, and supplies exactly the arguments it uses. (Keys built at run time, like
/// `claim-<id>`, are covered by the rendering tests, where a missing argument fails the build's
/// debug assertion.)
#[test]
fn the_code_supplies_every_argument_a_message_uses() {
    let en = messages("en.ftl", EN_FTL);
    let mut files = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut checked = 0;
    for file in files {
        let source = std::fs::read_to_string(&file).expect("source");
        for (key, args) in message_calls(&source) {
            let Some((_, vars)) = en.get(&key) else {
                panic!("{}: no message {key:?} in en.ftl", file.display());
            };
            assert_eq!(&args, vars, "{}: {key} is given {args:?} but uses {vars:?}", file.display());
            checked += 1;
        }
    }
    assert!(checked > 150, "only {checked} calls found: the scanner lost its way");
}

/// (key, argument names) of each literal message call in `source`.
fn message_calls(source: &str) -> Vec<(String, BTreeSet<String>)> {
    let mut out = Vec::new();
    for opener in ["text(\"", "tr(\"", "format(\n", "format(\"", "msg(\""] {
        let mut rest = source;
        while let Some(at) = rest.find(opener) {
            rest = &rest[at + opener.len() - 1..];
            let trimmed = rest.trim_start_matches(['\n', ' ', '(']);
            let Some(literal) = trimmed.strip_prefix('"') else { continue };
            let Some(end) = literal.find('"') else { continue };
            let key = &literal[..end];
            // Message ids: lowercase words joined by hyphens (not format strings like "{}").
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
                continue;
            }
            let after = literal[end + 1..].trim_start();
            let mut args = BTreeSet::new();
            if let Some(slice) = after.strip_prefix(',').map(str::trim_start).and_then(|s| s.strip_prefix("&[")) {
                // The slice up to its closing bracket, skipping brackets inside strings.
                let (mut depth, mut in_string, mut len) = (1, false, 0);
                for (i, c) in slice.char_indices() {
                    match c {
                        '"' => in_string = !in_string,
                        '[' | '(' if !in_string => depth += 1,
                        ']' | ')' if !in_string => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        len = i;
                        break;
                    }
                }
                // Each top-level tuple's first element: `("name", value)`.
                let inner = &slice[..len];
                let (mut depth, mut in_string) = (0, false);
                for (i, c) in inner.char_indices() {
                    match c {
                        '"' => in_string = !in_string,
                        '(' | '[' if !in_string => {
                            let tuple = inner[i + 1..].trim_start();
                            if let (0, '(', Some(name)) = (depth, c, tuple.strip_prefix('"')) {
                                args.insert(name[..name.find('"').unwrap_or(0)].to_string());
                            }
                            depth += 1;
                        }
                        ')' | ']' if !in_string => depth -= 1,
                        _ => {}
                    }
                }
            } else if !after.starts_with(')') {
                // Arguments built elsewhere (a vector filled at run time): checked by rendering.
                continue;
            }
            out.push((key.to_string(), args));
        }
    }
    out
}

/// The web module's English leaves out the messages only native code says (`NATIVE_ONLY`, kept
/// the same in build.rs): no code outside the server and the CLI names one, and the rest of the
/// catalog is there, comments aside.
#[test]
fn the_web_catalog_leaves_out_only_what_native_code_says() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let build = std::fs::read_to_string(root.join("build.rs")).expect("build.rs");
    let listed = format!("const NATIVE_ONLY: &[&str] = &{:?};", oomlab::i18n::NATIVE_ONLY);
    assert!(build.contains(&listed), "build.rs lists {listed}");
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("src").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out)
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p)
            }
        }
    }
    let mut files = Vec::new();
    walk(&root.join("src"), &mut files);
    // The serving estimate is compiled natively only (its `cfg` in estimate/mod.rs): the day the
    // app shows serving, that line goes, and so must `serve-` from NATIVE_ONLY.
    let estimate = std::fs::read_to_string(root.join("src/estimate/mod.rs")).expect("estimate/mod.rs");
    assert!(estimate.contains("#[cfg(not(target_arch = \"wasm32\"))]\npub mod serve;"), "serving is native-only");
    let native = |p: &std::path::Path| {
        // The Serving tab's desktop files too (the browser's tab is `serving_view/mod.rs`).
        let dirs = ["src/serve", "src/cli", "src/estimate/serve", "src/serving", "src/app/serving_view/tab.rs"];
        dirs.iter().chain(&["src/app/serving_view/charts.rs"]).any(|d| p.starts_with(root.join(d)))
    };
    let mut checked = 0;
    // src/i18n.rs holds the list itself.
    for f in files.iter().filter(|p| !native(p) && !p.ends_with("src/i18n.rs")) {
        let text = std::fs::read_to_string(f).expect("source");
        for prefix in oomlab::i18n::NATIVE_ONLY {
            assert!(!text.contains(&format!("\"{prefix}")), "{} names a {prefix}* message", f.display());
        }
        checked += 1;
    }
    assert!(checked > 100, "{checked} files");
    let web = std::fs::read_to_string(concat!(env!("OUT_DIR"), "/i18n/en-web.ftl")).expect("the web catalog");
    let full = messages("en.ftl", EN_FTL);
    let kept = messages("en-web.ftl", &web);
    let expected: BTreeSet<&String> =
        full.keys().filter(|k| !oomlab::i18n::NATIVE_ONLY.iter().any(|p| k.starts_with(p))).collect();
    assert_eq!(kept.keys().collect::<BTreeSet<_>>(), expected);
    assert!(full.len() > kept.len() + 40, "the native messages are left out");
    for (k, v) in &kept {
        assert_eq!(Some(v), full.get(k), "{k} reads as in the full catalog");
    }
}
