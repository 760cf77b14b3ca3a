//! Case 04, wrong fix: one transaction per row.
//!
//! The relay no longer holds one transaction for the whole batch: it claims,
//! sends and marks one row at a time, each row in a transaction of its own.
//! The transactions are shorter, but each one is still open across its
//! row's send, so the write lock is held for as long as the provider takes,
//! send after send, with only an instant free in between. An invite still
//! waits for the send in progress, and usually for the next ones too.
//! `notify check 4` must fail it on both the failing and the waiting property.

use std::time::Duration;

use lab::{Clock, Db, Email, Invite, Providers, Result, Worker};
use rusqlite::{OptionalExtension, TransactionBehavior};

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

/// Runs in the relay process when it starts and then every few seconds:
/// claims, sends and marks one pending row at a time, each row in its own
/// short transaction.
pub fn relay(db: &mut Db, providers: &Providers, clock: &Clock, worker: &Worker) -> Result<()> {
    for _ in 0..BATCH {
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row: Option<(i64, String, String)> = tx
            .query_row(
                "UPDATE outbox SET status = 'PROCESSING', claimed_by = ?1, claimed_at = ?2
                 WHERE id = (SELECT id FROM outbox WHERE status = 'PENDING' ORDER BY id LIMIT 1)
                 RETURNING id, recipient, body",
                (&worker.name, clock.now()?),
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        let Some((id, recipient, body)) = row else {
            return Ok(());
        };
        let key = format!("outbox/{id}");
        providers.email.send_with_key(&key, &recipient, &body)?;
        tx.execute(
            "UPDATE outbox SET status = 'SENT' WHERE id = ?1 AND claimed_by = ?2",
            (id, &worker.name),
        )?;
        tx.commit()?;
    }
    Ok(())
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
