//! Case 05, reference solution: retry, back off, dead-letter.
//!
//! A failed send is not the end of a row. After a failure the row goes back
//! to PENDING with `next_attempt_at` pushed out by a growing gap: 5 s after
//! the first failure, 30 s after the second, 5 min after the third. When
//! the fourth attempt fails too, the row is dead-lettered: FAILED, with the
//! provider's error kept for whoever looks at it. A permanent rejection (a
//! 4xx such as 400, 404 or 422) is dead-lettered at once: no retry can
//! change the provider's mind. A 429 is a 4xx too, but transient: it is
//! retried like a 503, never sooner than its `Retry-After`.

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
}

/// Wakes every 2 s. Claims the rows that are due in one short statement,
/// sends each with no transaction open, and records each result in a short
/// transaction of its own.
pub fn dispatch(db: &mut Db, providers: &Providers, clock: &Clock) -> Result<()> {
    let now = clock.now()?;
    for row in claim(db, now)? {
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
          RETURNING id, channel, recipient, body, attempts",
        )?
        .query_map((dispatcher(), now, BATCH), |row| {
            Ok(Claimed {
                id: row.get(0)?,
                channel: row.get(1)?,
                recipient: row.get(2)?,
                body: row.get(3)?,
                attempts: row.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// Records how a send went: SENT, back to PENDING for a later attempt, or
/// FAILED when no attempt is left (the dead letter, its error kept).
fn record(db: &mut Db, row: &Claimed, sent: Result<(), SendError>, now: i64) -> Result<()> {
    let attempts = row.attempts + 1;
    match sent {
        Ok(()) => db.execute(
            "UPDATE outbox SET status = 'SENT', attempts = ?3
              WHERE id = ?1 AND claimed_by = ?2",
            (row.id, dispatcher(), attempts),
        )?,
        Err(err) => match RETRY_AFTER.get(row.attempts as usize) {
            // A 5xx or no answer: the provider may take it later.
            Some(wait) if !err.is_permanent() => db.execute(
                "UPDATE outbox
                    SET status = 'PENDING', attempts = ?3, next_attempt_at = ?4,
                        last_error = ?5, claimed_by = NULL, claimed_at = NULL
                  WHERE id = ?1 AND claimed_by = ?2",
                (row.id, dispatcher(), attempts, now + later(*wait, &err), err.to_string()),
            )?,
            // Refused for good, or out of attempts: the dead letter.
            _ => db.execute(
                "UPDATE outbox SET status = 'FAILED', attempts = ?3, last_error = ?4
                  WHERE id = ?1 AND claimed_by = ?2",
                (row.id, dispatcher(), attempts, err.to_string()),
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

lab::serve!(schema: SCHEMA, ops: [publish, dispatch]);
