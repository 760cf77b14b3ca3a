//! The lab: the machinery behind `notify`.
//!
//! It has two sides, one folder each, and what they share:
//! - `case/`: what runs inside a case process. A case file uses a few of
//!   its types: [`Db`] (the service's database, a real rusqlite connection
//!   with the lab's fault points), [`Email`] (a provider whose sends land in
//!   the world, beyond any rollback), the simulated [`Clock`], the
//!   workshop's inputs such as [`Invite`], and [`serve!`], the case binary's
//!   entry point, which runs a plan and captures what the case prints.
//! - `grade/`: what the parent does: the command line, building cases,
//!   running scenarios and exploring generated ones, reading what the world
//!   saw, judging, reporting, and the `try` experiments.
//! - shared, at the top: the plan the parent hands a case process
//!   ([`scenario`]), the world both write and the parent reads ([`world`]),
//!   the webhooks a provider sends a case and the answers it got
//!   ([`webhook`]), the format of a process's captured output ([`output`]),
//!   and the seeded random numbers ([`rng`]).

pub mod fleet;
pub mod output;
pub mod rng;
pub mod scenario;
pub mod webhook;
pub mod world;

/// What runs inside a case process.
#[path = "case"]
mod case_side {
    pub mod capture;
    pub mod clock;
    pub mod db;
    pub mod domain;
    #[cfg(feature = "postgres")]
    pub mod pg;
    pub mod provider;
    pub mod serve;
    pub mod sqlite_now;
}
#[cfg(feature = "postgres")]
pub use case_side::pg;
pub use case_side::{capture, clock, db, domain, provider, serve, sqlite_now};

/// What the parent does.
#[path = "grade"]
mod grade_side {
    pub mod catalogue;
    pub mod chapter;
    pub mod cli;
    pub mod compile;
    pub mod experiments;
    pub mod explore;
    pub mod fleet_runner;
    pub mod grades;
    pub mod history;
    pub mod picture;
    pub mod progress;
    pub mod report;
    pub mod runner;
    pub mod status;
    pub mod timeline;
}
pub use grade_side::{
    catalogue, chapter, cli, compile, experiments, explore, fleet_runner, grades, history, picture,
    progress, report, runner, status, timeline,
};

pub use clock::Clock;
pub use db::Db;
pub use domain::{Invite, Worker};
pub use provider::{Email, Provider, Providers, Push, SendError};

/// A panic's message, when it has one (a `&str` or a `String` payload):
/// for the panic hooks of `notify` and of a case process.
pub(crate) fn panic_message(info: &std::panic::PanicHookInfo<'_>) -> Option<String> {
    let payload = info.payload();
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
}

/// The result type of a case's operations: any error, with its context.
pub type Result<T, E = anyhow::Error> = std::result::Result<T, E>;
