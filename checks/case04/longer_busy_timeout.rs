//! Case 04, wrong fix: a longer busy timeout.
//!
//! The relay is unchanged and still sends inside its transaction; the invite
//! simply waits up to 10 s for the write lock instead of 100 ms. No invite
//! fails any more, but one that arrives while the relay sends waits for
//! every send still to come: the admin watches a spinner for a second
//! instead of seeing an error after 100 ms, and a slower provider makes it
//! longer. `notify check 4` must fail it on the waiting property.

use std::time::Duration;

use lab::{Clock, Db, Email, Invite, Providers, Result, Worker};
use rusqlite::TransactionBehavior;

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

/// How long an invite may wait for the database: long enough for the relay
/// to finish, so that invites stop failing.
pub const INVITE_BUDGET: Duration = Duration::from_secs(10);

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

/// Runs in the relay process when it starts and then every few seconds:
/// claims a batch of pending rows under `worker`'s name, sends each one
/// under its key, and marks it sent. It is all one transaction, so if
/// anything fails half-way, every claim rolls back and the rows are PENDING
/// again; the keys make the repeated sends harmless.
pub fn relay(db: &mut Db, providers: &Providers, clock: &Clock, worker: &Worker) -> Result<()> {
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut claimed: Vec<(i64, String, String)> = tx
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
        let key = format!("outbox/{id}");
        providers.email.send_with_key(&key, &recipient, &body)?;
        tx.execute(
            "UPDATE outbox SET status = 'SENT' WHERE id = ?1 AND claimed_by = ?2",
            (id, &worker.name),
        )?;
    }
    tx.commit()?;
    Ok(())
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
