//! `notify try outbox`: what an outbox row really costs on a real SQLite commit.
//!
//! Chapter 1 says: write the notification as an outbox row in the same
//! transaction as the business change. This experiment times that against
//! the change alone and against the change followed by a second commit for
//! the outbox row, on a real database file with durable commits, next to a
//! plain 4 KiB write + fsync as a floor. The lesson is in the ratios: the
//! row is nearly free because it rides in a commit you were making anyway;
//! a second commit costs about as much again, because the commit (its
//! fsync) is the expensive part.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use colored::Colorize;
use rusqlite::Connection;
use serde::Serialize;
use tempfile::TempDir;

use super::database::{self, Settings};
use super::timing::{self, how_much, percentile_us, round, time_rounds, Options};
use super::Journal;

/// Iterations when `--iterations` is not given; the time budget usually ends the run first on slow disks.
pub const DEFAULT_ITERATIONS: usize = 5000;

/// Measuring stops after this long unless `--iterations` was given, so the default run stays short.
pub const TIME_BUDGET: Duration = Duration::from_secs(8);

/// Rounds of all four variants run and thrown away before measuring, so
/// the file, the page cache and SQLite's statement parsing are warm.
pub const WARM_UP_ROUNDS: usize = 50;

/// Size of the floor row's write: one page, as SQLite writes them.
const FLOOR_BLOCK_BYTES: usize = 4096;

/// The closing line's fixed part; `render` adds this run's ratios around it.
pub const TAKEAWAY: &str = "the outbox row rides in a commit you were making anyway";

/// The business tables plus the outbox, and one account to pay into.
const SCHEMA: &str = "
    CREATE TABLE accounts (
        id            INTEGER PRIMARY KEY,
        owner         TEXT    NOT NULL,
        balance_cents INTEGER NOT NULL
    );
    CREATE TABLE payments (
        id           INTEGER PRIMARY KEY,
        account_id   INTEGER NOT NULL REFERENCES accounts (id),
        amount_cents INTEGER NOT NULL
    );
    CREATE TABLE outbox (
        id        INTEGER PRIMARY KEY,
        recipient TEXT    NOT NULL,
        body      TEXT    NOT NULL,
        sent      INTEGER NOT NULL DEFAULT 0
    );
    INSERT INTO accounts (id, owner, balance_cents)
    VALUES (1, 'ada@example.com', 0);
";

/// Row a: the business change alone, in one commit.
const CHANGE_ONLY: &str = "
    BEGIN;
    INSERT INTO payments (account_id, amount_cents) VALUES (1, 1250);
    UPDATE accounts SET balance_cents = balance_cents + 1250 WHERE id = 1;
    COMMIT;
";

/// Row b: the transactional outbox. The email to send is one more row in
/// the same transaction, so it commits (or not) with the payment.
const CHANGE_AND_OUTBOX: &str = "
    BEGIN;
    INSERT INTO payments (account_id, amount_cents) VALUES (1, 1250);
    UPDATE accounts SET balance_cents = balance_cents + 1250 WHERE id = 1;
    INSERT INTO outbox (recipient, body)
    VALUES ('ada@example.com', 'We received your payment of 12.50.');
    COMMIT;
";

/// Row c: the same writes in two commits. Slower, and a crash between the
/// two commits keeps the payment but loses the email.
const CHANGE_THEN_OUTBOX: &str = "
    BEGIN;
    INSERT INTO payments (account_id, amount_cents) VALUES (1, 1250);
    UPDATE accounts SET balance_cents = balance_cents + 1250 WHERE id = 1;
    COMMIT;
    BEGIN;
    INSERT INTO outbox (recipient, body)
    VALUES ('ada@example.com', 'We received your payment of 12.50.');
    COMMIT;
";

/// One of the four things the experiment times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Row a: the payment alone, one commit.
    ChangeOnly,
    /// Row b: the payment and its outbox row, one commit.
    ChangeAndOutbox,
    /// Row c: the payment, then its outbox row, two commits.
    TwoCommits,
    /// Row d: one 4 KiB write and an fsync, no SQLite at all.
    Floor,
}

