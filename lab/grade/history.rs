//! The parent's side of the world: reading back what a scenario's
//! processes recorded in `world.db` (see [`crate::world`]).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use crate::explore::Row;
use crate::output::Output;
use crate::scenario::WORLD_DB;
use crate::world::{open, Delivery, Event, Kind, Outcome};

/// Everything a scenario's processes recorded, read back by the parent.
#[derive(Clone, Debug, Default, Serialize)]
pub struct History {
    pub deliveries: Vec<Delivery>,
    pub events: Vec<Event>,
}

impl History {
    /// Reads the world in `dir`. A world nobody wrote to reads as empty.
    pub fn read(dir: &Path) -> Result<History> {
        if !dir.join(WORLD_DB).exists() {
            return Ok(History::default());
        }
        let conn = open(dir)?;
        let deliveries = conn
            .prepare(
                "SELECT process, channel, recipient, body, key, outcome, at_ms, html,
                        coalesce(began_ms, at_ms)
                 FROM deliveries ORDER BY id",
            )?
            .query_map([], |row| {
                let name: String = row.get(5)?;
                let outcome = Outcome::parse(&name);
                Ok(Delivery {
                    process: row.get(0)?,
                    channel: row.get(1)?,
                    recipient: row.get(2)?,
                    body: row.get(3)?,
                    message: row.get(3)?,
                    html: row.get(7)?,
                    key: row.get(4)?,
                    outcome,
                    limited: name == crate::world::LIMITED,
                    at_ms: row.get(6)?,
                    began_ms: row.get(8)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
            .context("could not read the deliveries from the world")?;
        let events = conn
            .prepare(
                "SELECT process, kind, op, nth, subject, text, elapsed, writes, at_ms
                 FROM events ORDER BY seq",
            )?
            .query_map([], |row| {
                let kind: String = row.get(1)?;
                Ok(Event {
                    process: row.get(0)?,
                    kind: Kind::parse(&kind).unwrap_or(Kind::Panic),
                    op: row.get(2)?,
                    nth: row.get(3)?,
                    subject: row.get(4)?,
                    text: row.get(5)?,
                    elapsed_us: row.get::<_, Option<i64>>(6)?.map(|us| us as u64),
                    at_ms: row.get::<_, Option<i64>>(8)?.unwrap_or_default(),
                    output: None,
                    writes: row.get(7)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
            .context("could not read the events from the world")?;
        let mut events = events;
        for event in events.iter_mut().filter(|e| e.kind == Kind::Start) {
            event.output = Output::read(dir, event.process);
        }
        Ok(History { deliveries, events })
    }

    /// The delivery each send event records, by the event's place in
    /// [`History::events`]: a process's n-th send event is its n-th
    /// delivery.
    pub fn sends(&self) -> BTreeMap<usize, &Delivery> {
        let mut by_process: BTreeMap<u32, Vec<&Delivery>> = BTreeMap::new();
        for d in &self.deliveries {
            by_process.entry(d.process).or_default().push(d);
        }
        let mut next: BTreeMap<u32, usize> = BTreeMap::new();
        self.events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == Kind::Send)
            .filter_map(|(i, e)| {
                let n = next.entry(e.process).or_default();
                let d = by_process.get(&e.process)?.get(*n).copied();
                *n += 1;
                Some((i, d?))
            })
            .collect()
    }

    /// The emails that reached people (a repeat of a known key reaches nobody).
    pub fn emails(&self) -> impl Iterator<Item = &Delivery> {
        self.deliveries
            .iter()
            .filter(|d| d.channel == "email" && d.outcome == Outcome::Delivered)
    }

    /// Every send attempt on `channel` ("email" or "push"), in order, whatever came of it.
    pub fn attempts<'a>(&'a self, channel: &'a str) -> impl Iterator<Item = &'a Delivery> {
        self.deliveries.iter().filter(move |d| d.channel == channel)
    }

    /// Whether the claims this play stranded (each crash or failing commit
    /// of `claiming`, the operation that claims rows, may strand one, which
    /// chapter 6's sweep charges as a lost attempt), with the sends to
    /// `recipient` on `channel` that carry `text`, reach `attempts`: enough
    /// to spend that message's attempts, though fewer of them reached the
    /// provider. A crash in any other operation strands no claim: the sweep
    /// leaves no row claimed, whatever becomes of its commits.
    pub fn spent_on_lost_claims(
        &self,
        claiming: &str,
        (channel, recipient, text): (&str, &str, &str),
        attempts: usize,
    ) -> bool {
        let stranded = self
            .events
            .iter()
            .filter(|e| matches!(e.kind, Kind::Crash | Kind::CommitFailed))
            .filter(|e| e.op.as_deref() == Some(claiming))
            .count();
        let sent = self
            .attempts(channel)
            .filter(|d| d.recipient == recipient && d.body.contains(text))
            .count();
        stranded > 0 && stranded + sent >= attempts
    }

    /// The messages on `channel` that reached people.
    pub fn delivered<'a>(&'a self, channel: &'a str) -> impl Iterator<Item = &'a Delivery> {
        self.attempts(channel)
            .filter(|d| d.outcome == Outcome::Delivered)
    }

    /// The emails that reached `recipient`.
    pub fn emails_to<'a>(&'a self, recipient: &'a str) -> impl Iterator<Item = &'a Delivery> {
        self.emails().filter(move |d| d.recipient == recipient)
    }

    /// Which commits of operation `op` reached the database, counting from 1.
    pub fn commits(&self, op: &str) -> Vec<u32> {
        self.numbered(Kind::Commit, op)
    }

    /// Every commit operation `op` attempted, whether or not it reached the file.
    pub fn commit_attempts(&self, op: &str) -> Vec<u32> {
        let mut all = self.numbered(Kind::Commit, op);
        all.extend(self.numbered(Kind::CommitFailed, op));
        all.sort_unstable();
        all.dedup();
        all
    }

    fn numbered(&self, kind: Kind, op: &str) -> Vec<u32> {
        self.events
            .iter()
            .filter(|e| e.kind == kind && e.op.as_deref() == Some(op))
            .filter_map(|e| e.nth)
            .collect()
    }

    /// The first event of a kind, if any.
    pub fn first(&self, kind: Kind) -> Option<&Event> {
        self.events.iter().find(|e| e.kind == kind)
    }

    /// The error the operation about `subject` returned in the first process, if it failed.
    pub fn error_for(&self, op: &str, subject: &str) -> Option<&str> {
        self.events
            .iter()
            .find(|e| {
                e.kind == Kind::Error
                    && e.op.as_deref() == Some(op)
                    && e.subject.as_deref() == Some(subject)
            })
            .map(|e| e.text.as_str())
    }
}

/// Reads a two-column table of text from the service's database after a
/// scenario, e.g. the memberships the checks judge.
pub fn read_pairs(dir: &Path, sql: &str) -> Result<Vec<(String, String)>> {
    let path = dir.join(crate::scenario::APP_DB);
    let conn = Connection::open(&path)
        .with_context(|| format!("could not open the service's database {}", path.display()))?;
    let mut stmt = conn
        .prepare(sql)
        .with_context(|| format!("the service's database does not answer `{sql}`"))?;
    let rows = stmt
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .with_context(|| format!("could not read `{sql}` from the service's database"))?;
    Ok(rows)
}

/// The service's outbox as it was left, in the order of its ids, each row
/// judged by the contract of chapter 5, not by the case's own bookkeeping:
///
/// - a dead letter, what an operator reads, is `FAILED` with its error (see
///   [`read_dead_letters`]);
/// - any other row is `SENT` when the provider delivered its message (its
///   channel, recipient and body) and [`WAITING`] when it did not, whatever
///   status, lease, claim or cursor the case keeps, but for two marks held
///   against the world: a row whose `status` says `SENT` and whose message
///   was never delivered is [`MARKED_SENT`], and one whose `status` says
///   `CANCELLED` is [`CANCELLED`] with its reason (`last_error`): withdrawn,
///   chapter 9's end state for a message its recipient no longer wants.
///
/// Dead letters kept apart from the outbox come last. A scenario that
/// never opened its database left no rows.
pub fn read_ledger(dir: &Path, history: &History) -> Result<Vec<Queued>> {
    let path = dir.join(crate::scenario::APP_DB);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let conn = Connection::open(&path)
        .with_context(|| format!("could not open the service's database {}", path.display()))?;
    // The case's own mark, where it keeps chapter 3's status, is held
    // against the world: a row marked sent must have been delivered.
    let reasoned = "SELECT channel, recipient, body, status, last_error FROM outbox ORDER BY id";
    let marked = "SELECT channel, recipient, body, status, NULL FROM outbox ORDER BY id";
    let sql = "SELECT channel, recipient, body, '', NULL FROM outbox ORDER BY id";
    let mut stmt = conn
        .prepare(reasoned)
        .or_else(|_| conn.prepare(marked))
        .or_else(|_| conn.prepare(sql))
        .with_context(|| format!("the service's database does not answer `{sql}`"))?;
    let queued = stmt
        .query_map([], |row| {
            let status: Option<String> = row.get(3).ok().flatten();
            let status = status.unwrap_or_default();
            let mark = if status.eq_ignore_ascii_case("SENT") {
                Mark::Sent
            } else if status.eq_ignore_ascii_case(CANCELLED) {
                let reason: Option<String> = row.get(4).ok().flatten();
                Mark::Cancelled(reason.filter(|r| !r.trim().is_empty()))
            } else {
                Mark::None
            };
            Ok((
                Message {
                    channel: row.get(0)?,
                    recipient: row.get(1)?,
                    body: row.get(2)?,
                },
                mark,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
        .with_context(|| format!("could not read `{sql}` from the service's database"))?;
    let mut dead = read_dead_letters(&conn)?;
    let mut delivered: Vec<Message> = history
        .deliveries
        .iter()
        .filter(|d| d.outcome == Outcome::Delivered)
        .map(|d| Message {
            channel: d.channel.clone(),
            recipient: d.recipient.clone(),
            body: d.body.clone(),
        })
        .collect();
    let mut ledger: Vec<Queued> = queued
        .into_iter()
        .map(|(message, mark)| {
            let (status, error) = if let Some(i) = dead.iter().position(|d| d.0 == message) {
                ("FAILED", dead.remove(i).1)
            } else if let Some(i) = delivered.iter().position(|d| *d == message) {
                delivered.remove(i);
                ("SENT", None)
            } else {
                match mark {
                    Mark::Sent => (MARKED_SENT, None),
                    Mark::Cancelled(reason) => (CANCELLED, reason),
                    Mark::None => (WAITING, None),
                }
            };
            Queued {
                channel: message.channel,
                recipient: message.recipient,
                body: message.body,
                status: status.to_string(),
                error,
            }
        })
        .collect();
    // A dead letter the case keeps apart from the outbox (moved to a table
    // of its own) is a row of the ledger all the same.
    ledger.extend(dead.into_iter().map(|(message, error)| Queued {
        channel: message.channel,
        recipient: message.recipient,
        body: message.body,
        status: "FAILED".to_string(),
        error,
    }));
    Ok(ledger)
}

/// [`read_ledger`], each row named by `subject` for the shared invariants.
pub fn read_outbox(
    dir: &Path,
    history: &History,
    subject: impl Fn(&Queued) -> String,
) -> Result<Vec<Row>> {
    Ok(read_ledger(dir, history)?
        .into_iter()
        .map(|q| Row {
            subject: subject(&q),
            message: Some((q.channel.clone(), q.recipient.clone(), q.body.clone())),
            status: q.status,
            error: q.error,
            wrong: None,
        })
        .collect())
}

/// What a case's own `status` says of a row that was not delivered.
enum Mark {
    None,
    Sent,
    /// Withdrawn, with its reason, if one is kept.
    Cancelled(Option<String>),
}

/// One row of the outbox, as the contract places it.
#[derive(Clone, Debug)]
pub struct Queued {
    pub channel: String,
    pub recipient: String,
    pub body: String,
    /// `SENT`, `FAILED` (a dead letter), [`CANCELLED`], [`MARKED_SENT`] or
    /// [`WAITING`].
    pub status: String,
    /// A dead letter's error, or a withdrawn row's reason.
    pub error: Option<String>,
}

impl Queued {
    /// "email dana@example.com": its channel and recipient.
    pub fn key(&self) -> String {
        format!("{} {}", self.channel, self.recipient)
    }

    /// "dana@example.com (email)", as the generated worlds name a person.
    pub fn label(&self) -> String {
        format!("{} ({})", self.recipient, self.channel)
    }
}

/// Which answer a dead letter's error keeps, in the provider's own words:
/// "503", "429", "refused", "no answer", "dispatcher lost" (chapter 6's
/// sweep), "another error" or "no error kept". A dead letter must keep the
/// last word it got, so which one it keeps is part of how a message ended.
pub fn answer_kind(error: Option<&str>) -> &'static str {
    let Some(error) = error else {
        return "no error kept";
    };
    let error = error.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| error.contains(w));
    if has(&["dispatcher"]) {
        "dispatcher lost"
    } else if has(&["429"]) {
        "429"
    } else if has(&["rejected for good", "422"]) {
        "refused"
    } else if has(&["no answer", "timed out", "timeout"]) {
        "no answer"
    } else if has(&["503", "unavailable"]) {
        "503"
    } else {
        "another error"
    }
}

/// The words, in [`answer_kind`]'s terms, a dead letter's error may use
/// for what ended its message, read from the world after its last attempt:
/// - "dispatcher lost" alone, when the process sending it died before it
///   recorded any answer (an abort with no commit after the send), or a
///   poison send to the same recipient killed a sender after it;
/// - "no answer", when the caller saw a timeout;
/// - else the provider's answer: "503" (or "no answer": a hung provider
///   fails a send and never answers), "429" or "refused", and "no answer"
///   beside it when a later request to the recipient was lost on its way;
/// - and "dispatcher lost" beside either of those when any process died,
///   or any commit failed, after the attempt: the sweep may then have
///   charged a claim that stranded with no send (chapter 6).
///
/// `None` when the message reached no provider, was delivered, or its
/// answer's record failed (whether the service kept it anyway is its own
/// business).
///
/// `sends` is [`History::sends`], read once for every dead letter.
pub fn last_answers(
    history: &History,
    sends: &BTreeMap<usize, &Delivery>,
    (channel, recipient, body): (&str, &str, &str),
) -> Option<Vec<&'static str>> {
    const LOST: &str = "dispatcher lost";
    let last = sends
        .iter()
        .rfind(|(_, d)| d.channel == channel && d.recipient == recipient && d.body == body)
        .map(|(&i, &d)| (i, d));
    let (at, d) = last?;
    let after = &history.events[at + 1..];
    if after
        .iter()
        .any(|e| e.kind == Kind::Crash && e.subject.as_deref() == Some(recipient))
    {
        return Some(vec![LOST]);
    }
    let mut answer = None;
    // Its own process's next word on it: a timeout right after the send,
    // an abort before any commit recorded the answer, or that commit.
    for (k, e) in after.iter().filter(|e| e.process == d.process).enumerate() {
        match e.kind {
            Kind::Timeout if k == 0 => {
                answer = Some("no answer");
                break;
            }
            Kind::Crash | Kind::Panic => return Some(vec![LOST]),
            Kind::Commit => break,
            Kind::CommitFailed => return None,
            _ => {}
        }
    }
    let mut words = match (answer, d.outcome) {
        (Some(said), _) => vec![said],
        (None, Outcome::Delivered | Outcome::Deduplicated) => return None,
        (None, Outcome::Rejected) => vec!["refused"],
        (None, Outcome::Failed) if d.limited => vec!["429"],
        // A provider that hangs fails the send and never answers: the
        // world records no timeout for it.
        (None, Outcome::Failed) => vec!["503", "no answer"],
    };
    // A later request lost on its way never reached the provider.
    let lost_request = after
        .iter()
        .any(|e| e.kind == Kind::Timeout && e.subject.as_deref() == Some(recipient));
    if lost_request && !words.contains(&"no answer") {
        words.push("no answer");
    }
    let stranded = after.iter().any(|e| {
        matches!(
            e.kind,
            Kind::Crash | Kind::Panic | Kind::CommitFailed | Kind::Start
        )
    });
    if stranded {
        words.push(LOST);
    }
    Some(words)
}

/// Whether a dead letter's error, of this [`answer_kind`], names another
/// answer than those that may have ended its message ([`last_answers`]):
/// an operator reading it would mend the wrong thing. An error in the
/// service's own words names no answer, and passes.
pub fn names_another_answer(kind: &str, ended: &[&str]) -> bool {
    let answers = ["503", "429", "refused", "no answer", "dispatcher lost"];
    answers.contains(&kind) && !ended.contains(&kind)
}

/// How a row the contract cannot place is called: neither delivered nor
/// a dead letter.
pub const WAITING: &str = "waiting";

/// A row withdrawn before it went out (its `status` is `CANCELLED`): chapter
/// 9's end state for a message its recipient turned off while it waited.
pub const CANCELLED: &str = "CANCELLED";

/// A row the case marks sent (its `status` is `SENT`, or its `sent` flag is
/// set) whose message never reached the provider: lost for good, since no
/// relay or sweep will look at it again.
pub const MARKED_SENT: &str = "marked sent, never delivered";

/// One message as the provider and an operator see it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Message {
    channel: String,
    recipient: String,
    body: String,
}

/// The dead letters an operator reads, with the error kept with each: the
/// view `dead_letters (channel, recipient, body, error)` when the case
/// declares one (a design that keeps its progress elsewhere says there
/// where its dead letters are), else the outbox's `FAILED` rows with their
/// `last_error`, as the shipped cases keep them.
fn read_dead_letters(conn: &Connection) -> Result<Vec<(Message, Option<String>)>> {
    let declared: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'dead_letters'",
            [],
            |row| row.get(0),
        )
        .context("could not read the service's schema")?;
    let sql = if declared {
        "SELECT channel, recipient, body, error FROM dead_letters"
    } else {
        "SELECT channel, recipient, body, last_error FROM outbox WHERE status = 'FAILED' ORDER BY id"
    };
    let mut stmt = conn
        .prepare(sql)
        .with_context(|| format!("the service's database does not answer `{sql}`"))?;
    let rows = stmt
        .query_map([], |row| {
            Ok((
                Message {
                    channel: row.get(0)?,
                    recipient: row.get(1)?,
                    body: row.get(2)?,
                },
                row.get::<_, Option<String>>(3)?
                    .filter(|e| !e.trim().is_empty()),
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
        .with_context(|| format!("could not read `{sql}` from the service's database"))?;
    Ok(rows)
}

/// Reads one number from the service's database, if the query returns a row.
pub fn read_number(dir: &Path, sql: &str) -> Result<Option<i64>> {
    let path = dir.join(crate::scenario::APP_DB);
    let conn = Connection::open(&path)
        .with_context(|| format!("could not open the service's database {}", path.display()))?;
    conn.query_row(sql, [], |row| row.get(0))
        .optional()
        .with_context(|| format!("could not read `{sql}` from the service's database"))
}
