//! Inside a chapter 12 case process: a connection to the play's schema on
//! a real PostgreSQL server, the email provider, and `lab::serve_postgres!`,
//! the binary's entry point (see [`crate::fleet`] for the protocol).
//!
//! The provider is outside the service: it keeps its own records in the
//! play's `_world` schema over a connection of its own, so nothing the
//! relay's connection does (a rollback, a kill) can undo them. At every
//! send it also asks PostgreSQL what the relay's connection is doing
//! (`pg_stat_activity.state`), which tells a send made with a transaction
//! open from one made with none.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use postgres::{Client, Config, NoTls};

use crate::fleet::{Duty, Orders, RelayPlan, Request, Row, Seen, DATABASE_URL};
use crate::provider::SendError;
use crate::rng::Rng;

/// Exit code of a case process whose orders could not be carried out.
pub use crate::serve::EXIT_LAB_ERROR;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a relay waits before it polls again when it claimed nothing.
const POLL: Duration = Duration::from_millis(20);

/// The schema of the provider's records, beside the play's own.
fn world(schema: &str) -> String {
    format!("{schema}_world")
}

const WORLD_SCHEMA: &str = "
    CREATE TABLE keys (key TEXT PRIMARY KEY);
    CREATE TABLE requests (
        seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        recipient  TEXT NOT NULL,
        key        TEXT,
        relay      TEXT NOT NULL,
        delivered  BOOLEAN NOT NULL,
        answer     TEXT NOT NULL,
        connection TEXT NOT NULL,
        at         TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        hung_us    BIGINT NOT NULL DEFAULT 0,
        hanging    BOOLEAN NOT NULL DEFAULT false,
        released_by BIGINT,
        backend    INTEGER,
        waited_us  BIGINT NOT NULL DEFAULT 0,
        call       INTEGER NOT NULL
    );
    CREATE INDEX requests_by_recipient ON requests (recipient);
    CREATE TABLE notes (
        seq   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        relay TEXT NOT NULL,
        what  TEXT NOT NULL,
        text  TEXT NOT NULL,
        at    TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
    );
";

/// One recipient per row, as the chapter's outbox holds them.
const FILL: &str = "
    INSERT INTO outbox (recipient, body)
    SELECT 'reader' || lpad(i::text, 4, '0') || '@example.com',
           'Your seat at ws_acme is confirmed'
      FROM generate_series(1, $1::int) AS i
";

/// The provider's request: a key is delivered at most once, nothing is
/// delivered when the answer ($5) is a failure, and the relay's connection
/// is looked up at the same moment.
const REQUEST: &str = "
    WITH fresh AS (
        INSERT INTO keys (key) SELECT $1::text WHERE $1::text IS NOT NULL AND $5::text = 'ok'
        ON CONFLICT DO NOTHING
        RETURNING key
    )
    INSERT INTO requests (recipient, key, relay, delivered, answer, connection, call)
    VALUES ($2, $1::text, $3,
            $5::text = 'ok' AND ($1::text IS NULL OR EXISTS (SELECT 1 FROM fresh)),
            $5::text,
            coalesce((SELECT state FROM pg_stat_activity WHERE pid = $4), 'gone'),
            $6)
    RETURNING seq
";

/// How often a hung send looks for another relay's send of its recipient,
/// and the send that took over looks for the hung relay's next one.
const HANG_POLL: Duration = Duration::from_millis(1);
/// The longest the provider keeps back its answer to the send that took a
/// hung one's row over (see [`Email::take_over`]).
const TAKE_OVER_MAX: Duration = Duration::from_millis(1000);

/// Opens a connection to the server in `DATABASE_URL`, with `search_path`
/// set to `schema` when given.
pub fn connect(schema: Option<&str>, name: &str) -> Result<Client> {
    let url = std::env::var(DATABASE_URL).context(crate::fleet::NEEDS_SERVER)?;
    let mut config: Config = url.parse().context(
        "DATABASE_URL is not a PostgreSQL connection string (postgres://user:password@host:port/database)",
    )?;
    config
        .application_name(name)
        .connect_timeout(CONNECT_TIMEOUT);
    // Commits do not wait for the disk (a crash of the server could lose
    // the last few, never make them half-done): the plays measure locks
    // and sends, not how fast this machine's disk syncs.
    let mut options = "-c statement_timeout=30000 -c synchronous_commit=off".to_string();
    if let Some(schema) = schema {
        options.push_str(&format!(" -c search_path={schema}"));
    }
    config.options(&options);
    config
        .connect(NoTls)
        .context("could not connect to PostgreSQL at DATABASE_URL (is it running? lab/scripts/postgres-up starts one)")
}

