//! Case 08, reference solution: push falls back to email.
//!
//! Some news must reach people even when their phone cannot be reached: a
//! date chosen, an event cancelled, an event reopened. When a push of one of
//! those kinds is dead-lettered, because its last retry failed or because
//! the push provider refused it for good, the same transaction that marks
//! it FAILED queues one email with the same text to the person's address.
//! Either both happen or neither does, so a crash in between cannot lose
//! the email. The sweep, which dead-letters a row whose dispatcher died
//! during its last attempt, falls back the same way. Other kinds are
//! dead-lettered as before.
//!
//! A push can also wait without failing: while the push provider is down,
//! the breaker keeps it PENDING for as long as the outage lasts, and the
//! retries never run out. So an important push still PENDING 10 minutes
//! after it was queued is given up on as well: one transaction marks it
//! FAILED, superseded by the email, and queues that email. A push that is
//! FAILED is never claimed again, so the person is not told on both
//! channels when the provider comes back.

use std::collections::VecDeque;

use lab::clock::{MINUTE, SECOND};
use lab::{Clock, Db, Providers, Result, SendError};
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
        queued_at       INTEGER NOT NULL DEFAULT 0,
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

/// The kinds of news too important to leave to a push that failed: when
/// such a push is dead-lettered, the person is emailed instead.
const IMPORTANT: &str = "('date_chosen', 'event_cancelled', 'event_reopened')";

/// How long an important push may wait for the push provider, from the
/// moment it was queued, before the person is emailed instead.
const DEADLINE: i64 = 10 * MINUTE;

/// A claim older than this belongs to a dispatcher that died: no healthy
/// send takes anywhere near as long.
const ORPHANED_AFTER: i64 = 5 * MINUTE;

/// Attempts a row gets in all: the first, and one after each wait.
const ATTEMPTS: i64 = RETRY_AFTER.len() as i64 + 1;

/// How far back a breaker looks at its channel's sends.
const WINDOW: i64 = MINUTE;

/// Fewer sends than this in the window say nothing about the provider: one
/// failure out of one is a bad address or bad luck, not an outage.
const MIN_CALLS: usize = 5;

/// How long an open breaker waits before it lets one probe through.
const OPEN_FOR: i64 = 30 * SECOND;

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
/// the channel they chose, in one transaction; the outbox row keeps when.
pub fn publish(db: &mut Db, _providers: &Providers, clock: &Clock, notice: &Notice) -> Result<()> {
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
        "INSERT INTO outbox (notification, channel, recipient, body, queued_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        (
            notification,
            &channel,
            &recipient,
            &notice.text,
            clock.now()?,
        ),
    )?;
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
    /// When this claim was made: with the dispatcher's name, the claim's token.
    claimed_at: i64,
}

/// One circuit breaker per channel, kept in the dispatcher's memory from
/// one wake-up to the next. A restart begins with both closed.
#[derive(Default)]
pub struct Breakers {
    email: Breaker,
    push: Breaker,
}

impl Breakers {
    fn channel(&mut self, channel: &str) -> &mut Breaker {
        match channel {
            "push" => &mut self.push,
            _ => &mut self.email,
        }
    }
}

/// What a breaker lets through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// Closed: everything that is due.
    Closed,
    /// Open: nothing; the rows wait.
    Open,
    /// Open for 30 s already: exactly one row, to test the provider.
    Probe,
}

/// One channel's circuit breaker.
#[derive(Default)]
struct Breaker {
    /// The channel's recent sends: when, and whether the provider failed.
    recent: VecDeque<(i64, bool)>,
    /// Set while open: no send before this time, then one probe.
    open_until: Option<i64>,
}

impl Breaker {
    fn gate(&self, now: i64) -> Gate {
        match self.open_until {
            None => Gate::Closed,
            Some(until) if now < until => Gate::Open,
            Some(_) => Gate::Probe,
        }
    }

    /// Counts one send. `failed` means the provider failed (a 5xx, a
    /// timeout); a refusal of one address says nothing about its health.
    fn record(&mut self, now: i64, failed: bool) {
        if self.open_until.is_some() {
            // That was the probe: its answer closes the breaker or keeps it open.
            self.open_until = failed.then_some(now + OPEN_FOR);
            self.recent.clear();
            return;
        }
        self.recent.push_back((now, failed));
        while self
            .recent
            .front()
            .is_some_and(|&(at, _)| at <= now - WINDOW)
        {
            self.recent.pop_front();
        }
        let failures = self.recent.iter().filter(|&&(_, failed)| failed).count();
        if self.recent.len() >= MIN_CALLS && failures * 2 > self.recent.len() {
            self.open_until = Some(now + OPEN_FOR);
            self.recent.clear();
        }
    }
}

