//! The scenario protocol: what the parent asks one case process to do.
//!
//! `notify` writes a [`Plan`] as JSON into the scenario's folder and starts the
//! case binary with its path. The case process runs the steps against the
//! service's database and records everything the outside world saw in the
//! world (see [`crate::world`]). A restart is simply a second plan on the same
//! folder.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The file, inside a scenario's folder, that holds the service's database.
pub const APP_DB: &str = "app.db";
/// The file, inside a scenario's folder, that holds what the world saw.
pub const WORLD_DB: &str = "world.db";
/// The file, `done.N`, that case process N writes once it has played its
/// whole plan: a process that exits without it ended early.
pub const DONE_FILE: &str = "done";
/// Where a case process's standard error goes.
pub const STDERR_FILE: &str = "stderr.txt";

/// What one case process runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Plan {
    /// The scenario's folder: `app.db` and `world.db` live here.
    pub dir: PathBuf,
    /// 1 for the first process on this folder, 2 for the restart, and so on.
    pub process: u32,
    /// SQL run once after the case's schema, when the database is new.
    pub fixture: Vec<String>,
    /// SQL run when this process starts, on the database as the processes
    /// before it left it: the world's own data that changed meanwhile (a
    /// person who gave their name while the service was being deployed).
    /// It touches only the tables the chapter gives, never the case's own.
    #[serde(default)]
    pub meanwhile: Vec<String>,
    /// The operations to call, in order.
    pub steps: Vec<Step>,
    /// The fault to inject, if any.
    pub fault: Option<Fault>,
    /// How the email provider behaves in this process.
    #[serde(default)]
    pub provider: ProviderScript,
    /// How the push provider behaves in this process.
    #[serde(default)]
    pub push: ProviderScript,
    /// Seeds the provider's random latency, so a scenario replays the same.
    #[serde(default)]
    pub seed: u64,
    /// The host name the process runs under (its `HOSTNAME`), as a container
    /// platform names a pod; `None` gives each process a name of its own,
    /// `host-<process>`. Two plans with the same host play a process
    /// restarted under the name of one that is still running.
    #[serde(default)]
    pub host: Option<String>,
    /// The UTC instant the simulated clock's 0 stands for, in ms since the
    /// UNIX epoch; `None`: [`crate::clock::DEFAULT_START`].
    #[serde(default)]
    pub starts_at: Option<i64>,
    /// Another writer (the web app) takes the database's write lock right
    /// after each commit this process makes and holds it this many ms
    /// (0: never): the process's next write meets a database another
    /// connection holds, and waits its turn on its busy timeout.
    #[serde(default)]
    pub busy_after_commit_ms: u64,
}