/// The email provider of chapter 12: it delivers a key once, records every
/// request, and takes real time to answer. As the plan says, it sometimes
/// fails for a moment (a 503), refuses some addresses for good (a 4xx),
/// and fails every send to a few addresses whose mail server is down.
pub struct Email {
    observer: Mutex<Client>,
    relay: String,
    /// The relay's own connection, as `pg_backend_pid()` names it.
    backend: i32,
    plan: RelayPlan,
    rng: Mutex<Rng>,
    /// This life's hung send has been made.
    hung: std::sync::atomic::AtomicBool,
    /// Calls of the case's `relay` so far in this life.
    calls: std::sync::atomic::AtomicI32,
    /// Sends still to fail after the hung one: the link is still down.
    fails_left: std::sync::atomic::AtomicU32,
}

impl Email {
    /// Sends `body` to `to` with no idempotency key: every call that
    /// answers `Ok` delivers.
    pub fn send(&self, to: &str, body: &str) -> Result<(), SendError> {
        self.request(None, to, body)
    }

    /// Sends `body` to `to` under an idempotency key: the provider delivers
    /// a key once, and answers OK to its repeats without delivering again.
    pub fn send_with_key(&self, key: &str, to: &str, body: &str) -> Result<(), SendError> {
        self.request(Some(key), to, body)
    }

    /// What the provider answers this send to `to`.
    fn answer(&self, to: &str) -> Result<(), SendError> {
        let n: u32 = to
            .trim_start_matches("reader")
            .split('@')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        let now_ms = play_ms(&self.plan);
        let from = self.plan.outage_from_ms;
        if self.plan.outage_ms > 0 && now_ms >= from && now_ms < from + self.plan.outage_ms {
            return Err(SendError::Unavailable(
                "503 service unavailable: the provider is down".to_string(),
            ));
        }
        let browned = self.plan.brownout_from_ms;
        if self.plan.brownout_ms > 0
            && now_ms >= browned
            && now_ms < browned + self.plan.brownout_ms
            && crate::db::lock(&self.rng).between(0, 99) < u64::from(self.plan.brownout_pct)
        {
            return Err(SendError::Unavailable(
                "503 service unavailable: the provider is overloaded".to_string(),
            ));
        }
        let every = |k: u32| k > 0 && n.is_multiple_of(k);
        let imported =
            n >= self.plan.refuse_from && n < self.plan.refuse_from + self.plan.refuse_run;
        if every(self.plan.refuse_every) || imported {
            return Err(SendError::Rejected(format!("422 {to}: no such mailbox")));
        }
        if every(self.plan.down_every) {
            return Err(SendError::Unavailable(format!(
                "503 the mail server of {to} does not answer"
            )));
        }
        let fail = self.plan.fail_one_in;
        if fail > 0 && crate::db::lock(&self.rng).between(0, u64::from(fail) - 1) == 0 {
            return Err(SendError::Unavailable(
                "503 service unavailable, try again later".to_string(),
            ));
        }
        Ok(())
    }

