//! `notify try locks`: how long an invite waits while a relay sends slowly.
//!
//! Chapter 4 says: never keep a transaction open while a provider answers.
//! This experiment runs two threads on one real SQLite file with durable
//! commits: a relay draining a long outbox through a simulated provider (a
//! real sleep per send), and three admins inviting people at random moments,
//! each invite in its own short transaction. It times every invite while the relay works
//! in three ways: sending inside one transaction per batch (as chapter 4's
//! case ships), inside one transaction per row, and with no transaction
//! open at all (the fix). The lesson is in the medians: an invite waits for
//! whatever transaction the relay holds, so with the send inside it waits
//! for the provider, and with the send outside only for other commits.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use colored::Colorize;
use rusqlite::{Connection, TransactionBehavior};
use serde::Serialize;
use tempfile::TempDir;

use super::database::{self, Settings};
use super::timing::{self, how_much, percentile_us, round, Options, Progress};
use super::Journal;
use crate::rng::Rng;

/// Invites timed per variant when `--iterations` is not given; the time
/// budget usually ends the run first.
pub const DEFAULT_ITERATIONS: usize = 300;

/// Measuring stops after this long unless `--iterations` was given.
pub const TIME_BUDGET: Duration = Duration::from_secs(7);

/// Real time the simulated provider takes for one send.
pub const SEND_LATENCY: Duration = Duration::from_millis(30);

/// Rows the relay claims at a time.
pub const BATCH_ROWS: usize = 4;

/// How long the relay rests between batches, as a poller does.
pub const RELAY_PAUSE: Duration = Duration::from_millis(30);

/// One turn of the relay: a batch of sends, then its rest.
pub const RELAY_CYCLE: Duration = Duration::from_millis(
    BATCH_ROWS as u64 * SEND_LATENCY.as_millis() as u64 + RELAY_PAUSE.as_millis() as u64,
);

/// The budget chapter 4's invite has: the table counts invites over it,
/// which at that busy timeout would have failed with "database is locked".
pub const INVITE_BUDGET: Duration = Duration::from_millis(100);

/// Invites run and thrown away before measuring, with no relay running.
pub const WARM_UP_INVITES: usize = 20;

/// Admins inviting at the same time, each on a connection of their own, as
/// requests from several people would.
pub const ADMINS: usize = 3;

/// Invites per stretch of one variant. The variants take turns in short
/// stretches, so slow moments of the machine land on all of them alike and
/// a round of all three (under a second) ends soon after the time budget.
const STRETCH: usize = 12;

/// Pending rows in the outbox before the run: more than any run can send.
const BACKLOG_ROWS: usize = 5000;

/// A connection that finds the database locked tries again this often...
const RETRY_EVERY: Duration = Duration::from_millis(1);

/// ...for up to this many tries (30 s), so a wait is measured, not cut short.
const RETRIES: i32 = 30_000;

/// Seeds the admins' pauses, so every run draws the same ones.
const PAUSE_SEED: u64 = 4;

/// The closing line's fixed part; `render` adds this run's figures.
pub const TAKEAWAY: &str = "an invite waits for whatever transaction the relay holds open";

/// The invite's tables and the outbox, with a long backlog to send.
const SCHEMA: &str = "
    CREATE TABLE workspaces (
        id         TEXT PRIMARY KEY,
        free_seats INTEGER NOT NULL CHECK (free_seats >= 0)
    );
    CREATE TABLE memberships (
        email     TEXT NOT NULL,
        workspace TEXT NOT NULL REFERENCES workspaces (id),
        PRIMARY KEY (email, workspace)
    );
    CREATE TABLE outbox (
        id         INTEGER PRIMARY KEY,
        recipient  TEXT NOT NULL,
        body       TEXT NOT NULL,
        status     TEXT NOT NULL DEFAULT 'PENDING',
        claimed_by TEXT,
        claimed_at INTEGER
    );
    INSERT INTO workspaces (id, free_seats) VALUES ('ws_acme', 1000000000);
";

/// Fills the outbox with the relay's backlog.
const BACKLOG: &str = "
    WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
    INSERT INTO outbox (recipient, body)
    SELECT 'reader' || i || '@example.com', 'You joined ws_acme' FROM n
";

/// Claims up to ?2 pending rows for relay ?1.
const CLAIM: &str = "
    UPDATE outbox SET status = 'PROCESSING', claimed_by = ?1, claimed_at = ?3
    WHERE id IN (SELECT id FROM outbox WHERE status = 'PENDING' ORDER BY id LIMIT ?2)
    RETURNING id
