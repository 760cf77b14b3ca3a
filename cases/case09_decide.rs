//! Case 09: deciding who hears what, and when.
//!
//! People hear about their events in the app's inbox, by email and by push.
//! They can turn either channel off for each kind of notification, and a
//! phone buzzing at night is unwelcome. Publishing a notification writes
//! the inbox row and its outbox rows in one transaction; the dispatcher of
//! chapters 2 to 5 sends them (claimed, keyed, sent with no transaction
//! open, retried with backoff). `notify run 9` shows who got what, and at
//! what time on their own clock; chapters/09-decide-preferences-and-quiet-hours.md
//! explains what is wrong.

use lab::clock::{MINUTE, SECOND};
use lab::{Clock, Db, Email, Providers, Result, SendError};
use serde::Deserialize;

/// The service's tables. A person has an address, a phone, and the time
/// zone their phone is set to. A missing row in `preferences` means on.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS people (
        id        TEXT PRIMARY KEY,
        email     TEXT NOT NULL,
        device    TEXT NOT NULL,
        time_zone TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS preferences (
        person  TEXT NOT NULL REFERENCES people (id),
        kind    TEXT NOT NULL,
        channel TEXT NOT NULL CHECK (channel IN ('email', 'push')),
        enabled INTEGER NOT NULL,
        PRIMARY KEY (person, kind, channel)
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
                        CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'FAILED', 'CANCELLED')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL DEFAULT 0,
        last_error      TEXT,
        claimed_by      TEXT,
        claimed_at      INTEGER
    );
";

/// Every channel a notification can go out on, besides the inbox.
const CHANNELS: [&str; 2] = ["email", "push"];

/// How many rows one wake-up of the dispatcher claims.
const BATCH: i64 = 50;

/// How long a row waits after a failed send (chapter 5).
const RETRY_AFTER: [i64; 3] = [5 * SECOND, 30 * SECOND, 5 * MINUTE];

/// Something a person should hear about.
#[derive(Deserialize)]
pub struct Notice {
    /// Who hears about it: a row of `people`.
    pub person: String,
    /// What happened, e.g. `date_chosen` or `security_alert`.
    pub kind: String,
    /// What the notification says.
    pub text: String,
}

/// A person turning a channel on or off for one kind of notification.
#[derive(Deserialize)]
pub struct Preference {
    pub person: String,
    pub kind: String,
    pub channel: String,
    pub enabled: bool,
}

/// Puts the notification in the person's inbox and queues its delivery on
/// every channel, in one transaction.
pub fn publish(db: &mut Db, _providers: &Providers, clock: &Clock, notice: &Notice) -> Result<()> {
    let tx = db.transaction()?;
    let (address, device): (String, String) = tx.query_row(
        "SELECT email, device FROM people WHERE id = ?1",
        [&notice.person],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    tx.execute(
        "INSERT INTO notifications (person, kind, text) VALUES (?1, ?2, ?3)",
        (&notice.person, &notice.kind, &notice.text),
    )?;
    let notification = tx.last_insert_rowid();
    for channel in CHANNELS {
        let recipient = if channel == "push" { &device } else { &address };
        tx.execute(
            "INSERT INTO outbox (notification, channel, recipient, body, next_attempt_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            (notification, channel, recipient, &notice.text, clock.now()?),
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// Records a person's choice for one kind and channel.
pub fn set_preference(db: &mut Db, _email: &Email, change: &Preference) -> Result<()> {
    db.execute(
        "INSERT INTO preferences (person, kind, channel, enabled) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (person, kind, channel) DO UPDATE SET enabled = excluded.enabled",
        (
            &change.person,
            &change.kind,
            &change.channel,
            change.enabled,
        ),
    )?;
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

/// Wakes every minute. Claims the rows that are due, sends each with no
/// transaction open, and records each result in a short transaction.
pub fn dispatch(db: &mut Db, providers: &Providers, clock: &Clock) -> Result<()> {
    let now = clock.now()?;
    for row in claim(db, now)? {
        let provider = providers.channel(&row.channel)?;
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
/// FAILED when no attempt is left (chapter 5).
fn record(db: &mut Db, row: &Claimed, sent: Result<(), SendError>, now: i64) -> Result<()> {
    let attempts = row.attempts + 1;
    match sent {
        Ok(()) => finish(db, row, "SENT", attempts, None),
        Err(err) => match RETRY_AFTER.get(row.attempts as usize) {
            Some(wait) if !err.is_permanent() => {
                let later = now + (*wait).max(err.retry_after_ms().unwrap_or(0));
                retry_at(db, row, attempts, later, err.to_string())
            }
            _ => finish(db, row, "FAILED", attempts, Some(&err.to_string())),
        },
    }
}

/// Ends a claimed row: SENT, or FAILED with its reason.
fn finish(db: &Db, row: &Claimed, status: &str, attempts: i64, error: Option<&str>) -> Result<()> {
    db.execute(
        "UPDATE outbox SET status = ?3, attempts = ?4, last_error = coalesce(?5, last_error)
          WHERE id = ?1 AND claimed_by = ?2",
        (row.id, dispatcher(), status, attempts, error),
    )?;
    Ok(())
}

/// Hands a claimed row back after a failed attempt, due again at `at`.
fn retry_at(db: &Db, row: &Claimed, attempts: i64, at: i64, error: String) -> Result<()> {
    db.execute(
        "UPDATE outbox
            SET status = 'PENDING', attempts = ?3, next_attempt_at = ?4,
                last_error = ?5, claimed_by = NULL, claimed_at = NULL
          WHERE id = ?1 AND claimed_by = ?2",
        (row.id, dispatcher(), attempts, at, error),
    )?;
    Ok(())
}

lab::serve!(schema: SCHEMA, ops: [publish, set_preference, dispatch]);
