//! Case 04, reference solution: hold locks for a commit, not a send.
//!
//! The relay works in two phases. It claims its rows in one short
//! transaction, sends them with no transaction open, and records each result
//! in a short transaction of its own. The write lock is held for a commit's
//! worth of time, never for a provider's answer, so invites keep flowing
//! while the provider is slow.

use std::time::Duration;

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

/// How long an invite may wait for the database. An invite answers an admin
/// who clicked a button: past this budget it reports an error rather than
/// leave them watching a spinner.
pub const INVITE_BUDGET: Duration = Duration::from_millis(100);

/// The most rows one relay run claims.
const BATCH: i64 = 50;

/// Adds the invitee to the workspace, takes a seat on its plan, and queues
/// the email in the outbox, all in one transaction.
pub fn invite(db: &mut Db, _email: &Email, invite: &Invite) -> Result<()> {
    db.busy_timeout(INVITE_BUDGET)?;
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

/// Runs in the relay process when it starts and then every few seconds, in
/// two phases, so the write lock is never held while the provider works:
/// 1. claim a batch of pending rows under `worker`'s name in one short
///    transaction (a single statement);
/// 2. send each row with no transaction open, then record that it was sent
///    in a short transaction of its own.
pub fn relay(db: &mut Db, providers: &Providers, clock: &Clock, worker: &Worker) -> Result<()> {
    let mut claimed: Vec<(i64, String, String)> = db
        .prepare(
            "UPDATE outbox SET status = 'PROCESSING', claimed_by = ?1, claimed_at = ?2
             WHERE id IN (SELECT id FROM outbox WHERE status = 'PENDING' ORDER BY id LIMIT ?3)
             RETURNING id, recipient, body",
        )?
        .query_map((&worker.name, clock.now()?, BATCH), |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    // RETURNING gives rows in no promised order: send the oldest first.
    claimed.sort();
    for (id, recipient, body) in claimed {
        // No transaction is open here: invites commit while the provider works.
        let key = format!("outbox/{id}");
        providers.email.send_with_key(&key, &recipient, &body)?;
        db.execute(
            "UPDATE outbox SET status = 'SENT' WHERE id = ?1 AND claimed_by = ?2",
            (id, &worker.name),
        )?;
    }
    Ok(())
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