";

/// Records that row ?1 was sent.
const MARK_SENT: &str = "UPDATE outbox SET status = 'SENT' WHERE id = ?1";

/// How the relay holds its transactions around the provider's sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Row a: claim, send and mark a whole batch in one transaction.
    InsideBatch,
    /// Row b: claim, send and mark one row per transaction.
    InsideRow,
    /// Row c: claim in one statement, send with no transaction open, mark each row.
    Outside,
}

impl Variant {
    /// All variants, in table order.
    pub const ALL: [Variant; 3] = [Variant::InsideBatch, Variant::InsideRow, Variant::Outside];

    /// The row label in the table and in the JSON document.
    pub fn label(self) -> &'static str {
        match self {
            Variant::InsideBatch => "send inside one transaction per batch",
            Variant::InsideRow => "send inside one transaction per row",
            Variant::Outside => "send with no transaction open",
        }
    }
}

/// Opens a connection to the experiment's database with the lab's settings.
fn connect(path: &Path, journal: Journal) -> Result<Connection> {
    let mut conn = database::open(path, journal)?;
    // SQLite's own busy handler backs off to 100 ms between tries and can
    // miss a lock that is free for a moment; trying every millisecond
    // measures how long the lock was really held.
    conn.busy_handler(Some(retry_soon))
        .with_context(|| format!("could not set a busy handler on {}", path.display()))?;
    Ok(conn)
}

/// The busy handler: wait a moment and try again, up to [`RETRIES`] times.
fn retry_soon(tries: i32) -> bool {
    std::thread::sleep(RETRY_EVERY);
    tries < RETRIES
}

/// A fresh experiment database in its own temporary folder, and the
/// admin's connection to it.
pub struct Bench {
    conn: Connection,
    /// One connection and one stream of pauses per admin.
    admins: Vec<(Connection, Rng)>,
    db_path: PathBuf,
    journal: Journal,
    invites: AtomicUsize,
    // Declared last so it drops last: the folder goes after the connections.
    dir: TempDir,
}

impl Bench {
    /// Creates the folder and the database, with a long backlog in the
    /// outbox, and connects the admins.
    pub fn new(journal: Journal) -> Result<Bench> {
        let dir = database::folder("locks")?;
        let db_path = dir.path().join("locks.db");
        let conn = connect(&db_path, journal)?;
        conn.execute_batch(SCHEMA).with_context(|| {
            format!(
                "could not create the invite and outbox tables in {}",
                db_path.display()
            )
        })?;
        conn.execute(BACKLOG, [BACKLOG_ROWS as i64])
            .with_context(|| format!("could not fill the outbox in {}", db_path.display()))?;
        let admins = (0..ADMINS)
            .map(|i| Ok((connect(&db_path, journal)?, Rng::new(PAUSE_SEED + i as u64))))
            .collect::<Result<_>>()?;
        Ok(Bench {
            conn,
            admins,
            db_path,
            journal,
            invites: AtomicUsize::new(0),
            dir,
        })
    }

    /// Runs `count` invites with no relay running, the admins taking turns.
    pub fn warm_up(&mut self, count: usize) -> Result<()> {
        for i in 0..count {
            let conn = &mut self.admins[i % ADMINS].0;
            invite(conn, &self.db_path, &self.invites)?;
        }
        Ok(())
    }

    /// Times `count` invites, shared among the admins, while a relay thread
    /// sends the way `variant` says, and adds each invite's time to `samples`.
    pub fn stretch(
        &mut self,
        variant: Variant,
        count: usize,
        samples: &mut Vec<Duration>,
    ) -> Result<()> {
        let stop = AtomicBool::new(false);
        let tickets = AtomicUsize::new(count);
        let timed = Mutex::new(Vec::with_capacity(count));
        let (path, journal) = (self.db_path.as_path(), self.journal);
        let invites = &self.invites;
        let outcome = std::thread::scope(|scope| {
            let relay = scope.spawn(|| relay(path, journal, variant, &stop));
            // Let the relay take its first claim, so the invites meet it mid-stream.
            std::thread::sleep(Duration::from_millis(5));
            let admins: Vec<_> = self
                .admins
                .iter_mut()
                .map(|(conn, pauses)| {
                    let (tickets, timed) = (&tickets, &timed);
                    scope.spawn(move || -> Result<()> {
                        while take(tickets) {
                            std::thread::sleep(pause(pauses));
                            let took = invite(conn, path, invites)?;
                            crate::db::lock(timed).push(took);
                        }
                        Ok(())
                    })
                })
                .collect();
            let mut outcome = Ok(());
            for admin in admins {
                let done = admin
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("an admin's thread panicked")));
                outcome = outcome.and(done);
            }
            stop.store(true, Ordering::Relaxed);
            let relayed = relay
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the relay thread panicked")));
            outcome.and(relayed)
        });
        samples.extend(timed.into_inner().unwrap_or_else(|p| p.into_inner()));
        outcome
    }

    /// The settings the database really runs with, read back from SQLite.
    pub fn settings(&self) -> Result<Settings> {
        Settings::read(&self.conn, &self.db_path, self.journal, self.dir.path())
    }
}

