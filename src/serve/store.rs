//! Where classes and answers are kept: one small interface ([`Store`]) and its SQLite
//! implementation. A school-wide deployment could implement the same trait over Postgres; the
//! keeper ([`super::keeper`]) is the only caller, from one thread, inside transactions it opens
//! and commits, so an implementation needs no locking of its own.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rusqlite::{Connection, params};

use crate::class::{Answer, Prompt, Question, StoredAnswer};

/// A class as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassRow {
    pub code: String,
    /// The teacher token's hash ([`super::rules::token_hash`]); the token itself is never stored.
    pub token_hash: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub chapter: Option<u32>,
    pub question: Option<Question>,
    /// The question's words for the students (JSON), when the teacher sent them.
    pub prompt: Option<Prompt>,
    pub revealed: Option<Answer>,
    /// The revealed chapter's explanation in words (per language).
    pub explanation: BTreeMap<String, String>,
    pub closed: bool,
    /// When it was closed (seconds since the Unix epoch): closed classes are kept a while for
    /// the teacher's CSV, then deleted.
    pub closed_at: Option<i64>,
    /// No one else may join.
    pub locked: bool,
    /// The expected size: students past it wait to be let in.
    pub expected: Option<u32>,
    /// The current chapter's voting round (1 or 2).
    pub round: u32,
}

/// A student as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct StudentRow {
    pub code: String,
    pub id: String,
    pub name: Option<String>,
    pub joined_at: i64,
    /// Waits for the teacher to let them in.
    pub waiting: bool,
}

/// A store's failure: the disk, or a row that does not read back.
#[derive(thiserror::Error, Debug)]
pub enum StoreError {
    #[error("the class database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the class database holds a value that does not read back: {0}")]
    Corrupt(#[from] serde_json::Error),
    #[error("the class database's file: {0}")]
    File(std::io::Error),
}

/// The store's interface. Writes happen between [`Store::begin`] and [`Store::commit`]; a commit
/// that returns `Ok` is on disk.
pub trait Store: Send {
    fn begin(&mut self) -> Result<(), StoreError>;
    fn commit(&mut self) -> Result<(), StoreError>;
    /// Undoes everything since `begin` (after a failed write or commit).
    fn rollback(&mut self);
    /// Inserts or replaces a class.
    fn put_class(&mut self, class: &ClassRow) -> Result<(), StoreError>;
    fn put_student(&mut self, student: &StudentRow) -> Result<(), StoreError>;
    /// Inserts or replaces a student's answer to a chapter.
    fn put_answer(&mut self, code: &str, answer: &StoredAnswer) -> Result<(), StoreError>;
    /// Deletes a class with its students and answers.
    fn delete_class(&mut self, code: &str) -> Result<(), StoreError>;
    /// Deletes a student with their answers.
    fn delete_student(&mut self, code: &str, id: &str) -> Result<(), StoreError>;
    /// Every class, and every class's students.
    fn classes(&mut self) -> Result<Vec<ClassRow>, StoreError>;
    fn students(&mut self) -> Result<Vec<StudentRow>, StoreError>;
    /// A class's answers, one chapter's or all, in chapter order then by time.
    fn answers(&mut self, code: &str, chapter: Option<u32>) -> Result<Vec<StoredAnswer>, StoreError>;
    /// How many chapters each of a class's students answered.
    fn answer_counts(&mut self, code: &str) -> Result<HashMap<String, u32>, StoreError>;
    /// The chapters a class has answers for.
    fn chapters(&mut self, code: &str) -> Result<Vec<u32>, StoreError>;
}

/// SQLite, in WAL mode with `synchronous=FULL`: a committed transaction survives the process
/// being killed (and the machine losing power). The file holds students' names, so it is created
/// readable by its owner only (0600; SQLite gives its `-wal` and `-shm` files the same mode), and
/// an older, wider file is narrowed when opened.
pub struct SqliteStore {
    db: Connection,
}

/// The answers table's columns and keys: the schema's, and the rounds migration's rebuilt table.
macro_rules! answers_columns {
    () => {
        "(
    code TEXT NOT NULL,
    chapter INTEGER NOT NULL,
    round INTEGER NOT NULL DEFAULT 1,
    student TEXT NOT NULL,
    answer TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (code, chapter, round, student),
    FOREIGN KEY (code, student) REFERENCES students(code, id) ON DELETE CASCADE
)"
    };
}

