//! Case 03, wrong fix: each relay takes the rows its number picks out.
//!
//! No claim at all: `relay-1` sends the odd rows and `relay-2` the even ones,
//! by `id % 2`. With exactly two relays that works; with three, `relay-3`
//! takes the odd rows too, and a fourth relay would share the even ones.
//! It is tuned to the chapter's two relays. `notify check 3` must fail it on
//! a random race with more relays.

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

/// Runs in every relay process: sends the pending rows whose id matches
/// this relay's number, and marks them sent.
pub fn relay(db: &mut Db, providers: &Providers, clock: &Clock, worker: &Worker) -> Result<()> {
    let number: i64 = worker
        .name
        .trim_start_matches("relay-")
        .parse()
        .unwrap_or(1);
    let mine: Vec<(i64, String, String)> = db
        .prepare(
            "SELECT id, recipient, body FROM outbox
              WHERE status = 'PENDING' AND id % 2 = ?1 % 2 ORDER BY id",
        )?
        .query_map([number], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, recipient, body) in mine {
        db.execute(
            "UPDATE outbox SET status = 'PROCESSING', claimed_by = ?1, claimed_at = ?2
              WHERE id = ?3",
            (&worker.name, clock.now()?, id),
        )?;
        providers.email.send(&recipient, &body)?;
        db.execute("UPDATE outbox SET status = 'SENT' WHERE id = ?1", [id])?;
    }
    Ok(())
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
