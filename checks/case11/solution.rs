//! Case 11, reference solution: learn what happened, from webhooks you can
//! trust.
//!
//! A webhook is believed only when its signature is the provider's: an
//! HMAC-SHA256 of its timestamp and its body's exact bytes, keyed with the
//! shared secret, compared in constant time. Its timestamp must be within
//! five minutes of now, either side, so a request captured long ago cannot
//! be played again. An event is applied once, by its id, in the same
//! transaction as its effect. A hard bounce or a complaint puts the address
//! on the suppression list, which the dispatcher reads before every send.
//! A message's status follows the provider's clock, not the order requests
//! happen to arrive in. A body that cannot be read gets a 400.

use hmac::{Hmac, KeyInit, Mac};
use jiff::Timestamp;
use lab::clock::{MINUTE, SECOND};
use lab::webhook::{Request, Response, SECRET, SIGNATURE};
use lab::{Clock, Db, Providers, Result, SendError};
use serde::Deserialize;
use sha2::Sha256;

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
    CREATE TABLE IF NOT EXISTS webhook_events (
        id          TEXT PRIMARY KEY,
        received_at INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS suppressions (
        address TEXT PRIMARY KEY,
        reason  TEXT NOT NULL
    );
";

/// How many rows one wake-up of the dispatcher claims.
const BATCH: i64 = 50;

/// How long a row waits after a failed send (chapter 5).
const RETRY_AFTER: [i64; 3] = [5 * SECOND, 30 * SECOND, 5 * MINUTE];

/// How far a webhook's timestamp may be from now, either side, in seconds.
const TOLERANCE: i64 = 5 * 60;

/// An email to send.
#[derive(Deserialize)]
pub struct Message {
    /// Its id, also its idempotency key at the provider: webhooks name it.
    pub id: String,
    pub to: String,
    pub text: String,
}

/// What the provider says happened to a message.
#[derive(Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    kind: Kind,
    /// When it happened, on the provider's clock (UNIX seconds).
    occurred_at: i64,
    message: String,
    recipient: String,
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

/// The provider's endpoint: what became of each message. Answers 2xx when
/// the event is taken (or was already), 400 when it cannot be believed or
/// read.
pub fn receive_webhook(db: &mut Db, clock: &Clock, request: &Request) -> Result<Response> {
    let Some((timestamp, signatures)) = request.header(SIGNATURE).and_then(parse_signature) else {
        return Ok(Response::new(400, "no readable signature"));
    };
    if (clock.utc()?.as_second() - timestamp).abs() > TOLERANCE {
        return Ok(Response::new(400, "timestamp outside the tolerance"));
    }
    if !signatures
        .iter()
        .any(|signature| signed(timestamp, &request.body, signature))
    {
        return Ok(Response::new(400, "signature does not match"));
    }
    let event: Event = match serde_json::from_slice(&request.body) {
        Ok(event) => event,
        Err(err) => return Ok(Response::new(400, format!("unreadable event: {err}"))),
    };
    let tx = db.transaction()?;
    let fresh = tx.execute(
        "INSERT OR IGNORE INTO webhook_events (id, received_at) VALUES (?1, ?2)",
        (&event.id, clock.now()?),
    )? == 1;
    if fresh {
        tx.execute(
            "UPDATE outbox SET delivery = ?2, delivery_at = ?3
              WHERE message = ?1 AND (delivery_at IS NULL OR delivery_at < ?3)",
            (&event.message, event.kind.name(), event.occurred_at),
        )?;
        if event.kind != Kind::Delivered {
            let when = Timestamp::from_second(event.occurred_at)?;
            tx.execute(
                "INSERT OR IGNORE INTO suppressions (address, reason) VALUES (?1, ?2)",
                (&event.recipient, format!("{} at {when}", event.kind.name())),
            )?;
        }
    }
    tx.commit()?;
    Ok(Response::ok())
}

/// `t=<timestamp>,v1=<hex>[,v1=<hex>...]`: the timestamp and every `v1`
/// signature, decoded; `None` when the header cannot be read.
fn parse_signature(header: &str) -> Option<(i64, Vec<Vec<u8>>)> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=')? {
            ("t", t) => timestamp = Some(t.parse().ok()?),
            ("v1", hex) => signatures.push(hex::decode(hex).ok()?),
            _ => {}
        }
    }
    Some((timestamp?, signatures))
}

/// Whether `signature` is the provider's for this timestamp and body: the
/// HMAC is compared in constant time by `verify_slice`.
fn signed(timestamp: i64, body: &[u8], signature: &[u8]) -> bool {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("HMAC takes a key of any size");
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(body);
    mac.verify_slice(signature).is_ok()
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

/// Wakes every minute. Claims the rows that are due and sends each with no
/// transaction open, unless its address is suppressed: then the row fails,
/// with the reason.
pub fn dispatch(db: &mut Db, providers: &Providers, clock: &Clock) -> Result<()> {
    let now = clock.now()?;
    for row in claim(db, now)? {
        if let Some(reason) = suppressed(db, &row.recipient)? {
            let reason = format!("suppressed: {reason}");
            finish(db, &row, "FAILED", row.attempts, Some(&reason))?;
            continue;
        }
        let sent = providers
            .email
            .send_with_key(&row.message, &row.recipient, &row.body);
        record(db, &row, sent, clock.now()?)?;
    }
    Ok(())
}

/// Why `address` gets no more mail, if it is on the suppression list.
fn suppressed(db: &Db, address: &str) -> Result<Option<String>> {
    let mut stmt = db.prepare("SELECT reason FROM suppressions WHERE address = ?1")?;
    let mut rows = stmt.query([address])?;
    Ok(match rows.next()? {
        Some(row) => Some(row.get(0)?),
        None => None,
    })
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
