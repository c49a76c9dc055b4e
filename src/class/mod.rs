//! The classroom's contract: what the class server (`oomlab serve`, native only) and its clients
//! (the app as teacher or student, on the desktop or in the browser, and the tests) say to each
//! other over HTTP. Plain data and its checks, no I/O, so that both sides and every platform
//! share one definition. The book's "Teaching a class" chapter documents the routes.
//!
//! Routes (JSON bodies; errors are `{"error": "…"}` with a 4xx or 5xx status):
//! - `POST /api/classes` [`Create`] → `201` [`Created`] (with the students' join address and its
//!   QR code). Only the server's own machine (127.0.0.1 or ::1) or a request with the server's
//!   teacher key (`Authorization: Bearer <key>`, printed when the server starts) creates a class.
//! - `GET /api/classes/{code}` → `200` [`ClassState`] (public: no names, no answers).
//! - `GET /api/classes/{code}/events` → Server-Sent Events, `event: state`, data [`ClassState`],
//!   whenever it changes; the stream ends after a closed state.
//! - `POST /api/classes/{code}/join` [`Join`] → `201` [`Joined`] (`waiting` past the class's
//!   expected size, until the teacher lets the student in); `423` when the class is locked.
//! - `POST /api/classes/{code}/me` [`Me`] → `200` [`Membership`]: whether this student waits.
//! - `POST /api/classes/{code}/answers` [`AnswerBody`] → `200` [`Accepted`].
//! - With `Authorization: Bearer <teacher_token>` (401 without, 403 with a wrong one):
//!   - `POST /api/classes/{code}/chapter` [`SetChapter`] → `200` [`ClassState`];
//!   - `POST /api/classes/{code}/reveal` [`Reveal`] → `200` [`ClassState`];
//!   - `POST /api/classes/{code}/close` → `200` [`ClassState`];
//!   - `GET /api/classes/{code}/results?chapter=N` → `200` [`Results`];
//!   - `GET /api/classes/{code}/answers.csv` → `200` CSV, every chapter's answers;
//!   - `GET /api/classes/{code}/students` → `200` [`Roster`];
//!   - `POST /api/classes/{code}/lock` [`Lock`] → `200` [`ClassState`];
//!   - `POST /api/classes/{code}/admit` and `…/remove` [`Pick`] → `200` [`ClassState`]: lets
//!     waiting students in, or removes students with their answers.
//! - `GET /api/strings?lang=en|zh` → `200` the student page's words from the catalogs.
//! - `GET /join/{code}`: the student page (plain HTML, no WebGPU, no wasm: a phone on a school
//!   network loads a few kilobytes).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The largest request body the server reads (bytes).
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// The longest display name, in grapheme clusters (what a reader counts as characters: "é" or
/// "👩‍🔬" is one).
pub const MAX_NAME_CHARS: usize = 40;
/// The most combining marks stacked on one character of a name (Vietnamese needs 2).
pub const MAX_NAME_MARKS: usize = 4;
/// The most distinct chapters one class may open: with one round of answers per chapter, a
/// student stores at most this many answers.
pub const MAX_CHAPTERS_PER_CLASS: usize = 64;
/// The most options a choice question may have, and the longest option key (characters).
pub const MAX_OPTIONS: usize = 16;
pub const MAX_OPTION_CHARS: usize = 64;
/// The highest chapter number a class may open.
pub const MAX_CHAPTER: u32 = 1000;
/// A class code's length, and its letters: no 0/O or 1/I, so that it reads aloud and from a
/// projector without doubt. 32 letters, so one random byte's low five bits pick one evenly.
pub const CODE_LEN: usize = 6;
pub const CODE_ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
/// The languages a prompt may carry (the app's catalogs), and its longest texts (characters):
/// two languages of a question and sixteen options stay inside [`MAX_BODY_BYTES`].
pub const PROMPT_LANGS: [&str; 2] = ["en", "zh"];
pub const MAX_PROMPT_CHARS: usize = 600;
pub const MAX_LABEL_CHARS: usize = 80;

