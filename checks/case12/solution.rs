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

/// Runs in every relay process, over and over: claims up to 50 pending
/// rows, sends them, and marks each one SENT. `me` names this relay
/// process, e.g. `relay-2`. Returns how many rows it claimed.
pub fn relay(db: &mut Client, email: &Email, me: &str) -> Result<usize> {
    // One statement, so one short transaction: the row locks last until
    // it commits, microseconds; the claim lives on in status and
    // claimed_by. Rows another relay is claiming right now are skipped,
    // not waited for.
    let claimed = db.query(
        "WITH picked AS (
             SELECT id FROM outbox
              WHERE status = 'PENDING'
              ORDER BY id
              LIMIT $2
                FOR UPDATE SKIP LOCKED
         )
         UPDATE outbox
            SET status = 'PROCESSING', claimed_by = $1, claimed_at = now()
           FROM picked
          WHERE outbox.id = picked.id
         RETURNING outbox.id, outbox.recipient, outbox.body",
        &[&me, &BATCH],
    )?;
    // The sends, with no transaction open. The key belongs to the row, so
    // a row sent again after a kill is delivered once.
    for row in &claimed {
        let id: i64 = row.get(0);
        let recipient: String = row.get(1);
        let body: String = row.get(2);
        email.send_with_key(&format!("outbox-{id}"), &recipient, &body)?;
        // Fenced: only while the row is still this relay's claim.
        db.execute(
            "UPDATE outbox SET status = 'SENT', sent_at = now()
              WHERE id = $1 AND status = 'PROCESSING' AND claimed_by = $2",
            &[&id, &me],
        )?;
    }
    Ok(claimed.len())
}

/// Runs in every relay process, every so often: a row PROCESSING for longer
/// than `stale_after` belongs to a relay that died holding it, and goes
/// back to PENDING for another relay to claim.
pub fn sweep(db: &mut Client, stale_after: Duration) -> Result<u64> {
    let returned = db.execute(
        "UPDATE outbox
            SET status = 'PENDING', claimed_by = NULL, claimed_at = NULL
          WHERE status = 'PROCESSING'
            AND claimed_at < now() - $1::float8 * interval '1 second'",
        &[&stale_after.as_secs_f64()],
    )?;
    Ok(returned)
}

lab::serve_postgres!(schema: SCHEMA, relay: relay, sweep: sweep);
