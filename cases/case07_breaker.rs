//! Case 07: the dispatcher, through a provider outage.
//!
//! People hear about their events in the app's inbox, and by email or by
//! push, whichever they chose. Publishing a notification writes the inbox
//! row and its outbox row in one transaction. The dispatcher wakes every
//! 2 s: it claims the rows that are due, sends each one under its own key
//! with no transaction open, and records the result. A failed send is
//! retried after 5 s, 30 s and 5 min; when the last retry fails too, the row
//! is dead-lettered (FAILED, its error kept), and a message the provider
//! refuses for good is dead-lettered at once. A sweep every minute hands
//! back claims older than 5 min, fenced so a late dispatcher cannot
//! overwrite them. `notify run 7` shows what a 10-minute email outage does
//! to all this; chapters/07-circuit-breaker.md explains why.

use lab::clock::{MINUTE, SECOND};
use lab::{Clock, Db, Email, Providers, Result, SendError};
use serde::Deserialize;

/// The service's tables. An outbox row is PENDING until a dispatcher claims
/// it (PROCESSING, with the dispatcher's name and the claim's time), then
/// SENT, or FAILED with the error that ended it (the dead letter).
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS people (
        id      TEXT PRIMARY KEY,
        email   TEXT NOT NULL,
        device  TEXT,
        channel TEXT NOT NULL CHECK (channel IN ('email', 'push'))
    );
    CREATE TABLE IF NOT EXISTS notifications (
        id     INTEGER PRIMARY KEY,
        person TEXT NOT NULL REFERENCES people (id),
        kind   TEXT NOT NULL,
        text   TEXT NOT NULL,
        seen   INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS outbox (
        id              INTEGER PRIMARY KEY,
        notification    INTEGER NOT NULL REFERENCES notifications (id),
        channel         TEXT NOT NULL CHECK (channel IN ('email', 'push')),
        recipient       TEXT NOT NULL,
        body            TEXT NOT NULL,
        status          TEXT NOT NULL DEFAULT 'PENDING'
                        CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'FAILED')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL DEFAULT 0,
        last_error      TEXT,
        claimed_by      TEXT,
        claimed_at      INTEGER
    );
";

/// How many rows one wake-up of the dispatcher claims.
const BATCH: i64 = 50;

/// How long a row waits after a failed send before it is tried again: after
/// the first failure, the second, the third. When the attempt after the
/// last wait fails too, the row is dead-lettered.
const RETRY_AFTER: [i64; 3] = [5 * SECOND, 30 * SECOND, 5 * MINUTE];

/// A claim older than this belongs to a dispatcher that died: no healthy
/// send takes anywhere near as long.
const ORPHANED_AFTER: i64 = 5 * MINUTE;

/// Attempts a row gets in all: the first, and one after each wait.
const ATTEMPTS: i64 = RETRY_AFTER.len() as i64 + 1;

/// Something a person should hear about.
#[derive(Deserialize)]
pub struct Notice {
    /// Who hears about it: a row of `people`.
    pub person: String,
    /// What happened, e.g. `date_chosen` or `event_cancelled`.
    pub kind: String,
    /// What the notification says.
    pub text: String,
}

