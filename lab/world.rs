//! The world: what the outside world saw, kept outside the service's database.
//!
//! Every email a provider accepted, and every step of the story (calls,
//! commits, crashes), is written to `world.db` in the scenario's folder. It is
//! a separate SQLite file with its own connection, so a rollback in `app.db`
//! cannot undo it, exactly as a rollback cannot recall a real email. Each
//! record is its own committed transaction, so it survives a process abort.
//!
//! This module is what both sides share: the file's schema, the records'
//! types, and the [`Recorder`] that writes them (a case process records
//! its story; the parent sets a scenario's clock). The parent reads them
//! back with [`crate::history`].

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::output::Output;
use crate::scenario::{Moment, WORLD_DB};

const WORLD_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS deliveries (
        id        INTEGER PRIMARY KEY,
        process   INTEGER NOT NULL,
        channel   TEXT NOT NULL,
        recipient TEXT NOT NULL,
        body      TEXT NOT NULL,
        html      TEXT,
        key       TEXT,
        outcome   TEXT NOT NULL,
        at_ms     INTEGER NOT NULL,
        began_ms  INTEGER
    );
    CREATE INDEX IF NOT EXISTS deliveries_by_key ON deliveries (key, at_ms);
    CREATE TABLE IF NOT EXISTS events (
        seq     INTEGER PRIMARY KEY,
        process INTEGER NOT NULL,
        lane    TEXT NOT NULL,
        kind    TEXT NOT NULL,
        op      TEXT,
        nth     INTEGER,
        subject TEXT,
        text    TEXT NOT NULL,
        elapsed INTEGER,
        writes  TEXT,
        at_ms   INTEGER
    );
    CREATE TABLE IF NOT EXISTS moments (
        seq     INTEGER PRIMARY KEY,
        process INTEGER NOT NULL,
        what    TEXT NOT NULL
    );
";

/// How the world names the moments it records (see [`Moment`]).
const SENDING: &str = "sending";
const ENDED: &str = "ended";
const STEP: &str = "step ";

/// How long a provider remembers an idempotency key, in simulated time.
pub const KEY_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

/// Which column of a timeline an event belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    /// The service's own code: calls, errors, crashes, restarts.
    Service,
    /// The service's database: commits and failed commits.
    Database,
    /// The outside world: what providers accepted.
    Provider,
}

/// What happened, in the words the checks use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A case process started (the first run, or a restart).
    Start,
    /// An operation was called.
    Call,
    /// An operation returned `Ok`.
    Return,
    /// An operation returned an error.
    Error,
    /// A commit reached the database file.
    Commit,
    /// A commit was turned into a rollback by an injected fault.
    CommitFailed,
    /// The process aborted.
    Crash,
    /// A provider accepted a message.
    Send,
    /// A provider accepted a message, but its answer never reached the caller.
    Timeout,
    /// The case panicked.
    Panic,
}

const KINDS: [(Kind, &str); 10] = [
    (Kind::Start, "start"),
    (Kind::Call, "call"),
    (Kind::Return, "return"),
    (Kind::Error, "error"),
    (Kind::Commit, "commit"),
    (Kind::CommitFailed, "commit_failed"),
    (Kind::Crash, "crash"),
    (Kind::Send, "send"),
    (Kind::Timeout, "timeout"),
    (Kind::Panic, "panic"),
];

impl Kind {
    fn name(self) -> &'static str {
        KINDS
            .iter()
            .find(|(k, _)| *k == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }

    pub(crate) fn parse(name: &str) -> Option<Kind> {
        KINDS.iter().find(|(_, n)| *n == name).map(|(k, _)| *k)
    }

    /// The lane a kind of event is drawn in.
    pub fn lane(self) -> Lane {
        match self {
            Kind::Commit | Kind::CommitFailed => Lane::Database,
            Kind::Send | Kind::Timeout => Lane::Provider,
            _ => Lane::Service,
        }
    }
}