    fn request(&self, key: Option<&str>, to: &str, _body: &str) -> Result<(), SendError> {
        let link_down = self
            .fails_left
            .fetch_update(
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
                |n| n.checked_sub(1),
            )
            .is_ok();
        let answer = if link_down {
            Err(SendError::Unavailable(
                "503 no answer: the link to the provider is down".to_string(),
            ))
        } else {
            self.answer(to)
        };
        // The hang strikes a send the provider would deliver: the row that
        // another relay then takes over can be delivered, and what the hung
        // relay's late result does to it shows. It strikes a row's first
        // send, so the row has its attempts left whatever a sweep counts.
        if answer.is_ok()
            && self.plan.hang_from_ms > 0
            && play_ms(&self.plan) >= self.plan.hang_from_ms
            && !self.hung.load(std::sync::atomic::Ordering::Relaxed)
            && self.first_send(to)?
            && !self.hung.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            return self.hang(key, to);
        }
        let said = match &answer {
            Ok(()) => "ok",
            Err(SendError::Rejected(_)) => "rejected",
            Err(_) => "unavailable",
        };
        let seq: i64 = crate::db::lock(&self.observer)
            .query_one(
                REQUEST,
                &[&key, &to, &self.relay, &self.backend, &said, &self.call()],
            )
            .context("the provider could not record the send")?
            .get(0);
        self.take_over(to, seq)?;
        if said == "ok" && self.plan.crash_at_ms > 0 && play_ms(&self.plan) >= self.plan.crash_at_ms
        {
            crash();
        }
        let slow = self.plan.slow_one_in > 0
            && crate::db::lock(&self.rng).between(0, u64::from(self.plan.slow_one_in) - 1) == 0;
        let ms = if slow {
            self.plan.slow_ms
        } else {
            self.plan.send_ms
        };
        std::thread::sleep(Duration::from_millis(ms));
        answer
    }

    /// Whether no send to `to` reached the provider before this one.
    fn first_send(&self, to: &str) -> Result<bool, SendError> {
        let seen: bool = crate::db::lock(&self.observer)
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM requests WHERE recipient = $1)",
                &[&to],
            )
            .context("the provider could not look at its requests")?
            .get(0);
        Ok(!seen)
    }

    /// Which call of the case's `relay` this is, from 1.
    fn call(&self) -> i32 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A send (`seq`) to `to` that takes over a row another relay still
    /// hangs on: it releases that hang, and the provider keeps back its own
    /// answer until the hung relay has written the 503's result (its own
    /// connection has ended a statement since, or it has sent again), or
    /// for at most [`TAKE_OVER_MAX`]. Any send may take that long; this one
    /// does so where the order of the two relays' writes decides whether a
    /// fence holds, whatever the machine's load. The hang is known by the
    /// send that released it, so a taker slow to look still finds it.
    fn take_over(&self, to: &str, seq: i64) -> Result<(), SendError> {
        let began = Instant::now();
        let mut observer = crate::db::lock(&self.observer);
        let hung = observer
            .query_opt(
                "SELECT relay, backend FROM requests
                  WHERE recipient = $1 AND relay <> $2 AND seq < $3
                    AND (hanging OR released_by = $3)
                  LIMIT 1",
                &[&to, &self.relay, &seq],
            )
            .context("the provider could not look at its requests")?;
        let Some(hung) = hung else {
            return Ok(());
        };
        let (hung, backend): (String, Option<i32>) = (hung.get(0), hung.get(1));
        while began.elapsed() < TAKE_OVER_MAX {
            let written: bool = observer
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM requests WHERE relay = $1 AND seq > $2)
                         OR coalesce((SELECT state = 'idle' AND state_change > r.at
                                        FROM pg_stat_activity WHERE pid = $3), true)
                       FROM requests r WHERE r.seq = $2",
                    &[&hung, &seq, &backend],
                )
                .context("the provider could not look at its requests")?
                .get(0);
            if written {
                break;
            }
            std::thread::sleep(HANG_POLL);
        }
        observer
            .execute(
                "UPDATE requests SET waited_us = $2 WHERE seq = $1",
                &[&seq, &(began.elapsed().as_micros() as i64)],
            )
            .context("the provider could not record the send")?;
        Ok(())
    }

    /// A send the provider holds unanswered until another relay sends to
    /// `to`, or for `hang_max_ms`; then a 503, nothing delivered.
    fn hang(&self, key: Option<&str>, to: &str) -> Result<(), SendError> {
        let began = Instant::now();
        let mut observer = crate::db::lock(&self.observer);
        let seq: i64 = observer
            .query_one(
                REQUEST,
                &[
                    &key,
                    &to,
                    &self.relay,
                    &self.backend,
                    &"unavailable",
                    &self.call(),
                ],
            )
            .context("the provider could not record the send")?
            .get(0);
        observer
            .execute(
                "UPDATE requests SET hanging = true, backend = $2 WHERE seq = $1",
                &[&seq, &self.backend],
            )
            .context("the provider could not record the send")?;
        let limit = Duration::from_millis(self.plan.hang_max_ms);
        let mut released_by: Option<i64> = None;
        while began.elapsed() < limit {
            released_by = observer
                .query_one(
                    "SELECT min(seq) FROM requests
                      WHERE recipient = $1 AND relay <> $2 AND seq > $3",
                    &[&to, &self.relay, &seq],
                )
                .context("the provider could not look at its requests")?
                .get(0);
            if released_by.is_some() {
                break;
            }
            std::thread::sleep(HANG_POLL);
        }
        let hung = began.elapsed();
        self.fails_left.store(
            self.plan.hang_fails_after,
            std::sync::atomic::Ordering::Relaxed,
        );
        observer
            .execute(
                "UPDATE requests SET hung_us = $2, hanging = false, released_by = $3
                  WHERE seq = $1",
                &[&seq, &(hung.as_micros() as i64), &released_by],
            )
            .context("the provider could not record the send")?;
        Err(SendError::Unavailable(format!(
            "503 service unavailable: no answer for {:.1} s",
            hung.as_secs_f64()
        )))
    }
}

