//! `notify try claim`: how many rows a second a relay can claim, by batch size.
//!
//! Chapter 3 says: claim rows first, in one short statement that moves them
//! from PENDING to PROCESSING under the relay's name. This experiment times
//! that claim on a real SQLite file with durable commits, taking 1, 10, 50
//! or 200 rows at a time. Every claim is one commit, and a durable commit
//! waits for one fsync whatever it holds, so the figure to read is rows per
//! second: the bigger the batch, the more rows share the fsync.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use colored::Colorize;
use rusqlite::Connection;
use serde::Serialize;
use tempfile::TempDir;

use super::database::{self, Settings};
use super::timing::{self, how_much, percentile_us, round, time_rounds, Options};
use super::Journal;

/// The batch sizes compared, in table order.
pub const BATCHES: [usize; 4] = [1, 10, 50, 200];

/// Iterations when `--iterations` is not given; the time budget usually
/// ends the run first. Each iteration claims once with every batch size.
pub const DEFAULT_ITERATIONS: usize = 2000;

/// Measuring stops after this long unless `--iterations` was given.
pub const TIME_BUDGET: Duration = Duration::from_secs(8);

/// Rounds of every batch size run and thrown away before measuring.
pub const WARM_UP_ROUNDS: usize = 20;

/// Pending rows added at a time when the outbox runs low. Refilling is
/// bookkeeping, never timed.
const REFILL_ROWS: usize = 5000;

/// The closing line's fixed part; `render` adds this run's figures around it.
pub const TAKEAWAY: &str =
    "a claim is one commit, and a durable commit costs one fsync whatever it holds";

/// The outbox of chapter 3, with the index a relay's claim reads.
const SCHEMA: &str = "
    CREATE TABLE outbox (
        id         INTEGER PRIMARY KEY,
        recipient  TEXT NOT NULL,
        body       TEXT NOT NULL,
        status     TEXT NOT NULL DEFAULT 'PENDING'
                   CHECK (status IN ('PENDING', 'PROCESSING', 'SENT')),
        claimed_by TEXT,
        claimed_at INTEGER
    );
    CREATE INDEX outbox_pending ON outbox (id) WHERE status = 'PENDING';
";

/// The claim being measured: the reference solution's statement.
const CLAIM: &str = "
    UPDATE outbox
       SET status = 'PROCESSING', claimed_by = 'relay-1', claimed_at = ?1
     WHERE id IN (SELECT id FROM outbox
                   WHERE status = 'PENDING'
                   ORDER BY id
                   LIMIT ?2)
    RETURNING id, recipient, body
";

/// Adds pending rows in one transaction.
const REFILL: &str = "
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
    INSERT INTO outbox (recipient, body)
    SELECT 'user' || i || '@example.com', 'You joined ws_acme' FROM n
";

/// A fresh experiment database in its own temporary folder.
pub struct Bench {
    conn: Connection,
    db_path: PathBuf,
    journal: Journal,
    pending: usize,
    claims: i64,
    // Declared last so it drops last: the folder goes after the connection.
    dir: TempDir,
}

impl Bench {
    /// Creates the folder and the database (with `journal`, `synchronous=FULL`
    /// and `foreign_keys=ON`), with a first lot of pending rows.
    pub fn new(journal: Journal) -> Result<Bench> {
        let dir = database::folder("claim")?;
        let db_path = dir.path().join("claim.db");
        // synchronous=FULL: every claim waits for its fsync, as a relay's
        // claim must if a crash is not to hand the same rows out twice.
        let conn = database::open(&db_path, journal)?;
        conn.execute_batch(SCHEMA).with_context(|| {
            format!("could not create the outbox table in {}", db_path.display())
        })?;
        let mut bench = Bench {
            conn,
            db_path,
            journal,
            pending: 0,
            claims: 0,
            dir,
        };
        bench.refill()?;
        Ok(bench)
    }