/// What a chapter asks the class.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Question {
    /// A number (a ratio, a size): any finite number.
    Number,
    /// One of these options (stable keys, e.g. the catalog's message ids).
    Choice { options: Vec<String> },
}

/// One student's answer, or the true one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum Answer {
    Number(f64),
    Choice(String),
}

impl Answer {
    /// The answer as a CSV or display cell.
    pub fn text(&self) -> String {
        match self {
            Answer::Number(x) => format!("{x}"),
            Answer::Choice(c) => c.clone(),
        }
    }
}

/// Why an answer, a name or a question is refused.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum Invalid {
    #[error("the answer must be a finite number")]
    NotFinite,
    #[error("this question wants a number")]
    WantsNumber,
    #[error("'{0}' is not one of this question's choices")]
    UnknownChoice(String),
    #[error("the name is longer than {MAX_NAME_CHARS} characters")]
    NameTooLong,
    #[error("the name has control characters")]
    NameControl,
    #[error("the name has characters that change the direction of text")]
    NameBidi,
    #[error(
        "the name has characters that draw nothing, or that each device draws its own way (private use, unassigned)"
    )]
    NameInvisible,
    #[error("the name stacks more than {MAX_NAME_MARKS} marks on one character")]
    NameStacked,
    #[error("a choice question needs 2 to {MAX_OPTIONS} options of 1 to {MAX_OPTION_CHARS} characters, all different")]
    BadOptions,
    #[error("chapter {0} is past the last one ({MAX_CHAPTER})")]
    ChapterTooLarge(u32),
    #[error(
        "a prompt needs its question in en or zh (at most {MAX_PROMPT_CHARS} characters), and one label of at most {MAX_LABEL_CHARS} characters per option, in the same languages"
    )]
    BadPrompt,
    #[error("an expected class size is a whole number from 1 up")]
    ExpectedSize,
}

impl Prompt {
    /// Checks the prompt against its question (a teacher's request).
    pub fn check(&self, question: &Question) -> Result<(), Invalid> {
        let options = match question {
            Question::Number => 0,
            Question::Choice { options } => options.len(),
        };
        let text_ok = |text: &str, max: usize| {
            !text.trim().is_empty() && text.chars().count() <= max && !text.chars().any(|c| c.is_control() && c != '\n')
        };
        let langs_ok = |m: &BTreeMap<String, String>, max: usize| {
            !m.is_empty()
                && m.keys().all(|k| PROMPT_LANGS.contains(&k.as_str()))
                && m.keys().eq(self.question.keys())
                && m.values().all(|t| text_ok(t, max))
        };
        let unit_ok = self.unit.as_deref().is_none_or(|u| u.chars().count() <= 8 && !u.chars().any(char::is_control));
        let setting_ok = self.setting.is_empty() || langs_ok(&self.setting, MAX_PROMPT_CHARS);
        let ok = langs_ok(&self.question, MAX_PROMPT_CHARS)
            && setting_ok
            && self.options.len() == options
            && self.options.iter().all(|o| langs_ok(o, MAX_LABEL_CHARS))
            && unit_ok;
        if ok { Ok(()) } else { Err(Invalid::BadPrompt) }
    }
}

impl Question {
    /// Checks the question itself (a teacher's request).
    pub fn check(&self) -> Result<(), Invalid> {
        match self {
            Question::Number => Ok(()),
            Question::Choice { options } => {
                let well_formed = (2..=MAX_OPTIONS).contains(&options.len())
                    && options.iter().all(|o| !o.is_empty() && o.chars().count() <= MAX_OPTION_CHARS)
                    && options.iter().enumerate().all(|(i, o)| !options[..i].contains(o));
                if well_formed { Ok(()) } else { Err(Invalid::BadOptions) }
            }
        }
    }