/// Wakes every 2 s. Claims, per channel, what its breaker lets through,
/// sends each row with no transaction open, and records each result in a
/// short transaction of its own.
pub fn dispatch(
    db: &mut Db,
    providers: &Providers,
    clock: &Clock,
    breakers: &mut Breakers,
) -> Result<()> {
    let now = clock.now()?;
    fall_back_overdue(db, now)?;
    let mut claimed = Vec::new();
    for channel in ["email", "push"] {
        let limit = match breakers.channel(channel).gate(now) {
            Gate::Closed => BATCH,
            Gate::Probe => 1,
            Gate::Open => continue,
        };
        claimed.extend(claim(db, channel, limit, now)?);
    }
    claimed.sort_by_key(|r| r.id);
    for mut row in claimed {
        let now = clock.now()?;
        let breaker = breakers.channel(&row.channel);
        let gate = breaker.gate(now);
        if gate == Gate::Open {
            // The breaker opened while this batch was going out: the row
            // goes back to the queue as it was.
            release(db, &row)?;
            continue;
        }
        // The sweep measures a claim's age, and the rows of a batch are sent
        // one after another: renew this row's claim time just before its
        // send, so the age is this send's, not the batch's. A row the sweep
        // already handed on is no longer ours: skip it.
        if !renew(db, &mut row, now)? {
            continue;
        }
        let provider = providers.channel(&row.channel)?;
        // The key names the row: a repeat the provider already delivered is
        // recognised and not delivered again.
        let sent = provider.send_with_key(&format!("outbox/{}", row.id), &row.recipient, &row.body);
        // A 5xx or no answer counts against the provider. A refusal of one
        // message does not, nor does a 429: a provider that asks for less
        // traffic is up, and the row waits out its Retry-After.
        let failed = matches!(sent, Err(SendError::Unavailable(_) | SendError::Timeout(_)));
        breaker.record(now, failed);
        if gate == Gate::Probe && failed {
            // The provider is still down. That is no fault of this row; but
            // the next probe should be another row, in case it is.
            requeue(db, &row, now)?;
            continue;
        }
        record(db, &row, sent, now)?;
    }
    Ok(())
}

/// This process's name in `claimed_by`.
fn dispatcher() -> String {
    format!("dispatcher-{}", std::process::id())
}

