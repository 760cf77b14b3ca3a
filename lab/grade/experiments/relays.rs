//! `notify try relays`: rows a second that 1, 2 and 4 relay processes
//! deliver from one outbox on a real PostgreSQL server.
//!
//! Chapter 12 says: on PostgreSQL, relays claim with `FOR UPDATE SKIP
//! LOCKED`. This experiment starts real relay processes (this binary again,
//! as `notify relay-process`, each with its own connection) that drain an
//! outbox of a few thousand rows the way the production dispatcher does: a
//! claim of 50 rows in one short transaction (PENDING to PROCESSING), the
//! sends with no transaction open (a real sleep per row), then one UPDATE
//! marking the batch SENT. It compares that claim with the same claim
//! without `SKIP LOCKED`, where a relay that meets a row another relay has
//! locked waits for that relay's claim to commit. Every run also checks
//! that each row was sent exactly once, from the provider's side (the ids
//! the relays sent) and from the outbox's (the SENT count).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use colored::Colorize;
use postgres::config::Host;
use postgres::{Client, Config, NoTls};
use serde::{Deserialize, Serialize};

use super::timing::{how_much, median, percentile_us, round, Progress};

/// Relay processes compared, in table order.
pub const RELAYS: [usize; 3] = [1, 2, 4];

/// Rows in the outbox at the start of every run.
pub const ROWS: usize = 2000;

/// Rows one claim takes, as the production dispatcher does.
pub const BATCH: usize = 50;

/// Real time the simulated provider takes for one send.
pub const SEND_LATENCY: Duration = Duration::from_millis(1);

/// Rounds when `--iterations` is not given; the time budget usually ends
/// the run first. A round runs every cell of the table once.
pub const DEFAULT_ITERATIONS: usize = 3;

/// Measuring stops after this long unless `--iterations` was given; a
/// round takes about 12 s on a 2-core laptop.
pub const TIME_BUDGET: Duration = Duration::from_secs(30);

/// Rows of the warm-up run, which is not measured: it starts the server's
/// caches and the relay binary once before the clock matters.
const WARM_UP_ROWS: usize = 200;

/// How long a relay process may take to connect and report ready.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The schema the experiment's tables live in, out of the way of the
/// workshop's own tables in `public`.
const SCHEMA_NAME: &str = "try_relays";

/// The closing line's fixed part; `render` adds this run's figures.
pub const TAKEAWAY: &str =
    "with the sends outside the claim's transaction, relays queue only for each other's claims";

/// What `notify try relays` prints without `DATABASE_URL`.
pub const NEEDS_SERVER: &str = "notify try relays runs relay processes against a real PostgreSQL server, and DATABASE_URL does not say where one is. Start a throw-away server on this machine with `lab/scripts/postgres-up` (it installs Debian's postgresql package if needed, and runs on 127.0.0.1:54329), then export the URL it prints on its last line: `export DATABASE_URL=$(lab/scripts/postgres-up)`, and run `notify try relays` again. `lab/scripts/postgres-down` stops the server.";

/// A fresh outbox: the columns chapter 3's claim writes, and the index the
/// claim reads.
const CREATE_OUTBOX: &str = "
    CREATE SCHEMA IF NOT EXISTS try_relays;
    DROP TABLE IF EXISTS try_relays.outbox;
    CREATE TABLE try_relays.outbox (
        id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        recipient  TEXT NOT NULL,
        body       TEXT NOT NULL,
        status     TEXT NOT NULL DEFAULT 'PENDING'
                   CHECK (status IN ('PENDING', 'PROCESSING', 'SENT')),
        claimed_by TEXT,
        claimed_at TIMESTAMPTZ,
        sent_at    TIMESTAMPTZ
    );
    CREATE INDEX outbox_pending ON try_relays.outbox (id) WHERE status = 'PENDING';
";

