//! Case 03, wrong fix: a claim that records no owner.
//!
//! The claim itself is right: one UPDATE moves a batch of PENDING rows to
//! PROCESSING. But it records no owner, so the relay finds what it claimed
//! by reading every PROCESSING row back, and those include the rows another
//! relay claimed and is sending right now. `notify check 3` must fail it:
//! rows go out twice.

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

/// Runs in every relay process: claims a batch, sends what is claimed, and
/// repeats until nothing is left.
pub fn relay(db: &mut Db, providers: &Providers, clock: &Clock, _worker: &Worker) -> Result<()> {
    loop {
        let taken = db.execute(
            "UPDATE outbox SET status = 'PROCESSING', claimed_at = ?1
              WHERE id IN (SELECT id FROM outbox
                            WHERE status = 'PENDING'
                            ORDER BY id
                            LIMIT ?2)",
            (clock.now()?, BATCH),
        )?;
        if taken == 0 {
            return Ok(());
        }
        let claimed: Vec<(i64, String, String)> = db
            .prepare(
                "SELECT id, recipient, body FROM outbox
                  WHERE status = 'PROCESSING' ORDER BY id",
            )?
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (id, recipient, body) in claimed {
            providers.email.send(&recipient, &body)?;
            db.execute("UPDATE outbox SET status = 'SENT' WHERE id = ?1", [id])?;
        }
    }
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