const SCHEMA: &str = concat!(
    "
CREATE TABLE IF NOT EXISTS classes (
    code TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    chapter INTEGER,
    question TEXT,
    revealed TEXT,
    closed INTEGER NOT NULL DEFAULT 0,
    prompt TEXT,
    closed_at INTEGER,
    locked INTEGER NOT NULL DEFAULT 0,
    expected INTEGER,
    round INTEGER NOT NULL DEFAULT 1,
    explanation TEXT
);
CREATE TABLE IF NOT EXISTS students (
    code TEXT NOT NULL REFERENCES classes(code) ON DELETE CASCADE,
    id TEXT NOT NULL,
    name TEXT,
    joined_at INTEGER NOT NULL,
    waiting INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (code, id)
);
CREATE TABLE IF NOT EXISTS answers ",
    answers_columns!(),
    ";\n"
);

/// A database from before voting rounds keys its answers by (code, chapter, student): the table
/// is rebuilt with the round in its key, every answer in round 1.
const ANSWERS_WITH_ROUNDS: &str = concat!(
    "ALTER TABLE answers RENAME TO answers_before_rounds;\nCREATE TABLE answers ",
    answers_columns!(),
    ";
INSERT INTO answers (code, chapter, round, student, answer, at_ms)
    SELECT code, chapter, 1, student, answer, at_ms FROM answers_before_rounds;
DROP TABLE answers_before_rounds;
"
);

/// Columns added since the first schema: a database from before gains them (its rows take the
/// default).
const ADDED_COLUMNS: [(&str, &str, &str); 7] = [
    ("classes", "prompt", "TEXT"),
    ("classes", "closed_at", "INTEGER"),
    ("classes", "locked", "INTEGER NOT NULL DEFAULT 0"),
    ("classes", "expected", "INTEGER"),
    ("students", "waiting", "INTEGER NOT NULL DEFAULT 0"),
    ("classes", "round", "INTEGER NOT NULL DEFAULT 1"),
    ("classes", "explanation", "TEXT"),
];

