//! What a student's display name may hold. A name appears in the teacher's list, results and CSV,
//! so it must look like what it is: no text that reverses the line around it, nothing invisible
//! that makes "Ada" and "Ada" two different students, no tower of accents that paints over the
//! rows above it.
//!
//! The rules, in order:
//! 1. Trimmed; empty means no name (names are optional).
//! 2. Control characters (tabs and line breaks included) are refused.
//! 3. Bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) are refused:
//!    a right-to-left override turns "gpj.exe" into what reads as "exe.jpg".
//! 4. Normalised to NFC, so that "é" typed as one or two code points is one name; runs of
//!    whitespace become one space.
//! 5. Default-ignorable code points (zero-width spaces and joiners, Hangul fillers, variation
//!    selectors, tags: Unicode's `Default_Ignorable_Code_Point`) and every format character
//!    (general category Cf: the interlinear annotation marks U+FFF9–U+FFFB, the Egyptian
//!    hieroglyph format controls, the Arabic number signs U+0600–U+0605, the soft hyphen) are
//!    refused, except where emoji need them: a zero-width joiner between two emoji ("👩‍🔬") and a
//!    variation selector after a visible character ("❤️"). So are the marks that draw nothing
//!    (the Khitan filler U+16FE4, the Duployan selectors U+1BC9D–U+1BC9E), private-use code
//!    points (each device draws its own glyph, or none) and unassigned ones (which may render
//!    as nothing); line and paragraph separators (U+2028, U+2029) are line breaks, refused
//!    with the control characters.
//! 6. A name with no visible character (only marks, spaces and blanks such as U+2800) is refused.
//! 7. At most [`MAX_NAME_CHARS`] grapheme clusters, each with at most [`MAX_NAME_MARKS`]
//!    combining marks, counted on the cluster decomposed: NFC folds the first accent into its
//!    letter, and a fifth accent must not hide there.

use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeEmoji, UnicodeGeneralCategory};
use unicode_segmentation::UnicodeSegmentation;

use crate::class::{Invalid, MAX_NAME_CHARS, MAX_NAME_MARKS};

/// Whether `c` changes the direction of the text around it.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Unicode's `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt, Unicode 15.1): what a
/// renderer draws as nothing unless it knows better.
fn is_default_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// Marks that are drawn as nothing at all (not default-ignorable in Unicode's tables, but
/// selectors and fillers with no glyph of their own).
fn is_blank_mark(c: char) -> bool {
    matches!(c, '\u{16FE4}' | '\u{1BC9D}'..='\u{1BC9E}')
}

/// A code point no name may hold, wherever it is: a format character (Cf; the emoji joiner's
/// exception is the caller's), a private-use or unassigned one, or a blank mark.
fn is_never_in_a_name(c: char) -> bool {
    is_default_ignorable(c)
        || is_blank_mark(c)
        || matches!(
            c.general_category(),
            GeneralCategory::Format | GeneralCategory::PrivateUse | GeneralCategory::Unassigned
        )
}

fn is_mark(c: char) -> bool {
    c.general_category_group() == GeneralCategoryGroup::Mark
}

/// Emoji and the modifiers that continue an emoji sequence (skin tones, VS16).
fn is_emoji_part(c: char) -> bool {
    c != '#' && c != '*' && !c.is_ascii_digit() && (c.is_emoji_char() || c.is_emoji_component())
}

/// Whether `c` draws something a reader sees on its own.
fn is_visible(c: char) -> bool {
    !c.is_whitespace() && !is_default_ignorable(c) && !is_mark(c) && c != '\u{2800}'
}

