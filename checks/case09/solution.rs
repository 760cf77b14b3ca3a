//! Case 09, reference solution: decide who hears what, and when.
//!
//! Publishing decides. A channel the person turned off for this kind gets
//! no outbox row. A push that falls in the person's quiet hours (22:00 to
//! 08:00 on their own clock) is queued for 08:00 their time, never dropped.
//! A critical kind, a security alert, goes on every channel at once,
//! whatever the preferences and the hour.
//!
//! Hours may pass between the decision and the send. An opt-out made
//! meanwhile wins: it withdraws what waits on that channel as it is made
//! (`CANCELLED`, its reason kept: a withdrawal is no dead letter), and the
//! dispatcher looks again just before each send, for a row it had already
//! claimed. An opt-in made meanwhile brings nothing back: it is for the
//! notices that come after it. A push whose retry would land in quiet hours
//! waits for the morning too.

use jiff::Timestamp;
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

/// Kinds nobody can turn off or delay: they go out at once, everywhere.
const CRITICAL: [&str; 1] = ["security_alert"];

/// Quiet hours, on the person's own clock: from 22:00 to 08:00.
const QUIET_FROM: i8 = 22;
const QUIET_UNTIL: i8 = 8;

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
/// the channels they want, each at the time it may go out, in one
/// transaction.
pub fn publish(db: &mut Db, _providers: &Providers, clock: &Clock, notice: &Notice) -> Result<()> {
    let tx = db.transaction()?;
    let (address, device, zone): (String, String, String) = tx.query_row(
        "SELECT email, device, time_zone FROM people WHERE id = ?1",
        [&notice.person],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?;
    tx.execute(
        "INSERT INTO notifications (person, kind, text) VALUES (?1, ?2, ?3)",
        (&notice.person, &notice.kind, &notice.text),
    )?;
    let notification = tx.last_insert_rowid();
    let critical = CRITICAL.contains(&notice.kind.as_str());
    for channel in CHANNELS {
        if !critical && !wants(&tx, &notice.person, &notice.kind, channel)? {
            continue;
        }
        let recipient = if channel == "push" { &device } else { &address };
        // A push in quiet hours waits for the morning; the rest goes now.
        let due = match quiet_until(clock.utc()?, &zone)? {
            Some(morning) if channel == "push" && !critical => clock.ms_at(morning),
            _ => clock.now()?,
        };
        tx.execute(
            "INSERT INTO outbox (notification, channel, recipient, body, next_attempt_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            (notification, channel, recipient, &notice.text, due),
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// True unless the person turned `channel` off for `kind`.
fn wants(db: &rusqlite::Connection, person: &str, kind: &str, channel: &str) -> Result<bool> {
    let enabled: Option<bool> = db
        .query_row(
            "SELECT enabled FROM preferences WHERE person = ?1 AND kind = ?2 AND channel = ?3",
            (person, kind, channel),
            |row| row.get(0),
        )
        .map(Some)
        .or_else(|err| match err {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            err => Err(err),
        })?;
    Ok(enabled.unwrap_or(true))
}

/// When the quiet hours that `now` falls in end, on the clock of `zone`:
/// 08:00 local that morning, or the next one after 22:00. `None` in the
/// day. The end is found on the local calendar, so a night the clocks
/// change is as long as it really is.
fn quiet_until(now: Timestamp, zone: &str) -> Result<Option<Timestamp>> {
    let local = now.in_tz(zone)?;
    let morning = match local.hour() {
        hour if hour >= QUIET_FROM => local.date().tomorrow()?,
        hour if hour < QUIET_UNTIL => local.date(),
        _ => return Ok(None),
    };
    let end = morning.at(QUIET_UNTIL, 0, 0, 0).in_tz(zone)?;
    Ok(Some(end.timestamp()))
}

/// Records a person's choice for one kind and channel.
pub fn set_preference(db: &mut Db, _email: &Email, change: &Preference) -> Result<()> {
    let tx = db.transaction()?;
    tx.execute(
        "INSERT INTO preferences (person, kind, channel, enabled) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (person, kind, channel) DO UPDATE SET enabled = excluded.enabled",
        (&change.person, &change.kind, &change.channel, change.enabled),
    )?;
    // An opt-out withdraws what waits on that channel, in the same
    // transaction: turning the channel on again before the send must not
    // bring it back.
    if !change.enabled && !CRITICAL.contains(&change.kind.as_str()) {
        let why = format!(
            "withdrawn: {} turned {} off for {}",
            change.person, change.channel, change.kind
        );
        tx.execute(
            "UPDATE outbox SET status = 'CANCELLED', last_error = ?4
              WHERE status = 'PENDING' AND channel = ?3
                AND notification IN (SELECT id FROM notifications
                                      WHERE person = ?1 AND kind = ?2)",
            (&change.person, &change.kind, &change.channel, &why),
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// An outbox row this dispatcher has claimed.
struct Claimed {
    id: i64,
    notification: i64,
    channel: String,
    recipient: String,
    body: String,
    /// Attempts made before this one.
    attempts: i64,
}

/// Wakes every minute. Claims the rows that are due, looks again at what
/// the person wants and what time it is for them, sends each row with no
/// transaction open, and records each result in a short transaction.
pub fn dispatch(db: &mut Db, providers: &Providers, clock: &Clock) -> Result<()> {
    let now = clock.now()?;
    for row in claim(db, now)? {
        let (person, kind, zone): (String, String, String) = db.query_row(
            "SELECT n.person, n.kind, p.time_zone
               FROM notifications n JOIN people p ON p.id = n.person
              WHERE n.id = ?1",
            [row.notification],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        if !CRITICAL.contains(&kind.as_str()) {
            // An opt-out made since the row was queued wins.
            if !wants(db, &person, &kind, &row.channel)? {
                let why = format!("withdrawn: {person} turned {} off for {kind}", row.channel);
                finish(db, &row, "CANCELLED", row.attempts, Some(&why))?;
                continue;
            }
            // A retry that falls in quiet hours waits for the morning too.
            if row.channel == "push" {
                if let Some(morning) = quiet_until(clock.utc()?, &zone)? {
                    hold(db, &row, clock.ms_at(morning))?;
                    continue;
                }
            }
        }
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
          RETURNING id, notification, channel, recipient, body, attempts",
        )?
        .query_map((dispatcher(), now, BATCH), |row| {
            Ok(Claimed {
                id: row.get(0)?,
                notification: row.get(1)?,
                channel: row.get(2)?,
                recipient: row.get(3)?,
                body: row.get(4)?,
                attempts: row.get(5)?,
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
fn finish(
    db: &Db,
    row: &Claimed,
    status: &str,
    attempts: i64,
    error: Option<&str>,
) -> Result<()> {
    db.execute(
        "UPDATE outbox SET status = ?3, attempts = ?4, last_error = coalesce(?5, last_error)
          WHERE id = ?1 AND claimed_by = ?2",
        (row.id, dispatcher(), status, attempts, error),
    )?;
    Ok(())
}

/// Hands a claimed row back unsent, due again at `at`.
fn hold(db: &Db, row: &Claimed, at: i64) -> Result<()> {
    db.execute(
        "UPDATE outbox
            SET status = 'PENDING', next_attempt_at = ?3, claimed_by = NULL, claimed_at = NULL
          WHERE id = ?1 AND claimed_by = ?2",
        (row.id, dispatcher(), at),
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