/// Creates the file for its owner only, or narrows an existing one to that.
#[cfg(unix)]
fn owner_only(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            for file in [path.to_path_buf(), beside(path, "-wal"), beside(path, "-shm")] {
                if let Ok(meta) = std::fs::metadata(&file)
                    && meta.permissions().mode() & 0o077 != 0
                {
                    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
                }
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn owner_only(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// SQLite's `-wal` or `-shm` file beside the database at `path`.
#[cfg(unix)]
fn beside(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

impl SqliteStore {
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        owner_only(path).map_err(StoreError::File)?;
        let db = Connection::open(path)?;
        // journal_mode answers with a row, so it is read rather than executed.
        let _mode: String = db.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        db.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000;")?;
        db.execute_batch(SCHEMA)?;
        for (table, column, decl) in ADDED_COLUMNS {
            let has: bool = db.query_row(
                "SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2",
                params![table, column],
                |r| r.get(0),
            )?;
            if !has {
                db.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
            }
        }
        let rounds: bool =
            db.query_row("SELECT COUNT(*) FROM pragma_table_info('answers') WHERE name = 'round'", [], |r| r.get(0))?;
        if !rounds {
            db.execute_batch(&format!("BEGIN; {ANSWERS_WITH_ROUNDS} COMMIT;"))?;
        }
        // Tokens stored in the clear by an older server are replaced by their hashes.
        let plain: Vec<(String, String)> = {
            let mut q = db.prepare("SELECT code, token FROM classes WHERE token NOT LIKE 'sha256:%'")?;
            q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?
        };
        for (code, token) in plain {
            db.execute(
                "UPDATE classes SET token = ?2 WHERE code = ?1",
                params![code, super::rules::token_hash(&token)],
            )?;
        }
        Ok(SqliteStore { db })
    }
}

fn json_opt<T: serde::Serialize>(v: &Option<T>) -> Result<Option<String>, StoreError> {
    Ok(match v {
        Some(v) => Some(serde_json::to_string(v)?),
        None => None,
    })
}

fn from_json_opt<T: serde::de::DeserializeOwned>(s: Option<String>) -> Result<Option<T>, StoreError> {
    Ok(match s {
        Some(s) => Some(serde_json::from_str(&s)?),
        None => None,
    })
}

impl Store for SqliteStore {
    fn begin(&mut self) -> Result<(), StoreError> {
        self.db.execute_batch("BEGIN IMMEDIATE")?;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.db.execute_batch("COMMIT")?;
        Ok(())
    }

    fn rollback(&mut self) {
        if !self.db.is_autocommit() {
            let _ = self.db.execute_batch("ROLLBACK");
        }
    }

    fn put_class(&mut self, c: &ClassRow) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO classes (code, token, created_at, expires_at, chapter, question, revealed, closed, prompt,
                 closed_at, locked, expected, round, explanation)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
             ON CONFLICT(code) DO UPDATE SET token = ?2, created_at = ?3, expires_at = ?4, chapter = ?5,
                 question = ?6, revealed = ?7, closed = ?8, prompt = ?9, closed_at = ?10, locked = ?11,
                 expected = ?12, round = ?13, explanation = ?14",
            params![
                c.code,
                c.token_hash,
                c.created_at,
                c.expires_at,
                c.chapter,
                json_opt(&c.question)?,
                json_opt(&c.revealed)?,
                c.closed,
                json_opt(&c.prompt)?,
                c.closed_at,
                c.locked,
                c.expected,
                c.round,
                serde_json::to_string(&c.explanation)?
            ],
        )?;
        Ok(())
    }

    fn put_student(&mut self, s: &StudentRow) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT OR REPLACE INTO students (code, id, name, joined_at, waiting) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![s.code, s.id, s.name, s.joined_at, s.waiting],
        )?;
        Ok(())
    }

    fn put_answer(&mut self, code: &str, a: &StoredAnswer) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO answers (code, chapter, round, student, answer, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(code, chapter, round, student) DO UPDATE SET answer = ?5, at_ms = ?6",
            params![code, a.chapter, a.round, a.student, serde_json::to_string(&a.answer)?, a.at_ms],
        )?;
        Ok(())
    }

    fn delete_class(&mut self, code: &str) -> Result<(), StoreError> {
        // Answers reference students, students reference the class: both go with it.
        self.db.execute("DELETE FROM answers WHERE code = ?1", params![code])?;
        self.db.execute("DELETE FROM students WHERE code = ?1", params![code])?;
        self.db.execute("DELETE FROM classes WHERE code = ?1", params![code])?;
        Ok(())
    }

    fn delete_student(&mut self, code: &str, id: &str) -> Result<(), StoreError> {
        self.db.execute("DELETE FROM answers WHERE code = ?1 AND student = ?2", params![code, id])?;
        self.db.execute("DELETE FROM students WHERE code = ?1 AND id = ?2", params![code, id])?;
        Ok(())
    }

    fn classes(&mut self) -> Result<Vec<ClassRow>, StoreError> {
        let mut q = self.db.prepare(
            "SELECT code, token, created_at, expires_at, chapter, question, revealed, closed, prompt, closed_at, locked,
                 expected, round, explanation FROM classes",
        )?;
        let rows = q.query_map([], |r| {
            let row = ClassRow {
                code: r.get(0)?,
                token_hash: r.get(1)?,
                created_at: r.get(2)?,
                expires_at: r.get(3)?,
                chapter: r.get(4)?,
                question: None,
                prompt: None,
                revealed: None,
                closed: r.get(7)?,
                closed_at: r.get(9)?,
                locked: r.get(10)?,
                expected: r.get(11)?,
                round: r.get(12)?,
                explanation: BTreeMap::new(),
            };
            let texts =
                (r.get::<_, Option<String>>(5)?, r.get::<_, Option<String>>(6)?, r.get::<_, Option<String>>(8)?);
            Ok((row, texts, r.get::<_, Option<String>>(13)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (row, (question, revealed, prompt), explanation) = row?;
            out.push(ClassRow {
                question: from_json_opt(question)?,
                prompt: from_json_opt(prompt)?,
                revealed: from_json_opt(revealed)?,
                explanation: from_json_opt(explanation)?.unwrap_or_default(),
                ..row
            });
        }
        Ok(out)
    }

    fn students(&mut self) -> Result<Vec<StudentRow>, StoreError> {
        let mut q =
            self.db.prepare("SELECT code, id, name, joined_at, waiting FROM students ORDER BY joined_at, rowid")?;
        let rows = q.query_map([], |r| {
            Ok(StudentRow { code: r.get(0)?, id: r.get(1)?, name: r.get(2)?, joined_at: r.get(3)?, waiting: r.get(4)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn answer_counts(&mut self, code: &str) -> Result<HashMap<String, u32>, StoreError> {
        let mut q =
            self.db.prepare("SELECT student, COUNT(DISTINCT chapter) FROM answers WHERE code = ?1 GROUP BY student")?;
        let rows = q.query_map(params![code], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn chapters(&mut self, code: &str) -> Result<Vec<u32>, StoreError> {
        let mut q = self.db.prepare("SELECT DISTINCT chapter FROM answers WHERE code = ?1 ORDER BY chapter")?;
        let rows = q.query_map(params![code], |r| r.get::<_, u32>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn answers(&mut self, code: &str, chapter: Option<u32>) -> Result<Vec<StoredAnswer>, StoreError> {
        let mut q = self.db.prepare(
            "SELECT a.student, s.name, a.chapter, a.answer, a.at_ms, a.round FROM answers a
             JOIN students s ON s.code = a.code AND s.id = a.student
             WHERE a.code = ?1 AND (?2 IS NULL OR a.chapter = ?2)
             ORDER BY a.chapter, a.round, a.at_ms, a.student",
        )?;
        let rows = q.query_map(params![code, chapter], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, u32>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, u32>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (student, name, chapter, answer, at_ms, round) = row?;
            let answer = serde_json::from_str(&answer)?;
            out.push(StoredAnswer { student, name, chapter, round, answer, at_ms });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::OptionalExtension;

    fn has_class(store: &SqliteStore, code: &str) -> bool {
        let found = store.db.query_row("SELECT 1 FROM classes WHERE code = ?1", params![code], |_| Ok(()));
        found.optional().unwrap().is_some()
    }

    fn class(code: &str) -> ClassRow {
        ClassRow {
            code: code.into(),
            token_hash: super::super::rules::token_hash("t"),
            created_at: 1,
            expires_at: 2,
            round: 1,
            chapter: Some(3),
            question: Some(Question::Choice { options: vec!["a".into(), "b".into()] }),
            prompt: Some(Prompt {
                question: [("en".to_string(), "Which?".to_string())].into(),
                options: vec![
                    [("en".to_string(), "A".to_string())].into(),
                    [("en".to_string(), "B".to_string())].into(),
                ],
                unit: None,
                ..Prompt::default()
            }),
            revealed: None,
            explanation: [("en".to_string(), "Because.".to_string())].into(),
            closed: false,
            closed_at: None,
            locked: true,
            expected: Some(30),
        }
    }

    #[test]
    fn a_database_from_before_prompts_gains_their_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        let old = Connection::open(&path).unwrap();
        // The first schema: none of the added columns.
        let mut before = SCHEMA.to_string();
        for (_, column, decl) in ADDED_COLUMNS {
            before = before.replace(&format!(",\n    {column} {decl}"), "");
        }
        // Before voting rounds, answers were keyed without one.
        before = before.replace("PRIMARY KEY (code, chapter, round, student)", "PRIMARY KEY (code, chapter, student)");
        assert!(!before.contains("prompt") && !before.contains("waiting") && !before.contains("round"), "{before}");
        old.execute_batch(&before).unwrap();
        old.execute("INSERT INTO classes (code, token, created_at, expires_at) VALUES ('CCCCCC', 't', 1, 2)", [])
            .unwrap();
        old.execute("INSERT INTO students (code, id, name, joined_at) VALUES ('CCCCCC', 's1', NULL, 1)", []).unwrap();
        old.execute("INSERT INTO answers VALUES ('CCCCCC', 4, 's1', '2.5', 7)", []).unwrap();
        drop(old);
        let mut s = SqliteStore::open(&path).unwrap();
        let loaded = s.classes().unwrap();
        assert_eq!((loaded[0].prompt.as_ref(), loaded[0].locked, loaded[0].expected), (None, false, None));
        // The old token in the clear is now its hash, which still checks the same token.
        assert_eq!(loaded[0].token_hash, super::super::rules::token_hash("t"));
        assert!(!s.students().unwrap()[0].waiting);
        // The old answer is the first round's; a second round's answer sits beside it.
        let old_answer = s.answers("CCCCCC", Some(4)).unwrap();
        assert_eq!(old_answer.len(), 1);
        assert_eq!((old_answer[0].round, &old_answer[0].answer), (1, &Answer::Number(2.5)));
        s.put_answer("CCCCCC", &StoredAnswer { round: 2, answer: Answer::Number(3.0), ..old_answer[0].clone() })
            .unwrap();
        let rounds: Vec<u32> = s.answers("CCCCCC", Some(4)).unwrap().iter().map(|a| a.round).collect();
        assert_eq!(rounds, [1, 2]);
        s.put_class(&class("CCCCCC")).unwrap();
        assert_eq!(s.classes().unwrap(), vec![class("CCCCCC")]);
    }

    #[cfg(unix)]
    #[test]
    fn the_database_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let mut s = SqliteStore::open(&path).unwrap();
        s.begin().unwrap();
        s.put_class(&class("DDDDDD")).unwrap();
        s.commit().unwrap();
        for file in ["c.sqlite", "c.sqlite-wal", "c.sqlite-shm"] {
            assert_eq!(mode(&dir.path().join(file)), 0o600, "{file}");
        }
        drop(s);
        // A file an older server made world-readable is narrowed.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(SqliteStore::open(&path).unwrap());
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn rows_round_trip_and_deleting_a_class_takes_its_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        let mut s = SqliteStore::open(&path).unwrap();
        s.begin().unwrap();
        s.put_class(&class("AAAAAA")).unwrap();
        let ada = StudentRow {
            code: "AAAAAA".into(),
            id: "s1".into(),
            name: Some("Ada".into()),
            joined_at: 5,
            waiting: false,
        };
        s.put_student(&ada).unwrap();
        s.put_student(&StudentRow { id: "s2".into(), name: None, waiting: true, ..ada.clone() }).unwrap();
        let a = StoredAnswer {
            student: "s1".into(),
            name: Some("Ada".into()),
            chapter: 3,
            round: 1,
            answer: Answer::Choice("b".into()),
            at_ms: 9,
        };
        s.put_answer("AAAAAA", &a).unwrap();
        s.put_answer("AAAAAA", &StoredAnswer { answer: Answer::Number(2.5), at_ms: 10, ..a.clone() }).unwrap();
        s.commit().unwrap();
        drop(s);
        // Reopened: what was committed is there, the latest answer only.
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.classes().unwrap(), vec![class("AAAAAA")]);
        assert_eq!(s.students().unwrap().len(), 2);
        let answers = s.answers("AAAAAA", Some(3)).unwrap();
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].answer, Answer::Number(2.5));
        assert!(s.answers("AAAAAA", Some(4)).unwrap().is_empty());
        assert_eq!(s.answer_counts("AAAAAA").unwrap(), HashMap::from([("s1".to_string(), 1)]));
        assert_eq!(s.chapters("AAAAAA").unwrap(), vec![3]);
        // A removed student takes their answers along.
        s.begin().unwrap();
        s.delete_student("AAAAAA", "s1").unwrap();
        s.commit().unwrap();
        assert!(s.answers("AAAAAA", None).unwrap().is_empty());
        let left = s.students().unwrap();
        assert_eq!((left.len(), left[0].id.as_str(), left[0].waiting), (1, "s2", true));
        s.begin().unwrap();
        s.delete_class("AAAAAA").unwrap();
        s.commit().unwrap();
        assert!(!has_class(&s, "AAAAAA"));
        assert!(s.answers("AAAAAA", None).unwrap().is_empty());
        assert!(s.students().unwrap().is_empty());
    }

    #[test]
    fn a_rolled_back_transaction_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SqliteStore::open(&dir.path().join("c.sqlite")).unwrap();
        s.begin().unwrap();
        s.put_class(&class("BBBBBB")).unwrap();
        s.rollback();
        assert!(s.classes().unwrap().is_empty());
    }
}