/// Ms since the play's relays first started.
fn play_ms(plan: &RelayPlan) -> u64 {
    crate::fleet::now_ms().saturating_sub(plan.play_start_ms)
}

/// The case's relay: claims some rows, sends them, marks them; returns how
/// many rows it claimed (0: nothing to do).
pub type RelayFn = fn(&mut Client, &Email, &str) -> Result<usize>;
/// The case's sweep: returns to PENDING the rows PROCESSING for longer
/// than the given age; returns how many.
pub type SweepFn = fn(&mut Client, Duration) -> Result<u64>;

/// Makes a chapter 12 case file's `main`.
///
/// ```ignore
/// lab::serve_postgres!(schema: SCHEMA, relay: relay, sweep: sweep);
/// ```
#[macro_export]
macro_rules! serve_postgres {
    (schema: $schema:expr, relay: $relay:path, sweep: $sweep:path $(,)?) => {
        fn main() {
            const SOURCE: u64 = $crate::chapter::fingerprint(include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/",
                file!()
            )));
            $crate::pg::main(SOURCE, $schema, $relay, $sweep)
        }
    };
}

/// The body of a chapter 12 case binary's `main`. Never returns.
pub fn main(source: u64, schema: &str, relay: RelayFn, sweep: SweepFn) -> ! {
    let arg = std::env::args_os().nth(1);
    if arg.as_deref() == Some(std::ffi::OsStr::new(crate::serve::FINGERPRINT)) {
        println!("fnv1a64 {source:016x}");
        std::process::exit(0);
    }
    let Some(orders) = arg else {
        eprintln!(
            "This is a case of the notify workshop: the service, without a scenario to run.\n\
             Run it through the lab instead: `notify run 12` or `notify check 12`."
        );
        std::process::exit(2);
    };
    match serve(schema, relay, sweep, Path::new(&orders)) {
        Ok(()) => std::process::exit(0),
        Err(err) => {
            eprintln!("{err:#}");
            std::process::exit(EXIT_LAB_ERROR);
        }
    }
}

fn serve(schema: &str, relay: RelayFn, sweep: SweepFn, orders: &Path) -> Result<()> {
    let text = std::fs::read_to_string(orders)
        .with_context(|| format!("could not read the orders {}", orders.display()))?;
    let orders: Orders = serde_json::from_str(&text)
        .with_context(|| format!("the orders {} are not valid", orders.display()))?;
    match &orders.duty {
        Duty::Setup { rows } => setup(&orders.schema, schema, *rows),
        Duty::Relay(plan) => relay_loop(&orders.schema, plan, relay, sweep),
        Duty::Watch { to, every_ms } => watch(&orders.schema, to, *every_ms),
        Duty::Collect { to } => collect(&orders.schema, to),
    }
}