/// Adds $1 pending rows.
const FILL: &str = "
    INSERT INTO outbox (recipient, body)
    SELECT 'reader' || i || '@example.com', 'You joined ws_acme'
      FROM generate_series(1, $1::bigint) AS i
";

/// The claim with `SKIP LOCKED`: rows another relay has locked are passed
/// over, so every relay takes the next free ones at once. One statement is
/// one transaction: the row locks last until it commits, and the claim
/// lives on in `status` and `claimed_by`.
const CLAIM_SKIP_LOCKED: &str = "
    WITH claimed AS (
        SELECT id FROM outbox
         WHERE status = 'PENDING'
         ORDER BY id
         LIMIT $2
           FOR UPDATE SKIP LOCKED
    )
    UPDATE outbox
       SET status = 'PROCESSING', claimed_by = $1, claimed_at = now()
      FROM claimed
     WHERE outbox.id = claimed.id
    RETURNING outbox.id
";

/// The same claim with plain `FOR UPDATE`: a relay that meets a row another
/// relay has locked waits until that relay commits, then finds the row no
/// longer PENDING and moves on to the next.
const CLAIM_FOR_UPDATE: &str = "
    WITH claimed AS (
        SELECT id FROM outbox
         WHERE status = 'PENDING'
         ORDER BY id
         LIMIT $2
           FOR UPDATE
    )
    UPDATE outbox
       SET status = 'PROCESSING', claimed_by = $1, claimed_at = now()
      FROM claimed
     WHERE outbox.id = claimed.id
    RETURNING outbox.id
";

/// Records that the relay's own batch was sent.
const MARK_SENT: &str = "
    UPDATE outbox
       SET status = 'SENT', sent_at = now()
     WHERE id = ANY($1) AND status = 'PROCESSING' AND claimed_by = $2
";

/// How a relay claims its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Claim {
    /// `FOR UPDATE SKIP LOCKED`: pass over rows other relays hold.
    SkipLocked,
    /// Plain `FOR UPDATE`: wait for the relay that holds them.
    ForUpdate,
}

impl Claim {
    /// Both, in table order.
    pub const ALL: [Claim; 2] = [Claim::SkipLocked, Claim::ForUpdate];

    /// The locking clause, as the table's header shows it.
    pub fn label(self) -> &'static str {
        match self {
            Claim::SkipLocked => "FOR UPDATE SKIP LOCKED",
            Claim::ForUpdate => "FOR UPDATE",
        }
    }

    /// The claim statement.
    fn sql(self) -> &'static str {
        match self {
            Claim::SkipLocked => CLAIM_SKIP_LOCKED,
            Claim::ForUpdate => CLAIM_FOR_UPDATE,
        }
    }

    /// The value `notify relay-process --claim` takes.
    fn arg(self) -> &'static str {
        match self {
            Claim::SkipLocked => "skip-locked",
            Claim::ForUpdate => "for-update",
        }
    }
}

/// Connects to `url` with the experiment's settings: its schema first on
/// the search path, and a statement timeout so that nothing waits forever.
fn connect(url: &str, name: &str) -> Result<Client> {
    let mut config: Config = url
        .parse()
        .context("DATABASE_URL is not a PostgreSQL connection string (postgres://user:password@host:port/database)")?;
    config
        .application_name(name)
        .connect_timeout(CONNECT_TIMEOUT)
        .options(&format!(
            "-c search_path={SCHEMA_NAME} -c statement_timeout=60000"
        ));
    config.connect(NoTls).with_context(|| {
        format!(
            "could not connect to PostgreSQL at {} (is it running? lab/scripts/postgres-up starts one)",
            address(&config)
        )
    })
}

/// "notify@127.0.0.1:54329/notify": where `config` points, without its password.
fn address(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("?");
    let dbname = config.get_dbname().unwrap_or(user);
    format!("{user}@{host}:{port}/{dbname}")
}