/// One invite, as chapter 4's case does it: a membership, its outbox row
/// and a seat, in one transaction. Returns how long it took.
fn invite(conn: &mut Connection, db_path: &Path, invites: &AtomicUsize) -> Result<Duration> {
    let n = invites.fetch_add(1, Ordering::Relaxed) + 1;
    let email = format!("admin-pick-{n}@example.com");
    let started = Instant::now();
    let tx = conn
        .transaction()
        .context("could not begin an invite's transaction")?;
    tx.execute(
        "INSERT INTO memberships (email, workspace) VALUES (?1, 'ws_acme')",
        [&email],
    )
    .and_then(|_| {
        tx.execute(
            "INSERT INTO outbox (recipient, body) VALUES (?1, 'You joined ws_acme')",
            [&email],
        )
    })
    .and_then(|_| {
        tx.execute(
            "UPDATE workspaces SET free_seats = free_seats - 1 WHERE id = 'ws_acme'",
            [],
        )
    })
    .and_then(|_| tx.commit())
    .with_context(|| format!("could not add {email} in {}", db_path.display()))?;
    Ok(started.elapsed())
}

/// Takes one of the stretch's invites, if any are left.
fn take(tickets: &AtomicUsize) -> bool {
    tickets
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

/// An admin's pause before the next invite: anything up to one relay
/// cycle, so that wherever the last invite ended (often just as the relay
/// committed), the next one meets the relay at any point of its cycle with
/// the same chance.
fn pause(pauses: &mut Rng) -> Duration {
    Duration::from_micros(pauses.between(0, RELAY_CYCLE.as_micros() as u64))
}

/// The relay thread: drains the outbox in batches until `stop`, holding its
/// transactions as `variant` says, with a real sleep for every send.
fn relay(path: &Path, journal: Journal, variant: Variant, stop: &AtomicBool) -> Result<()> {
    let mut conn = connect(path, journal)?;
    let started = Instant::now();
    let now = || started.elapsed().as_millis() as i64;
    let send = || std::thread::sleep(SEND_LATENCY);
    let context = || format!("the relay could not work on {}", path.display());
    while !stop.load(Ordering::Relaxed) {
        match variant {
            Variant::InsideBatch => {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .with_context(context)?;
                let ids = claim(&tx, BATCH_ROWS, now()).with_context(context)?;
                for id in ids {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    send();
                    tx.execute(MARK_SENT, [id]).with_context(context)?;
                }
                tx.commit().with_context(context)?;
            }
            Variant::InsideRow => {
                for _ in 0..BATCH_ROWS {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let tx = conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .with_context(context)?;
                    for id in claim(&tx, 1, now()).with_context(context)? {
                        send();
                        tx.execute(MARK_SENT, [id]).with_context(context)?;
                    }
                    tx.commit().with_context(context)?;
                }
            }
            Variant::Outside => {
                for id in claim(&conn, BATCH_ROWS, now()).with_context(context)? {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    send();
                    conn.execute(MARK_SENT, [id]).with_context(context)?;
                }
            }
        }
        std::thread::sleep(RELAY_PAUSE);
    }
    Ok(())
}

/// Claims up to `rows` pending rows; on a bare connection, in one statement.
fn claim(conn: &Connection, rows: usize, now_ms: i64) -> rusqlite::Result<Vec<i64>> {
    conn.prepare(CLAIM)?
        .query_map(("relay-1", rows as i64, now_ms), |row| row.get(0))?
        .collect()
}

/// One row of the table: the invites timed while the relay sent one way.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// How the relay sent, e.g. "send with no transaction open".
    pub label: String,
    /// Invites timed.
    pub invites: usize,
    /// Median time an invite took, in microseconds.
    pub median_us: f64,
    /// 99th percentile, in microseconds.
    pub p99_us: f64,
    /// The slowest invite, in microseconds.
    pub max_us: f64,
    /// Invites that took longer than [`INVITE_BUDGET`].
    pub over_budget: usize,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always "locks".
    pub experiment: &'static str,
    /// The settings the database ran with.
    pub settings: Settings,
    /// Real time one simulated send takes, in milliseconds.
    pub send_latency_ms: u64,
    /// Rows the relay claims at a time.
    pub batch_rows: usize,
    /// The invite budget the table counts against, in milliseconds.
    pub invite_budget_ms: u64,
    /// Invites timed per variant.
    pub iterations: usize,
    /// Invites asked for per variant; more than `iterations` when the time budget ended the run.
    pub iterations_requested: usize,
    /// Whether the time budget ended the run early.
    pub stopped_on_time_budget: bool,
    /// Invites run and discarded before measuring.
    pub warm_up_invites: usize,
    /// Wall time of the whole run, setup and warm-up included, in seconds.
    pub elapsed_s: f64,
    /// Rows a to c: inside a batch's transaction, inside a row's, outside.
    pub rows: Vec<Row>,
}

