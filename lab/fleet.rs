//! Chapter 12's protocol: relay processes of one case sharing an outbox on
//! a real PostgreSQL server.
//!
//! The other chapters' cases run against their own SQLite file. Chapter
//! 12's case runs as several processes at once against one PostgreSQL
//! server, so the parent (`notify`, which has no PostgreSQL client) hands
//! each process a [`Duty`] and the case process does the database work
//! itself: it creates the play's schema and fills the outbox, relays, or
//! writes what the world saw ([`Seen`]) as JSON for the check to judge.
//! Everything a play creates lives in two schemas of its own, dropped
//! when it ends.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The variable that says where the PostgreSQL server is.
pub const DATABASE_URL: &str = "DATABASE_URL";

/// What the workshop prints when chapter 12 is run without a server.
pub const NEEDS_SERVER: &str = "Chapter 12 runs its relays on a real PostgreSQL server, and DATABASE_URL does not say where one is.
Start a throw-away server on this machine with `lab/scripts/postgres-up` (it installs Debian's postgresql
package if needed and listens on 127.0.0.1:54329 only), then export the URL it prints on its last line:
`export DATABASE_URL=$(lab/scripts/postgres-up | tail -n 1)`. Or set DATABASE_URL to a server you own:
each play works in schemas of its own and drops them afterwards. `lab/scripts/postgres-down` stops the
throw-away server.";

/// What one case process of chapter 12 does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Duty {
    /// Creates the play's schemas, runs the case's schema there, and puts
    /// `rows` pending rows in the outbox, one per recipient.
    Setup { rows: u32 },
    /// Relays until the outbox is all SENT, or until it has claimed nothing
    /// for `give_up_ms`.
    Relay(RelayPlan),
    /// Reads the outbox's statuses every `every_ms` while the relays run,
    /// as an operator would, and appends to `to` what it saw: `read` once
    /// its first reading is taken, then `held ID FROM TO` for each row seen
    /// `PROCESSING` from one reading to another and no longer at the next,
    /// in µs on the server's clock. Runs until it is stopped.
    Watch { to: PathBuf, every_ms: u64 },
    /// Writes what the world saw ([`Seen`]) to `to`, then drops the play's
    /// schemas.
    Collect { to: PathBuf },
}

/// How one relay process runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayPlan {
    /// The relay's name, as the case sees it and writes in `claimed_by`:
    /// `relay-2` for its first life, `relay-2.1` after its first restart.
    pub me: String,
    /// Real time the provider takes for a send, in ms.
    pub send_ms: u64,
    /// One send in this many is slow (0: none).
    pub slow_one_in: u32,
    /// Real time a slow send takes, in ms.
    pub slow_ms: u64,
    /// Seeds which sends are slow.
    pub seed: u64,
    /// The relay calls the case's sweep this often, in ms.
    pub sweep_every_ms: u64,
    /// What the sweep is told: a row PROCESSING for longer than this, in
    /// ms, belongs to a relay that died.
    pub stale_after_ms: u64,
    /// The relay stops when it has claimed nothing for this long while
    /// rows are still neither SENT nor FAILED.
    pub give_up_ms: u64,
    /// The relay starts relaying at this wall-clock instant, in ms since
    /// the UNIX epoch, so that relays started together begin together.
    pub start_at_ms: u64,
    /// One send in this many fails for a moment (a 503, nothing sent; 0:
    /// none), drawn from the seed.
    #[serde(default)]
    pub fail_one_in: u32,
    /// The addresses `readerN` with N a multiple of this are refused for
    /// good (a 4xx; 0: none).
    #[serde(default)]
    pub refuse_every: u32,
    /// The `refuse_run` addresses from `readerN` with N this one on are
    /// refused for good too: a bad import, one after another in the list.
    #[serde(default)]
    pub refuse_from: u32,
    #[serde(default)]
    pub refuse_run: u32,
    /// The addresses `readerN` with N a multiple of this fail at every
    /// send (their mail server is down for days; 0: none).
    #[serde(default)]
    pub down_every: u32,
    /// The provider is down for everyone (a 503 at every send) from this
    /// many ms after the play's start, for `outage_ms` (0: never).
    #[serde(default)]
    pub outage_from_ms: u64,
    #[serde(default)]
    pub outage_ms: u64,
    /// The provider is partly down from this many ms after the play's
    /// start, for `brownout_ms` (0: never): each send then fails (a 503)
    /// with a chance of `brownout_pct` in 100, drawn from the seed, so a
    /// relay's recent sends hold every share of failures, about half of
    /// them included.
    #[serde(default)]
    pub brownout_from_ms: u64,
    #[serde(default)]
    pub brownout_ms: u64,
    #[serde(default)]
    pub brownout_pct: u32,
    /// When the play's relays first started, in ms since the UNIX epoch:
    /// the outage is timed from it, whatever life a relay is in.
    #[serde(default)]
    pub play_start_ms: u64,
    /// The relay's first send this many ms or more after the play's start,
    /// of a row never sent before, that the provider would deliver hangs
    /// (0: none): the provider holds it unanswered until another relay
    /// sends to the same recipient, or for `hang_max_ms`, and then answers
    /// a 503 (nothing delivered). A relay hung past the sweep's threshold
    /// is taken for dead while it still runs: its late answer and the rest
    /// of its batch come after its rows were given to others.
    #[serde(default)]
    pub hang_from_ms: u64,
    #[serde(default)]
    pub hang_max_ms: u64,
    /// Sends after the hung one that fail too, with a 503 and nothing
    /// delivered, whatever they carry: the relay's link to the provider is
    /// still down when it wakes.
    #[serde(default)]
    pub hang_fails_after: u32,
    /// The relay crashes at its first send the provider delivers this many
    /// ms or more after the play's start (0: never), right after the
    /// delivery and before the case hears the answer: the row was sent
    /// and its mark never made. It says [`CRASHED`] and the moment on its
    /// standard error, then kills itself with SIGKILL.
    #[serde(default)]
    pub crash_at_ms: u64,
    /// How far the relay's machine's clock is off, in ms (0: not at all):
    /// every reading of the wall clock in the relay process, the case's
    /// `SystemTime::now()` among them, is this much ahead (or behind, when
    /// negative). The database's clock is the one clock all relays share.
    #[serde(default)]
    pub clock_skew_ms: i64,
}