/// What one relay process reports when the outbox is empty.
#[derive(Debug, Serialize, Deserialize)]
struct RelayLog {
    /// The ids the relay handed to the provider, in order: the provider's log.
    sent: Vec<i64>,
    /// How long each claim statement took, waits included, in microseconds.
    claims_us: Vec<u64>,
}

/// `notify relay-process`: one relay of the experiment, started by
/// `notify try relays`. It connects, says `ready`, waits for `go` on its
/// stdin, drains the outbox (claim, send, mark SENT) until a claim finds
/// nothing, and prints its [`RelayLog`] as one line of JSON.
pub fn relay_process(claim: Claim, name: &str) -> Result<i32> {
    let url = std::env::var("DATABASE_URL").context("the relay process needs DATABASE_URL")?;
    let mut client = connect(&url, name)?;
    let claim_statement = client
        .prepare(claim.sql())
        .context("could not prepare the relay's claim")?;
    let mark_statement = client
        .prepare(MARK_SENT)
        .context("could not prepare the relay's mark-SENT")?;

    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready")?;
    stdout.flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    if line.trim() != "go" {
        // The experiment ended before this relay's turn.
        return Ok(2);
    }

    let mut log = RelayLog {
        sent: Vec::new(),
        claims_us: Vec::new(),
    };
    loop {
        let started = Instant::now();
        let rows = client
            .query(&claim_statement, &[&name, &(BATCH as i64)])
            .with_context(|| format!("{name} could not claim rows"))?;
        log.claims_us.push(started.elapsed().as_micros() as u64);
        if rows.is_empty() {
            break;
        }
        let ids: Vec<i64> = rows.iter().map(|row| row.get(0)).collect();
        // The sends: no transaction is open, and no lock held.
        for &id in &ids {
            std::thread::sleep(SEND_LATENCY);
            log.sent.push(id);
        }
        let marked = client
            .execute(&mark_statement, &[&ids, &name])
            .with_context(|| format!("{name} could not mark its rows SENT"))?;
        ensure!(
            marked as usize == ids.len(),
            "{name} sent {} rows but could mark only {marked} of them SENT",
            ids.len()
        );
    }
    writeln!(stdout, "{}", serde_json::to_string(&log)?)?;
    Ok(0)
}

/// The relay processes of one run, stopped if the run ends early.
struct Relays {
    relays: Vec<(String, Child, BufReader<ChildStdout>, ChildStdin)>,
}

impl Relays {
    /// Starts `count` relay processes claiming with `claim`, and waits
    /// until each has connected.
    fn start(url: &str, count: usize, claim: Claim) -> Result<Relays> {
        let exe = std::env::current_exe()
            .context("could not find the notify binary to start relays with")?;
        let mut relays = Relays { relays: Vec::new() };
        for i in 1..=count {
            let name = format!("relay-{i}");
            let mut child = Command::new(&exe)
                .args(["relay-process", "--claim", claim.arg(), "--name", &name])
                .env("DATABASE_URL", url)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("could not start {name} ({})", exe.display()))?;
            let stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
            let stdin = child.stdin.take().expect("stdin is piped");
            relays.relays.push((name, child, stdout, stdin));
        }
        for (name, child, stdout, _) in &mut relays.relays {
            let mut line = String::new();
            stdout.read_line(&mut line)?;
            if line.trim() != "ready" {
                let status = child.wait()?;
                bail!("{name} did not start ({status}); its error is above");
            }
        }
        Ok(relays)
    }

    /// Lets every relay go, waits for all of them to drain the outbox, and
    /// returns how long that took and each relay's log.
    fn go(mut self) -> Result<(Duration, Vec<RelayLog>)> {
        let started = Instant::now();
        for (name, _, _, stdin) in &mut self.relays {
            writeln!(stdin, "go").with_context(|| format!("could not start {name}"))?;
            stdin.flush()?;
        }
        let mut outputs = Vec::new();
        for (_, _, stdout, _) in &mut self.relays {
            let mut output = String::new();
            stdout.read_to_string(&mut output)?;
            outputs.push(output);
        }
        // Each relay's output ends when it exits, so the last one read is
        // the last relay done.
        let took = started.elapsed();
        let mut logs = Vec::new();
        for ((name, child, _, _), output) in self.relays.iter_mut().zip(outputs) {
            let status = child.wait()?;
            ensure!(
                status.success(),
                "{name} failed ({status}); its error is above"
            );
            let log = serde_json::from_str(output.trim())
                .with_context(|| format!("{name} printed no report: {output:?}"))?;
            logs.push(log);
        }
        Ok((took, logs))
    }
}