/// Puts the notification in the person's inbox and queues its delivery on
/// the channel they chose, in one transaction.
pub fn publish(db: &mut Db, _email: &Email, notice: &Notice) -> Result<()> {
    let tx = db.transaction()?;
    let (address, device, channel): (String, Option<String>, String) = tx.query_row(
        "SELECT email, device, channel FROM people WHERE id = ?1",
        [&notice.person],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?;
    tx.execute(
        "INSERT INTO notifications (person, kind, text) VALUES (?1, ?2, ?3)",
        (&notice.person, &notice.kind, &notice.text),
    )?;
    let notification = tx.last_insert_rowid();
    let recipient = match channel.as_str() {
        "push" => device.unwrap_or(address),
        _ => address,
    };
    tx.execute(
        "INSERT INTO outbox (notification, channel, recipient, body) VALUES (?1, ?2, ?3, ?4)",
        (notification, &channel, &recipient, &notice.text),
    )?;
    tx.commit()?;
    Ok(())
}

/// An outbox row this dispatcher has claimed.
struct Claimed {
    id: i64,
    channel: String,
    recipient: String,
    body: String,
    /// Attempts made before this one.
    attempts: i64,
    /// When this claim was made: with the dispatcher's name, the claim's token.
    claimed_at: i64,
}

/// Wakes every 2 s. Claims the rows that are due in one short statement,
/// sends each with no transaction open, and records each result in a short
/// transaction of its own.
pub fn dispatch(db: &mut Db, providers: &Providers, clock: &Clock) -> Result<()> {
    let now = clock.now()?;
    for mut row in claim(db, now)? {
        // The sweep measures a claim's age, and the rows of a batch are sent
        // one after another: renew this row's claim time just before its
        // send, so the age is this send's, not the batch's. A row the sweep
        // already handed on is no longer ours: skip it.
        if !renew(db, &mut row, clock.now()?)? {
            continue;
        }
        let provider = providers.channel(&row.channel)?;
        // The key names the row: a repeat the provider already delivered is
        // recognised and not delivered again.
        let sent = provider.send_with_key(&format!("outbox/{}", row.id), &row.recipient, &row.body);
        record(db, &row, sent, clock.now()?)?;
    }
    Ok(())
}

/// This process's name in `claimed_by`.
fn dispatcher() -> String {
    format!("dispatcher-{}", std::process::id())
}

/// Claims up to a batch of due rows, oldest due first.
fn claim(db: &mut Db, now: i64) -> Result<Vec<Claimed>> {
    let mut rows = db
        .prepare(
            "UPDATE outbox
                SET status = 'PROCESSING', claimed_by = ?1, claimed_at = ?2
              WHERE id IN (SELECT id FROM outbox
                            WHERE status = 'PENDING' AND next_attempt_at <= ?2
                            ORDER BY next_attempt_at, id LIMIT ?3)
          RETURNING id, channel, recipient, body, attempts, claimed_at",
        )?
        .query_map((dispatcher(), now, BATCH), |row| {
            Ok(Claimed {
                id: row.get(0)?,
                channel: row.get(1)?,
                recipient: row.get(2)?,
                body: row.get(3)?,
                attempts: row.get(4)?,
                claimed_at: row.get(5)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// The fence every result is recorded under: only a claim that is still
/// ours may change the row, since the sweep may have handed it on.
const OURS: &str = "id = ?1 AND status = 'PROCESSING' AND claimed_by = ?2 AND claimed_at = ?3";

/// Moves the row's claim time to `now`, under the fence, and keeps the new
/// time as the claim's token. False when the claim is no longer ours.
fn renew(db: &mut Db, row: &mut Claimed, now: i64) -> Result<bool> {
    let renewed = db.execute(
        &format!("UPDATE outbox SET claimed_at = ?4 WHERE {OURS}"),
        (row.id, dispatcher(), row.claimed_at, now),
    )?;
    row.claimed_at = now;
    Ok(renewed == 1)
}

/// Records how a send went: SENT, back to PENDING for a later attempt, or
/// FAILED when no attempt is left (the dead letter, its error kept).
fn record(db: &mut Db, row: &Claimed, sent: Result<(), SendError>, now: i64) -> Result<()> {
    let attempts = row.attempts + 1;
    let (id, me, claimed_at) = (row.id, dispatcher(), row.claimed_at);
    match sent {
        Ok(()) => db.execute(
            &format!("UPDATE outbox SET status = 'SENT', attempts = ?4 WHERE {OURS}"),
            (id, &me, claimed_at, attempts),
        )?,
        Err(err) => match RETRY_AFTER.get(row.attempts as usize) {
            // A 5xx or no answer: the provider may take it later.
            Some(wait) if !err.is_permanent() => db.execute(
                &format!(
                    "UPDATE outbox
                        SET status = 'PENDING', attempts = ?4, next_attempt_at = ?5,
                            last_error = ?6, claimed_by = NULL, claimed_at = NULL
                      WHERE {OURS}"
                ),
                (
                    id,
                    &me,
                    claimed_at,
                    attempts,
                    now + later(*wait, &err),
                    err.to_string(),
                ),
            )?,
            // Refused for good, or out of attempts: the dead letter.
            _ => db.execute(
                &format!(
                    "UPDATE outbox SET status = 'FAILED', attempts = ?4, last_error = ?5
                      WHERE {OURS}"
                ),
                (id, &me, claimed_at, attempts, err.to_string()),
            )?,
        },
    };
    Ok(())
}

/// How long a failed row waits: its gap, unless the provider asked for
/// longer. A 429 (too many requests) is a 4xx, yet transient, and its
/// `Retry-After` says when a new request is welcome: never sooner.
fn later(gap: i64, err: &SendError) -> i64 {
    gap.max(err.retry_after_ms().unwrap_or(0))
}

/// Runs every minute: hands back rows claimed more than 5 min ago, whose
/// dispatcher died mid-send. The lost attempt counts: a row that has used
/// its last one is dead-lettered, so a row that kills its dispatcher every
/// time cannot loop forever. The keys make a repeat harmless.
pub fn sweep(db: &mut Db, _providers: &Providers, clock: &Clock) -> Result<()> {
    let orphaned_before = clock.now()? - ORPHANED_AFTER;
    let tx = db.transaction()?;
    tx.execute(
        "UPDATE outbox
            SET status = 'FAILED', attempts = attempts + 1,
                last_error = 'its dispatcher was lost during attempt ' || (attempts + 1),
                claimed_by = NULL, claimed_at = NULL
          WHERE status = 'PROCESSING' AND claimed_at < ?1 AND attempts + 1 >= ?2",
        (orphaned_before, ATTEMPTS),
    )?;
    tx.execute(
        "UPDATE outbox
            SET status = 'PENDING', attempts = attempts + 1,
                last_error = 'its dispatcher was lost during attempt ' || (attempts + 1),
                claimed_by = NULL, claimed_at = NULL
          WHERE status = 'PROCESSING' AND claimed_at < ?1",
        [orphaned_before],
    )?;
    tx.commit()?;
    Ok(())
}

lab::serve!(schema: SCHEMA, ops: [publish, dispatch, sweep]);