    /// Checks an answer to this question.
    pub fn check_answer(&self, answer: &Answer) -> Result<(), Invalid> {
        match (self, answer) {
            (_, Answer::Number(x)) if !x.is_finite() => Err(Invalid::NotFinite),
            (Question::Number, Answer::Number(_)) => Ok(()),
            (Question::Number, Answer::Choice(_)) => Err(Invalid::WantsNumber),
            (Question::Choice { options }, Answer::Choice(c)) if options.contains(c) => Ok(()),
            (Question::Choice { .. }, Answer::Choice(c)) => Err(Invalid::UnknownChoice(shorten(c))),
            (Question::Choice { .. }, Answer::Number(x)) => Err(Invalid::UnknownChoice(shorten(&x.to_string()))),
        }
    }
}

/// At most 40 characters of `s`, for a message.
fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(MAX_NAME_CHARS).collect();
    if s.chars().count() > MAX_NAME_CHARS {
        out.push('…');
    }
    out
}

/// Whether `code` has a class code's shape (the server answers 404 to anything else).
pub fn is_code(code: &str) -> bool {
    code.len() == CODE_LEN && code.bytes().all(|b| CODE_ALPHABET.contains(&b))
}

/// A class code as a person typed it: upper case, without spaces or dashes.
pub fn normalize_code(typed: &str) -> String {
    typed.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_uppercase()).collect()
}

/// `POST /api/classes`: the class's expected size, if the teacher gave one. Past it, students
/// who join wait until the teacher lets them in (a second step that a script flooding the class
/// cannot take).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Create {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<u32>,
}

/// `POST /api/classes` → 201.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Created {
    pub code: String,
    /// The teacher's secret: 256 random bits, hex. Never part of a student's link.
    pub teacher_token: String,
    /// When the class and its answers are deleted (seconds since the Unix epoch).
    pub expires_at: i64,
    /// The address students open (the server's address on the local network), and its QR code:
    /// one string per row of modules, `1` dark and `0` light, quiet zone included.
    #[serde(default)]
    pub join_url: String,
    #[serde(default)]
    pub qr: Vec<String>,
}

/// What the students read for a chapter, in each of the app's languages: the question, each
/// option's label (in the options' order; none for a number question) and a number's unit. The
/// teacher's app writes it from its catalogs with the live numbers, so the student page needs
/// no lesson logic of its own, and it holds no answer: the answer comes with the reveal.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Prompt {
    /// Language code (`en`, `zh`) → the question.
    pub question: BTreeMap<String, String>,
    #[serde(default)]
    pub options: Vec<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The setting the question is about, in words per language ("tiny GPT-2, batch 16,
    /// sequence 64, budget 64 MiB"): never a figure the answer follows from.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub setting: BTreeMap<String, String>,
}

/// A class as everyone may see it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ClassState {
    pub code: String,
    /// The chapter the teacher is on, and its question; `None` before the first.
    pub chapter: Option<u32>,
    pub question: Option<Question>,
    /// The question's words for the students, when the teacher sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Prompt>,
    /// The true answer, once the teacher revealed the chapter.
    pub revealed: Option<Answer>,
    /// The chapter's explanation in words, sent with the reveal (none before it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub explanation: BTreeMap<String, String>,
    pub closed: bool,
    /// Students in the class (who joined and were let in).
    pub students: u32,
    /// Distinct students who answered the current chapter.
    pub answered: u32,
    pub expires_at: i64,
    /// No one else may join.
    #[serde(default)]
    pub locked: bool,
    /// The size the teacher expects; students past it wait to be let in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<u32>,
    /// Students waiting to be let in.
    #[serde(default)]
    pub waiting: u32,
    /// Attempts to join in the last [`JOIN_WINDOW_SECS`] seconds, refused ones included.
    #[serde(default)]
    pub joins_recent: u32,
    /// Whether those attempts came faster than a class types ([`FLOOD_JOINS`] or more).
    #[serde(default)]
    pub join_flood: bool,
    /// The voting round of the current chapter: 1, or [`LAST_ROUND`] once the teacher started
    /// the second vote (peer instruction: vote, discuss, vote again, then the reveal). 0 before
    /// the first chapter.
    #[serde(default)]
    pub round: u32,
}

