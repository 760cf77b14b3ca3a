//! Case 01: invitations.
//!
//! An admin invites people to workspaces. Each invite adds a membership, takes
//! a seat on the workspace's plan and emails the person. `notify run 1` shows
//! what goes wrong; chapters/01-send-after-commit.md explains why.

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

/// Adds the invitee to the workspace, takes a seat on its plan, and tells them.
pub fn invite(db: &mut Db, email: &Email, invite: &Invite) -> Result<()> {
    let tx = db.transaction()?;
    tx.execute(
        "INSERT INTO memberships (email, workspace) VALUES (?1, ?2)",
        (&invite.email, &invite.workspace),
    )?;
    email.send(&invite.email, &format!("You joined {}", invite.workspace))?;
    tx.execute(
        "UPDATE workspaces SET free_seats = free_seats - 1 WHERE id = ?1",
        [&invite.workspace],
    )?;
    tx.commit()?;
    Ok(())
}

/// Runs after every invite and when the service starts: sends what the outbox
/// holds, oldest first, and marks each row sent.
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
