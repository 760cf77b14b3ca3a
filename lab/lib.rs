//! The lab: the machinery behind `notify`.
//!
//! A case file uses a few of its types: [`Db`] (the service's database, a
//! real rusqlite connection with the lab's fault points), [`Email`] (a
//! provider whose sends land in the world, beyond any rollback), the
//! workshop's inputs such as [`Invite`], and [`serve!`], the case binary's
//! entry point. The rest is the parent's side: building and running cases,
//! reading what the world saw, and reporting verdicts.

pub mod catalogue;
pub mod chapter;
pub mod cli;
pub mod clock;
pub mod compile;
pub mod db;
pub mod domain;
pub mod experiments;
pub mod explore;
pub mod output;
pub mod progress;
pub mod provider;
pub mod report;
pub mod rng;
pub mod runner;
pub mod scenario;
pub mod serve;
pub mod status;
pub mod timeline;
pub mod world;

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
