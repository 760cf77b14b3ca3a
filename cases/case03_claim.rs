//! Case 03: two relays, one outbox.
//!
//! Invites queue their email in the outbox (chapter 1), and a relay sends
//! what the outbox holds. For availability the service now runs two or more
//! relay processes on the same database file, and each one polls the outbox
//! on its own. `notify run 3` shows what goes wrong;
//! chapters/03-two-relays.md explains why.

use lab::{Clock, Db, Email, Invite, Providers, Result, Worker};

/// The service's tables. A plan with no seat left cannot take another member.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS workspaces (
        id         TEXT PRIMARY KEY,
        free_seats INTEGER NOT NULL CHECK (free_seats >= 0)
    );
    CREATE TABLE IF NOT EXISTS memberships (
        email     TEXT NOT NULL,
        workspace TEXT NOT NULL REFERENCES workspaces (id),
        PRIMARY KEY (email, workspace)
    );
    CREATE TABLE IF NOT EXISTS outbox (
        id        INTEGER PRIMARY KEY,
        recipient TEXT NOT NULL,
        body      TEXT NOT NULL,
        sent      INTEGER NOT NULL DEFAULT 0
    );
";

/// Adds the invitee to the workspace, takes a seat on its plan, and queues
/// the email in the outbox, all in one transaction.
pub fn invite(db: &mut Db, _email: &Email, invite: &Invite) -> Result<()> {
    let tx = db.transaction()?;
    tx.execute(
        "INSERT INTO memberships (email, workspace) VALUES (?1, ?2)",
        (&invite.email, &invite.workspace),
    )?;
    tx.execute(
        "INSERT INTO outbox (recipient, body) VALUES (?1, ?2)",
        (&invite.email, format!("You joined {}", invite.workspace)),
    )?;
    tx.execute(
        "UPDATE workspaces SET free_seats = free_seats - 1 WHERE id = ?1",
        [&invite.workspace],
    )?;
    tx.commit()?;
    Ok(())
}

/// Runs in every relay process, when it starts and then every few seconds:
/// sends everything the outbox holds, oldest first, and marks each row sent.
/// `worker` names the process running it, e.g. `relay-2`.
///
/// It sends without chapter 2's idempotency key for now: chapter 3 explains
/// why, and when to put it back.
pub fn relay(db: &mut Db, providers: &Providers, _clock: &Clock, _worker: &Worker) -> Result<()> {
    let unsent: Vec<(i64, String, String)> = db
        .prepare("SELECT id, recipient, body FROM outbox WHERE sent = 0 ORDER BY id")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, recipient, body) in unsent {
        providers.email.send(&recipient, &body)?;
        db.execute("UPDATE outbox SET sent = 1 WHERE id = ?1", [id])?;
    }
    Ok(())
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