/// Claims up to `limit` due rows of one channel, oldest due first.
fn claim(db: &mut Db, channel: &str, limit: i64, now: i64) -> Result<Vec<Claimed>> {
    let mut rows = db
        .prepare(
            "UPDATE outbox
                SET status = 'PROCESSING', claimed_by = ?1, claimed_at = ?2
              WHERE id IN (SELECT id FROM outbox
                            WHERE status = 'PENDING' AND channel = ?4 AND next_attempt_at <= ?2
                            ORDER BY next_attempt_at, id LIMIT ?3)
          RETURNING id, notification, channel, recipient, body, attempts, claimed_at",
        )?
        .query_map((dispatcher(), now, limit, channel), |row| {
            Ok(Claimed {
                id: row.get(0)?,
                notification: row.get(1)?,
                channel: row.get(2)?,
                recipient: row.get(3)?,
                body: row.get(4)?,
                attempts: row.get(5)?,
                claimed_at: row.get(6)?,
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

/// Hands a claimed row back untouched: PENDING, its attempts and its next
/// attempt as they were.
fn release(db: &mut Db, row: &Claimed) -> Result<()> {
    db.execute(
        &format!(
            "UPDATE outbox SET status = 'PENDING', claimed_by = NULL, claimed_at = NULL
              WHERE {OURS}"
        ),
        (row.id, dispatcher(), row.claimed_at),
    )?;
    Ok(())
}

/// Hands a failed probe's row back without charging it an attempt: PENDING
/// and due, but behind every row that has waited longer.
fn requeue(db: &mut Db, row: &Claimed, now: i64) -> Result<()> {
    db.execute(
        &format!(
            "UPDATE outbox SET status = 'PENDING', next_attempt_at = ?4,
                               claimed_by = NULL, claimed_at = NULL
              WHERE {OURS}"
        ),
        (row.id, dispatcher(), row.claimed_at, now),
    )?;
    Ok(())
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
            _ => return dead_letter(db, row, attempts, &err, now),
        },
    };
    Ok(())
}

/// Dead-letters a row. A push of an important kind is not left there: the
/// same transaction queues an email with its text to the person's address,
/// so the row cannot end FAILED without the email, nor the other way round.
fn dead_letter(db: &mut Db, row: &Claimed, attempts: i64, err: &SendError, now: i64) -> Result<()> {
    let tx = db.transaction()?;
    let failed = tx.execute(
        &format!(
            "UPDATE outbox SET status = 'FAILED', attempts = ?4, last_error = ?5 WHERE {OURS}"
        ),
        (
            row.id,
            dispatcher(),
            row.claimed_at,
            attempts,
            err.to_string(),
        ),
    )?;
    // Only the dispatcher whose claim still holds falls back, and only once.
    if failed == 1 && row.channel == "push" {
        tx.execute(
            &format!(
                "INSERT INTO outbox (notification, channel, recipient, body, queued_at)
                 SELECT notifications.id, 'email', people.email, notifications.text, ?2
                   FROM notifications JOIN people ON people.id = notifications.person
                  WHERE notifications.id = ?1 AND notifications.kind IN {IMPORTANT}"
            ),
            (row.notification, now),
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// How long a failed row waits: its gap, unless the provider asked for
/// longer. A 429 (too many requests) is a 4xx, yet transient, and its
/// `Retry-After` says when a new request is welcome: never sooner.
fn later(gap: i64, err: &SendError) -> i64 {
    gap.max(err.retry_after_ms().unwrap_or(0))
}

/// Gives up on every important push still PENDING `DEADLINE` after it was
/// queued, whatever holds it back (an open breaker, a long backoff): in one
/// transaction, the push is settled as FAILED, superseded, and the email is
/// queued. A push a dispatcher is sending right now is PROCESSING and left
/// alone; if that send fails, the row is back to PENDING and its turn comes
/// at the next wake-up.
fn fall_back_overdue(db: &mut Db, now: i64) -> Result<()> {
    let overdue = format!(
        "outbox.channel = 'push' AND outbox.status = 'PENDING' AND outbox.queued_at <= ?1
         AND outbox.notification IN (SELECT id FROM notifications WHERE kind IN {IMPORTANT})"
    );
    // Most wake-ups find nothing overdue: they look without a transaction.
    let any: bool = db.query_row(
        &format!("SELECT EXISTS (SELECT 1 FROM outbox WHERE {overdue})"),
        [now - DEADLINE],
        |row| row.get(0),
    )?;
    if !any {
        return Ok(());
    }
    let tx = db.transaction()?;
    tx.execute(
        &format!(
            "INSERT INTO outbox (notification, channel, recipient, body, queued_at)
             SELECT notifications.id, 'email', people.email, notifications.text, ?2
               FROM outbox
               JOIN notifications ON notifications.id = outbox.notification
               JOIN people ON people.id = notifications.person
              WHERE {overdue}"
        ),
        (now - DEADLINE, now),
    )?;
    tx.execute(
        &format!(
            "UPDATE outbox
                SET status = 'FAILED',
                    last_error = 'superseded: no push got through within 10 min, emailed instead'
              WHERE {}",
            overdue.replace("outbox.", "")
        ),
        [now - DEADLINE],
    )?;
    tx.commit()?;
    Ok(())
}

/// Runs every minute: hands back rows claimed more than 5 min ago, whose
/// dispatcher died mid-send. The lost attempt counts: a row that has used
/// its last one is dead-lettered, so a row that kills its dispatcher every
/// time cannot loop forever. The keys make a repeat harmless.
pub fn sweep(db: &mut Db, _providers: &Providers, clock: &Clock) -> Result<()> {
    let now = clock.now()?;
    let orphaned_before = now - ORPHANED_AFTER;
    let tx = db.transaction()?;
    // A push the sweep dead-letters falls back to email like any other.
    tx.execute(
        &format!(
            "INSERT INTO outbox (notification, channel, recipient, body, queued_at)
             SELECT notifications.id, 'email', people.email, notifications.text, ?3
               FROM outbox
               JOIN notifications ON notifications.id = outbox.notification
               JOIN people ON people.id = notifications.person
              WHERE outbox.status = 'PROCESSING' AND outbox.claimed_at < ?1
                AND outbox.attempts + 1 >= ?2 AND outbox.channel = 'push'
                AND notifications.kind IN {IMPORTANT}"
        ),
        (orphaned_before, ATTEMPTS, now),
    )?;
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
