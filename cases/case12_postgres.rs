//! Case 12: many relays, one outbox on PostgreSQL.
//!
//! The service has outgrown one machine: its outbox lives on a PostgreSQL
//! server, and several relay processes, on several machines, drain it at
//! once. Any of them may be killed at any moment and started again.
//! `notify run 12` shows what goes wrong; chapters/12-many-machines.md
//! explains why.

use std::time::Duration;

use lab::pg::Email;
use lab::Result;
use postgres::Client;

/// The outbox. `claimed_by` names the relay that holds a PROCESSING row,
/// `claimed_at` says since when.
pub const SCHEMA: &str = "
    CREATE TABLE outbox (
        id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        recipient  TEXT NOT NULL,
        body       TEXT NOT NULL,
        status     TEXT NOT NULL DEFAULT 'PENDING'
                   CHECK (status IN ('PENDING', 'PROCESSING', 'SENT')),
        claimed_by TEXT,
        claimed_at TIMESTAMPTZ,
        sent_at    TIMESTAMPTZ
    );
    CREATE INDEX outbox_pending ON outbox (id) WHERE status = 'PENDING';
";

/// How many rows a relay claims at a time.
const BATCH: i64 = 50;

/// Runs in every relay process, over and over: takes up to 50 pending
/// rows, sends them, and marks each one SENT. `me` names this relay
/// process, e.g. `relay-2`. Returns how many rows it took.
pub fn relay(db: &mut Client, email: &Email, me: &str) -> Result<usize> {
    // FOR UPDATE locks the rows it returns, so no other relay can take
    // them before this transaction ends: each row is sent by one relay.
    let mut tx = db.transaction()?;
    let rows = tx.query(
        "SELECT id, recipient, body FROM outbox
          WHERE status = 'PENDING'
          ORDER BY id
          LIMIT $1
            FOR UPDATE",
        &[&BATCH],
    )?;
    for row in &rows {
        let id: i64 = row.get(0);
        let recipient: String = row.get(1);
        let body: String = row.get(2);
        email.send_with_key(&format!("outbox-{id}"), &recipient, &body)?;
        tx.execute(
            "UPDATE outbox SET status = 'SENT', claimed_by = $2, sent_at = now()
              WHERE id = $1",
            &[&id, &me],
        )?;
    }
    tx.commit()?;
    Ok(rows.len())
}

/// Runs in every relay process, every so often. There is nothing to sweep:
/// a relay killed in the middle of its batch never committed, so
/// PostgreSQL rolls its transaction back and its rows are PENDING again.
pub fn sweep(_db: &mut Client, _stale_after: Duration) -> Result<u64> {
    Ok(0)
}

lab::serve_postgres!(schema: SCHEMA, relay: relay, sweep: sweep);
