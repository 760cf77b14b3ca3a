//! Case 02: invitations, sent through an outbox.
//!
//! An admin invites people to workspaces. Each invite adds a membership, takes
//! a seat on the workspace's plan and queues the invitation email in the
//! outbox, all in one transaction: the fix from chapter 1. The relay sends
//! what the outbox holds. `notify run 2` shows what goes wrong when the
//! process dies at the wrong moment; chapters/02-repeats-are-harmless.md
//! explains why.

use lab::{Db, Email, Invite, Result};

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

/// Runs after every invite, every minute, and when the service starts: sends
/// what the outbox holds, oldest first, and marks each row sent.
pub fn relay(db: &mut Db, email: &Email) -> Result<()> {
    let unsent: Vec<(i64, String, String)> = db
        .prepare("SELECT id, recipient, body FROM outbox WHERE sent = 0 ORDER BY id")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, recipient, body) in unsent {
        email.send(&recipient, &body)?;
        db.execute("UPDATE outbox SET sent = 1 WHERE id = ?1", [id])?;
    }
    Ok(())
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
