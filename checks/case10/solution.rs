//! Case 10, reference solution: templates that fail closed.
//!
//! The messages are rendered by a template engine, minijinja, set up so
//! that a mistake cannot reach anyone. A template whose name ends in
//! `.html` escapes every value it prints, once: markup typed into a title
//! is shown as text, never run. A field may be required or optional. An
//! optional one (the reader's name, the author) has a default, written in
//! the template. A required one (the title, the comment) the context lacks
//! is an error (`UndefinedBehavior::Strict`), not an empty string: the row
//! is dead-lettered at once with the reason, because rendering the same
//! data again gives the same error. A push is cut to the
//! provider's 4096-byte limit on a character boundary, with an ellipsis.

use std::collections::BTreeMap;

use lab::clock::{MINUTE, SECOND};
use lab::provider::PUSH_PAYLOAD_LIMIT;
use lab::{Clock, Db, Providers, Result, SendError};
use minijinja::{Environment, UndefinedBehavior};
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

/// The templates, by name. The name decides the escaping: minijinja escapes
/// what a template named `*.html` prints, and nothing in the others.
/// The reader's name and the author are optional: each has its default,
/// said in the template. The title and the comment are required: without
/// them there is no message, and rendering fails.
const TEMPLATES: [(&str, &str); 3] = [
    (
        "comment.html",
        "<p>Hello {{ name | default(\"there\") }},</p>\n<p>{{ author | default(\"A former member\") }} commented on <b>{{ title }}</b>:</p>\n<blockquote>{{ text }}</blockquote>",
    ),
    (
        "comment.txt",
        "Hello {{ name | default(\"there\") }},\n\n{{ author | default(\"A former member\") }} commented on {{ title }}:\n\n{{ text }}",
    ),
    (
        "comment.push.txt",
        "{{ author | default(\"A former member\") }} on {{ title }}: {{ text }}",
    ),
];

/// What ends a push cut to fit.
const ELLIPSIS: &str = "…";

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
    let templates = templates()?;
    let now = clock.now()?;
    for row in claim(db, now)? {
        let message = match render(db, &templates, &row) {
            Ok(message) => message,
            Err(err) => {
                // The same data renders the same way every time: no retry.
                let reason = format!("render: {err}");
                finish(db, &row, "FAILED", row.attempts + 1, Some(&reason))?;
                continue;
            }
        };
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

/// The template engine, strict about what a template asks for.
fn templates() -> Result<Environment<'static>> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    for (name, source) in TEMPLATES {
        env.add_template(name, source)?;
    }
    Ok(env)
}

/// Renders the row's message from its notification. A field that is not
/// known is left out of the context: a template that prints it without a
/// default fails.
fn render(db: &Db, templates: &Environment, row: &Claimed) -> Result<Message> {
    let (name, title, author, text): (Option<String>, String, Option<String>, Option<String>) = db
        .query_row(
            "SELECT people.name, notifications.title, notifications.author, notifications.text
               FROM notifications JOIN people ON people.id = notifications.person
              WHERE notifications.id = ?1",
            [row.notification],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
    let mut context = BTreeMap::new();
    context.insert("title", title);
    if let Some(text) = text {
        context.insert("text", text);
    }
    if let Some(name) = name {
        context.insert("name", name);
    }
    if let Some(author) = author {
        context.insert("author", author);
    }
    let render = |name: &str| templates.get_template(name)?.render(&context);
    Ok(match row.channel.as_str() {
        "push" => Message::Push(fit(render("comment.push.txt")?, PUSH_PAYLOAD_LIMIT)),
        _ => Message::Email {
            text: render("comment.txt")?,
            html: render("comment.html")?,
        },
    })
}

/// Cuts `text` to at most `limit` bytes, on a character boundary, ending
/// with an ellipsis when anything was cut.
fn fit(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit - ELLIPSIS.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(ELLIPSIS);
    text
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
