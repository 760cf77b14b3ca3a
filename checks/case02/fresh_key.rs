//! Case 02, wrong fix: a fresh key on every attempt.
//!
//! The relay passes an idempotency key, but draws a new random one each time
//! it sends, the way a request id is made. A repeat after a crash or a timeout
//! carries a key the provider has never seen, so it is delivered again.
//! `notify check 2` must fail it on the crash and the timeout properties.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

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
        email.send_with_key(&request_id(), &recipient, &body)?;
        db.execute("UPDATE outbox SET sent = 1 WHERE id = ?1", [id])?;
    }
    Ok(())
}

/// A random id for one request, like a UUID.
fn request_id() -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:016x}", hasher.finish())
}

lab::serve!(schema: SCHEMA, ops: [invite, relay]);
