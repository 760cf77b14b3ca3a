//! The parent's side of the world: reading back what a scenario's
//! processes recorded in `world.db` (see [`crate::world`]).

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
                let outcome: String = row.get(5)?;
                let outcome = Outcome::parse(&outcome);
                Ok(Delivery {
                    process: row.get(0)?,
                    channel: row.get(1)?,
                    recipient: row.get(2)?,
                    body: row.get(3)?,
                    html: row.get(7)?,
                    key: row.get(4)?,
                    outcome,
                    at_ms: row.get(6)?,
                    began_ms: row.get(8)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
            .context("could not read the deliveries from the world")?;
        let events = conn
            .prepare(
                "SELECT process, kind, op, nth, subject, text, elapsed, writes
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

/// The service's outbox as it was left, in the order of its ids: each row
/// named by `subject` (an SQL expression over the outbox's columns, e.g.
/// `recipient || ' (' || channel || ')'`), with its status and the error it
/// keeps. A scenario that never opened its database left no rows.
pub fn read_outbox(dir: &Path, subject: &str) -> Result<Vec<Row>> {
    let path = dir.join(crate::scenario::APP_DB);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let conn = Connection::open(&path)
        .with_context(|| format!("could not open the service's database {}", path.display()))?;
    let sql = format!("SELECT {subject}, status, last_error FROM outbox ORDER BY id");
    let mut stmt = conn
        .prepare(&sql)
        .with_context(|| format!("the service's database does not answer `{sql}`"))?;
    let rows = stmt
        .query_map([], |row| {
            Ok(Row {
                subject: row.get(0)?,
                status: row.get(1)?,
                error: row.get::<_, Option<String>>(2)?.filter(|e| !e.is_empty()),
            })
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
