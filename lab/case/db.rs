//! The service's database, and where the lab injects commit faults.
//!
//! [`Db`] is a real rusqlite [`Connection`] on `app.db` (WAL, `synchronous=FULL`,
//! foreign keys on); it dereferences to the connection, so a case uses plain
//! rusqlite: `db.transaction()`, `tx.execute(...)`, `tx.commit()`.
//!
//! Faults live in SQLite's own hooks, so they cover every commit, whether it
//! ends an explicit transaction or a single autocommit statement:
//! - the commit hook counts each commit and, for a failing commit, answers
//!   "roll back": SQLite turns the COMMIT into a ROLLBACK and the case gets the
//!   real error (`SQLITE_CONSTRAINT_COMMITHOOK`);
//! - the write-ahead-log hook runs once the commit is in the log file, and
//!   there a crash aborts the process: no destructor, no flush, no catch.
//!   A commit whose writes changed no page (an update that sets what was
//!   there) never reaches the log file; the world records it, and a crash
//!   after it strikes, before the process does anything else it can see.

use std::collections::{BTreeSet, HashMap};
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::config::DbConfig;
use rusqlite::Connection;

use crate::scenario::Fault;
use crate::world::{Kind, Recorder};

/// The SQLite settings every service database in the lab uses.
pub const DURABLE: &str = "
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    PRAGMA foreign_keys = ON;
";

/// Prepared statements a service database keeps for reuse.
const STATEMENTS_KEPT: usize = 64;

/// Pages in the write-ahead log before the lab checkpoints it, as SQLite's default does.
const CHECKPOINT_PAGES: i32 = 1000;

/// The service's database: a rusqlite connection with the lab's fault points.
pub struct Db {
    conn: Connection,
}

impl Db {
    /// Opens (or creates) a database with the lab's durable settings.
    pub fn open(path: &Path) -> Result<Db> {
        let conn = Connection::open(path)
            .with_context(|| format!("could not open the database {}", path.display()))?;
        conn.execute_batch(DURABLE)
            .with_context(|| format!("could not set up the database {}", path.display()))?;
        // The query planner stability guarantee: a statement keeps the plan
        // it was prepared with. Without it, SQLite prepares a statement
        // again each time a new value is bound to a `LIMIT ?`, as every
        // claim here has, to plan for that value: a parse per claim, for
        // the same plan.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .with_context(|| format!("could not set up the database {}", path.display()))?;
        // Room for every statement a case runs again and again (see
        // [`Db::execute`]).
        conn.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        Ok(Db { conn })
    }