/// How a provider behaves: scripted per scenario. Attempts are counted in
/// the world, so a script holds across restarts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderScript {
    /// Real time every send takes, in milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
    /// Extra real time, drawn from the plan's seed, up to this many milliseconds.
    #[serde(default)]
    pub jitter_ms: u64,
    /// Simulated time every send takes: the provider moves the clock on by it.
    #[serde(default)]
    pub sim_latency_ms: i64,
    /// (recipient, ms): the simulated time a send to this recipient takes,
    /// instead of [`ProviderScript::sim_latency_ms`].
    #[serde(default)]
    pub sim_latency_each: Vec<(String, i64)>,
    /// (recipient, n): the first n attempts to this recipient fail, then it works.
    #[serde(default)]
    pub flaky: Vec<(String, u32)>,
    /// (recipient, n, seconds): the first n attempts to this recipient are
    /// refused with a 429 (too many requests) and `Retry-After: seconds`,
    /// then it works. Nothing is sent by a refused attempt.
    #[serde(default)]
    pub rate_limited: Vec<(String, u32, i64)>,
    /// Recipients whose every attempt fails (the provider answers 5xx).
    #[serde(default)]
    pub unreachable: Vec<String>,
    /// Recipients the provider refuses for good (a 4xx): retrying cannot help.
    #[serde(default)]
    pub rejected: Vec<String>,
    /// Recipients whose every send reaches the provider and fails there
    /// (the world records a failed attempt), but whose answer never comes:
    /// the caller sees a timeout, every time.
    #[serde(default)]
    pub unanswered: Vec<String>,
    /// Simulated-time windows `[from, to)` in ms during which every send fails.
    #[serde(default)]
    pub outages: Vec<(i64, i64)>,
    /// Simulated-time windows `[from, to)` in ms during which the provider
    /// hangs: every send times out, and nothing is delivered.
    #[serde(default)]
    pub hangs: Vec<(i64, i64)>,
    /// Recipients whose every send kills the sending process before the
    /// provider gets it: a poison message, e.g. one the renderer crashes on.
    /// A recipient also in [`ProviderScript::flaky`] or
    /// [`ProviderScript::rate_limited`] meets those answers first: its
    /// first n attempts fail, or are refused with a 429, and only the later
    /// ones kill.
    #[serde(default)]
    pub crash_on: Vec<String>,
    /// (recipient, n): the first n sends to this recipient kill the process
    /// sending it before the provider gets them, as a host lost mid-send
    /// would; later sends go as the rest of the script says. The claim the
    /// process held is left for chapter 6's sweep.
    #[serde(default)]
    pub crash_first: Vec<(String, u32)>,
    /// Records in the world that a send has begun, before any wait, so that
    /// the parent or another process can wait for it ([`Moment::Sending`]).
    #[serde(default)]
    pub announce: bool,
    /// A send answers only once one of these moments has happened: it
    /// blocks, in real time, until then. Racing processes are lined up by
    /// what the world saw, not by how long anything takes. Name the other
    /// process's end among them, so the send cannot wait for a process that
    /// is gone; past [`ProviderScript::hold_limit_ms`] the process stops
    /// with a lab error rather than wait on.
    #[serde(default)]
    pub hold_until_any: Vec<Moment>,
    /// (recipient, moments): a send to this recipient answers only once one
    /// of these moments has happened, instead of the script's
    /// [`ProviderScript::hold_until_any`], and is announced
    /// ([`Moment::Sending`]) whatever [`ProviderScript::announce`] says.
    #[serde(default)]
    pub hold_each: Vec<(String, Vec<Moment>)>,
    /// (n, moments): the process's nth send, over all its providers,
    /// counted from 1 among the sends [`ProviderScript::hold_op`] holds,
    /// whatever its recipient, answers only once one of these moments has happened, and
    /// is announced; it takes precedence over the rest of the holds. A race
    /// about the last send of a batch holds it in whatever order the batch
    /// goes out.
    #[serde(default)]
    pub hold_nth: Option<(u32, Vec<Moment>)>,
    /// Only sends made by this operation are announced and held; `None`:
    /// every send. A race about the relay leaves a send made inside an
    /// invite alone.
    #[serde(default)]
    pub hold_op: Option<String>,
    /// How long, in real milliseconds, a send waits for
    /// [`ProviderScript::hold_until_any`] at most; 0 means
    /// [`HOLD_LIMIT_MS`].
    #[serde(default)]
    pub hold_limit_ms: u64,
}

/// How long a held send waits at most, unless its script says otherwise.
pub const HOLD_LIMIT_MS: u64 = 120_000;

/// Something that happens in a scenario, which a held send can wait for
/// (see [`ProviderScript::hold_until_any`]). The world records each one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Moment {
    /// The simulated clock has reached this time, in ms.
    Clock(i64),
    /// Process `n` has begun a send (its provider announces it).
    Sending(u32),
    /// Process `n` has ended, however it ended (the parent records it).
    Ended(u32),
}

impl Moment {
    /// Says what is awaited, for a lab error: "process 2 ends".
    pub fn describe(&self) -> String {
        match self {
            Moment::Clock(ms) => {
                let s = ms / 1000;
                format!("the clock reaches {}:{:02}", s / 60, s % 60)
            }
            Moment::Sending(n) => format!("process {n} begins a send"),
            Moment::Ended(n) => format!("process {n} ends"),
        }
    }
}

