//! `notify try NAME`: experiments that measure what a fix costs.
//!
//! Each experiment runs on this machine, with real files and real commits,
//! so the figures it prints are yours rather than the workshop's.

use anyhow::{Context, Result};
use serde::Serialize;

pub mod backoff;
pub mod breaker;
pub mod chart;
pub mod claim;
pub mod database;
pub mod locks;
pub mod outbox;
#[cfg(feature = "postgres")]
pub mod relays;
pub mod timing;

/// The SQLite journal an experiment runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Journal {
    /// Write-ahead log (`journal_mode=WAL`), the lab's own setting: one fsync a commit.
    Wal,
    /// Rollback journal (`journal_mode=DELETE`): about four fsyncs a commit.
    Delete,
}

impl Journal {
    /// The value given to `PRAGMA journal_mode`.
    pub fn pragma_value(self) -> &'static str {
        match self {
            Journal::Wal => "WAL",
            Journal::Delete => "DELETE",
        }
    }
}

/// The experiments `notify try` knows: (name, one-line description).
pub const EXPERIMENTS: &[(&str, &str)] = &[
    (
        "outbox",
        "what an outbox row costs on a real SQLite commit (chapter 1)",
    ),
    (
        "claim",
        "how many rows a second a relay claims, by batch size (chapter 3)",
    ),
    (
        "locks",
        "how long an invite waits while a relay sends slowly (chapter 4)",
    ),
    (
        "backoff",
        "attempts through a provider outage, for three retry policies (chapter 5)",
    ),
    (
        "breaker",
        "sends and backlog through a provider outage, with and without a breaker (chapter 7)",
    ),
    (
        "relays",
        "rows a second from 1, 2 and 4 relay processes on PostgreSQL (chapter 12)",
    ),
];

/// What `notify try relays` prints in a build without the `postgres` feature.
pub const RELAYS_NEED_FEATURE: &str = "notify try relays needs PostgreSQL support, which this build leaves out: run it as `cargo run --features postgres --bin notify -- try relays`.";

/// `notify try relays` from a build without PostgreSQL's client (the
/// workshop's default, so chapters 1 to 11 never compile it): inside the
/// workshop, cargo builds `notify` with `--features postgres` and runs the
/// experiment with it, as `notify` already builds case 12. The client's
/// crates are compiled once; case 12 needs them too. Outside the workshop
/// (an installed copy), says how to run it.
#[cfg(not(feature = "postgres"))]
fn relays_with_postgres(iterations: Option<usize>, json: bool) -> Result<i32> {
    let here = std::env::current_dir().context("could not read the current folder")?;
    let Ok(root) = crate::compile::find_root(&here) else {
        eprintln!("{RELAYS_NEED_FEATURE}");
        return Ok(2);
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "notify try relays needs PostgreSQL's client, which the default build leaves out: building notify with it (its first build compiles the client's crates, about a minute on 2 cores)..."
    );
    let mut command = std::process::Command::new(&cargo);
    command
        .current_dir(&root)
        .args([
            "run",
            "--quiet",
            "--features",
            "postgres",
            "--bin",
            "notify",
            "--",
        ])
        .args(["try", "relays"]);
    if let Some(n) = iterations {
        command.args(["--iterations", &n.to_string()]);
    }
    if json {
        command.arg("--json");
    }
    let status = command.status().with_context(|| {
        format!(
            "could not run cargo ({}) to build notify with PostgreSQL's client: is the Rust toolchain installed?",
            std::path::Path::new(&cargo).display()
        )
    })?;
    Ok(status.code().unwrap_or(2))
}

/// An experiment's report as a pretty-printed JSON document.
pub fn to_json<R: Serialize>(report: &R) -> Result<String> {
    serde_json::to_string_pretty(report)
        .context("could not turn the experiment's figures into JSON")
}

/// Prints `report` to stdout: the table `render` draws, or with `json` a
/// JSON document.
pub fn print<R: Serialize>(report: &R, json: bool, render: fn(&R) -> String) -> Result<()> {
    if json {
        println!("{}", to_json(report)?);
    } else {
        print!("{}", render(report));
    }
    Ok(())
}

/// Runs experiment `name`, printing to stdout; returns the process exit code.
///
/// `iterations` overrides the experiment's default run length, `journal`
/// picks the SQLite journal, and `json` prints the figures as a JSON
/// document instead of a table. An unknown name prints the list of
/// experiments to stderr and returns 2.
pub fn run_try(name: &str, iterations: Option<usize>, journal: Journal, json: bool) -> Result<i32> {
    match name {
        "outbox" => outbox::run(iterations, journal, json),
        "claim" => claim::run(iterations, journal, json),
        "locks" => locks::run(iterations, journal, json),
        "backoff" => backoff::run(json),
        "breaker" => breaker::run(json),
        #[cfg(feature = "postgres")]
        "relays" => relays::run(iterations, json),
        #[cfg(not(feature = "postgres"))]
        "relays" => relays_with_postgres(iterations, json),
        _ => {
            eprintln!("There is no experiment called {name:?}. The experiments are:");
            for (name, description) in EXPERIMENTS {
                eprintln!("  {name:<10} {description}");
            }
            eprintln!("Run one with: notify try NAME");
            Ok(2)
        }
    }
}
