//! The teacher's actions on a class: each is checked against the class's token first, then its
//! body; and the bounds on what a server keeps of closed classes.

use std::collections::HashSet;
use std::time::Instant;

use subtle::ConstantTimeEq;

use super::{Keeper, Live, Refusal, Settle, Student, TeacherAction, live_in, outcome, refuse_teacher, settle};
use crate::class::{self, ClassState, Invalid, Pick, Results, Roster, StudentInfo};
use crate::serve::rules::{now_s, token_hash};
use crate::serve::store::{Store, StoreError, StudentRow};

impl<S: Store> Keeper<S> {
    pub(super) fn teacher(
        &mut self,
        code: String,
        token: Option<String>,
        action: TeacherAction,
        changed: &mut HashSet<String>,
    ) -> Result<Settle, (Settle, StoreError)> {
        let refusal = match (self.live(&code), &token) {
            (None, _) => Some(Refusal::NoClass),
            (Some(_), None) => Some(Refusal::NoToken),
            (Some(live), Some(t)) if !bool::from(live.row.token_hash.as_bytes().ct_eq(token_hash(t).as_bytes())) => {
                Some(Refusal::WrongToken)
            }
            _ => None,
        };
        if let Some(r) = refusal {
            return Ok(refuse_teacher(action, r));
        }
        // The token is right: now the body may be judged.
        macro_rules! body {
            ($body:expr, $reply:expr) => {
                match $body {
                    Ok(b) => b,
                    Err(r) => return Ok(settle($reply, Err(r))),
                }
            };
        }
        let touched = Some((changed, code.clone()));
        match action {
            TeacherAction::SetChapter(set, reply) => {
                let set = body!(set, reply);
                // A chapter the class goes back to keeps its stored answers (the latest of each
                // student counts), so its count starts from them, as it does after a restart. It
                // starts again at round 1.
                let before: HashSet<String> = match self.store.answers(&code, Some(set.chapter)) {
                    Ok(stored) => stored.into_iter().filter(|a| a.round == 1).map(|a| a.student).collect(),
                    Err(e) => return Err((settle(reply, Err(Refusal::Stopping)), e)),
                };
                let result = self.update(&code, |live| {
                    if set.chapter > class::MAX_CHAPTER {
                        return Err(Invalid::ChapterTooLarge(set.chapter).into());
                    }
                    if !live.chapters.contains(&set.chapter) && live.chapters.len() >= class::MAX_CHAPTERS_PER_CLASS {
                        return Err(Refusal::TooManyChapters(class::MAX_CHAPTERS_PER_CLASS));
                    }
                    set.question.check()?;
                    if let Some(p) = &set.prompt {
                        p.check(&set.question)?;
                    }
                    live.chapters.insert(set.chapter);
                    if live.row.chapter != Some(set.chapter) || live.row.question.as_ref() != Some(&set.question) {
                        live.row.chapter = Some(set.chapter);
                        live.row.question = Some(set.question);
                        live.row.revealed = None;
                        live.row.explanation.clear();
                        live.row.round = 1;
                        live.answered = before;
                    }
                    // The same question in other words (a language switch, new numbers) keeps
                    // the answers and the reveal.
                    live.row.prompt = set.prompt;
                    Ok(())
                });
                outcome(reply, result, touched)
            }
            TeacherAction::Reveal(reveal, reply) => {
                let reveal = body!(reveal, reply);
                let result = self.update(&code, |live| {
                    if live.row.chapter != Some(reveal.chapter) {
                        return Err(Refusal::NotCurrentChapter { asked: reveal.chapter, current: live.row.chapter });
                    }
                    if let Some(q) = &live.row.question {
                        q.check_answer(&reveal.answer)?;
                    }
                    reveal.check()?;
                    live.row.revealed = Some(reveal.answer);
                    live.row.explanation = reveal.explanation;
                    Ok(())
                });
                outcome(reply, result, touched)
            }
            TeacherAction::SecondRound(round, reply) => {
                let round = body!(round, reply);
                let result = self.update(&code, |live| {
                    if live.row.chapter != Some(round.chapter) {
                        return Err(Refusal::NotCurrentChapter { asked: round.chapter, current: live.row.chapter });
                    }
                    if live.row.revealed.is_some() {
                        return Err(Refusal::Revealed(round.chapter));
                    }
                    // Asked twice (a retry), the second round stays as it is.
                    if live.row.round < class::LAST_ROUND {
                        live.row.round = class::LAST_ROUND;
                        live.answered.clear();
                    }
                    Ok(())
                });
                outcome(reply, result, touched)
            }
            TeacherAction::Close(reply) => {
                let result = self.update(&code, |live| {
                    live.row.closed = true;
                    live.row.closed_at = Some(now_s());
                    Ok(())
                });
                let result = match result {
                    Ok(Ok(state)) => self.keep_closed_bounded(&code).map(|()| Ok(state)),
                    other => other,
                };
                outcome(reply, result, touched)
            }
            TeacherAction::Lock(lock, reply) => {
                let lock = body!(lock, reply);
                let result = self.update(&code, |live| {
                    live.row.locked = lock.locked;
                    Ok(())
                });
                outcome(reply, result, touched)
            }
            TeacherAction::Admit(pick, reply) => {
                let pick = body!(pick, reply);
                outcome(reply, self.admit(&code, &pick), touched)
            }
            TeacherAction::Remove(pick, reply) => {
                let pick = body!(pick, reply);
                outcome(reply, self.remove(&code, &pick), touched)
            }
            TeacherAction::Results(chapter, reply) => {
                let chapter = body!(chapter, reply);
                let result = self.store.answers(&code, Some(chapter)).map(|answers| {
                    let students: HashSet<&str> = answers.iter().map(|a| a.student.as_str()).collect();
                    let count = students.len().try_into().unwrap_or(u32::MAX);
                    Ok(Results { chapter, count, answers })
                });
                outcome(reply, result, None)
            }
            TeacherAction::Answers(reply) => outcome(reply, self.store.answers(&code, None).map(Ok), None),
            TeacherAction::Roster(reply) => {
                let result = self.store.answer_counts(&code).map(|counts| {
                    let Some(live) = self.classes.get(&code) else { return Err(Refusal::NoClass) };
                    let mut students: Vec<(&String, &Student)> = live.students.iter().collect();
                    students.sort_by_key(|(_, s)| s.seq);
                    let students = students
                        .into_iter()
                        .map(|(id, s)| StudentInfo {
                            student: id.clone(),
                            name: s.name.clone(),
                            joined_at: s.joined_at,
                            waiting: s.waiting,
                            answered: counts.get(id).copied().unwrap_or(0),
                        })
                        .collect();
                    Ok(Roster { students })
                });
                outcome(reply, result, None)
            }
        }
    }

