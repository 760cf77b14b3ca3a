//! Case 03, wrong fix: select, then update, in two statements.
//!
//! The relay reads a batch of PENDING rows, then marks exactly those rows
//! PROCESSING under its name, and sends them. Between the SELECT and the
//! UPDATE another relay can read the same rows: both UPDATEs succeed (the
//! second does not ask whether the row is still PENDING), and both relays
//! send them. `notify check 3` must fail it: rows go out twice.

use lab::{Clock, Db, Email, Invite, Providers, Result, Worker};

/// The service's tables. An outbox row is PENDING until a relay claims it
/// (PROCESSING, with the relay's name and the time of the claim), then SENT.
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
        id         INTEGER PRIMARY KEY,
        recipient  TEXT NOT NULL,
        body       TEXT NOT NULL,
        status     TEXT NOT NULL DEFAULT 'PENDING'
                   CHECK (status IN ('PENDING', 'PROCESSING', 'SENT')),
        claimed_by TEXT,
        claimed_at INTEGER
    );
";

/// The most rows one claim takes.
const BATCH: i64 = 50;

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

/// Runs in every relay process: reads a batch of pending rows, claims them,
/// sends them, and repeats until nothing is pending.
pub fn relay(db: &mut Db, providers: &Providers, clock: &Clock, worker: &Worker) -> Result<()> {
    loop {
        let batch: Vec<(i64, String, String)> = db
            .prepare(
                "SELECT id, recipient, body FROM outbox
                  WHERE status = 'PENDING' ORDER BY id LIMIT ?1",
            )?
            .query_map([BATCH], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        if batch.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = batch.iter().map(|(id, _, _)| *id).collect();
        db.execute(
            "UPDATE outbox SET status = 'PROCESSING', claimed_by = ?1, claimed_at = ?2
              WHERE id IN (SELECT value FROM json_each(?3))",
            (&worker.name, clock.now()?, serde_json::to_string(&ids)?),
        )?;
        for (id, recipient, body) in batch {
            providers.email.send(&recipient, &body)?;
            db.execute("UPDATE outbox SET status = 'SENT' WHERE id = ?1", [id])?;
        }
    }
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