/// A display name checked and normalised; `None` when empty.
pub fn clean_name(name: Option<&str>) -> Result<Option<String>, Invalid> {
    let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else { return Ok(None) };
    // A cheap bound before any work: 40 clusters of a few code points each.
    if name.chars().count() > MAX_NAME_CHARS * (MAX_NAME_MARKS + 8) {
        return Err(Invalid::NameTooLong);
    }
    if name.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
        return Err(Invalid::NameControl);
    }
    if name.chars().any(is_bidi_control) {
        return Err(Invalid::NameBidi);
    }
    let mut clean = String::with_capacity(name.len());
    for c in name.nfc() {
        if c.is_whitespace() {
            if !clean.ends_with(' ') {
                clean.push(' ');
            }
        } else {
            clean.push(c);
        }
    }
    let chars: Vec<char> = clean.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let before = i.checked_sub(1).and_then(|j| chars.get(j)).copied();
        let after = chars.get(i + 1).copied();
        let allowed = match c {
            // A joiner inside an emoji sequence ("👩‍🔬"), not next to letters.
            '\u{200D}' => before.is_some_and(is_emoji_part) && after.is_some_and(is_emoji_part),
            // Emoji or text presentation of what comes just before.
            '\u{FE0E}' | '\u{FE0F}' => before.is_some_and(is_visible),
            _ => !is_never_in_a_name(c),
        };
        if !allowed {
            return Err(Invalid::NameInvisible);
        }
    }
    if !chars.iter().copied().any(is_visible) {
        return Err(Invalid::NameInvisible);
    }
    let mut clusters = 0usize;
    for cluster in clean.graphemes(true) {
        clusters += 1;
        if clusters > MAX_NAME_CHARS {
            return Err(Invalid::NameTooLong);
        }
        if cluster.nfd().filter(|&c| is_mark(c)).count() > MAX_NAME_MARKS {
            return Err(Invalid::NameStacked);
        }
    }
    Ok(Some(clean))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(name: &str) -> String {
        match clean_name(Some(name)) {
            Ok(Some(n)) => n,
            other => panic!("{name:?} was refused: {other:?}"),
        }
    }

    #[test]
    fn ordinary_names_pass_trimmed_and_normalised() {
        assert_eq!(clean_name(None), Ok(None));
        assert_eq!(clean_name(Some("  ")), Ok(None));
        assert_eq!(ok(" 小明 "), "小明");
        assert_eq!(ok("Ada  Lovelace"), "Ada Lovelace", "runs of spaces become one");
        assert_eq!(ok("李\u{3000}雷"), "李 雷", "an ideographic space too");
        // "é" as e + combining acute is the same name as the precomposed one.
        assert_eq!(ok("Jose\u{301}"), "José");
        assert_eq!(ok("Nguyễn Thị Minh Khai"), "Nguyễn Thị Minh Khai");
        assert_eq!(ok("Nguye\u{302}\u{303}n"), "Nguyễn", "two marks, composed by NFC");
        assert_eq!(ok("O'Brien-Smith"), "O'Brien-Smith");
        assert_eq!(ok("محمد"), "محمد", "right-to-left script is fine; bidi controls are not");
        assert_eq!(ok("❤️ Mia"), "❤️ Mia", "a variation selector after a visible character");
        assert_eq!(ok("👩‍🔬 Kim"), "👩‍🔬 Kim", "a joiner inside an emoji sequence");
        assert_eq!(ok("👍🏽"), "👍🏽", "a skin tone");
        assert_eq!(ok(&"名".repeat(40)), "名".repeat(40));
        // 40 clusters of several code points each are 40 characters to a reader.
        assert_eq!(ok(&"👩‍🔬".repeat(40)), "👩‍🔬".repeat(40));
    }

    #[test]
    fn hostile_names_are_refused() {
        assert_eq!(clean_name(Some(&"名".repeat(41))), Err(Invalid::NameTooLong));
        assert_eq!(clean_name(Some("a\u{7}b")), Err(Invalid::NameControl));
        assert_eq!(clean_name(Some("a\tb")), Err(Invalid::NameControl));
        assert_eq!(clean_name(Some("a\nb")), Err(Invalid::NameControl));
        for bidi in ['\u{202E}', '\u{202D}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{200F}', '\u{061C}'] {
            assert_eq!(clean_name(Some(&format!("gpj{bidi}exe"))), Err(Invalid::NameBidi), "{:?}", bidi);
        }
        // Invisible only, or invisible beside a visible name.
        for name in [
            "\u{200B}\u{200B}\u{200B}",
            "Ada\u{200B}",
            "A\u{200D}da",
            "\u{2060}Ada",
            "Ada\u{FEFF}",
            "\u{3164}",
            "\u{115F}\u{1160}",
            "\u{2800}\u{2800}",
            "\u{FE0F}",
            "\u{E0041}Ada",
            "Ada\u{AD}",
            "\u{301}\u{301}",
            "\u{0378}Ada",
        ] {
            assert_eq!(clean_name(Some(name)), Err(Invalid::NameInvisible), "{:?}", name);
        }
        let zalgo = format!("Z{}", "\u{0336}".repeat(40));
        assert_eq!(clean_name(Some(&zalgo)), Err(Invalid::NameStacked));
        // NFC folds the first mark into "á", but the marks are counted on the letter decomposed:
        // five stacked are five.
        assert_eq!(clean_name(Some("a\u{301}\u{302}\u{303}\u{304}\u{305}")), Err(Invalid::NameStacked));
        assert_eq!(clean_name(Some("\u{e1}\u{302}\u{303}\u{304}\u{305}")), Err(Invalid::NameStacked));
        assert!(clean_name(Some("a\u{301}\u{302}\u{303}\u{304}")).is_ok(), "four on one are allowed");
        // Line and paragraph separators are line breaks.
        for sep in ['\u{2028}', '\u{2029}'] {
            assert_eq!(clean_name(Some(&format!("Ada{sep}Bob"))), Err(Invalid::NameControl), "{sep:?}");
        }
        // Format characters, blank marks, private use: drawn as nothing, or as each device likes.
        for c in [
            '\u{FFF9}',
            '\u{FFFA}',
            '\u{FFFB}',
            '\u{13430}',
            '\u{13438}',
            '\u{16FE4}',
            '\u{1BC9D}',
            '\u{0600}',
            '\u{0605}',
            '\u{E000}',
            '\u{F8FF}',
            '\u{F0000}',
            '\u{10FFFD}',
        ] {
            assert_eq!(clean_name(Some(&format!("Ada{c}"))), Err(Invalid::NameInvisible), "{c:?}");
            assert_eq!(clean_name(Some(&format!("{c}Ada"))), Err(Invalid::NameInvisible), "{c:?}");
        }
        assert_eq!(clean_name(Some(&"x".repeat(100_000))), Err(Invalid::NameTooLong));
    }
}