    /// Claims up to `batch` pending rows in one statement, as a relay does,
    /// and returns how many it got.
    pub fn claim(&mut self, batch: usize) -> Result<usize> {
        // The claim time only needs to change, like a clock's reading.
        self.claims += 1;
        let mut stmt = self.conn.prepare_cached(CLAIM).with_context(|| {
            format!("could not prepare the claim in {}", self.db_path.display())
        })?;
        let claimed = stmt
            .query_map((self.claims, batch as i64), |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .with_context(|| format!("could not claim rows in {}", self.db_path.display()))?;
        self.pending -= claimed.len();
        Ok(claimed.len())
    }

    /// Makes sure a claim of `batch` rows finds that many pending rows,
    /// adding more (untimed) when they run low.
    pub fn ready_for(&mut self, batch: usize) -> Result<()> {
        if self.pending < batch {
            self.refill()?;
        }
        Ok(())
    }

    fn refill(&mut self) -> Result<()> {
        self.conn
            .execute(REFILL, [REFILL_ROWS as i64])
            .with_context(|| format!("could not add pending rows to {}", self.db_path.display()))?;
        self.pending += REFILL_ROWS;
        Ok(())
    }

    /// The settings the database really runs with, read back from SQLite.
    pub fn settings(&self) -> Result<Settings> {
        Settings::read(&self.conn, &self.db_path, self.journal, self.dir.path())
    }
}

/// One row of the table: one batch size.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Rows one claim takes.
    pub batch: usize,
    /// Median time of one claim (one commit), in microseconds.
    pub median_us: f64,
    /// 99th percentile time of one claim, in microseconds.
    pub p99_us: f64,
    /// Rows claimed per second at the median: `batch` over the median claim.
    pub rows_per_s: f64,
    /// This row's rows per second divided by the batch of 1's.
    pub speedup: f64,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always "claim".
    pub experiment: &'static str,
    /// The settings the database ran with.
    pub settings: Settings,
    /// Iterations measured (each claims once with every batch size).
    pub iterations: usize,
    /// Iterations asked for; more than `iterations` when the time budget ended the run.
    pub iterations_requested: usize,
    /// Whether the time budget ended the run early.
    pub stopped_on_time_budget: bool,
    /// Rounds run and discarded before measuring.
    pub warm_up_rounds: usize,
    /// Wall time of the whole run, setup and warm-up included, in seconds.
    pub elapsed_s: f64,
    /// One row per batch size, in the order of [`BATCHES`].
    pub rows: Vec<Row>,
}

/// Runs the experiment: warms up, then claims once with every batch size per
/// iteration, interleaved, and summarises each batch size.
pub fn measure(opts: &Options) -> Result<Report> {
    ensure!(
        opts.iterations > 0,
        "the experiment needs at least one iteration"
    );
    let started = Instant::now();
    let mut bench = Bench::new(opts.journal)?;
    let settings = bench.settings()?;
    let mut rounds = time_rounds(opts, started, WARM_UP_ROUNDS, &BATCHES, |batch| {
        // Refilling is bookkeeping, outside the timed claim.
        bench.ready_for(batch)?;
        let start = Instant::now();
        let got = bench.claim(batch)?;
        let took = start.elapsed();
        ensure!(got == batch, "a claim of {batch} rows found only {got}");
        Ok(took)
    })?;

    let samples = &mut rounds.samples;
    let medians: Vec<f64> = samples.iter_mut().map(|s| percentile_us(s, 0.5)).collect();
    let per_second = |i: usize| BATCHES[i] as f64 / (medians[i] / 1e6);
    let rows = (0..BATCHES.len())
        .zip(samples.iter_mut())
        .map(|(i, samples)| Row {
            batch: BATCHES[i],
            median_us: round(medians[i], 2),
            p99_us: round(percentile_us(samples, 0.99), 2),
            rows_per_s: round(per_second(i), 1),
            speedup: round(per_second(i) / per_second(0), 2),
        })
        .collect();

    Ok(Report {
        experiment: "claim",
        settings,
        iterations: rounds.done,
        iterations_requested: opts.iterations,
        stopped_on_time_budget: rounds.stopped_on_time_budget,
        warm_up_rounds: rounds.warm_up_rounds,
        elapsed_s: round(started.elapsed().as_secs_f64(), 2),
        rows,
    })
}

