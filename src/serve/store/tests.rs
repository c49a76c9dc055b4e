//! The SQLite store: its schema's migrations, its file's mode, rows round trip, rollbacks, and
//! files that vanish or cannot be written.

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
            options: vec![[("en".to_string(), "A".to_string())].into(), [("en".to_string(), "B".to_string())].into()],
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
    old.execute("INSERT INTO classes (code, token, created_at, expires_at) VALUES ('CCCCCC', 't', 1, 2)", []).unwrap();
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
    s.put_answer("CCCCCC", &StoredAnswer { round: 2, answer: Answer::Number(3.0), ..old_answer[0].clone() }).unwrap();
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
    let ada =
        StudentRow { code: "AAAAAA".into(), id: "s1".into(), name: Some("Ada".into()), joined_at: 5, waiting: false };
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

/// A database deleted, or its write-ahead log deleted, or another file moved to its path while
/// the server runs: the next commit is refused and rolled back, never acknowledged.
#[cfg(unix)]
#[test]
fn a_vanished_or_replaced_file_takes_no_more_writes() {
    let dir = tempfile::tempdir().unwrap();
    for (i, vanish) in ["db", "wal", "replaced"].into_iter().enumerate() {
        let path = dir.path().join(format!("c{i}.sqlite"));
        let mut s = SqliteStore::open(&path).unwrap();
        s.begin().unwrap();
        s.put_class(&class("AAAAAA")).unwrap();
        s.commit().unwrap();
        match vanish {
            "db" => {
                for f in [path.clone(), beside(&path, "-wal"), beside(&path, "-shm")] {
                    std::fs::remove_file(f).unwrap();
                }
            }
            "wal" => std::fs::remove_file(beside(&path, "-wal")).unwrap(),
            _ => {
                let other = dir.path().join("other.sqlite");
                std::fs::write(&other, b"").unwrap();
                std::fs::rename(&other, &path).unwrap();
            }
        }
        s.begin().unwrap();
        s.put_class(&class("BBBBBB")).unwrap();
        let refused = s.commit();
        assert!(matches!(&refused, Err(StoreError::Replaced { .. })), "{vanish}: {refused:?}");
        let text = refused.map_err(|e| e.to_string()).unwrap_err();
        assert!(text.contains(&path.display().to_string()) && text.contains("restart"), "{text}");
        // The words the teacher's app knows it by.
        assert!(text.contains(crate::class::NOT_SAVED), "{text}");
        s.rollback();
    }
}
