//! Case 12: many relays, one outbox on PostgreSQL.
//!
//! The service has outgrown one machine: its outbox lives on a PostgreSQL
//! server, and several relay processes, on several machines, drain it at
//! once. Any of them may be killed at any moment and started again.
//! `notify run 12` shows what goes wrong; chapters/12-many-machines.md
//! explains why.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use lab::pg::Email;
use lab::{Result, SendError};
use postgres::{Client, GenericClient};

/// The outbox. `claimed_by` names the relay that holds a PROCESSING row,
/// `claimed_at` says since when. A failed send leaves the row PENDING until
/// `next_attempt_at`; a row out of attempts, or refused for good, ends
/// FAILED with its `last_error` (the dead letter).
pub const SCHEMA: &str = "
    CREATE TABLE outbox (
        id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        recipient       TEXT NOT NULL,
        body            TEXT NOT NULL,
        status          TEXT NOT NULL DEFAULT 'PENDING'
                        CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'FAILED')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        last_error      TEXT,
        claimed_by      TEXT,
        claimed_at      TIMESTAMPTZ,
        sent_at         TIMESTAMPTZ
    );
    CREATE INDEX outbox_pending ON outbox (id) WHERE status = 'PENDING';
";

/// How many rows a relay claims at a time.
const BATCH: i64 = 50;

/// How long a row waits after a failed send before it is tried again, in
/// ms: after the first failure, the second, the third. Chapter 5's 5 s,
/// 30 s and 5 min, a hundred times shorter, as all the lab's times here.
/// When the attempt after the last wait fails too, the row is
/// dead-lettered.
const RETRY_AFTER_MS: [f64; 3] = [50.0, 300.0, 3000.0];

/// How far back the breaker looks at its sends: chapter 7's minute, scaled.
const WINDOW: Duration = Duration::from_millis(600);

/// Sends the breaker needs in its window before it judges the provider.
const MIN_CALLS: usize = 5;

/// How long an open breaker waits before it lets one probe through:
/// chapter 7's 30 s, scaled.
const OPEN_FOR: Duration = Duration::from_millis(300);

/// Chapter 7's circuit breaker, in this relay process's memory: a
/// restarted relay begins with it closed.
static BREAKER: Mutex<Breaker> = Mutex::new(Breaker {
    recent: VecDeque::new(),
    open_until: None,
});

/// What the breaker lets through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// Closed: a whole batch.
    Closed,
    /// Open: nothing; the rows wait.
    Open,
    /// Open for 300 ms already: one row, to test the provider.
    Probe,
}

struct Breaker {
    /// The recent sends: when, and whether the provider failed.
    recent: VecDeque<(Instant, bool)>,
    /// Set while open: no send before this moment, then one probe.
    open_until: Option<Instant>,
}

impl Breaker {
    fn gate(&self, now: Instant) -> Gate {
        match self.open_until {
            None => Gate::Closed,
            Some(until) if now < until => Gate::Open,
            Some(_) => Gate::Probe,
        }
    }