impl Drop for Relays {
    fn drop(&mut self) {
        for (_, child, _, _) in &mut self.relays {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// What one run saw.
struct Run {
    took: Duration,
    claims_us: Vec<u64>,
    /// What went wrong, unless every row was sent exactly once.
    problem: Option<String>,
}

/// Fills a fresh outbox with `rows` rows, lets `count` relays drain it
/// with `claim`, and checks that every row was sent exactly once.
fn run_once(
    client: &mut Client,
    url: &str,
    count: usize,
    claim: Claim,
    rows: usize,
) -> Result<Run> {
    client
        .batch_execute(CREATE_OUTBOX)
        .context("could not create the experiment's outbox")?;
    client
        .execute(FILL, &[&(rows as i64)])
        .context("could not fill the outbox")?;
    client.batch_execute("ANALYZE outbox")?;

    let relays = Relays::start(url, count, claim)?;
    let (took, logs) = relays.go()?;

    // The provider's side: how often each row was sent.
    let mut sends: HashMap<i64, usize> = HashMap::new();
    for log in &logs {
        for &id in &log.sent {
            *sends.entry(id).or_default() += 1;
        }
    }
    let ids: Vec<i64> = client
        .query("SELECT id FROM outbox ORDER BY id", &[])?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let twice: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|id| sends.get(id).copied().unwrap_or(0) > 1)
        .collect();
    let never: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|id| !sends.contains_key(id))
        .collect();
    // The outbox's side.
    let marked: i64 = client
        .query_one("SELECT count(*) FROM outbox WHERE status = 'SENT'", &[])?
        .get(0);
    let first = |ids: &[i64]| {
        ids.first()
            .map_or(String::new(), |id| format!(" (the first: row {id})"))
    };
    let problem = (!twice.is_empty() || !never.is_empty() || marked as usize != rows).then(|| {
        format!(
            "{count} relays, {}: {} of {rows} rows sent more than once{}, {} never sent{}, {marked} marked SENT",
            claim.label(),
            twice.len(),
            first(&twice),
            never.len(),
            first(&never),
        )
    });
    Ok(Run {
        took,
        claims_us: logs.into_iter().flat_map(|log| log.claims_us).collect(),
        problem,
    })
}

/// The server a run used, as it reports itself.
#[derive(Clone, Debug, Serialize)]
pub struct Server {
    /// `server_version`, e.g. "15.18 (Debian 15.18-0+deb12u1)".
    pub version: String,
    /// Where DATABASE_URL points, without the password.
    pub address: String,
    /// `synchronous_commit`: "on" means a commit waits for its WAL flush.
    pub synchronous_commit: String,
    /// `fsync`.
    pub fsync: String,
}

/// One cell of the table: a number of relays and a claim.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// Relay processes at once.
    pub relays: usize,
    /// How they claimed.
    pub claim: Claim,
    /// Runs measured.
    pub runs: usize,
    /// Median over the runs of rows delivered a second (rows over the
    /// time from the start signal to the last relay done).
    pub rows_per_s: f64,
    /// The slowest run's rows a second.
    pub rows_per_s_min: f64,
    /// The fastest run's rows a second.
    pub rows_per_s_max: f64,
    /// Median time of one claim statement, waits for locks included, in milliseconds.
    pub claim_median_ms: f64,
    /// 99th percentile of the claim's time, in milliseconds.
    pub claim_p99_ms: f64,
    /// Runs in which every row was sent exactly once and marked SENT.
    pub exactly_once_runs: usize,
}