/// How long the watcher's readings may fail one after another before it
/// stops by itself: the play's schema is gone, or its server.
const WATCH_GIVES_UP: Duration = Duration::from_secs(3);

/// Reads the outbox's statuses as the check does at the end, every
/// `every_ms`, until the parent stops it: how long each claim lasted, as
/// far as the readings show. It also stops by itself when its parent is
/// gone (notify was killed, and nobody else will stop it) or its readings
/// have failed for `WATCH_GIVES_UP`.
fn watch(play: &str, to: &Path, every_ms: u64) -> Result<()> {
    use std::collections::HashMap;
    use std::io::Write;
    let mut db = connect(Some(play), "notify watch")?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(to)
        .with_context(|| format!("could not open {}", to.display()))?;
    // Rows PROCESSING at the last reading: when first and last seen so.
    let mut held: HashMap<i64, (i64, i64)> = HashMap::new();
    let mut out = String::from("read\n");
    let parent = std::os::unix::process::parent_id();
    let mut failing_since: Option<Instant> = None;
    loop {
        if std::os::unix::process::parent_id() != parent {
            return Ok(());
        }
        // A reading that fails (a lock, a busy server) is taken again at
        // the next turn; the first that works says so.
        let reading = db.query(
            "SELECT id, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
               FROM outbox WHERE status = 'PROCESSING'",
            &[],
        );
        if let Ok(rows) = reading {
            failing_since = None;
            let mut now_held = HashMap::new();
            for row in &rows {
                let (id, at): (i64, i64) = (row.get(0), row.get(1));
                let from = held.get(&id).map_or(at, |&(from, _)| from);
                now_held.insert(id, (from, at));
            }
            for (id, (from, to)) in &held {
                if !now_held.contains_key(id) {
                    out.push_str(&format!("held {id} {from} {to}\n"));
                }
            }
            held = now_held;
            if !out.is_empty() {
                file.write_all(out.as_bytes())?;
                out.clear();
            }
        } else if failing_since.get_or_insert_with(Instant::now).elapsed() >= WATCH_GIVES_UP {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(every_ms));
    }
}

fn setup(play: &str, schema: &str, rows: u32) -> Result<()> {
    let mut db = connect(None, "notify setup")?;
    let world = world(play);
    db.batch_execute(&format!(
        "CREATE SCHEMA {play}; CREATE SCHEMA {world}; SET search_path = {world}; {WORLD_SCHEMA}"
    ))
    .context("could not create the play's schemas")?;
    db.batch_execute(&format!("SET search_path = {play}"))?;
    db.batch_execute(schema)
        .context("the case's SCHEMA does not run on PostgreSQL")?;
    db.execute(FILL, &[&(rows as i32)])
        .context("the case's outbox does not take the lab's rows (recipient, body)")?;
    db.batch_execute("ANALYZE outbox")?;
    Ok(())
}