/// Runs the experiment: warms up, then times invites against each way of
/// relaying, the variants taking turns, and summarises each variant.
pub fn measure(opts: &Options) -> Result<Report> {
    ensure!(
        opts.iterations > 0,
        "the experiment needs at least one iteration"
    );
    let started = Instant::now();
    let mut bench = Bench::new(opts.journal)?;
    let settings = bench.settings()?;
    let mut progress = Progress::new(opts.progress);

    progress.show("warming up");
    bench.warm_up(WARM_UP_INVITES)?;

    let mut samples: [Vec<Duration>; 3] =
        std::array::from_fn(|_| Vec::with_capacity(opts.iterations));
    let mut done = 0;
    let mut stopped_on_time_budget = false;
    while done < opts.iterations {
        if opts.out_of_time(started) {
            stopped_on_time_budget = true;
            break;
        }
        let count = STRETCH.min(opts.iterations - done);
        for (variant, samples) in Variant::ALL.into_iter().zip(samples.iter_mut()) {
            progress.show(&format!(
                "{done}/{} invites each; now: {}",
                opts.iterations,
                variant.label()
            ));
            bench.stretch(variant, count, samples)?;
        }
        done += count;
    }
    progress.clear();

    let rows = Variant::ALL
        .iter()
        .zip(samples.iter_mut())
        .map(|(variant, samples)| Row {
            label: variant.label().to_string(),
            invites: samples.len(),
            median_us: round(percentile_us(samples, 0.5), 1),
            p99_us: round(percentile_us(samples, 0.99), 1),
            max_us: round(percentile_us(samples, 1.0), 1),
            over_budget: samples.iter().filter(|d| **d > INVITE_BUDGET).count(),
        })
        .collect();

    Ok(Report {
        experiment: "locks",
        settings,
        send_latency_ms: SEND_LATENCY.as_millis() as u64,
        batch_rows: BATCH_ROWS,
        invite_budget_ms: INVITE_BUDGET.as_millis() as u64,
        iterations: done,
        iterations_requested: opts.iterations,
        stopped_on_time_budget,
        warm_up_invites: WARM_UP_INVITES,
        elapsed_s: round(started.elapsed().as_secs_f64(), 2),
        rows,
    })
}

/// "0.84 ms", "152.3 ms": a time in microseconds, as milliseconds.
fn ms(us: f64) -> String {
    if us < 10_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.1} ms", us / 1000.0)
    }
}