/// Everything one run of the experiment measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always "relays".
    pub experiment: &'static str,
    /// The server.
    pub server: Server,
    /// How the relays run: "processes", one connection each.
    pub relays_are: &'static str,
    /// Rows in the outbox at the start of each run.
    pub rows: usize,
    /// Rows a claim takes.
    pub batch: usize,
    /// Real time one send takes, in milliseconds.
    pub send_ms: f64,
    /// Rounds measured (each runs every cell once).
    pub iterations: usize,
    /// Rounds asked for; more than `iterations` when the time budget ended the run.
    pub iterations_requested: usize,
    /// Whether the time budget ended the run early.
    pub stopped_on_time_budget: bool,
    /// Wall time of the whole experiment, warm-up included, in seconds.
    pub elapsed_s: f64,
    /// Whether every run sent every row exactly once.
    pub exactly_once: bool,
    /// What went wrong in the runs that did not, if any.
    pub problems: Vec<String>,
    /// One cell per relay count and claim: relays 1, 2, 4, each with SKIP LOCKED then FOR UPDATE.
    pub cells: Vec<Cell>,
}

impl Report {
    /// The cell of `relays` relays claiming with `claim`.
    pub fn cell(&self, relays: usize, claim: Claim) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.relays == relays && c.claim == claim)
    }
}

/// Runs the experiment: a warm-up run, then up to `iterations` rounds of
/// every cell (in rotating order) within `budget`, and summarises each cell.
pub fn measure(
    url: &str,
    iterations: usize,
    budget: Option<Duration>,
    progress: bool,
) -> Result<Report> {
    ensure!(
        iterations > 0,
        "the experiment needs at least one iteration"
    );
    let started = Instant::now();
    let mut client = connect(url, "notify try relays")?;
    let settings = client.query_one(
        "SELECT current_setting('server_version'), current_setting('synchronous_commit'), current_setting('fsync')",
        &[],
    )?;
    let server = Server {
        version: settings.get(0),
        address: address(&url.parse()?),
        synchronous_commit: settings.get(1),
        fsync: settings.get(2),
    };

    let mut progress = Progress::new(progress);
    progress.show("warming up");
    let warm_up = run_once(
        &mut client,
        url,
        RELAYS[RELAYS.len() - 1],
        Claim::SkipLocked,
        WARM_UP_ROWS,
    )?;
    ensure!(
        warm_up.problem.is_none(),
        "the warm-up run went wrong: {:?}",
        warm_up.problem
    );

    let cells: Vec<(usize, Claim)> = RELAYS
        .iter()
        .flat_map(|&relays| Claim::ALL.map(|claim| (relays, claim)))
        .collect();
    let mut runs: Vec<Vec<Run>> = cells.iter().map(|_| Vec::new()).collect();
    let mut done = 0;
    let mut stopped_on_time_budget = false;
    while done < iterations {
        if budget.is_some_and(|budget| started.elapsed() >= budget) {
            stopped_on_time_budget = true;
            break;
        }
        // The first cell rotates, so none of them always follows the same neighbour.
        for k in 0..cells.len() {
            let index = (done + k) % cells.len();
            let (relays, claim) = cells[index];
            progress.show(&format!(
                "round {} of {iterations}: {relays} relays, {}",
                done + 1,
                claim.label()
            ));
            runs[index].push(run_once(&mut client, url, relays, claim, ROWS)?);
        }
        done += 1;
    }
    progress.clear();

    let mut problems = Vec::new();
    let cells = cells
        .iter()
        .zip(runs)
        .map(|(&(relays, claim), runs)| {
            let mut rates: Vec<f64> = runs
                .iter()
                .map(|run| ROWS as f64 / run.took.as_secs_f64())
                .collect();
            rates.sort_by(f64::total_cmp);
            let mut claims: Vec<Duration> = runs
                .iter()
                .flat_map(|run| run.claims_us.iter().map(|&us| Duration::from_micros(us)))
                .collect();
            problems.extend(runs.iter().filter_map(|run| run.problem.clone()));
            Cell {
                relays,
                claim,
                runs: runs.len(),
                rows_per_s: round(median(&rates), 1),
                rows_per_s_min: round(rates.first().copied().unwrap_or(f64::NAN), 1),
                rows_per_s_max: round(rates.last().copied().unwrap_or(f64::NAN), 1),
                claim_median_ms: round(percentile_us(&mut claims, 0.5) / 1000.0, 3),
                claim_p99_ms: round(percentile_us(&mut claims, 0.99) / 1000.0, 3),
                exactly_once_runs: runs.iter().filter(|run| run.problem.is_none()).count(),
            }
        })
        .collect();

    Ok(Report {
        experiment: "relays",
        server,
        relays_are: "processes",
        rows: ROWS,
        batch: BATCH,
        send_ms: SEND_LATENCY.as_secs_f64() * 1000.0,
        iterations: done,
        iterations_requested: iterations,
        stopped_on_time_budget,
        elapsed_s: round(started.elapsed().as_secs_f64(), 2),
        exactly_once: problems.is_empty(),
        problems,
        cells,
    })
}

