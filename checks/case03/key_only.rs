//! Case 03, wrong fix: chapter 2's key, and no claim.
//!
//! The relay is the shipped one with the idempotency key put back. Every
//! relay still sends every row it read, but the provider recognises the
//! second send of a key and delivers nothing new, so nobody gets two emails.
//! The race is still there: each row costs the provider two calls, and only
//! the key's 24-hour memory stands between the relays and a duplicate (many
//! channels have no key at all). `notify check 3` must fail it: rows go to
//! the provider more than once.

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

/// Runs in every relay process: sends everything the outbox holds, oldest
/// first, under each row's key, and marks each row sent.
pub fn relay(db: &mut Db, providers: &Providers, _clock: &Clock, _worker: &Worker) -> Result<()> {
    let unsent: Vec<(i64, String, String)> = db
        .prepare("SELECT id, recipient, body FROM outbox WHERE sent = 0 ORDER BY id")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, recipient, body) in unsent {
        providers
            .email
            .send_with_key(&format!("outbox/{id}"), &recipient, &body)?;
        db.execute("UPDATE outbox SET sent = 1 WHERE id = ?1", [id])?;
    }
    Ok(())
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