/// One line of the story, as recorded by the case process.
#[derive(Clone, Debug, Serialize)]
pub struct Event {
    /// 1 for the first process, 2 for the restart.
    pub process: u32,
    pub kind: Kind,
    /// The operation running when it happened.
    pub op: Option<String>,
    /// For commits: which commit of that operation, counting from 1.
    pub nth: Option<u32>,
    /// Who it is about (an email address), when known.
    pub subject: Option<String>,
    pub text: String,
    /// For returns and errors: the real time the operation took, in µs.
    pub elapsed_us: Option<u64>,
    /// The simulated time it happened, in milliseconds.
    pub at_ms: i64,
    /// For a process's start: what the process printed, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Output>,
    /// For commits: what the transaction wrote, e.g. `insert outbox,
    /// update outbox`: the kind of commit it was, whichever code made it.
    #[serde(skip)]
    pub writes: Option<String>,
}

/// What a provider did with one send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It reached the person: it cannot be recalled.
    Delivered,
    /// Its idempotency key was seen within the window: nothing new was sent.
    Deduplicated,
    /// The provider failed (a 5xx or an outage): nothing was sent; a retry may work.
    Failed,
    /// The provider refused it for good (a 4xx): nothing was sent, and a retry cannot help.
    Rejected,
}

/// How the world stores a failed send that was a 429: read back as
/// [`Outcome::Failed`], with [`Delivery::limited`] set.
pub const LIMITED: &str = "limited";

const OUTCOMES: [(Outcome, &str); 4] = [
    (Outcome::Delivered, "delivered"),
    (Outcome::Deduplicated, "deduplicated"),
    (Outcome::Failed, "failed"),
    (Outcome::Rejected, "rejected"),
];

impl Outcome {
    fn name(self) -> &'static str {
        OUTCOMES
            .iter()
            .find(|(o, _)| *o == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }

    /// The outcome a stored name stands for: a 429 ([`LIMITED`]) is a
    /// failure.
    pub(crate) fn parse(name: &str) -> Outcome {
        OUTCOMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(o, _)| *o)
            .unwrap_or(Outcome::Failed)
    }
}

/// One send a provider accepted.
#[derive(Clone, Debug, Serialize)]
pub struct Delivery {
    pub process: u32,
    pub channel: String,
    pub recipient: String,
    pub body: String,
    /// An email's HTML body, exactly as the provider got it, when the
    /// caller sent one besides the text `body`.
    pub html: Option<String>,
    /// The idempotency key the caller gave, if any.
    pub key: Option<String>,
    pub outcome: Outcome,
    /// A failure that was a 429: the provider is up and asked the caller
    /// to slow down. It fails the send all the same (a retry may work), but
    /// it says nothing against the provider.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub limited: bool,
    /// Simulated time of the send, in milliseconds: when its answer came.
    pub at_ms: i64,
    /// Simulated time the send began, in milliseconds: `at_ms` less the
    /// time a slow provider took over it.
    #[serde(skip)]
    pub began_ms: i64,
    /// What identifies the message this send carried, whatever its
    /// attempts said: its text, unless the chapter's world names it
    /// otherwise (see `Explorer::message_of`).
    #[serde(skip)]
    pub message: String,
}

/// The scenario's simulated clock: milliseconds since it began, in the
/// file `world.clock` of its folder (8 bytes), mapped into every process that
/// reads or moves it. A case process asks the time several times each
/// wake-up (its schedule, the case, SQLite's "now") and moves it once:
/// kept in the world database, each was a transaction with its locks, a
/// quarter of what an idle wake-up cost. Mapped, a read is a
/// load and a move one atomic add, shared at once by processes that race
/// on the same folder; what a process wrote is in the file even when it is
/// aborted a moment later, so a restart goes on from there.
pub(crate) struct SharedClock {
    map: memmap2::MmapMut,
}

/// The clock's file in a scenario's folder.
const CLOCK_FILE: &str = "world.clock";