/// The report as the table `notify try relays` prints, ending in a newline.
pub fn render(report: &Report) -> String {
    let s = &report.server;
    let mut out = String::new();
    out.push_str(&format!(
        "\n  {}\n",
        "How many rows a second relay processes deliver from one PostgreSQL outbox".bold()
    ));
    out.push_str(&format!(
        "  {}\n",
        format!(
            "PostgreSQL {} at {}, synchronous_commit={}, fsync={}",
            s.version, s.address, s.synchronous_commit, s.fsync
        )
        .dimmed()
    ));
    out.push_str(&format!(
        "  {}\n\n",
        format!(
            "{} rows a run; each relay is a process of its own: claim {} rows in one statement, send each ({} ms, a real sleep, no transaction open), mark them SENT",
            report.rows, report.batch, report.send_ms
        )
        .dimmed()
    ));
    let group = 32;
    let header = format!(
        "  {:>6}   {:<group$}   {}",
        "",
        Claim::SkipLocked.label(),
        Claim::ForUpdate.label()
    );
    out.push_str(&format!("{header}\n"));
    out.push_str(&format!(
        "  {:>6}   {:>8} {:>13} {:>9}   {:>8} {:>13} {:>9}\n",
        "relays", "rows/s", "(min – max)", "claim", "rows/s", "(min – max)", "claim"
    ));
    for relays in RELAYS {
        out.push_str(&format!("  {relays:>6}"));
        for claim in Claim::ALL {
            match report.cell(relays, claim) {
                Some(c) => out.push_str(&format!(
                    "   {:>8.0} {:>13} {:>6.2} ms",
                    c.rows_per_s,
                    format!("({:.0} – {:.0})", c.rows_per_s_min, c.rows_per_s_max),
                    c.claim_median_ms
                )),
                None => out.push_str(&format!("   {:>group$}", "")),
            }
        }
        out.push('\n');
    }

    let runs: usize = report.cells.iter().map(|c| c.runs).sum();
    if report.exactly_once {
        out.push_str(&format!(
            "\n  Every row was sent exactly once in each of the {runs} runs: once in the provider's log, and marked SENT in the outbox.\n"
        ));
    } else {
        out.push_str(&format!(
            "\n  {}\n",
            format!(
                "Not every row was sent exactly once, in {} of {runs} runs:",
                report.problems.len()
            )
            .red()
            .bold()
        ));
        for problem in &report.problems {
            out.push_str(&format!("    {problem}\n"));
        }
    }
    let rounds = how_much(
        report.iterations,
        report.iterations_requested,
        report.stopped_on_time_budget,
        TIME_BUDGET,
        if report.iterations_requested == 1 {
            "round"
        } else {
            "rounds"
        },
    );
    out.push_str(&format!(
        "  {}\n",
        format!(
            "Medians over {rounds}, each running every cell once in turn, after a warm-up run; claim: the median time of one claim statement, lock waits included; {:.1} s in all.",
            report.elapsed_s
        )
        .dimmed()
    ));
    out.push_str(&format!("  Read it: {TAKEAWAY}. {}\n", reading(report)));
    out
}