/// The rounds a chapter may be voted in.
pub const LAST_ROUND: u32 = 2;

/// The round of an answer that names none: what clients from before rounds send.
pub fn first_round() -> u32 {
    1
}

/// The window over which joins are counted, and the count in it that no class reaches by
/// typing: a student needs several seconds to type a code and a name, so even a class of 60
/// that starts at once spreads its joins over half a minute or more.
pub const JOIN_WINDOW_SECS: u64 = 10;
pub const FLOOD_JOINS: u32 = 20;

/// `POST /api/classes/{code}/join`: an optional display name (see `serve::names` for what a
/// name may hold).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Join {
    #[serde(default)]
    pub name: Option<String>,
}

/// A student's session: the id every answer carries (128 random bits, hex), which the server
/// also rate-limits by. A class's students often share one network address, so the address is
/// never the key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Joined {
    pub student: String,
    /// The class is past its expected size: the student waits until the teacher lets them in.
    #[serde(default)]
    pub waiting: bool,
}

/// `POST /api/classes/{code}/me`: a student asks where they stand.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Me {
    pub student: String,
}

/// Whether the student is still waiting to be let in (a removed student gets 403 instead).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Membership {
    pub waiting: bool,
}

/// `POST /api/classes/{code}/lock` (teacher): lock the class (no one else joins), or open it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Lock {
    pub locked: bool,
}

/// Words in a 503's reason when the server's database can take no more writes (its file was
/// removed or replaced while it ran): the teacher's app then says so in the reader's language,
/// rather than "busy, try again".
pub const NOT_SAVED: &str = "nothing more is saved";

/// `POST /api/classes/{code}/admit` or `…/remove` (teacher): these students, and with
/// `all_waiting` every student who waits. A removed student's answers leave the results. With
/// `lock`, a removal also locks the class in the same step, so that those removed cannot come
/// straight back.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Pick {
    #[serde(default)]
    pub students: Vec<String>,
    #[serde(default)]
    pub all_waiting: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lock: bool,
}

/// One student as the teacher sees them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StudentInfo {
    pub student: String,
    pub name: Option<String>,
    /// When they joined (seconds since the Unix epoch).
    pub joined_at: i64,
    pub waiting: bool,
    /// Chapters they answered.
    pub answered: u32,
}

/// `GET /api/classes/{code}/students` (teacher): every student, in the order they joined.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Roster {
    pub students: Vec<StudentInfo>,
}

/// `POST /api/classes/{code}/answers`: one answer per student, chapter and round; the latest counts.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AnswerBody {
    pub student: String,
    pub chapter: u32,
    pub answer: Answer,
    /// The round it is for (1 when absent): an answer to a round that is over is refused.
    #[serde(default = "first_round")]
    pub round: u32,
}

/// The server's receipt: the answer is on disk.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Accepted {
    pub chapter: u32,
    #[serde(default = "first_round")]
    pub round: u32,
    pub answer: Answer,
    /// Distinct students who answered this chapter so far.
    pub answered: u32,
}

/// The teacher opens a chapter and its question (answers to the previous one stay stored).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SetChapter {
    pub chapter: u32,
    pub question: Question,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Prompt>,
}

/// `POST /api/classes/{code}/round` (teacher): the current chapter's second vote opens. The
/// first round's answers stay; each student answers again.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SecondRound {
    pub chapter: u32,
}

/// The teacher reveals the current chapter's true answer; answers close.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Reveal {
    pub chapter: u32,
    pub answer: Answer,
    /// The chapter's explanation in words per language (at most [`MAX_PROMPT_CHARS`] each), for
    /// the students' phones once revealed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub explanation: BTreeMap<String, String>,
}