impl SharedClock {
    /// Maps the clock of the scenario in `dir`, at 0 when it is new.
    pub(crate) fn open(dir: &Path) -> Result<SharedClock> {
        let path = dir.join(CLOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("could not open the clock at {}", path.display()))?;
        let size = std::mem::size_of::<AtomicI64>() as u64;
        if file.metadata()?.len() < size {
            // Zeros: the clock at 0. Two processes that both do this
            // write the same zeros before either moves it.
            file.set_len(size)
                .with_context(|| format!("could not set up the clock at {}", path.display()))?;
        }
        // SAFETY: the file is the lab's own, in the scenario's private
        // folder, and never shrinks; every process reaches it only
        // through `cell`'s atomic operations.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .len(size as usize)
                .map_mut(&file)
        }
        .with_context(|| format!("could not map the clock at {}", path.display()))?;
        Ok(SharedClock { map })
    }

    fn cell(&self) -> &AtomicI64 {
        // SAFETY: the mapping is 8 bytes long and page-aligned, so aligned
        // for an AtomicI64, and lives as long as `self`.
        unsafe { &*(self.map.as_ptr() as *const AtomicI64) }
    }

    /// The simulated time now, in milliseconds.
    pub(crate) fn now(&self) -> i64 {
        self.cell().load(Ordering::SeqCst)
    }

    /// Moves the clock `ms` milliseconds on.
    fn advance(&self, ms: i64) {
        self.cell().fetch_add(ms, Ordering::SeqCst);
    }
}

/// The simulated time now in the scenario in `dir`, as its clock reads.
pub fn read_clock(dir: &Path) -> Result<i64> {
    Ok(SharedClock::open(dir)?.now())
}