/// The closing line's figures: how far each claim scales from 1 relay to
/// the most, and what plain FOR UPDATE's waits cost at the most relays.
fn reading(report: &Report) -> String {
    let cell = |relays: usize, claim: Claim| report.cell(relays, claim);
    let rate = |relays: usize, claim: Claim| cell(relays, claim).map_or(f64::NAN, |c| c.rows_per_s);
    let most = RELAYS[RELAYS.len() - 1];
    let share = rate(most, Claim::ForUpdate) / rate(most, Claim::SkipLocked);
    let scaling = format!(
        "{most} relays deliver {:.1}× what 1 does with SKIP LOCKED and {:.1}× with plain FOR UPDATE, \
         which at {most} relays gets {:.0}% of SKIP LOCKED's rate",
        rate(most, Claim::SkipLocked) / rate(1, Claim::SkipLocked),
        rate(most, Claim::ForUpdate) / rate(1, Claim::ForUpdate),
        100.0 * share,
    );
    // With SKIP LOCKED a claim never waits, so its time is how long a claim
    // holds its row locks.
    let holds_ms = cell(most, Claim::SkipLocked).map_or(f64::NAN, |c| c.claim_median_ms);
    let sends_ms = report.batch as f64 * report.send_ms;
    if share >= 0.9 {
        format!(
            "{scaling}: a claim holds its row locks for about {holds_ms:.1} ms, against {sends_ms:.0} ms of sends a batch, \
             so a relay seldom finds rows another has locked. The longer claims hold their locks, and the more relays \
             there are, the more often plain FOR UPDATE makes them wait."
        )
    } else {
        format!(
            "{scaling}: a relay that meets rows another claim has locked waits for that claim to commit, \
             so the claims queue one behind the other while SKIP LOCKED's pass each other."
        )
    }
}