impl Variant {
    /// All variants, in table order.
    pub const ALL: [Variant; 4] = [
        Variant::ChangeOnly,
        Variant::ChangeAndOutbox,
        Variant::TwoCommits,
        Variant::Floor,
    ];

    /// The row label in the table and in the JSON document.
    pub fn label(self) -> &'static str {
        match self {
            Variant::ChangeOnly => "change only, one commit",
            Variant::ChangeAndOutbox => "change and outbox row, one commit",
            Variant::TwoCommits => "change, then outbox row, two commits",
            Variant::Floor => "floor: 4 KiB write + fsync (sync_all)",
        }
    }
}

/// A fresh experiment database and floor file in their own temporary
/// folder, with one method per variant. The experiment and the criterion
/// bench both drive this, so each variant exists once.
pub struct Bench {
    conn: Connection,
    db_path: PathBuf,
    floor_file: File,
    floor_path: PathBuf,
    floor_block: Vec<u8>,
    journal: Journal,
    // Declared last so it drops last: the folder is deleted only after the
    // connection and the floor file are closed.
    dir: TempDir,
}

impl Bench {
    /// Creates the folder, the database (with `journal`, `synchronous=FULL`
    /// and `foreign_keys=ON`) and the floor file.
    pub fn new(journal: Journal) -> Result<Bench> {
        let dir = database::folder("outbox")?;
        let db_path = dir.path().join("outbox.db");
        // synchronous=FULL: every commit waits for its fsync, so a committed
        // payment survives a power cut. That wait is what is measured here.
        let conn = database::open(&db_path, journal)?;
        conn.execute_batch(SCHEMA).with_context(|| {
            format!(
                "could not create the payments and outbox tables in {}",
                db_path.display()
            )
        })?;

        let floor_path = dir.path().join("floor.bin");
        let mut floor_file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&floor_path)
            .with_context(|| {
                format!(
                    "could not create the floor file at {}",
                    floor_path.display()
                )
            })?;
        let floor_block = vec![0xA5; FLOOR_BLOCK_BYTES];
        // Write the block once up front so each measured write overwrites it
        // in place, the way a reused WAL frame is, instead of growing the file.
        floor_file
            .write_all(&floor_block)
            .and_then(|()| floor_file.sync_all())
            .with_context(|| {
                format!("could not write the floor file at {}", floor_path.display())
            })?;

        Ok(Bench {
            conn,
            db_path,
            floor_file,
            floor_path,
            floor_block,
            journal,
            dir,
        })
    }

    /// The folder holding the database and the floor file.
    pub fn folder(&self) -> &Path {
        self.dir.path()
    }

    /// Row a: records a payment in one transaction and commits.
    pub fn change_only(&mut self) -> Result<()> {
        self.run_sql(CHANGE_ONLY, "record a payment")
    }

    /// Row b: records a payment and its outbox row in one transaction and commits.
    pub fn change_and_outbox(&mut self) -> Result<()> {
        self.run_sql(CHANGE_AND_OUTBOX, "record a payment with its outbox row")
    }

    /// Row c: commits the payment, then commits its outbox row separately.
    pub fn two_commits(&mut self) -> Result<()> {
        self.run_sql(CHANGE_THEN_OUTBOX, "record a payment, then its outbox row")
    }

    /// Row d: overwrites one 4 KiB block of the floor file and waits for
    /// `sync_all` (fsync), which is how the bundled SQLite syncs a commit.
    pub fn floor(&mut self) -> Result<()> {
        let path = &self.floor_path;
        self.floor_file
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.floor_file.write_all(&self.floor_block))
            .and_then(|()| self.floor_file.sync_all())
            .with_context(|| {
                format!(
                    "could not write and fsync the floor file at {}",
                    path.display()
                )
            })
    }

    /// Runs one variant once.
    pub fn run(&mut self, variant: Variant) -> Result<()> {
        match variant {
            Variant::ChangeOnly => self.change_only(),
            Variant::ChangeAndOutbox => self.change_and_outbox(),
            Variant::TwoCommits => self.two_commits(),
            Variant::Floor => self.floor(),
        }
    }

    /// The settings the database really runs with, read back from SQLite.
    pub fn settings(&self) -> Result<Settings> {
        Settings::read(&self.conn, &self.db_path, self.journal, self.dir.path())
    }

    fn run_sql(&mut self, sql: &str, what: &str) -> Result<()> {
        if let Err(err) = self.conn.execute_batch(sql) {
            // A failed statement leaves its transaction open and the next
            // BEGIN would fail with a confusing message; roll it back. The
            // original error is the one worth reporting, so a failed
            // rollback is ignored.
            if !self.conn.is_autocommit() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
            return Err(err)
                .with_context(|| format!("could not {what} in {}", self.db_path.display()));
        }
        Ok(())
    }
}