/// One call of an operation the case exports (`invite`, `relay`, ...).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Step {
    /// The operation's name, as given to `lab::serve!`.
    pub op: String,
    /// Its input, deserialised into the operation's argument type.
    #[serde(default)]
    pub input: serde_json::Value,
    /// Who the step is about (an email address), for the story and the timeline.
    #[serde(default)]
    pub subject: Option<String>,
}

impl Step {
    /// A step with no input.
    pub fn new(op: &str) -> Step {
        Step {
            op: op.to_string(),
            input: serde_json::Value::Null,
            subject: None,
        }
    }

    /// A step with an input, about `subject`.
    pub fn with(op: &str, input: impl Serialize, subject: &str) -> Step {
        Step {
            op: op.to_string(),
            input: serde_json::to_value(input).expect("step inputs are plain data"),
            subject: Some(subject.to_string()),
        }
    }

    /// A step of the lab's that moves the scenario's clock on by `ms`.
    pub fn advance(ms: i64) -> Step {
        Step {
            op: crate::serve::ADVANCE.to_string(),
            input: serde_json::json!(ms),
            subject: None,
        }
    }
}

/// A fault at the `nth` commit or send (counting from 1) made while
/// operation `op` runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// The commit succeeds, then the process aborts: no destructor, no flush.
    CrashAfterCommit { op: String, nth: u32 },
    /// SQLite turns the COMMIT into a ROLLBACK and the case sees the error.
    FailCommit { op: String, nth: u32 },
    /// The provider accepts the send, then the process aborts before the
    /// caller sees the answer.
    CrashAfterSend { op: String, nth: u32 },
    /// The provider accepts the send, but the caller sees a timeout error.
    TimeoutAfterSend { op: String, nth: u32 },
    /// The request is lost on its way: the provider never gets it, and the
    /// caller sees the same timeout error as for [`Fault::TimeoutAfterSend`].
    TimeoutBeforeSend { op: String, nth: u32 },
}

impl Fault {
    /// Whether the fault aborts the process: a crash after a commit or
    /// after a send.
    pub fn is_crash(&self) -> bool {
        matches!(
            self,
            Fault::CrashAfterCommit { .. } | Fault::CrashAfterSend { .. }
        )
    }

    /// The operation the fault strikes.
    pub fn op(&self) -> &str {
        match self {
            Fault::CrashAfterCommit { op, .. }
            | Fault::FailCommit { op, .. }
            | Fault::CrashAfterSend { op, .. }
            | Fault::TimeoutAfterSend { op, .. }
            | Fault::TimeoutBeforeSend { op, .. } => op,
        }
    }

    /// Says which fault this is in the workshop's words: "crash after invite commit 2".
    pub fn describe(&self) -> String {
        match self {
            Fault::CrashAfterCommit { op, nth } => format!("crash after {op} commit {nth}"),
            Fault::FailCommit { op, nth } => format!("{op} commit {nth} fails"),
            Fault::CrashAfterSend { op, nth } => {
                format!("crash after the provider accepts {op} send {nth}")
            }
            Fault::TimeoutAfterSend { op, nth } => {
                format!("{op} send {nth} is accepted but times out")
            }
            Fault::TimeoutBeforeSend { op, nth } => {
                format!("{op} send {nth} times out before the provider gets it")
            }
        }
    }
}

impl Plan {
    /// Writes the plan into its folder and returns the file's path.
    pub fn save(&self) -> Result<PathBuf> {
        let path = self.dir.join(format!("plan-{}.json", self.process));
        let text = serde_json::to_string_pretty(self).context("could not encode the plan")?;
        std::fs::write(&path, text)
            .with_context(|| format!("could not write the scenario plan to {}", path.display()))?;
        Ok(path)
    }

    /// Reads a plan written by [`Plan::save`].
    pub fn load(path: &Path) -> Result<Plan> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("could not read the scenario plan {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("the scenario plan {} is not valid", path.display()))
    }
}