/// `notify try relays`: measures against DATABASE_URL, then prints the
/// table (or JSON); returns the exit code: 2 without a server, 1 when a row
/// was not sent exactly once.
pub fn run(iterations: Option<usize>, json: bool) -> Result<i32> {
    let Some(url) = std::env::var("DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        eprintln!("{NEEDS_SERVER}");
        return Ok(2);
    };
    if iterations == Some(0) {
        eprintln!("--iterations must be at least 1.");
        return Ok(2);
    }
    let budget = iterations.is_none().then_some(TIME_BUDGET);
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let report = measure(
        &url,
        iterations.unwrap_or(DEFAULT_ITERATIONS),
        budget,
        progress,
    )?;
    super::print(&report, json, render)?;
    Ok(if report.exactly_once { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::to_json;

    /// A report as `measure` would build it, with `for_update` the rate of
    /// plain FOR UPDATE at every relay count as a share of SKIP LOCKED's.
    fn report(for_update: f64, problems: Vec<String>) -> Report {
        let cells = RELAYS
            .iter()
            .flat_map(|&relays| {
                Claim::ALL.map(|claim| {
                    let skip = 700.0 * relays as f64;
                    let rate = match claim {
                        Claim::SkipLocked => skip,
                        Claim::ForUpdate => skip * for_update,
                    };
                    Cell {
                        relays,
                        claim,
                        runs: 3,
                        rows_per_s: rate,
                        rows_per_s_min: rate - 10.0,
                        rows_per_s_max: rate + 10.0,
                        claim_median_ms: 2.5,
                        claim_p99_ms: 9.0,
                        exactly_once_runs: 3,
                    }
                })
            })
            .collect();
        Report {
            experiment: "relays",
            server: Server {
                version: "15.18".to_string(),
                address: "notify@127.0.0.1:54329/notify".to_string(),
                synchronous_commit: "on".to_string(),
                fsync: "on".to_string(),
            },
            relays_are: "processes",
            rows: ROWS,
            batch: BATCH,
            send_ms: 1.0,
            iterations: 3,
            iterations_requested: 3,
            stopped_on_time_budget: false,
            elapsed_s: 30.0,
            exactly_once: problems.is_empty(),
            problems,
            cells,
        }
    }

    #[test]
    fn render_shows_every_relay_count_both_claims_and_the_closing_line() {
        let text = render(&report(1.0, Vec::new()));
        assert!(text.contains("FOR UPDATE SKIP LOCKED") && text.contains("rows/s"));
        for relays in RELAYS {
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with(&format!("{relays} "))),
                "no row for {relays} relays:\n{text}"
            );
        }
        assert!(
            text.contains("exactly once in each of the 18 runs"),
            "{text}"
        );
        assert!(text.contains("Medians over 3 rounds"), "{text}");
        assert!(text.contains(TAKEAWAY), "{text}");
        assert!(text.contains("4.0× what 1 does"), "{text}");
        assert!(text.contains("gets 100% of SKIP LOCKED's rate"), "{text}");
        assert!(text.contains("seldom"), "{text}");
        assert!(text.lines().all(|l| l == l.trim_end()), "{text:?}");
    }

    #[test]
    fn the_closing_line_says_the_claims_queue_when_for_update_falls_behind() {
        let text = render(&report(0.5, Vec::new()));
        assert!(text.contains("gets 50% of SKIP LOCKED's rate"), "{text}");
        assert!(text.contains("the claims queue"), "{text}");
        assert!(!text.contains("seldom"), "{text}");
    }

    #[test]
    fn render_names_the_runs_that_did_not_send_every_row_once() {
        let problem = "2 relays, FOR UPDATE: 1 of 2000 rows sent more than once".to_string();
        let text = render(&report(1.0, vec![problem.clone()]));
        assert!(
            text.contains("Not every row was sent exactly once, in 1 of 18 runs"),
            "{text}"
        );
        assert!(text.contains(&problem), "{text}");
    }

    #[test]
    fn json_has_the_server_and_one_cell_per_relay_count_and_claim() {
        let doc: serde_json::Value =
            serde_json::from_str(&to_json(&report(1.0, Vec::new())).unwrap()).expect("valid JSON");
        assert_eq!(doc["experiment"], "relays");
        assert_eq!(doc["relays_are"], "processes");
        assert_eq!(doc["server"]["synchronous_commit"], "on");
        assert_eq!(doc["exactly_once"], true);
        let cells = doc["cells"].as_array().expect("cells is an array");
        assert_eq!(cells.len(), RELAYS.len() * Claim::ALL.len());
        assert_eq!(cells[0]["claim"], "skip-locked");
        assert_eq!(cells[1]["claim"], "for-update");
        for cell in cells {
            for field in [
                "relays",
                "rows_per_s",
                "rows_per_s_min",
                "rows_per_s_max",
                "claim_median_ms",
            ] {
                assert!(cell[field].is_number(), "{field} in {cell}");
            }
        }
    }

    #[test]
    fn address_leaves_the_password_out() {
        let config: Config = "postgres://notify:secret@127.0.0.1:54329/notify"
            .parse()
            .unwrap();
        assert_eq!(address(&config), "notify@127.0.0.1:54329/notify");
    }
}
