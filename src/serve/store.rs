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
    /// The file the server opened is no longer at its path (deleted, or another put there):
    /// SQLite would go on writing into the unlinked file, and a restart would lose it all.
    #[error(
        "the class database {path} was removed or replaced while the server ran ({what}): nothing more is saved; restart the server to open a new one"
    )]
    Replaced { path: String, what: String },
    /// Said where the server names the file: "cannot open the class database PATH: …".
    #[error("it cannot be written ({why})")]
    ReadOnly { why: String },
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
    /// The database and its `-wal` file as opened: each path and its file's identity, checked
    /// before every commit (see [`SqliteStore::check_files`]).
    files: Vec<(std::path::PathBuf, FileId)>,
}

/// A file's identity on its disk (device and inode on Unix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId(u64, u64);

#[cfg(unix)]
fn file_id(path: &Path) -> std::io::Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok(FileId(m.dev(), m.ino()))
}

/// Elsewhere the identity is the file's existence alone (and its creation time where known).
#[cfg(not(unix))]
fn file_id(path: &Path) -> std::io::Result<FileId> {
    let m = std::fs::metadata(path)?;
    let born = m.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    Ok(FileId(born.map_or(0, |d| d.as_secs()), born.map_or(0, |d| u64::from(d.subsec_nanos()))))
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
fn beside(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

impl SqliteStore {
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        owner_only(path).map_err(StoreError::File)?;
        let db = Connection::open(path)?;
        // SQLite opens a file it may not write read-only, without a word: every write would
        // then fail while the server looked well.
        if db.is_readonly(rusqlite::MAIN_DB)? {
            return Err(StoreError::ReadOnly { why: "the file is read-only".into() });
        }
        // journal_mode answers with a row, so it is read rather than executed.
        let mode: String = db.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            let why = format!("its journal cannot be write-ahead (SQLite kept '{mode}'): is its folder writable?");
            return Err(StoreError::ReadOnly { why });
        }
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
        // A write at start: a database that cannot take one refuses to start, with its reason
        // (a full disk, a folder that is not writable), rather than failing each answer later.
        db.execute_batch("BEGIN IMMEDIATE; PRAGMA user_version = 1; COMMIT;")
            .map_err(|e| StoreError::ReadOnly { why: e.to_string() })?;
        let mut files = Vec::new();
        for file in [path.to_path_buf(), beside(path, "-wal")] {
            let id = file_id(&file).map_err(|e| StoreError::ReadOnly { why: e.to_string() })?;
            files.push((file, id));
        }
        Ok(SqliteStore { db, files })
    }

    /// Whether the files opened are still the ones at their paths: a database deleted (or
    /// moved, or replaced) while the server runs must not acknowledge another write.
    fn check_files(&self) -> Result<(), StoreError> {
        for (file, id) in &self.files {
            let what = match file_id(file) {
                Ok(now) if now == *id => continue,
                Ok(_) => format!("{} is another file now", file.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => format!("{} is gone", file.display()),
                Err(e) => format!("{}: {e}", file.display()),
            };
            let path = self.files.first().map_or_else(String::new, |(p, _)| p.display().to_string());
            return Err(StoreError::Replaced { path, what });
        }
        Ok(())
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
        // Checked before the commit: a transaction into a vanished file is rolled back, and
        // nothing in it is acknowledged.
        self.check_files()?;
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
mod tests;