fn relay_loop(play: &str, plan: &RelayPlan, relay: RelayFn, sweep: SweepFn) -> Result<()> {
    let mut db = connect(Some(play), &plan.me)?;
    let backend: i32 = db.query_one("SELECT pg_backend_pid()", &[])?.get(0);
    let observer = connect(Some(&world(play)), &format!("{} provider", plan.me))?;
    let email = Email {
        observer: Mutex::new(observer),
        relay: plan.me.clone(),
        backend,
        plan: plan.clone(),
        rng: Mutex::new(Rng::new(plan.seed)),
        hung: Default::default(),
        calls: Default::default(),
        fails_left: Default::default(),
    };
    let note = |what: &str, text: &str| -> Result<()> {
        crate::db::lock(&email.observer)
            .execute(
                "INSERT INTO notes (relay, what, text) VALUES ($1, $2, $3)",
                &[&plan.me, &what, &text],
            )
            .context("could not record the relay's note")?;
        Ok(())
    };
    let remaining = |email: &Email| -> Result<i64> {
        Ok(crate::db::lock(&email.observer)
            .query_one(
                &format!(
                    "SELECT count(*) FROM {play}.outbox WHERE status NOT IN ('SENT', 'FAILED')"
                ),
                &[],
            )
            .context(
                "the lab could not count the rows neither SENT nor FAILED (the outbox needs its status column)",
            )?
            .get(0))
    };

    let wait = plan.start_at_ms.saturating_sub(crate::fleet::now_ms());
    std::thread::sleep(Duration::from_millis(wait));
    let sweep_every = Duration::from_millis(plan.sweep_every_ms);
    let stale_after = Duration::from_millis(plan.stale_after_ms);
    let mut last_sweep: Option<Instant> = None;
    let mut idle_since: Option<Instant> = None;
    loop {
        if last_sweep.is_none_or(|at| at.elapsed() >= sweep_every) {
            last_sweep = Some(Instant::now());
            if let Err(err) = sweep(&mut db, stale_after) {
                note("error", &format!("sweep: {err:#}"))?;
            }
        }
        email
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let claimed = match relay(&mut db, &email, &plan.me) {
            Ok(n) => n,
            Err(err) => {
                note("error", &format!("relay: {err:#}"))?;
                0
            }
        };
        if claimed > 0 {
            idle_since = None;
            continue;
        }
        if remaining(&email)? == 0 {
            note("done", "")?;
            return Ok(());
        }
        let idle = idle_since.get_or_insert_with(Instant::now);
        if idle.elapsed() >= Duration::from_millis(plan.give_up_ms) {
            note(
                "gave up",
                &format!(
                    "claimed nothing for {:.1} s while rows were neither SENT nor FAILED",
                    plan.give_up_ms as f64 / 1000.0
                ),
            )?;
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

fn collect(play: &str, to: &Path) -> Result<()> {
    let mut db = connect(None, "notify collect")?;
    let seen = read_seen(&mut db, play);
    // The play's schemas go whatever was read.
    let dropped = drop_play(&mut db, play);
    std::fs::write(to, serde_json::to_string(&seen?)?)
        .with_context(|| format!("could not write {}", to.display()))?;
    dropped
}

fn read_seen(db: &mut Client, play: &str) -> Result<Seen> {
    let world = world(play);
    let rows = db
        .query(
            &format!(
                "SELECT id, recipient, status, to_jsonb(o) ->> 'last_error'
                   FROM {play}.outbox AS o ORDER BY id"
            ),
            &[],
        )
        .context("could not read the outbox (id, recipient, status)")?
        .iter()
        .map(|r| Row {
            id: r.get(0),
            recipient: r.get(1),
            status: r.get(2),
            last_error: r.get(3),
        })
        .collect();
    let at = "(extract(epoch FROM at) * 1000000)::bigint";
    let requests = db
        .query(
            &format!(
                "SELECT recipient, key, relay, delivered, connection, {at}, answer, hung_us, call, waited_us FROM {world}.requests ORDER BY seq"
            ),
            &[],
        )?
        .iter()
        .map(|r| Request {
            recipient: r.get(0),
            key: r.get(1),
            relay: r.get(2),
            delivered: r.get(3),
            connection: r.get(4),
            at_us: r.get(5),
            answer: r.get(6),
            hung_us: r.get(7),
            call: r.get(8),
            waited_us: r.get(9),
        })
        .collect();
    let notes = db
        .query(
            &format!("SELECT relay, what, text, {at} FROM {world}.notes ORDER BY seq"),
            &[],
        )?
        .iter()
        .map(|r| crate::fleet::Note {
            relay: r.get(0),
            what: r.get(1),
            text: r.get(2),
            at_us: r.get(3),
        })
        .collect();
    Ok(Seen {
        rows,
        requests,
        notes,
    })
}

/// Drops the play's two schemas and all they hold.
fn drop_play(db: &mut Client, play: &str) -> Result<()> {
    if !play.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("the play's schema name {play:?} is not a plain name");
    }
    db.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {play} CASCADE; DROP SCHEMA IF EXISTS {} CASCADE",
        world(play)
    ))
    .context("could not drop the play's schemas")
}

/// The relay's planned crash: it says when on its standard error, for the
/// parent, and dies at once, as a SIGKILL from outside would kill it.
fn crash() -> ! {
    eprintln!("{} {}", crate::fleet::CRASHED, crate::fleet::now_us());
    // SAFETY: a signal to this very process; nothing after it runs.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    std::process::abort()
}
