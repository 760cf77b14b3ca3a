//! Case 11: learning what happened to each email, from the provider's
//! webhooks.
//!
//! The dispatcher of chapters 2 to 5 sends the outbox (claimed, keyed, sent
//! with no transaction open, retried with backoff). The email provider then
//! tells the service what became of each message by calling its webhook
//! endpoint: delivered, bounced, or complained about (the person marked it
//! as spam). `notify run 11` shows what the endpoint believes and who still
//! gets mail; chapters/11-learn-what-happened-webhooks.md explains what is
//! wrong.

use lab::clock::{MINUTE, SECOND};
use lab::webhook::{Request, Response};
use lab::{Clock, Db, Providers, Result, SendError};
use serde::Deserialize;

/// The service's tables. `delivery` is what the provider last said of a
/// message, and `delivery_at` when that happened, on the provider's clock.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS outbox (
        id              INTEGER PRIMARY KEY,
        message         TEXT NOT NULL UNIQUE,
        recipient       TEXT NOT NULL,
        body            TEXT NOT NULL,
        status          TEXT NOT NULL DEFAULT 'PENDING'
                        CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'FAILED')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL DEFAULT 0,
        last_error      TEXT,
        claimed_by      TEXT,
        claimed_at      INTEGER,
        delivery        TEXT,
        delivery_at     INTEGER
    );
";

/// How many rows one wake-up of the dispatcher claims.
const BATCH: i64 = 50;

/// How long a row waits after a failed send (chapter 5).
const RETRY_AFTER: [i64; 3] = [5 * SECOND, 30 * SECOND, 5 * MINUTE];

/// An email to send.
#[derive(Deserialize)]
pub struct Message {
    /// Its id, also its idempotency key at the provider: webhooks name it.
    pub id: String,
    pub to: String,
    pub text: String,
}

/// What the provider says happened to a message. The body also carries
/// `id`, the event's own id, and `recipient`, the message's address.
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: Kind,
    /// When it happened, on the provider's clock (UNIX seconds).
    occurred_at: i64,
    message: String,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Delivered,
    Bounced,
    Complained,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Delivered => "delivered",
            Kind::Bounced => "bounced",
            Kind::Complained => "complained",
        }
    }
}

/// Queues an email.
pub fn enqueue(
    db: &mut Db,
    _providers: &Providers,
    clock: &Clock,
    message: &Message,
) -> Result<()> {
    db.execute(
        "INSERT INTO outbox (message, recipient, body, next_attempt_at) VALUES (?1, ?2, ?3, ?4)",
        (&message.id, &message.to, &message.text, clock.now()?),
    )?;
    Ok(())
}

/// The provider's endpoint: what became of each message. The provider
/// signs every request (see `lab::webhook`); a 2xx answer tells it the
/// event was taken.
pub fn receive_webhook(db: &mut Db, _clock: &Clock, request: &Request) -> Result<Response> {
    let event: Event = serde_json::from_slice(&request.body)?;
    db.execute(
        "UPDATE outbox SET delivery = ?2, delivery_at = ?3 WHERE message = ?1",
        (&event.message, event.kind.name(), event.occurred_at),
    )?;
    Ok(Response::ok())
}

/// An outbox row this dispatcher has claimed.
struct Claimed {
    id: i64,
    message: String,
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
        let sent = providers
            .email
            .send_with_key(&row.message, &row.recipient, &row.body);
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
          RETURNING id, message, recipient, body, attempts",
        )?
        .query_map((dispatcher(), now, BATCH), |row| {
            Ok(Claimed {
                id: row.get(0)?,
                message: row.get(1)?,
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

lab::serve!(schema: SCHEMA, ops: [enqueue, receive_webhook, dispatch]);
