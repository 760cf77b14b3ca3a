//! Case 10: rendering what people read.
//!
//! People going to an event hear about each new comment on it, by email
//! (a text body and an HTML body) and by push. Publishing a comment writes
//! the notification and its outbox rows in one transaction; the dispatcher
//! of chapters 2 to 5 renders each message just before it sends it
//! (claimed, keyed, sent with no transaction open, retried with backoff).
//! `notify run 10` shows what reached each person;
//! chapters/10-render-templates-that-fail-closed.md explains what is wrong.

use std::collections::BTreeMap;

use lab::clock::{MINUTE, SECOND};
use lab::{Clock, Db, Providers, Result, SendError};
use serde::Deserialize;

/// The service's tables. A person may not have told us their name, an
/// author may have left, and a moderator may have removed a comment.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS people (
        id     TEXT PRIMARY KEY,
        name   TEXT,
        email  TEXT NOT NULL,
        device TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS notifications (
        id     INTEGER PRIMARY KEY,
        person TEXT NOT NULL REFERENCES people (id),
        title  TEXT NOT NULL,
        author TEXT,
        text   TEXT
    );
    CREATE TABLE IF NOT EXISTS outbox (
        id              INTEGER PRIMARY KEY,
        notification    INTEGER NOT NULL REFERENCES notifications (id),
        channel         TEXT NOT NULL CHECK (channel IN ('email', 'push')),
        recipient       TEXT NOT NULL,
        status          TEXT NOT NULL DEFAULT 'PENDING'
                        CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'FAILED')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL DEFAULT 0,
        last_error      TEXT,
        claimed_by      TEXT,
        claimed_at      INTEGER
    );
";

/// The templates: each `{field}` is replaced by the field's value.
const EMAIL_HTML: &str = "<p>Hello {name},</p>\n<p>{author} commented on <b>{title}</b>:</p>\n<blockquote>{text}</blockquote>";
const EMAIL_TEXT: &str = "Hello {name},\n\n{author} commented on {title}:\n\n{text}";
const PUSH: &str = "{author} on {title}: {text}";

/// Every channel a notification goes out on.
const CHANNELS: [&str; 2] = ["email", "push"];

/// How many rows one wake-up of the dispatcher claims.
const BATCH: i64 = 50;

/// How long a row waits after a failed send (chapter 5).
const RETRY_AFTER: [i64; 3] = [5 * SECOND, 30 * SECOND, 5 * MINUTE];

/// A comment on an event, for one person going to it.
#[derive(Deserialize)]
pub struct Notice {
    /// Who hears about it: a row of `people`.
    pub person: String,
    /// The event's title, as its organiser typed it.
    pub title: String,
    /// Who wrote the comment; `None` once they deleted their account.
    pub author: Option<String>,
    /// The comment, as its author typed it; `None` once a moderator removed
    /// it.
    pub text: Option<String>,
}

/// Stores the notification and queues its delivery on every channel, in
/// one transaction. Rendering waits for the send.
pub fn publish(db: &mut Db, _providers: &Providers, clock: &Clock, notice: &Notice) -> Result<()> {
    let tx = db.transaction()?;
    let (address, device): (String, String) = tx.query_row(
        "SELECT email, device FROM people WHERE id = ?1",
        [&notice.person],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    tx.execute(
        "INSERT INTO notifications (person, title, author, text) VALUES (?1, ?2, ?3, ?4)",
        (&notice.person, &notice.title, &notice.author, &notice.text),
    )?;
    let notification = tx.last_insert_rowid();
    for channel in CHANNELS {
        let recipient = if channel == "push" { &device } else { &address };
        tx.execute(
            "INSERT INTO outbox (notification, channel, recipient, next_attempt_at)
             VALUES (?1, ?2, ?3, ?4)",
            (notification, channel, recipient, clock.now()?),
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
    /// Attempts made before this one.
    attempts: i64,
}

/// A rendered message, ready for its provider.
enum Message {
    Email { text: String, html: String },
    Push(String),
}

/// Wakes every minute. Claims the rows that are due, renders and sends each
/// with no transaction open, and records each result in a short transaction.
pub fn dispatch(db: &mut Db, providers: &Providers, clock: &Clock) -> Result<()> {
    let now = clock.now()?;
    for row in claim(db, now)? {
        let message = render(db, &row)?;
        let key = format!("outbox/{}", row.id);
        let sent = match &message {
            Message::Email { text, html } => {
                providers
                    .email
                    .send_html_with_key(&key, &row.recipient, text, html)
            }
            Message::Push(body) => providers.push.send_with_key(&key, &row.recipient, body),
        };
        record(db, &row, sent, clock.now()?)?;
    }
    Ok(())
}

/// Renders the row's message from its notification.
fn render(db: &Db, row: &Claimed) -> Result<Message> {
    let (name, title, author, text): (Option<String>, String, Option<String>, Option<String>) = db
        .query_row(
            "SELECT people.name, notifications.title, notifications.author, notifications.text
               FROM notifications JOIN people ON people.id = notifications.person
              WHERE notifications.id = ?1",
            [row.notification],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
    let mut fields = BTreeMap::new();
    fields.insert("title", title);
    if let Some(text) = text {
        fields.insert("text", text);
    }
    if let Some(name) = name {
        fields.insert("name", name);
    }
    if let Some(author) = author {
        fields.insert("author", author);
    }
    Ok(match row.channel.as_str() {
        "push" => Message::Push(fill(PUSH, &fields)),
        _ => Message::Email {
            text: fill(EMAIL_TEXT, &fields),
            html: fill(EMAIL_HTML, &fields),
        },
    })
}

/// Replaces each `{field}` of `template` with the field's value.
fn fill(template: &str, fields: &BTreeMap<&str, String>) -> String {
    let mut message = template.to_string();
    for (field, value) in fields {
        message = message.replace(&format!("{{{field}}}"), value);
    }
    message
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
          RETURNING id, notification, channel, recipient, attempts",
        )?
        .query_map((dispatcher(), now, BATCH), |row| {
            Ok(Claimed {
                id: row.get(0)?,
                notification: row.get(1)?,
                channel: row.get(2)?,
                recipient: row.get(3)?,
                attempts: row.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// Records how a send went: SENT, back to PENDING for a later attempt, or
/// FAILED when no attempt is left or the provider refused it for good
/// (chapter 5).
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

lab::serve!(schema: SCHEMA, ops: [publish, dispatch]);
