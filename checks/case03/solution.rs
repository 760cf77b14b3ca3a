//! Case 03, reference solution: claim first, then send what you claimed.
//!
//! An outbox row is PENDING until a relay claims it. One UPDATE moves a batch
//! of PENDING rows to PROCESSING under the relay's name and returns them; the
//! relay sends only those, under chapter 2's key, and marks each one SENT.
//! SQLite runs every writing statement under its single write lock, so two
//! relays claiming at the same instant take turns: the second one's
//! `WHERE status = 'PENDING'` no longer matches what the first one took.

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

/// The most rows one claim takes: big enough to spread a commit over many
/// rows, small enough that other relays find work too.
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

/// Runs in every relay process, when it starts and then every few seconds:
/// claims a batch, sends it, marks each row sent, and claims again until
/// nothing is left. `worker` names the process running it, e.g. `relay-2`.
pub fn relay(db: &mut Db, providers: &Providers, clock: &Clock, worker: &Worker) -> Result<()> {
    loop {
        let claimed = claim(db, clock, worker)?;
        if claimed.is_empty() {
            return Ok(());
        }
        for (id, recipient, body) in claimed {
            // The key names the row: a crash between send and mark still
            // repeats harmlessly, as in chapter 2.
            let key = format!("outbox/{id}");
            providers.email.send_with_key(&key, &recipient, &body)?;
            db.execute(
                "UPDATE outbox SET status = 'SENT' WHERE id = ?1 AND claimed_by = ?2",
                (id, &worker.name),
            )?;
        }
    }
}

/// Moves up to [`BATCH`] pending rows to PROCESSING under `worker`'s name in
/// one statement, and returns them, oldest first.
fn claim(db: &Db, clock: &Clock, worker: &Worker) -> Result<Vec<(i64, String, String)>> {
    let mut claimed: Vec<(i64, String, String)> = db
        .prepare(
            "UPDATE outbox
                SET status = 'PROCESSING', claimed_by = ?1, claimed_at = ?2
              WHERE id IN (SELECT id FROM outbox
                            WHERE status = 'PENDING'
                            ORDER BY id
                            LIMIT ?3)
             RETURNING id, recipient, body",
        )?
        .query_map((&worker.name, clock.now()?, BATCH), |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    // RETURNING gives rows in no promised order.
    claimed.sort();
    Ok(claimed)
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