/// The report as the table `notify try locks` prints, ending in a newline.
pub fn render(report: &Report) -> String {
    let width = report
        .rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    out.push_str(&format!(
        "\n  {}\n",
        "How long an invite waits while a relay sends slowly".bold()
    ));
    out.push_str(&format!("  {}\n", report.settings.describe().dimmed()));
    out.push_str(&format!(
        "  {}\n\n",
        format!(
            "the relay sends {} rows a batch, {} ms a send (a real sleep); then a {} ms rest; {} admins invite at random moments",
            report.batch_rows,
            report.send_latency_ms,
            RELAY_PAUSE.as_millis(),
            ADMINS
        )
        .dimmed()
    ));
    let budget = format!("over {} ms", report.invite_budget_ms);
    out.push_str(&format!(
        "  {:<w$} {:>11} {:>11} {:>11}  {budget}\n",
        "the relay's sends",
        "median",
        "p99",
        "max",
        w = width + 3
    ));
    for (letter, row) in ('a'..).zip(&report.rows) {
        out.push_str(&format!(
            "  {letter}  {:<width$} {:>11} {:>11} {:>11}  {:>w$}\n",
            row.label,
            ms(row.median_us),
            ms(row.p99_us),
            ms(row.max_us),
            format!("{} of {}", row.over_budget, row.invites),
            w = budget.len()
        ));
    }

    let runs = how_much(
        report.iterations,
        report.iterations_requested,
        report.stopped_on_time_budget,
        TIME_BUDGET,
        "invites a row",
    );
    out.push_str(&format!(
        "\n  {}\n",
        format!(
            "Medians and p99 over {runs}, rows taking turns, after {} warm-up invites; {:.1} s in all.",
            report.warm_up_invites, report.elapsed_s
        )
        .dimmed()
    ));
    let median = |i: usize| report.rows.get(i).map_or(f64::NAN, |r| r.median_us);
    out.push_str(&format!(
        "  Read it: {TAKEAWAY}. With the send inside it (a, b) the invite waits for the provider, a median of {} and {}; with no transaction open during the send (c) it waits only for other commits, {}.\n",
        ms(median(0)),
        ms(median(1)),
        ms(median(2))
    ));
    out
}

/// `notify try locks`: measures, then prints the table (or JSON); returns the exit code.
pub fn run(iterations: Option<usize>, journal: Journal, json: bool) -> Result<i32> {
    let opts = Options::new(iterations, journal, DEFAULT_ITERATIONS, TIME_BUDGET);
    timing::run(&opts, json, measure, render)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::to_json;

    fn tiny(journal: Journal) -> Report {
        measure(&Options {
            iterations: 2,
            journal,
            time_budget: None,
            progress: false,
        })
        .expect("the experiment runs")
    }

    #[test]
    fn measure_gives_three_rows_with_figures() {
        let report = tiny(Journal::Wal);
        assert_eq!(report.experiment, "locks");
        assert_eq!(report.iterations, 2);
        assert_eq!(report.settings.journal_mode, "wal");
        assert_eq!(report.settings.synchronous, "FULL");
        assert_eq!(report.rows.len(), 3);
        for (row, variant) in report.rows.iter().zip(Variant::ALL) {
            assert_eq!(row.label, variant.label());
            assert_eq!(row.invites, 2);
            assert!(row.median_us > 0.0, "{row:?}");
            assert!(row.p99_us >= row.median_us, "{row:?}");
            assert!(row.max_us >= row.p99_us, "{row:?}");
            assert!(row.over_budget <= row.invites, "{row:?}");
        }
    }

    #[test]
    fn render_shows_units_labels_and_the_closing_line() {
        let text = render(&tiny(Journal::Wal));
        assert!(text.contains(" ms"));
        for variant in Variant::ALL {
            assert!(text.contains(variant.label()), "{:?}", variant.label());
        }
        assert!(text.contains(TAKEAWAY));
        assert!(text.contains("2 invites a row"));
        assert!(text.contains("over 100 ms"));
    }

    #[test]
    fn json_has_settings_iterations_and_rows() {
        let report = tiny(Journal::Wal);
        let doc: serde_json::Value =
            serde_json::from_str(&to_json(&report).unwrap()).expect("valid JSON");
        assert_eq!(doc["experiment"], "locks");
        assert_eq!(doc["settings"]["synchronous"], "FULL");
        assert_eq!(doc["iterations"], 2);
        assert_eq!(doc["send_latency_ms"], SEND_LATENCY.as_millis() as u64);
        let rows = doc["rows"].as_array().expect("rows is an array");
        assert_eq!(rows.len(), 3);
        for row in rows {
            assert!(row["label"].is_string());
            for field in ["median_us", "p99_us", "max_us", "invites", "over_budget"] {
                assert!(row[field].is_number(), "{field} in {row}");
            }
        }
    }

    #[test]
    fn zero_iterations_exits_with_2() {
        assert_eq!(run(Some(0), Journal::Wal, false).unwrap(), 2);
    }
}