/// One row of the table: one variant's timings per payment.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// What was timed, e.g. "change only, one commit".
    pub label: String,
    /// Median time per payment, in microseconds.
    pub median_us: f64,
    /// 99th percentile time per payment, in microseconds.
    pub p99_us: f64,
    /// This row's median divided by row a's median.
    pub ratio: f64,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always "outbox".
    pub experiment: &'static str,
    /// The settings the database ran with.
    pub settings: Settings,
    /// Iterations measured (each times every variant once).
    pub iterations: usize,
    /// Iterations asked for; more than `iterations` when the time budget ended the run.
    pub iterations_requested: usize,
    /// Whether the time budget ended the run early.
    pub stopped_on_time_budget: bool,
    /// Rounds run and discarded before measuring (fewer than [`WARM_UP_ROUNDS`] on a slow disk).
    pub warm_up_rounds: usize,
    /// Wall time of the whole run, setup and warm-up included, in seconds.
    pub elapsed_s: f64,
    /// Rows a to d, in order: change only, change and outbox, two commits, floor.
    pub rows: Vec<Row>,
}

/// Runs the experiment: warms up, then times every variant once per
/// iteration, interleaved, and summarises each variant.
pub fn measure(opts: &Options) -> Result<Report> {
    ensure!(
        opts.iterations > 0,
        "the experiment needs at least one iteration"
    );
    let started = Instant::now();
    let mut bench = Bench::new(opts.journal)?;
    let settings = bench.settings()?;
    let mut rounds = time_rounds(opts, started, WARM_UP_ROUNDS, &Variant::ALL, |variant| {
        let start = Instant::now();
        bench.run(variant)?;
        Ok(start.elapsed())
    })?;

    let samples = &mut rounds.samples;
    let medians: Vec<f64> = samples.iter_mut().map(|s| percentile_us(s, 0.5)).collect();
    let rows = Variant::ALL
        .iter()
        .zip(samples.iter_mut())
        .zip(&medians)
        .map(|((variant, samples), &median_us)| Row {
            label: variant.label().to_string(),
            median_us: round(median_us, 2),
            p99_us: round(percentile_us(samples, 0.99), 2),
            ratio: round(median_us / medians[0], 3),
        })
        .collect();

    Ok(Report {
        experiment: "outbox",
        settings,
        iterations: rounds.done,
        iterations_requested: opts.iterations,
        stopped_on_time_budget: rounds.stopped_on_time_budget,
        warm_up_rounds: rounds.warm_up_rounds,
        elapsed_s: round(started.elapsed().as_secs_f64(), 2),
        rows,
    })
}