/// The report as the table `notify try claim` prints, ending in a newline.
pub fn render(report: &Report) -> String {
    let s = &report.settings;
    let mut out = String::new();
    out.push_str(&format!(
        "\n  {}\n",
        "How many rows a second a relay claims, by batch size".bold()
    ));
    out.push_str(&format!(
        "  {}\n\n",
        format!(
            "journal_mode={}, synchronous={}, one UPDATE ... RETURNING per claim, a fresh database under {}",
            s.journal_mode, s.synchronous, s.temp_root
        )
        .dimmed()
    ));
    out.push_str(&format!(
        "  {:>5}  {:>12} {:>12} {:>12} {:>9}\n",
        "batch", "per claim", "p99", "rows/s", "vs 1"
    ));
    for row in &report.rows {
        out.push_str(&format!(
            "  {:>5}  {:>9.1} µs {:>9.1} µs {:>12.1} {:>8.1}×\n",
            row.batch, row.median_us, row.p99_us, row.rows_per_s, row.speedup
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
            "Medians and p99 over {runs}, batch sizes interleaved, after {} warm-up rounds; {:.1} s in all.",
            report.warm_up_rounds, report.elapsed_s
        )
        .dimmed()
    ));
    let row = |batch: usize| report.rows.iter().find(|r| r.batch == batch);
    let (one, fifty) = (row(1), row(50));
    let claim_us = one.map_or(f64::NAN, |r| r.median_us);
    let fifty_us = fifty.map_or(f64::NAN, |r| r.median_us);
    let speedup = fifty.map_or(f64::NAN, |r| r.speedup);
    out.push_str(&format!(
        "  Read it: {TAKEAWAY}. A claim of 1 row took {claim_us:.0} µs and a claim of 50 took {fifty_us:.0} µs, \
         so 50 at a time moves {speedup:.1}× as many rows a second. Marking each row SENT in a commit of its own \
         pays that fsync again per row.\n"
    ));
    out
}

/// `notify try claim`: measures, then prints the table (or JSON); returns the exit code.
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
    fn measure_gives_one_row_per_batch_size() {
        let report = tiny(Journal::Wal);
        assert_eq!(report.experiment, "claim");
        assert_eq!(report.iterations, 3);
        assert_eq!(report.settings.journal_mode, "wal");
        assert_eq!(report.settings.synchronous, "FULL");
        let batches: Vec<usize> = report.rows.iter().map(|r| r.batch).collect();
        assert_eq!(batches, BATCHES);
        for row in &report.rows {
            assert!(row.median_us > 0.0, "{row:?}");
            assert!(row.p99_us > 0.0, "{row:?}");
            assert!(row.rows_per_s > 0.0, "{row:?}");
            assert!(row.speedup.is_finite() && row.speedup > 0.0, "{row:?}");
        }
        assert_eq!(report.rows[0].speedup, 1.0);
    }

    #[test]
    fn a_claim_takes_pending_rows_once_and_refills_when_low() {
        let mut bench = Bench::new(Journal::Wal).expect("the bench opens");
        let mut claimed = 0;
        // Drain the first lot, then ask for more: the bench refills first.
        while bench.pending >= 200 {
            claimed += bench.claim(200).unwrap();
        }
        bench.ready_for(200).unwrap();
        claimed += bench.claim(200).unwrap();
        let processing: i64 = bench
            .conn
            .query_row(
                "SELECT COUNT(*) FROM outbox WHERE status = 'PROCESSING'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(processing as usize, claimed);
        assert!(claimed > REFILL_ROWS);
    }

    #[test]
    fn delete_journal_is_used_when_asked() {
        let report = tiny(Journal::Delete);
        assert_eq!(report.settings.journal_mode, "delete");
        assert_eq!(report.rows.len(), BATCHES.len());
    }

    #[test]
    fn render_shows_every_batch_size_and_the_closing_line() {
        let report = tiny(Journal::Wal);
        let text = render(&report);
        assert!(text.contains("µs") && text.contains("rows/s"));
        for batch in BATCHES {
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with(&format!("{batch} "))),
                "no row for a batch of {batch}:\n{text}"
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
        assert_eq!(doc["experiment"], "claim");
        assert_eq!(doc["settings"]["synchronous"], "FULL");
        assert_eq!(doc["iterations"], 3);
        let rows = doc["rows"].as_array().expect("rows is an array");
        assert_eq!(rows.len(), BATCHES.len());
        for row in rows {
            for field in ["batch", "median_us", "p99_us", "rows_per_s", "speedup"] {
                assert!(row[field].is_number(), "{field} in {row}");
            }
        }
    }

    #[test]
    fn zero_iterations_exits_with_2() {
        assert_eq!(run(Some(0), Journal::Wal, false).unwrap(), 2);
    }
}
