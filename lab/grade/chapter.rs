//! What the lab knows about a chapter: its files, its binaries, and the
//! functions that tell its story and judge it. The chapters themselves are
//! registered in `checks/mod.rs`.

use anyhow::Result;

use crate::explore::{Budget, Reached};
use crate::history::History;
use crate::picture::Band;
use crate::report::Verdict;
use crate::runner::Case;
use crate::scenario::Plan;

/// One chapter of the workshop.
pub struct Chapter {
    /// 1 to 12.
    pub number: u32,
    /// E.g. "send after commit: the outbox".
    pub title: &'static str,
    /// The file the learner edits, relative to the workshop's root.
    pub case_file: &'static str,
    /// The chapter's text, relative to the workshop's root.
    pub text_file: &'static str,
    /// The case's binary, e.g. `case01`. Its other versions (the reference
    /// solution and the wrong fixes, see [`crate::catalogue`]) are named after
    /// it, e.g. `case01-solution`.
    pub bin: &'static str,
    /// FNV-1a hash of the case file as shipped: an equal file is "not started".
    pub shipped_hash: u64,
    /// `notify run N`: plays the chapter's batch and tells its story.
    pub run: fn(&Case) -> Result<String>,
    /// `notify check N`: plays every scenario and judges each property.
    pub check: fn(&Case, &CheckOptions) -> Result<Checked>,
    /// `notify check N --coverage`: how many generated worlds of a budget
    /// reach each situation the chapter's rules turn on.
    pub coverage: fn(Budget) -> Vec<Reached>,
    /// `notify check N --html`: the stretches of simulated time the
    /// chapter's rules speak about in a scenario's history (a backoff, an
    /// open breaker, a person's night), shaded in its picture. The plans
    /// the scenario was played from, when known, say what the history
    /// does not (a person's time zone).
    pub bands: fn(&History, &[Vec<Plan>]) -> Vec<Band>,
}

/// For a chapter without generated worlds: no situations to count.
pub fn no_coverage(_budget: Budget) -> Vec<Reached> {
    Vec::new()
}

/// A chapter the workshop plans but has not written yet: it has a number
/// and a title, and no text or case.
pub struct Planned {
    /// 9 to 12.
    pub number: u32,
    /// E.g. "decide: preferences and quiet hours".
    pub title: &'static str,
}

/// How a check is asked to run.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// Seeds of the random batches to replay besides the chapter's own.
    pub seeds: Vec<u64>,
    /// How much to explore with generated scenarios.
    pub budget: Budget,
    /// The reference solution, built, to compare with; `None` when it is
    /// the reference itself that is checked.
    pub reference: Option<Case>,
}

/// What a check found.
pub struct Checked {
    pub verdicts: Vec<Verdict>,
    /// How many case processes it started.
    pub processes: usize,
}

/// The random batches every check replays unless `--seed` says otherwise.
pub const DEFAULT_SEEDS: [u64; 3] = [1, 2, 3];

/// FNV-1a, 64 bits: a stable fingerprint of a case file. A `const fn`, so a
/// case binary can carry the fingerprint of the source it was built from.
pub const fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash = (hash ^ bytes[i] as u64).wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}