/// The report as the table `notify try outbox` prints, ending in a newline.
pub fn render(report: &Report) -> String {
    let width = report
        .rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        + 3;
    let mut out = String::new();
    out.push_str(&format!(
        "\n  {}\n",
        "What an outbox row costs on a real SQLite commit".bold()
    ));
    out.push_str(&format!("  {}\n\n", report.settings.describe().dimmed()));
    out.push_str(&format!(
        "  {:<width$} {:>12} {:>12} {:>8}\n",
        "one payment", "per payment", "p99", "vs a"
    ));
    for (letter, row) in ('a'..).zip(&report.rows) {
        out.push_str(&format!(
            "  {letter}  {:<w$} {:>9.1} µs {:>9.1} µs {:>7.2}×\n",
            row.label,
            row.median_us,
            row.p99_us,
            row.ratio,
            w = width - 3
        ));
    }

    let runs = how_much(
        report.iterations,
        report.iterations_requested,
        report.stopped_on_time_budget,
        TIME_BUDGET,
        "iterations",
    );
    out.push_str(&format!(
        "\n  {}\n",
        format!(
            "Medians and p99 over {runs}, variants interleaved, after {} warm-up rounds; {:.1} s in all.",
            report.warm_up_rounds, report.elapsed_s
        )
        .dimmed()
    ));
    let ratio = |i: usize| report.rows.get(i).map_or(f64::NAN, |r| r.ratio);
    out.push_str(&format!(
        "  Read it: {TAKEAWAY} (b is {:.2}× a); a second commit pays the whole commit again (c is {:.2}× a). The commit, waiting for fsync, is the expensive part, not the row.\n",
        ratio(1),
        ratio(2)
    ));
    out
}

/// `notify try outbox`: measures, then prints the table (or JSON); returns the exit code.
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
            iterations: 3,
            journal,
            time_budget: None,
            progress: false,
        })
        .expect("the experiment runs")
    }

    #[test]
    fn measure_gives_four_rows_with_figures() {
        let report = tiny(Journal::Wal);
        assert_eq!(report.iterations, 3);
        assert_eq!(report.settings.journal_mode, "wal");
        assert_eq!(report.settings.synchronous, "FULL");
        assert!(report.settings.foreign_keys);
        assert_eq!(report.rows.len(), 4);
        for (row, variant) in report.rows.iter().zip(Variant::ALL) {
            assert_eq!(row.label, variant.label());
            assert!(row.median_us > 0.0, "{row:?}");
            assert!(row.p99_us > 0.0, "{row:?}");
            assert!(row.ratio.is_finite() && row.ratio > 0.0, "{row:?}");
        }
        assert_eq!(report.rows[0].ratio, 1.0);
    }

    #[test]
    fn delete_journal_is_used_when_asked() {
        let report = tiny(Journal::Delete);
        assert_eq!(report.settings.journal_mode, "delete");
        assert_eq!(report.rows.len(), 4);
    }

    #[test]
    fn render_shows_units_labels_and_the_closing_line() {
        let report = tiny(Journal::Wal);
        let text = render(&report);
        assert!(text.contains("µs"));
        for variant in Variant::ALL {
            assert!(
                text.contains(variant.label()),
                "missing {:?}",
                variant.label()
            );
        }
        assert!(text.contains(TAKEAWAY));
        assert!(text.contains("3 iterations"));
    }

    #[test]
    fn json_has_settings_iterations_and_rows() {
        let report = tiny(Journal::Wal);
        let doc: serde_json::Value =
            serde_json::from_str(&to_json(&report).unwrap()).expect("valid JSON");
        assert_eq!(doc["settings"]["journal"], "wal");
        assert_eq!(doc["settings"]["synchronous"], "FULL");
        assert_eq!(doc["iterations"], 3);
        let rows = doc["rows"].as_array().expect("rows is an array");
        assert_eq!(rows.len(), 4);
        for row in rows {
            assert!(row["label"].is_string());
            for field in ["median_us", "p99_us", "ratio"] {
                assert!(row[field].is_number(), "{field} in {row}");
            }
        }
    }

    #[test]
    fn unknown_experiment_exits_with_2() {
        assert_eq!(
            crate::experiments::run_try("nope", Some(1), Journal::Wal, false).unwrap(),
            2
        );
    }

    #[test]
    fn zero_iterations_exits_with_2() {
        assert_eq!(run(Some(0), Journal::Wal, false).unwrap(), 2);
    }

    /// The full default run, for measuring by hand:
    /// `cargo test --release --lib experiments::outbox::tests::full_run -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn full_run() {
        run(None, Journal::Wal, false).unwrap();
    }
}