    /// Keeps at most [`Limits::max_closed`] closed classes (for their CSV): the ones closed
    /// longest ago go first, but never `just_closed`. Deleted in the batch's transaction; a
    /// rollback reloads them from the store.
    fn keep_closed_bounded(&mut self, just_closed: &str) -> Result<(), StoreError> {
        let mut closed: Vec<(i64, i64, String)> = self
            .classes
            .values()
            .filter_map(|l| Some((l.row.closed_at?, l.row.created_at, l.row.code.clone())))
            .collect();
        closed.sort();
        let excess = closed.len().saturating_sub(self.limits.max_closed.max(1));
        for (_, _, code) in closed.into_iter().filter(|(_, _, c)| c != just_closed).take(excess) {
            self.store.delete_class(&code)?;
            self.classes.remove(&code);
        }
        Ok(())
    }

    /// The students a pick names, among those of the class: the listed ones it has, and with
    /// `all_waiting` every waiting one.
    fn picked(live: &Live, pick: &Pick) -> Vec<String> {
        let mut ids: Vec<String> = pick.students.iter().filter(|id| live.students.contains_key(*id)).cloned().collect();
        if pick.all_waiting {
            ids.extend(live.students.iter().filter(|(_, s)| s.waiting).map(|(id, _)| id.clone()));
        }
        ids.sort();
        ids.dedup();
        ids
    }

    fn admit(&mut self, code: &str, pick: &Pick) -> Result<Result<ClassState, Refusal>, StoreError> {
        let Some(live) = live_in(&mut self.classes, code) else { return Ok(Err(Refusal::NoClass)) };
        if live.row.closed {
            return Ok(Err(Refusal::Closed));
        }
        for id in Self::picked(live, pick) {
            let Some(s) = live.students.get_mut(&id).filter(|s| s.waiting) else { continue };
            s.waiting = false;
            let row =
                StudentRow { code: code.to_string(), id, name: s.name.clone(), joined_at: s.joined_at, waiting: false };
            self.store.put_student(&row)?;
        }
        let now = Instant::now();
        Ok(self.live(code).map(|l| l.state(now)).ok_or(Refusal::NoClass))
    }

    fn remove(&mut self, code: &str, pick: &Pick) -> Result<Result<ClassState, Refusal>, StoreError> {
        let Some(live) = live_in(&mut self.classes, code) else { return Ok(Err(Refusal::NoClass)) };
        if live.row.closed {
            return Ok(Err(Refusal::Closed));
        }
        for id in Self::picked(live, pick) {
            live.students.remove(&id);
            live.answered.remove(&id);
            self.store.delete_student(code, &id)?;
        }
        if pick.lock && !live.row.locked {
            live.row.locked = true;
            self.store.put_class(&live.row)?;
        }
        let now = Instant::now();
        Ok(self.live(code).map(|l| l.state(now)).ok_or(Refusal::NoClass))
    }
}