/// The line a relay's planned crash begins with on its standard error,
/// followed by the moment, in µs since the UNIX epoch.
pub const CRASHED: &str = "notify: crashed as planned at";

/// Now, in µs since the UNIX epoch: the moments both sides of a play
/// speak in. Read from the kernel itself, never through the C library's
/// `clock_gettime`, which a relay's skewed clock replaces (see
/// [`RelayPlan::clock_skew_ms`]): the play's moments are the one machine's
/// true time, whatever clock the case is given.
pub fn now_us() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the system call writes one timespec, which `ts` is.
    let read = unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_REALTIME,
            &mut ts as *mut libc::timespec,
        )
    };
    if read != 0 {
        return 0;
    }
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
}

/// Now, in ms since the UNIX epoch, as [`now_us`] reads it.
pub fn now_ms() -> u64 {
    (now_us() / 1000) as u64
}

/// A case process's orders: which play, and its duty there.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Orders {
    /// The play's schema, e.g. `notify_12_4711_3`; the provider's records
    /// live in the schema of the same name with `_world` appended.
    pub schema: String,
    pub duty: Duty,
}

/// One outbox row at the end of a play.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub id: i64,
    pub recipient: String,
    pub status: String,
    /// The row's `last_error`, when its table has one and it is set.
    #[serde(default)]
    pub last_error: Option<String>,
}

/// One request the provider received.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    pub recipient: String,
    /// The idempotency key, if the relay gave one.
    pub key: Option<String>,
    /// The relay that sent it (its [`RelayPlan::me`]).
    pub relay: String,
    /// False when the provider had already delivered this key: it answered
    /// OK and delivered nothing new.
    pub delivered: bool,
    /// What PostgreSQL said the relay's connection was doing at that
    /// moment (`pg_stat_activity.state`), e.g. `idle` or `idle in
    /// transaction`.
    pub connection: String,
    /// When, in µs since the UNIX epoch (the server's clock, which is this
    /// machine's).
    pub at_us: i64,
    /// What the provider answered: `ok`, `unavailable` (a 503, nothing
    /// sent) or `rejected` (refused for good).
    #[serde(default)]
    pub answer: String,
    /// How long the provider held this request before it answered, in µs,
    /// when it hung ([`RelayPlan::hang_from_ms`]); 0 otherwise.
    #[serde(default)]
    pub hung_us: i64,
    /// Which call of the case's `relay` in this relay process made it,
    /// from 1: the sends of one call are the batch of one claim.
    #[serde(default)]
    pub call: i32,
    /// How long the provider kept back its answer to this send because it
    /// took over a row another relay hung on, in µs; 0 otherwise.
    #[serde(default)]
    pub waited_us: i64,
}

impl Request {
    /// When the relay had its answer, in µs since the UNIX epoch.
    pub fn answered_us(&self) -> i64 {
        self.at_us + self.hung_us + self.waited_us
    }
}

/// Something a relay process did that the story tells.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Note {
    pub relay: String,
    /// `error` (the case's relay or sweep returned an error, in `text`),
    /// `gave up` (nothing claimed for too long), or `done`.
    pub what: String,
    pub text: String,
    pub at_us: i64,
}

/// What the world saw in one play: the outbox at the end, every request
/// the provider received, in order, and the relays' notes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Seen {
    pub rows: Vec<Row>,
    pub requests: Vec<Request>,
    pub notes: Vec<Note>,
}