impl Reveal {
    /// Checks the explanation's languages and lengths (a teacher's request).
    pub fn check(&self) -> Result<(), Invalid> {
        let ok = self.explanation.iter().all(|(lang, text)| {
            PROMPT_LANGS.contains(&lang.as_str())
                && !text.trim().is_empty()
                && text.chars().count() <= MAX_PROMPT_CHARS
                && !text.chars().any(|c| c.is_control() && c != '\n')
        });
        if ok { Ok(()) } else { Err(Invalid::BadPrompt) }
    }
}

/// One stored answer, as the teacher sees it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StoredAnswer {
    pub student: String,
    pub name: Option<String>,
    pub chapter: u32,
    #[serde(default = "first_round")]
    pub round: u32,
    pub answer: Answer,
    /// When it was last changed (milliseconds since the Unix epoch).
    pub at_ms: i64,
}

/// `GET /api/classes/{code}/results?chapter=N`: both rounds' answers, each with its round.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Results {
    pub chapter: u32,
    /// Distinct students who answered (in any round).
    pub count: u32,
    pub answers: Vec<StoredAnswer>,
}

/// An error body.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ErrorBody {
    pub error: String,
}

/// The answers as CSV (RFC 4180: every cell quoted, quotes doubled), one row per student,
/// chapter and round. A cell that a spreadsheet would read as a formula gets a leading apostrophe. The file
/// starts with a UTF-8 byte-order mark, without which Excel reads Chinese names as Latin-1.
pub fn csv(answers: &[StoredAnswer]) -> String {
    fn cell(s: &str) -> String {
        let guarded = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) && s.parse::<f64>().is_err() {
            format!("'{s}")
        } else {
            s.to_string()
        };
        format!("\"{}\"", guarded.replace('"', "\"\""))
    }
    let mut out = String::from("\u{feff}chapter,round,student,name,answer,at_ms\r\n");
    for a in answers {
        let row = [
            a.chapter.to_string(),
            a.round.to_string(),
            a.student.clone(),
            a.name.clone().unwrap_or_default(),
            a.answer.text(),
            a.at_ms.to_string(),
        ];
        out.push_str(&row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(","));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_against_their_question() {
        let choice = Question::Choice { options: vec!["a".into(), "b".into()] };
        assert_eq!(choice.check_answer(&Answer::Choice("a".into())), Ok(()));
        assert_eq!(choice.check_answer(&Answer::Choice("c".into())), Err(Invalid::UnknownChoice("c".into())));
        assert!(choice.check_answer(&Answer::Number(1.0)).is_err());
        assert_eq!(Question::Number.check_answer(&Answer::Number(2.5)), Ok(()));
        assert_eq!(Question::Number.check_answer(&Answer::Number(f64::INFINITY)), Err(Invalid::NotFinite));
        assert_eq!(Question::Number.check_answer(&Answer::Choice("a".into())), Err(Invalid::WantsNumber));
        assert_eq!(Question::Choice { options: vec!["a".into(), "a".into()] }.check(), Err(Invalid::BadOptions));
        assert_eq!(Question::Choice { options: vec!["a".into()] }.check(), Err(Invalid::BadOptions));
        assert_eq!(choice.check(), Ok(()));
    }

    #[test]
    fn a_prompt_matches_its_question_and_languages() {
        let words = |en: &str, zh: &str| BTreeMap::from([("en".to_string(), en.to_string()), ("zh".into(), zh.into())]);
        let choice = Question::Choice { options: vec!["a".into(), "b".into()] };
        let good = Prompt {
            question: words("Which?", "哪个？"),
            options: vec![words("A", "甲"), words("B", "乙")],
            unit: None,
            ..Prompt::default()
        };
        assert_eq!(good.check(&choice), Ok(()));
        // One label per option, in the question's languages.
        let short = Prompt { options: vec![words("A", "甲")], ..good.clone() };
        assert_eq!(short.check(&choice), Err(Invalid::BadPrompt));
        let mut english_only = good.clone();
        english_only.options[1].remove("zh");
        assert_eq!(english_only.check(&choice), Err(Invalid::BadPrompt));
        // Known languages only, no empty or overlong text, no control characters.
        let klingon =
            Prompt { question: BTreeMap::from([("tlh".to_string(), "nuq?".to_string())]), ..Prompt::default() };
        assert_eq!(klingon.check(&Question::Number), Err(Invalid::BadPrompt));
        let number =
            Prompt { question: words("How many times?", "多少倍？"), unit: Some("×".into()), ..Prompt::default() };
        assert_eq!(number.check(&Question::Number), Ok(()));
        assert_eq!(number.check(&choice), Err(Invalid::BadPrompt), "a choice question needs its labels");
        let long = Prompt { question: words(&"x".repeat(MAX_PROMPT_CHARS + 1), "长"), ..number.clone() };
        assert_eq!(long.check(&Question::Number), Err(Invalid::BadPrompt));
        let bell = Prompt { question: words("ring\u{7}", "铃"), ..number.clone() };
        assert_eq!(bell.check(&Question::Number), Err(Invalid::BadPrompt));
        assert_eq!(Prompt { question: words(" ", "空"), ..number }.check(&Question::Number), Err(Invalid::BadPrompt));
        // The largest prompt the checks allow fits in one request body.
        let big = words(&"长".repeat(MAX_PROMPT_CHARS), &"长".repeat(MAX_PROMPT_CHARS));
        let label = words(&"长".repeat(MAX_LABEL_CHARS), &"长".repeat(MAX_LABEL_CHARS));
        let options: Vec<String> = (0..MAX_OPTIONS).map(|i| format!("option-{i}")).collect();
        let set = SetChapter {
            chapter: MAX_CHAPTER,
            question: Question::Choice { options: options.clone() },
            prompt: Some(Prompt { question: big, options: vec![label; MAX_OPTIONS], ..Prompt::default() }),
        };
        assert!(set.prompt.as_ref().is_some_and(|p| p.check(&set.question).is_ok()));
        let json = serde_json::to_string(&set).unwrap_or_default();
        assert!(json.len() < MAX_BODY_BYTES, "{} bytes", json.len());
    }

    #[test]
    fn answers_read_as_json_numbers_or_strings() {
        let a: AnswerBody = serde_json::from_str(r#"{"student":"s","chapter":2,"answer":1.5}"#).unwrap();
        assert_eq!(a.answer, Answer::Number(1.5));
        let a: AnswerBody = serde_json::from_str(r#"{"student":"s","chapter":2,"answer":"x"}"#).unwrap();
        assert_eq!(a.answer, Answer::Choice("x".into()));
        assert!(serde_json::from_str::<AnswerBody>(r#"{"student":"s","chapter":2,"answer":[1]}"#).is_err());
        let q: Question = serde_json::from_str(r#"{"kind":"choice","options":["a","b"]}"#).unwrap();
        assert_eq!(q, Question::Choice { options: vec!["a".into(), "b".into()] });
    }

    #[test]
    fn codes_have_one_shape() {
        assert!(is_code("ABC234"));
        assert!(!is_code("ABC10O"));
        assert!(!is_code("abc234"));
        assert!(!is_code("ABC2345"));
        assert_eq!(normalize_code(" abc-234 "), "ABC234");
    }

    #[test]
    fn csv_quotes_every_cell_and_defuses_formulas() {
        let rows = [StoredAnswer {
            round: 1,
            student: "s1".into(),
            name: Some("=HYPERLINK(\"x\")".into()),
            chapter: 3,
            answer: Answer::Number(-1.5),
            at_ms: 7,
        }];
        assert_eq!(
            csv(&rows),
            "\u{feff}chapter,round,student,name,answer,at_ms\r\n\"3\",\"1\",\"s1\",\"'=HYPERLINK(\"\"x\"\")\",\"-1.5\",\"7\"\r\n"
        );
    }
}