pub(crate) fn open(dir: &Path) -> Result<Connection> {
    let path = dir.join(WORLD_DB);
    let conn = Connection::open(&path)
        .with_context(|| format!("could not open the world at {}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
        .and_then(|_| conn.execute_batch(WORLD_SCHEMA))
        .with_context(|| format!("could not set up the world at {}", path.display()))?;
    Ok(conn)
}

/// The case process's pen: writes events and deliveries to the world.
pub struct Recorder {
    conn: Connection,
    clock: SharedClock,
    process: u32,
    /// When the send being recorded began, if a slow provider moved the
    /// clock since: see [`Recorder::began`].
    began: Option<i64>,
    /// Whether the next send recorded was answered 429 (see [`Recorder::limited`]).
    limited: bool,
    op: Option<String>,
    subject: Option<String>,
    /// A commit SQLite has accepted and the world has not recorded yet
    /// (see [`Recorder::hold_commit`]).
    held: Option<Held>,
}

/// A commit waiting to be recorded: its operation, its number, what its
/// transaction wrote, when, and whether the process aborts right after it.
struct Held {
    op: Option<String>,
    nth: u32,
    writes: String,
    at_ms: i64,
    crash: bool,
}

impl Recorder {
    /// Opens the world in `dir` for case process number `process`.
    pub fn open(dir: &Path, process: u32) -> Result<Recorder> {
        Ok(Recorder {
            conn: open(dir)?,
            clock: SharedClock::open(dir)?,
            process,
            began: None,
            limited: false,
            op: None,
            subject: None,
            held: None,
        })
    }

    /// Holds a commit of the running operation until it reaches the
    /// database file ([`Recorder::flush_commit`], from SQLite's
    /// write-ahead-log hook), and records the one held before, if it never
    /// got there. A commit whose writes changed no page (an update that
    /// sets what was there) never reaches the file, and is a commit all
    /// the same: it is recorded when the process's next event is, so a
    /// fault can strike it like any other. A commit that wrote nothing at
    /// all (a claim that found no row) is left out.
    pub(crate) fn hold_commit(&mut self, nth: u32, writes: &str, crash: bool) {
        let _ = self.settle_held();
        self.held = Some(Held {
            op: self.op.clone(),
            nth,
            writes: writes.to_string(),
            at_ms: self.clock.now(),
            crash,
        });
    }

    /// Records the held commit, if there is one, as of when it was made;
    /// and aborts the process there when the fault says to crash after it.
    pub(crate) fn flush_commit(&mut self) -> Result<()> {
        let Some(held) = self.held.take() else {
            return Ok(());
        };
        let text = format!(
            "{} commit {}",
            held.op.as_deref().unwrap_or("start-up"),
            held.nth
        );
        let op = std::mem::replace(&mut self.op, held.op);
        let recorded = self.insert_event(
            Kind::Commit,
            Some(held.nth),
            &text,
            None,
            held.at_ms,
            Some(&held.writes),
        );
        if held.crash {
            let _ = self.insert_event(Kind::Crash, None, "process aborted", None, held.at_ms, None);
            std::process::abort();
        }
        self.op = op;
        recorded.map(|_| ())
    }

    /// Sets the operation (and who it is about) that later events belong to.
    pub fn enter(&mut self, op: Option<&str>, subject: Option<&str>) {
        self.op = op.map(str::to_string);
        self.subject = subject.map(str::to_string);
    }

    /// The operation now running, if any.
    pub fn op(&self) -> Option<&str> {
        self.op.as_deref()
    }

    /// Records an event of the current operation.
    pub fn event(&mut self, kind: Kind, nth: Option<u32>, text: &str) -> Result<()> {
        self.timed_event(kind, nth, text, None)
    }

    /// Records an event of the current operation about `subject` (an email
    /// address) rather than the step's own subject.
    pub fn event_about(
        &mut self,
        kind: Kind,
        nth: Option<u32>,
        subject: &str,
        text: &str,
    ) -> Result<()> {
        let step = self.subject.replace(subject.to_string());
        let recorded = self.event(kind, nth, text);
        self.subject = step;
        recorded
    }

    /// Records an event with the real time the operation took, in microseconds.
    pub fn timed_event(
        &mut self,
        kind: Kind,
        nth: Option<u32>,
        text: &str,
        elapsed_us: Option<u64>,
    ) -> Result<()> {
        self.settle_held()?;
        self.insert_event(kind, nth, text, elapsed_us, self.clock.now(), None)
    }

    /// Records a held commit with writes, which came before whatever comes
    /// now; drops one without any (see [`Recorder::hold_commit`]).
    pub(crate) fn settle_held(&mut self) -> Result<()> {
        if self.held.as_ref().is_some_and(|h| h.writes.is_empty()) {
            self.held = None;
        }
        self.flush_commit()
    }

    /// Records one event, with what its transaction wrote when it is a
    /// commit: one statement, so one transaction of the world's.
    fn insert_event(
        &mut self,
        kind: Kind,
        nth: Option<u32>,
        text: &str,
        elapsed_us: Option<u64>,
        at_ms: i64,
        writes: Option<&str>,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO events
                    (process, lane, kind, op, nth, subject, text, elapsed, at_ms, writes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .and_then(|mut insert| {
                insert.execute(params![
                    self.process,
                    format!("{:?}", kind.lane()).to_lowercase(),
                    kind.name(),
                    self.op,
                    nth,
                    self.subject,
                    text,
                    elapsed_us.map(|us| us as i64),
                    at_ms,
                    writes
                ])
            })
            .context("could not record an event in the world")?;
        Ok(())
    }

    /// The simulated time now, in milliseconds.
    pub fn now_ms(&self) -> Result<i64> {
        Ok(self.clock.now())
    }

    /// Moves the simulated clock forward by `ms` milliseconds.
    pub fn advance(&mut self, ms: i64) -> Result<()> {
        self.settle_held()?;
        self.clock.advance(ms);
        Ok(())
    }

    /// Records one send attempt and its event. A send the provider took
    /// (`refused` is `None`) is delivered, unless its key was seen within
    /// [`KEY_WINDOW_MS`]: then it delivers nothing new. The check and the
    /// record are one transaction, so racing processes agree.
    pub fn attempt(
        &mut self,
        channel: &str,
        recipient: &str,
        body: &str,
        key: Option<&str>,
        refused: Option<Outcome>,
    ) -> Result<Outcome> {
        self.attempt_with_html(channel, recipient, body, None, key, refused)
    }

    /// Notes that the next send recorded began at simulated time `at`,
    /// before the provider took its time over it.
    pub fn began(&mut self, at: i64) {
        self.began = Some(at);
    }

    /// Notes that the next send recorded, a failure, was the provider
    /// asking to slow down (a 429) rather than failing: it is up, and
    /// answered. The history keeps the difference ([`Delivery::limited`]).
    pub fn limited(&mut self) {
        self.limited = true;
    }

    /// Records one send attempt as [`Recorder::attempt`] does, with the
    /// HTML body an email carried besides its text.
    pub fn attempt_with_html(
        &mut self,
        channel: &str,
        recipient: &str,
        body: &str,
        html: Option<&str>,
        key: Option<&str>,
        refused: Option<Outcome>,
    ) -> Result<Outcome> {
        self.settle_held()?;
        // The check, the record and its event are one transaction, so
        // racing processes agree, and the world writes once per send.
        self.in_transaction("a send", |this| {
            let now = this.clock.now();
            let seen = match key {
                Some(key) if refused.is_none() => this
                    .conn
                    .prepare_cached(
                        "SELECT 1 FROM deliveries
                         WHERE key = ?1 AND channel = ?2 AND outcome = 'delivered' AND at_ms > ?3",
                    )?
                    .query_row(params![key, channel, now - KEY_WINDOW_MS], |_| Ok(()))
                    .optional()?
                    .is_some(),
                _ => false,
            };
            let outcome = match (refused, seen) {
                (Some(refused), _) => refused,
                (None, true) => Outcome::Deduplicated,
                (None, false) => Outcome::Delivered,
            };
            this.conn
                .prepare_cached(
                    "INSERT INTO deliveries
                        (process, channel, recipient, body, html, key, outcome, at_ms, began_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )?
                .execute(params![
                    this.process,
                    channel,
                    recipient,
                    body,
                    html,
                    key,
                    match std::mem::take(&mut this.limited) {
                        true if outcome == Outcome::Failed => LIMITED,
                        _ => outcome.name(),
                    },
                    now,
                    this.began.take().unwrap_or(now)
                ])?;
            let subject = this.subject.replace(recipient.to_string());
            let text = match outcome {
                Outcome::Delivered => format!("{channel} to {recipient}: {body}"),
                Outcome::Deduplicated => format!(
                    "{channel} to {recipient}: repeat of key {}, nothing sent",
                    key.unwrap_or("")
                ),
                Outcome::Failed => format!("{channel} to {recipient}: provider failed"),
                Outcome::Rejected => format!("{channel} to {recipient}: rejected for good"),
            };
            let recorded = this.insert_event(Kind::Send, None, &text, None, now, None);
            this.subject = subject;
            recorded.map(|_| outcome)
        })
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction of the world's, which
    /// commits if `f` succeeds and rolls back if it fails. `what` names
    /// what is recorded, for the error.
    fn in_transaction<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .with_context(|| format!("could not lock the world to record {what}"))?;
        let recorded = f(self);
        let ended = match recorded {
            Ok(_) => self.conn.execute_batch("COMMIT"),
            Err(_) => self.conn.execute_batch("ROLLBACK"),
        };
        let value = recorded?;
        ended.with_context(|| format!("could not record {what} in the world"))?;
        Ok(value)
    }

    /// Records that this process has begun a send ([`Moment::Sending`]).
    pub fn record_sending(&mut self) -> Result<()> {
        self.record_moment(self.process, SENDING)
    }

    /// Records that process `process` has ended ([`Moment::Ended`]): the
    /// parent does, once the process has exited, however it ended.
    pub fn record_ended(&mut self, process: u32) -> Result<()> {
        self.record_moment(process, ENDED)
    }

    /// Records that this process begins step `index` of its plan, so that a
    /// restart after a crash knows where the plan stopped.
    pub fn record_step(&mut self, index: usize) -> Result<()> {
        self.record_moment(self.process, &format!("{STEP}{index}"))
    }

    /// The last step process `process` began, if it began any.
    pub fn last_step(&self, process: u32) -> Result<Option<usize>> {
        let whats: Vec<String> = self
            .conn
            .prepare("SELECT what FROM moments WHERE process = ?1 AND what LIKE 'step %'")?
            .query_map([process], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()
            .context("could not read the scenario's steps from the world")?;
        Ok(whats
            .iter()
            .filter_map(|w| w.strip_prefix(STEP)?.parse().ok())
            .max())
    }

    fn record_moment(&mut self, process: u32, what: &str) -> Result<()> {
        self.settle_held()?;
        self.conn
            .prepare_cached("INSERT INTO moments (process, what) VALUES (?1, ?2)")
            .and_then(|mut insert| insert.execute(params![process, what]))
            .context("could not record a moment of the scenario in the world")?;
        Ok(())
    }

    /// Whether `moment` has happened.
    pub fn reached(&self, moment: Moment) -> Result<bool> {
        let (process, what) = match moment {
            Moment::Clock(ms) => return Ok(self.now_ms()? >= ms),
            Moment::Sending(n) => (n, SENDING),
            Moment::Ended(n) => (n, ENDED),
        };
        self.exists(
            "SELECT 1 FROM moments WHERE process = ?1 AND what = ?2",
            params![process, what],
        )
        .context("could not read the scenario's moments from the world")
    }

    /// Whether `sql` finds a row.
    fn exists(&self, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<bool> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut read| read.query_row(params, |_| Ok(())))
            .optional()
            .map(|found| found.is_some())
    }

    /// Whether process `process` has seen operation `op` return, with `Ok`
    /// or an error, at least once.
    pub fn returned(&self, process: u32, op: &str) -> Result<bool> {
        self.exists(
            "SELECT 1 FROM events
              WHERE process = ?1 AND op = ?2 AND kind IN ('return', 'error')",
            params![process, op],
        )
        .context("could not read the scenario's operations from the world")
    }

    /// Whether process `process` died on a send its provider script kills
    /// on (see [`crate::scenario::ProviderScript::crash_on`] and
    /// [`crate::scenario::ProviderScript::crash_first`]), so the world, not
    /// a fault of the lab's, ended it.
    pub fn poisoned(&self, process: u32) -> Result<bool> {
        self.exists(
            "SELECT 1 FROM events
              WHERE process = ?1 AND kind = 'crash' AND subject IS NOT NULL",
            [process],
        )
        .context("could not read the scenario's crashes from the world")
    }

    /// How many processes a send to `recipient` has killed, in every
    /// process of the scenario.
    pub fn kills_of(&self, recipient: &str) -> Result<u32> {
        self.conn
            .prepare_cached("SELECT count(*) FROM events WHERE kind = 'crash' AND subject = ?1")
            .and_then(|mut count| count.query_row([recipient], |row| row.get(0)))
            .context("could not count the crashes in the world")
    }

    /// How many sends to `recipient` on `channel` the provider has seen, in
    /// every process of the scenario.
    pub fn attempts_to(&self, channel: &str, recipient: &str) -> Result<u32> {
        self.conn
            .prepare_cached("SELECT count(*) FROM deliveries WHERE channel = ?1 AND recipient = ?2")
            .and_then(|mut count| count.query_row(params![channel, recipient], |row| row.get(0)))
            .context("could not count the sends in the world")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two processes on one folder share one clock: a move by either is
    /// what the other reads next, and the clock outlives them both.
    #[test]
    fn the_clock_is_shared_and_outlives_its_readers() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = Recorder::open(dir.path(), 1).unwrap();
        let second = Recorder::open(dir.path(), 2).unwrap();
        assert_eq!(first.now_ms().unwrap(), 0);
        first.advance(2_500).unwrap();
        assert_eq!(second.now_ms().unwrap(), 2_500);
        drop(first);
        drop(second);
        assert_eq!(read_clock(dir.path()).unwrap(), 2_500);
        let mut again = Recorder::open(dir.path(), 3).unwrap();
        again.advance(500).unwrap();
        assert_eq!(read_clock(dir.path()).unwrap(), 3_000);
    }
}