    /// Counts commits against the running operation and injects `fault`;
    /// with `busy_after`, the database is busy that long after each commit.
    pub(crate) fn watch(
        &mut self,
        recorder: Arc<Mutex<Recorder>>,
        fault: Option<Fault>,
        busy_after: Option<Duration>,
    ) {
        let tracker = Arc::new(Mutex::new(Tracker {
            fault,
            counts: HashMap::new(),
            writes: BTreeSet::new(),
        }));

        // What each transaction writes, so that a commit is known by its
        // kind (an outbox row inserted, a claim) whichever code made it.
        let track = tracker.clone();
        self.conn
            .update_hook(Some(
                move |action: rusqlite::hooks::Action, _: &str, table: &str, _| {
                    let verb = match action {
                        rusqlite::hooks::Action::SQLITE_INSERT => "insert",
                        rusqlite::hooks::Action::SQLITE_UPDATE => "update",
                        rusqlite::hooks::Action::SQLITE_DELETE => "delete",
                        _ => "write",
                    };
                    lock(&track).writes.insert(format!("{verb} {table}"));
                },
            ))
            .expect("an update hook can always be installed");
        let track = tracker.clone();
        self.conn
            .rollback_hook(Some(move || lock(&track).writes.clear()))
            .expect("a rollback hook can always be installed");

        let (rec, track) = (recorder.clone(), tracker.clone());
        self.conn
            .commit_hook(Some(move || {
                let mut rec = lock(&rec);
                let mut track = lock(&track);
                let op = rec.op().unwrap_or("start-up").to_string();
                let nth = track.counts.entry(op.clone()).or_insert(0);
                *nth += 1;
                let nth = *nth;
                let fail = track.fault
                    == Some(Fault::FailCommit {
                        op: op.clone(),
                        nth,
                    });
                if fail {
                    // The world must know before SQLite rolls back: nothing after
                    // this point is guaranteed to run if the case then crashes.
                    let _ = rec.event(
                        Kind::CommitFailed,
                        Some(nth),
                        &format!("{op} commit {nth} fails, rolled back"),
                    );
                } else {
                    let writes: Vec<String> =
                        std::mem::take(&mut track.writes).into_iter().collect();
                    let crash = track.fault
                        == Some(Fault::CrashAfterCommit {
                            op: op.clone(),
                            nth,
                        });
                    rec.hold_commit(nth, &writes.join(", "), crash);
                }
                fail
            }))
            .expect("a commit hook can always be installed");

        // With `busy_after` set, another writer (a busy web app) takes the
        // write lock right after each commit, once the commit's own lock is
        // free, and holds it that long on a thread of its own: the case's
        // next write waits for it. It never waits itself: with the lock
        // taken by another process, that commit goes without it.
        let other = busy_after.and_then(|hold| {
            let path = self.conn.path()?;
            let other = Connection::open(path).ok()?;
            other.busy_timeout(Duration::ZERO).ok()?;
            Some((Arc::new(Mutex::new(other)), hold))
        });
        self.conn
            .wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages| {
                let _ = lock(&recorder).flush_commit();
                if pages >= CHECKPOINT_PAGES {
                    wal.checkpoint()?;
                }
                if let Some((other, hold)) = &other {
                    if lock(other).execute_batch("BEGIN IMMEDIATE").is_ok() {
                        let (other, hold) = (other.clone(), *hold);
                        std::thread::spawn(move || {
                            std::thread::sleep(hold);
                            let _ = lock(&other).execute_batch("ROLLBACK");
                        });
                    }
                }
                Ok(())
            }))
            .expect("a write-ahead-log hook can always be installed");
    }
}

struct Tracker {
    fault: Option<Fault>,
    counts: HashMap<String, u32>,
    /// What the open transaction has written so far.
    writes: BTreeSet<String>,
}

/// Locks a mutex even if a panicking thread poisoned it: the lab must still
/// record what happened.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Db {
    /// Runs one statement, as [`Connection::execute`] does, from the
    /// connection's cache of prepared statements: a statement the service
    /// runs on every wake-up is parsed once per process, not once per run.
    /// The statement, its parameters, its answer and its errors are the
    /// same.
    pub fn execute<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.conn.prepare_cached(sql)?.execute(params)
    }

    /// Prepares a statement, as [`Connection::prepare`] does, from the
    /// cache of prepared statements (see [`Db::execute`]). What it gives
    /// dereferences to a rusqlite `Statement`.
    pub fn prepare(&self, sql: &str) -> rusqlite::Result<rusqlite::CachedStatement<'_>> {
        self.conn.prepare_cached(sql)
    }

    /// Runs one query for one row, as [`Connection::query_row`] does, from
    /// the cache of prepared statements (see [`Db::execute`]). A statement
    /// that writes (an `UPDATE ... RETURNING`) commits, outside a
    /// transaction, only once it has run to its end: it is run there, so a
    /// commit that fails is this call's error, as it is `execute`'s, and
    /// not lost when the statement is put back.
    pub fn query_row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        let mut statement = self.conn.prepare_cached(sql)?;
        let writes = !statement.readonly();
        let mut rows = statement.query(params)?;
        let value = match rows.next()? {
            Some(row) => f(row)?,
            None => return Err(rusqlite::Error::QueryReturnedNoRows),
        };
        if writes {
            while rows.next()?.is_some() {}
        }
        Ok(value)
    }
}

impl Deref for Db {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl DerefMut for Db {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }
}