    /// Counts one send. `failed` means the provider failed (a 503, no
    /// answer); a refusal of one address says nothing about its health.
    fn record(&mut self, now: Instant, failed: bool) {
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
            .is_some_and(|&(at, _)| now.duration_since(at) >= WINDOW)
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

/// This process's breaker.
fn breaker() -> MutexGuard<'static, Breaker> {
    BREAKER.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The breaker's gate now.
fn gate() -> Gate {
    breaker().gate(Instant::now())
}

/// How many rows the breaker lets this relay claim now.
fn batch() -> i64 {
    match gate() {
        Gate::Closed => BATCH,
        Gate::Open => 0,
        Gate::Probe => 1,
    }
}

/// Runs in every relay process, over and over: claims up to 50 pending
/// rows, sends them, and marks each one SENT. `me` names this relay
/// process, e.g. `relay-2`. Returns how many rows it claimed.
pub fn relay(db: &mut Client, email: &Email, me: &str) -> Result<usize> {
    // The breaker, open, lets nothing through; about to probe, one row.
    let limit = batch();
    if limit == 0 {
        return Ok(0);
    }
    // One statement, so one short transaction: the row locks last until
    // it commits (with synchronous_commit on, until its WAL is flushed,
    // about a millisecond); the claim lives on in status and claimed_by.
    // Rows another relay is claiming right now are skipped, not waited for.
    let claimed = db.query(
        "WITH picked AS (
             SELECT id FROM outbox
              WHERE status = 'PENDING' AND next_attempt_at <= clock_timestamp()
              ORDER BY id
              LIMIT $2
                FOR UPDATE SKIP LOCKED
         )
         UPDATE outbox
            SET status = 'PROCESSING', claimed_by = $1, claimed_at = now()
           FROM picked
          WHERE outbox.id = picked.id
         RETURNING outbox.id, outbox.recipient, outbox.body, outbox.attempts",
        &[&me, &limit],
    )?;
    // The sends, with no transaction open. The key belongs to the row, so
    // a row sent again after a kill is delivered once.
    for (i, row) in claimed.iter().enumerate() {
        let id: i64 = row.get(0);
        let recipient: String = row.get(1);
        let body: String = row.get(2);
        let attempts: i32 = row.get(3);
        // The breaker opened during this batch: the rest waits, no
        // attempt spent.
        if i > 0 && gate() != Gate::Closed {
            hand_back(db, OURS, id, me)?;
            continue;
        }
        let sent = email.send_with_key(&format!("outbox-{id}"), &recipient, &body);
        let down = matches!(sent, Err(SendError::Unavailable(_) | SendError::Timeout(_)));
        breaker().record(Instant::now(), down);
        record(db, OURS, id, me, attempts, sent)?;
    }
    Ok(claimed.len())
}

/// The fence every result is recorded under: only while the row is still
/// this relay's claim.
const OURS: &str = "id = $1 AND status = 'PROCESSING' AND claimed_by = $2";

/// Hands a claimed row back, unsent and with no attempt spent, under `fence`.
fn hand_back(db: &mut impl GenericClient, fence: &str, id: i64, me: &str) -> Result<()> {
    db.execute(
        &format!(
            "UPDATE outbox SET status = 'PENDING', claimed_by = NULL, claimed_at = NULL
              WHERE {fence}"
        ),
        &[&id, &me],
    )?;
    Ok(())
}

/// Records how a send went, under `fence`: SENT; back to PENDING until its
/// backoff has passed; or FAILED, its error kept, when the provider
/// refused it for good or no attempt is left.
fn record(
    db: &mut impl GenericClient,
    fence: &str,
    id: i64,
    me: &str,
    attempts: i32,
    sent: Result<(), SendError>,
) -> Result<()> {
    match sent {
        Ok(()) => db.execute(
            &format!(
                "UPDATE outbox SET status = 'SENT', attempts = attempts + 1,
                        claimed_by = $2, sent_at = now()
                  WHERE {fence}"
            ),
            &[&id, &me],
        )?,
        // The lab itself failed, not the provider: no attempt was made.
        Err(SendError::Lab(err)) => return Err(err),
        Err(err) => match RETRY_AFTER_MS.get(attempts as usize) {
            // A 503 or no answer: the provider may take it later.
            Some(wait) if !err.is_permanent() => db.execute(
                &format!(
                    "UPDATE outbox
                        SET status = 'PENDING', attempts = attempts + 1, last_error = $3,
                            next_attempt_at = clock_timestamp() + $4::float8 * interval '1 millisecond',
                            claimed_by = NULL, claimed_at = NULL
                      WHERE {fence}"
                ),
                &[&id, &me, &err.to_string(), wait],
            )?,
            // Refused for good, or out of attempts: the dead letter.
            _ => db.execute(
                &format!(
                    "UPDATE outbox
                        SET status = 'FAILED', attempts = attempts + 1, last_error = $3,
                            claimed_by = $2
                      WHERE {fence}"
                ),
                &[&id, &me, &err.to_string()],
            )?,
        },
    };
    Ok(())
}

/// Runs in every relay process, every so often: a row PROCESSING for longer
/// than `stale_after` belongs to a relay that died holding it, and goes
/// back to PENDING for another relay to claim.
pub fn sweep(db: &mut Client, stale_after: Duration) -> Result<u64> {
    let returned = db.execute(
        "UPDATE outbox
            SET status = 'PENDING', claimed_by = NULL, claimed_at = NULL
          WHERE status = 'PROCESSING'
            AND claimed_at < now() - $1::float8 * interval '1 second'",
        &[&stale_after.as_secs_f64()],
    )?;
    Ok(returned)
}

lab::serve_postgres!(schema: SCHEMA, relay: relay, sweep: sweep);
