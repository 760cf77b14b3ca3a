//! Exploring a case instead of sampling it: scenarios generated from seeds,
//! a crash and a failing commit after every commit of every operation, the
//! invariants every dispatcher shares, agreement with the reference solution
//! on the same scenario, and shrinking a failure to the smallest scenario
//! that still shows it.
//!
//! A chapter says what its world may contain (an [`Explorer`]: a generator,
//! the plans of a scenario's processes, what a restart runs, what the rules
//! fix); the lab plays, injects, compares, shrinks and reports. The three
//! parts stay apart, as in Maelstrom: the workload (the generated scenario),
//! the nemesis (the faults, chosen from what the fault-free run did), and the
//! checker (judging what the world saw, never the code).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::chapter::fingerprint;
pub use crate::experiments::chart::clock;
use crate::history::History;
use crate::report::{counted, Verdict};
use crate::rng::Rng;
use crate::runner::{in_parallel, scenario_dir, Case, Exit};
use crate::scenario::{Fault, Plan, Step};
use crate::serve::RUN;
use crate::world::{Delivery, Event, Kind, Outcome, Recorder};

/// How much a check explores.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// The seeds of the generated scenarios: `first..first + scenarios`.
    pub first_seed: u64,
    pub scenarios: u64,
    /// Faults played per scenario: `None` plays every fault point, a number
    /// samples that many from the seed.
    pub faults: Option<usize>,
    /// Whether the explorer's [covering seeds](Explorer::covering_seeds)
    /// are played too, after the range above.
    pub covering: bool,
    /// Whether a failure is shrunk to a smaller scenario that still breaks
    /// its rule before it is reported (`--no-shrink` reports it as found).
    pub shrink: bool,
}

impl Budget {
    /// The learner's loop: a few seeds, a sample of the fault points.
    pub const QUICK: Budget = Budget {
        first_seed: 1,
        scenarios: 4,
        faults: Some(6),
        covering: true,
        shrink: true,
    };

    /// For CI and instructors: `seeds` scenarios, each under every fault
    /// point it has, or a sample of [`THOROUGH_FAULTS`] of them when it has
    /// more (a world of many wake-ups has hundreds, one a commit).
    pub fn thorough(seeds: u64) -> Budget {
        Budget {
            first_seed: 1,
            scenarios: seeds,
            faults: Some(THOROUGH_FAULTS),
            covering: true,
            shrink: true,
        }
    }

    /// This budget, reporting each failure as it was first found.
    pub fn unshrunk(self) -> Budget {
        Budget {
            shrink: false,
            ..self
        }
    }

    /// One seed only, as `--seed N` asks, with every fault point.
    pub fn seed(seed: u64) -> Budget {
        Budget {
            first_seed: seed,
            scenarios: 1,
            faults: None,
            covering: false,
            shrink: true,
        }
    }
}

/// The most fault points `--thorough` plays in one scenario: every one in
/// most scenarios; a sample, chosen by the seed, in the longest.
pub const THOROUGH_FAULTS: usize = 60;

/// Where faults go, in the chapter's fault model.
#[derive(Clone, Copy, Debug, Default)]
pub struct FaultModel {
    /// Operations after whose commits the process aborts (then restarts).
    pub crash_after_commit: &'static [&'static str],
    /// Operations whose commits fail inside SQLite.
    pub fail_commit: &'static [&'static str],
    /// Operations whose sends the provider accepts just before the process
    /// aborts.
    pub crash_after_send: &'static [&'static str],
    /// Operations that take a request from outside (an invite, a publish):
    /// when one returns an error, the request was refused, and whatever it
    /// was about is owed to nobody.
    pub requests: &'static [&'static str],
    /// Leaves out the failing commit of the commit that records a delivered
    /// send's answer: the first commit of the same process and operation
    /// after a send the provider accepted. Such a failure loses the answer
    /// the way a crash right after the send does, and a chapter that takes
    /// those crashes out of its model (an empty `crash_after_send` for an
    /// operation) takes this failure out with them. Off by default: every
    /// commit of a `fail_commit` operation may fail.
    pub keep_answers: bool,
    /// Operations whose sends may go astray without a crash: the provider
    /// takes one and its answer never comes back, or the request never
    /// reaches the provider; either way the caller sees a timeout. After
    /// such a play, as after a failing commit, the service runs once more,
    /// as at start-up, as it would later in production: what the fault left
    /// owed must go out then, once.
    pub lose_send: &'static [&'static str],
    /// Operations whose sends may be lost on their way only: the provider
    /// never gets the request, and the caller sees a timeout. A chapter
    /// whose sends carry no key yet (chapter 1) plays this half of
    /// [`FaultModel::lose_send`]: the row must still go out, once, while an
    /// answer lost after a delivery is chapter 2's to judge.
    pub lose_request: &'static [&'static str],
    /// Operations whose faults may strand what the process had claimed:
    /// before chapter 6's sweep, nobody hands back a claim a crashed relay
    /// held or a failed send left. Under such a fault a message may go
    /// untold where the play without it told it, and its row may wait,
    /// claimed, once the service is idle; it is still never told twice,
    /// and never marked sent without reaching the provider.
    pub strands: &'static [&'static str],
}

impl FaultModel {
    /// The dispatcher of chapters 6 to 8: a `publish` takes the request;
    /// `dispatch` and `sweep` run on a schedule, which resumes after a
    /// restart, and the sweep hands back whatever a crash left claimed, so
    /// a crash or a failing commit anywhere is survivable, a crash right
    /// after a send included.
    pub const DISPATCHER: FaultModel = FaultModel {
        crash_after_commit: &["publish", "dispatch", "sweep"],
        fail_commit: &["publish", "dispatch", "sweep"],
        crash_after_send: &["dispatch"],
        requests: &["publish"],
        keep_answers: false,
        lose_send: &[],
        lose_request: &[],
        strands: &[],
    };

    /// A dispatcher without chapter 6's sweep (chapters 5, 9 and 10): a
    /// `publish` takes the request, and a crash after any commit, a failing
    /// commit or a crash right after a send may strike it or the
    /// dispatcher. A row claimed by a dispatcher that died or gave up stays
    /// claimed until chapter 6's sweep: such a fault may strand it, never
    /// send it twice or mark it sent unsent. (A lost answer is a failed
    /// attempt by chapter 5's rules, with its own scenarios: it may rightly
    /// turn a delivery into a dead letter, so it is not played here.)
    pub const PUBLISH: FaultModel = FaultModel {
        crash_after_commit: &["publish", "dispatch"],
        fail_commit: &["publish", "dispatch"],
        crash_after_send: &["dispatch"],
        requests: &["publish"],
        keep_answers: false,
        lose_send: &[],
        lose_request: &[],
        strands: &["dispatch"],
    };
}

/// Which of the shared invariants hold in a chapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct Invariants {
    /// Nobody gets the same message twice.
    pub told_once: bool,
    /// Once the service is idle, every queued message was delivered (the
    /// world saw it) or is a dead letter with the error that killed it.
    pub settled: bool,
    /// With `settled`, chapter 9's third end state: a row withdrawn because
    /// its recipient turned the channel off is `CANCELLED` with its reason.
    /// Elsewhere a `CANCELLED` row is a message lost.
    pub withdraws: bool,
    /// After the n-th failed attempt of a message, the next one waits at
    /// least `retry_gaps[n - 1]` ms (chapter 5's backoff).
    pub retry_gaps: &'static [i64],
    /// With `retry_gaps`, chapter 7's breaker: a failed send that may have
    /// been a probe costs its row nothing, so the row may go out again at
    /// once, and its backoff counts only its other failures.
    pub breaker: Option<Breaker>,
    /// Once a provider answers a send on a channel (it delivers, refuses
    /// one address or asks it to slow down: anything but a 503 or no
    /// answer), a message on that channel
    /// that was waiting, never tried, goes out within this many ms:
    /// chapter 7's breaker, which holds rows back only while its provider
    /// fails (0: not judged). Needs [`Explorer::published`].
    pub closes_on_answer: i64,
    /// With `breaker`, chapter 7's open state: a probe that failed opens
    /// the breaker for another `probe_after`, so the dispatcher that sent
    /// it sends nothing more on its channel for that long, whatever else
    /// opens or closes. The number is the longest a closed breaker lets a
    /// due message wait, never tried (how a probe is told from other sends:
    /// see [`after_a_failed_probe`]); 0: not judged. Fault-free only.
    pub one_probe: i64,
    /// When a crash loses a send's answer, the message goes out again no
    /// sooner than this many ms after that send (chapter 6's sweep, which
    /// takes back only a claim this old; 0: not judged). For worlds whose
    /// sends take no simulated time, where a row is claimed at its send.
    pub orphaned_after: i64,
    /// Every send carries an idempotency key, and one message (a channel,
    /// a recipient, a text) never reaches the provider under two keys:
    /// chapter 2's rule, which every later chapter keeps.
    pub keyed: bool,
    /// A message goes to the provider again only when the service could
    /// not record its earlier send: the process aborted after it, its
    /// answer was lost, or the commit after it failed or never came
    /// (chapter 3: "each row goes to the provider once, key or no key",
    /// but for what a crash between the send and the mark repeats).
    /// Judged with the survival rule, for worlds with no sweep that hands a
    /// live claim to another process.
    pub sent_once: bool,
    /// The service records what it learnt before it lets go: a send whose
    /// answer came back is recorded by a commit before the operation that
    /// made it returns, with an error too (chapter 2: "the key protects a
    /// retry, it does not replace remembering"; past the key window, an
    /// unrecorded send goes out again), unless a failing commit or an
    /// abort took the record. Judged with the survival rule.
    pub recorded: bool,
}

impl Invariants {
    /// The property `settled` is judged as: with chapter 9's withdrawals or
    /// without.
    fn settled_rule(&self) -> Rule {
        match self.withdraws {
            true => Rule::SettledOrWithdrawn,
            false => Rule::Settled,
        }
    }
}

/// A breaker per channel as chapter 7 states it, seen from the provider's
/// side: it opens when, in the last `window` ms, at least `opens_after`
/// sends were made and more than half of them failed, and then lets one
/// send through, the probe, once nothing went out for `probe_after` ms.
#[derive(Clone, Copy, Debug)]
pub struct Breaker {
    pub window: i64,
    pub opens_after: usize,
    pub probe_after: i64,
    /// A wake-up: how far each of those times may stretch either way.
    pub slack: i64,
}

impl Breaker {
    /// The failed sends that may have been probes, by their place among the
    /// deliveries: a send before which nothing went to its provider for
    /// the breaker's wait, and whose last send before that wait may have
    /// left the breaker open (its window held enough sends, mostly failed,
    /// or it was a failed probe itself). That last send may be a success:
    /// the rule weighs the minute, so a delivery that ends a minute of
    /// three failures in five opens the breaker all the same. A 429 is no
    /// failure here: it is the provider answering. Judged over each
    /// dispatcher's own sends and over the channel's, so that a breaker in
    /// memory and one shared in a table both have their probes.
    fn probes(&self, deliveries: &[Delivery]) -> BTreeSet<usize> {
        let mut probes = BTreeSet::new();
        let mut order: Vec<usize> = (0..deliveries.len()).collect();
        order.sort_by_key(|&i| (deliveries[i].began_ms, i));
        for (k, &i) in order.iter().enumerate() {
            let d = &deliveries[i];
            // Only a failed probe is ever asked about: one that got
            // through is followed by no backoff, and a 429 is the provider
            // answering, which closes a breaker.
            if d.outcome != Outcome::Failed || d.limited {
                continue;
            }
            let may = |same: &dyn Fn(&Delivery) -> bool| -> bool {
                let mut before = order[..k].iter().copied().filter(|&j| same(&deliveries[j]));
                let quiet_from = d.began_ms - self.probe_after + self.slack;
                if before.clone().any(|j| deliveries[j].at_ms > quiet_from) {
                    return false;
                }
                let Some(last) = before.clone().max_by_key(|&j| (deliveries[j].at_ms, j)) else {
                    return false;
                };
                let q = &deliveries[last];
                if probes.contains(&last) {
                    return true;
                }
                let window: Vec<&Delivery> = before
                    .by_ref()
                    .map(|j| &deliveries[j])
                    .filter(|o| o.at_ms >= q.at_ms - self.window - self.slack)
                    .collect();
                let failed = window
                    .iter()
                    .filter(|o| o.outcome == Outcome::Failed && !o.limited)
                    .count();
                window.len() >= self.opens_after && failed > self.opens_after / 2
            };
            let channel = |o: &Delivery| o.channel == d.channel;
            if may(&|o| channel(o) && o.process == d.process) || may(&channel) {
                probes.insert(i);
            }
        }
        probes
    }
}

/// What happened to one subject (a person, a row), in the rules' words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fate {
    /// How many messages reached them.
    pub told: u32,
    /// How the service left it, e.g. `SENT`, `FAILED (rejected for good)`, `member`.
    pub state: String,
    /// What else the rules fix when nothing goes wrong, e.g. the attempts'
    /// times and answers: compared only in fault-free runs.
    pub detail: String,
}

impl Fate {
    fn told(&self) -> String {
        match self.told {
            0 => "never told".to_string(),
            1 => "told once".to_string(),
            n => format!("told {n} times"),
        }
    }

    fn said(&self, with_detail: bool) -> String {
        let told = self.told();
        match (with_detail, self.detail.is_empty()) {
            (true, false) => format!("{told}, {}; {}", self.state, self.detail),
            _ => format!("{told}, {}", self.state),
        }
    }

    /// What of this fate differs from `other`'s, said as this one has it.
    fn differing(&self, other: &Fate, with_detail: bool) -> String {
        let mut head = Vec::new();
        if self.told != other.told {
            head.push(self.told());
        }
        if self.state != other.state {
            head.push(self.state.clone());
        }
        let head = head.join(", ");
        let detail = with_detail && self.detail != other.detail && !self.detail.is_empty();
        match (head.is_empty(), detail) {
            (true, false) => self.said(with_detail),
            (true, true) => self.detail.clone(),
            (false, true) => format!("{head}; {}", self.detail),
            (false, false) => head,
        }
    }
}

/// One row of the service's outbox as it was left, for the invariants.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// Who or what it is about, as in the report.
    pub subject: String,
    /// `SENT` (the world saw it delivered), `FAILED` (a dead letter), or
    /// [`crate::history::WAITING`]: by the contract, not the case's columns.
    pub status: String,
    /// The error kept with it, if any.
    pub error: Option<String>,
    /// Its message (channel, recipient, body), where the chapter's rows
    /// carry one: a dead letter's error is then held against the answer
    /// that ended its message ([`crate::history::last_answers`]).
    #[serde(default)]
    pub message: Option<(String, String, String)>,
    /// What the chapter's contract finds wrong with how it ended, which no
    /// shared rule can tell, e.g. "is CANCELLED, though its recipient never
    /// turned push off for comments": a withdrawal only its own recipient
    /// may ask for.
    #[serde(default)]
    pub wrong: Option<String>,
}

/// What a chapter reads from one played scenario.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Observation {
    /// Per subject, what the rules fix.
    pub fates: BTreeMap<String, Fate>,
    /// The outbox as it was left.
    pub rows: Vec<Row>,
}

/// One played scenario, as a chapter reads it.
pub struct Run<'a> {
    /// The scenario's folder: `app.db` and `world.db`.
    pub dir: &'a Path,
    pub history: &'a History,
}

/// A chapter's world, for exploring.
pub trait Explorer: Sync {
    /// One generated scenario.
    type Scenario: Clone + Send + Sync + Serialize + 'static;

    /// Draws a scenario from `seed`.
    fn generate(&self, seed: u64) -> Self::Scenario;
    /// The scenario's processes, one after the other, without faults.
    fn plans(&self, scenario: &Self::Scenario, dir: &Path) -> Vec<Plan>;
    /// What the service runs when it starts again after a crash, before it
    /// carries on with the rest of its plan: nothing by default, for a
    /// service whose schedule simply resumes (its sweep with it).
    fn startup(&self) -> Vec<Step> {
        Vec::new()
    }
    /// Where faults go.
    fn faults(&self) -> FaultModel;
    /// Which shared invariants hold.
    fn invariants(&self) -> Invariants;
    /// What the rules fix in a played scenario.
    fn observe(&self, scenario: &Self::Scenario, run: &Run) -> Result<Observation>;
    /// What the rules promise for `scenario` when the requests about
    /// `refused` were turned down (a failing commit refuses a request), when
    /// the chapter can say it without playing anything, e.g. who gets the
    /// seats once a refused invite has freed one. A run under a fault is
    /// compared with this; without it, with the case's own fault-free run
    /// (which suits worlds where a refused request changes nothing else).
    fn promised(
        &self,
        _scenario: &Self::Scenario,
        _refused: &[String],
    ) -> Option<BTreeMap<String, Fate>> {
        None
    }
    /// Whether `fate` says its message is still waiting to be sent, in the
    /// words of this chapter's contract: the outbox's waiting rows and
    /// chapter 3's claims by default. A fault in [`FaultModel::strands`]
    /// may leave such a message untold without losing it.
    fn waiting(&self, fate: &Fate) -> bool {
        // A state may say more after its status: "PROCESSING, bounced".
        let status = fate.state.split(", ").next().unwrap_or_default();
        [crate::history::WAITING, "PROCESSING"].contains(&status)
    }

    /// Whether a message the play without a fault dead-lettered, never
    /// told, may be told once under a fault: true in a chapter whose dead
    /// letters only say that attempts ran out or a claim was lost, which a
    /// fault's timing changes (chapters 5 to 8). False by default: a dead
    /// letter may also mean "owed to nobody" (a notification withdrawn, an
    /// address suppressed, a message that must not render).
    fn dead_letters_may_arrive(&self) -> bool {
        false
    }

    /// Whether `subject`'s message, told once in the play without the
    /// fault, may end a dead letter in `history`, the play under it, told
    /// once at most: its attempts ran out, some of them charged to
    /// dispatchers that died or failed a commit while holding it (chapter
    /// 6's lost attempt).
    /// False by default; a chapter whose sweep charges lost attempts says
    /// when the play stranded enough claims to spend them.
    fn spent_on_lost_claims(
        &self,
        _scenario: &Self::Scenario,
        _subject: &str,
        _history: &History,
    ) -> bool {
        false
    }

    /// The fates a run under a fault is compared by, from those observed:
    /// by default, every subject as it is. A chapter whose rules let a
    /// fault change how a message travels, though not whether it arrives,
    /// folds the ways it may travel into one subject here (chapter 8: an
    /// important push and the email that may replace it). Applied to both
    /// sides of the comparison; a fault-free run's agreement with the
    /// reference still sees every subject.
    fn under_faults(
        &self,
        _scenario: &Self::Scenario,
        fates: BTreeMap<String, Fate>,
    ) -> BTreeMap<String, Fate> {
        fates
    }
    /// Smaller scenarios that may fail the same way, most promising first.
    fn shrink(&self, scenario: &Self::Scenario) -> Vec<Self::Scenario>;
    /// One line about the scenario: "3 people; email down 0:30 to 5:00".
    fn describe(&self, scenario: &Self::Scenario) -> String;
    /// The edges of the chapter's world that its rules speak about: each a
    /// situation a rule turns on (two messages for one person waiting at
    /// once, a run of failures longer than the attempt budget, an outage
    /// longer than the breaker's window) and a test of whether a generated
    /// world reaches it. The quick budget plays, after its first seeds, the
    /// first seed that reaches each edge none of them reaches, so every rule
    /// is exercised in the learner's loop; `--coverage` counts the worlds of
    /// a budget that reach each edge.
    fn dimensions(&self) -> &'static [Dimension<Self::Scenario>] {
        &[]
    }
    /// Every message the scenario publishes, with when: what the
    /// invariants that ask whether a message was waiting read.
    fn published(&self, _scenario: &Self::Scenario) -> Vec<Published> {
        Vec::new()
    }
    /// What identifies the message a send of `body` to `recipient` on
    /// `channel` carries, for the invariants that follow one message
    /// through its attempts: its text by default. A chapter whose messages
    /// are rendered at each send, from data that may change between two
    /// attempts, names the message by what its world attached to it
    /// (chapter 10: the comment's number in its title).
    fn message_of(
        &self,
        _scenario: &Self::Scenario,
        _channel: &str,
        _recipient: &str,
        body: &str,
    ) -> String {
        body.to_string()
    }
}

/// A message a scenario publishes: where it goes, what it says, and when
/// (simulated ms).
#[derive(Clone, Debug)]
pub struct Published {
    pub channel: String,
    pub recipient: String,
    /// Its text; the invariants compare it with what names each send's
    /// message ([`Explorer::message_of`]), applied to it as well.
    pub body: String,
    pub at: i64,
}

/// One edge of a chapter's world: a situation its rules speak about, and
/// whether a scenario reaches it.
pub struct Dimension<S> {
    /// The situation, in the rules' words: "one person with two invites
    /// waiting for the relay".
    pub name: &'static str,
    pub reached: fn(&S) -> bool,
}

// By hand: a derive would ask the scenario to be `Copy` too.
impl<S> Clone for Dimension<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Dimension<S> {}

/// How far past its first seeds the quick budget looks for a world that
/// reaches an edge none of them reaches.
pub const SEARCHED_SEEDS: u64 = 2_000;

/// The seeds `budget` plays with `explorer`: its range, then, for a budget
/// that covers, the first seed past it that reaches each edge of the world
/// the seeds so far do not reach.
pub fn seeds_of<E: Explorer>(explorer: &E, budget: Budget) -> Vec<u64> {
    let end = budget.first_seed + budget.scenarios;
    let mut seeds: Vec<u64> = (budget.first_seed..end).collect();
    if !budget.covering {
        return seeds;
    }
    let dimensions = explorer.dimensions();
    let mut reached: Vec<bool> = vec![false; dimensions.len()];
    let mark = |scenario: &E::Scenario, reached: &mut Vec<bool>| -> bool {
        let mut new = false;
        for (d, dimension) in dimensions.iter().enumerate() {
            if !reached[d] && (dimension.reached)(scenario) {
                reached[d] = true;
                new = true;
            }
        }
        new
    };
    for &seed in &seeds {
        mark(&explorer.generate(seed), &mut reached);
    }
    for seed in end..end + SEARCHED_SEEDS {
        if reached.iter().all(|&r| r) {
            break;
        }
        if mark(&explorer.generate(seed), &mut reached) {
            seeds.push(seed);
        }
    }
    seeds
}

/// How many worlds of `budget` reach each edge of `explorer`'s world, in
/// the order the chapter declares them.
pub fn coverage<E: Explorer>(explorer: &E, budget: Budget) -> Vec<Reached> {
    let worlds: Vec<E::Scenario> = seeds_of(explorer, budget)
        .into_iter()
        .map(|seed| explorer.generate(seed))
        .collect();
    reached(explorer.dimensions(), &worlds)
}

/// How many of `worlds` reach each of `dimensions`, in their order.
pub fn reached<S>(dimensions: &[Dimension<S>], worlds: &[S]) -> Vec<Reached> {
    dimensions
        .iter()
        .map(|d| Reached {
            rule: d.name.to_string(),
            worlds: worlds.iter().filter(|w| (d.reached)(w)).count(),
        })
        .collect()
}

/// How many worlds of a budget reach one edge of the chapter's world.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reached {
    pub rule: String,
    pub worlds: usize,
}

/// The properties exploring judges, in the order they are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// Fault-free, the case ends as the reference does.
    Agrees,
    /// Under any crash or failing commit, nothing is lost or sent twice.
    Survives,
    ToldOnce,
    Settled,
    /// `Settled` where a message may also be withdrawn (chapter 9).
    SettledOrWithdrawn,
    NotEarly,
    /// A crash's orphan is not sent again before the sweep may take it.
    SweptLate,
    /// A provider that answers is not held back by a breaker.
    ClosesOnAnswer,
    /// A failed probe holds its channel for the breaker's whole wait, and
    /// the next probe goes to another row when one has waited since.
    OneProbe,
    /// Every send has its message's key, one key per message.
    Keyed,
}

impl Rule {
    /// The property as a check line names it.
    pub fn property(self) -> &'static str {
        match self {
            Rule::Agrees => "generated scenarios end as with the reference solution",
            Rule::Survives => {
                "a crash or a failing commit anywhere loses nothing and sends nothing twice"
            }
            Rule::ToldOnce => "nobody gets the same message twice",
            Rule::Settled => {
                "once idle, every message is delivered, or a dead letter with its error"
            }
            Rule::SettledOrWithdrawn => {
                "once idle, every message is delivered, withdrawn with its reason, or a dead letter with its error"
            }
            Rule::NotEarly => "generated scenarios: no retry comes before its backoff (chapter 5)",
            Rule::SweptLate => {
                "an orphan goes out again only once its claim is old (chapter 6's sweep)"
            }
            Rule::ClosesOnAnswer => {
                "once a provider answers, its breaker lets the waiting rows through (chapter 7)"
            }
            Rule::OneProbe => {
                "while a provider fails, its breaker lets one probe through per wait, and not to the last failed probe's row while others wait (chapter 7)"
            }
            Rule::Keyed => "every send carries its message's key, and only that one (chapter 2)",
        }
    }
}

/// A fault of the nemesis: `fault` in the scenario's process `process`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Injected {
    pub process: u32,
    pub fault: Fault,
}

impl Injected {
    fn describe(&self) -> String {
        format!("{} (process {})", self.fault.describe(), self.process)
    }

    fn is_crash(&self) -> bool {
        self.fault.is_crash()
    }

    fn is_lost_send(&self) -> bool {
        matches!(
            self.fault,
            Fault::TimeoutAfterSend { .. } | Fault::TimeoutBeforeSend { .. }
        )
    }
}

/// A broken rule, found in one play.
#[derive(Clone, Debug)]
struct Breach {
    rule: Rule,
    lines: Vec<String>,
}

/// Everything one play left: its observation, its history, how it ended.
struct Played {
    observation: Observation,
    history: History,
    exits: Vec<Exit>,
    /// The processes a poison message killed: the world's doing, each
    /// followed by a restart, as a crash is.
    poisoned: Vec<u32>,
    /// Why the chapter could not read the run, if it could not.
    unreadable: Option<String>,
}

impl Played {
    fn trouble(&self, fault: Option<&Injected>) -> Option<String> {
        let crash = fault.is_some_and(Injected::is_crash);
        let mut aborted = false;
        for (i, exit) in self.exits.iter().enumerate() {
            match exit {
                Exit::Finished => {}
                Exit::Aborted if self.poisoned.contains(&(i as u32 + 1)) => {}
                Exit::Aborted if crash && !aborted => aborted = true,
                other => {
                    return Some(format!("process {} {}", i + 1, other.describe()));
                }
            }
        }
        self.unreadable.clone()
    }
}

/// Plays `plans` on `case` with `fault`, restarting after a crash, and
/// reads the result with `explorer`.
fn play<E: Explorer>(
    explorer: &E,
    case: &Case,
    scenario: &E::Scenario,
    fault: Option<&Injected>,
) -> Result<Played> {
    let Ran {
        dir,
        exits,
        poisoned,
    } = run(explorer, case, scenario, fault)?;
    let mut history = History::read(dir.path())?;
    for d in &mut history.deliveries {
        d.message = explorer.message_of(scenario, &d.channel, &d.recipient, &d.body);
    }
    let run = Run {
        dir: dir.path(),
        history: &history,
    };
    let (observation, unreadable) = match explorer.observe(scenario, &run) {
        Ok(observation) => (observation, None),
        Err(err) => (
            Observation::default(),
            Some(format!("what the service left could not be read: {err:#}")),
        ),
    };
    Ok(Played {
        observation,
        history,
        exits,
        poisoned,
        unreadable,
    })
}

/// What the processes of one play left: their folder, how each ended, and
/// which of them a poison message killed.
struct Ran {
    dir: tempfile::TempDir,
    exits: Vec<Exit>,
    poisoned: Vec<u32>,
}

/// `scenario` played without a fault on `case`, as the explorer plays it
/// (restarted after each process a poison message kills): its folder, for
/// a chapter that judges its own properties over the explorer's worlds
/// too, and how each process ended, less those the poison killed (the
/// world's doing, not the case's).
pub fn play_plain<E: Explorer>(
    explorer: &E,
    case: &Case,
    scenario: &E::Scenario,
) -> Result<(tempfile::TempDir, Vec<Exit>)> {
    let ran = run(explorer, case, scenario, None)?;
    let exits = ran
        .exits
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !ran.poisoned.contains(&(*i as u32 + 1)))
        .map(|(_, exit)| exit)
        .collect();
    Ok((ran.dir, exits))
}

/// Plays `scenario`'s plans on `case` with `fault`, restarting after a
/// crash or a poison message, then once more a while after a fault the
/// service survived.
fn run<E: Explorer>(
    explorer: &E,
    case: &Case,
    scenario: &E::Scenario,
    fault: Option<&Injected>,
) -> Result<Ran> {
    let dir = scenario_dir()?;
    let plans = explorer.plans(scenario, dir.path());
    let mut exits = Vec::new();
    let mut poisoned = Vec::new();
    let mut number = 1;
    let mut last: Option<Plan> = None;
    // Faults go by the number a process has in the play, as in the
    // fault-free history their points come from: the same up to the fault.
    let fault_for = |process: u32| {
        fault
            .filter(|f| f.process == process)
            .map(|f| f.fault.clone())
    };
    'plans: for mut plan in plans {
        plan.process = number;
        number += 1;
        loop {
            plan.fault = fault_for(plan.process);
            let exit = case.start(&plan)?;
            last = Some(plan.clone());
            let aborted = exit == Exit::Aborted;
            let done = exit == Exit::Finished;
            exits.push(exit);
            // A poison message kills every process that sends it: the
            // service restarts as after any crash, up to a point.
            let poison = aborted && Recorder::open(dir.path(), 0)?.poisoned(plan.process)?;
            if poison {
                poisoned.push(plan.process);
            }
            let crashed = aborted && !poison && plan.fault.as_ref().is_some_and(Fault::is_crash);
            if (poison && poisoned.len() <= POISON_RESTARTS) || crashed {
                plan = restart_plan(explorer, &plan, number)?;
                number += 1;
                continue;
            }
            if !done {
                break 'plans;
            }
            break;
        }
    }
    // A failing commit or a lost send leaves the service running: what it
    // left owed must go out on the service's next pass, so there is one, as
    // there would be later in production (a crash's restart runs one anyway).
    let finished = exits.iter().all(|e| *e == Exit::Finished);
    let survived = fault.is_some_and(|f| !f.is_crash());
    if finished && survived && !explorer.startup().is_empty() {
        if let Some(last) = last {
            let mut steps = vec![Step::advance(later_by(fault))];
            steps.extend(explorer.startup());
            let later = Plan {
                process: number,
                fixture: Vec::new(),
                meanwhile: Vec::new(),
                steps,
                fault: None,
                ..last
            };
            exits.push(case.start(&later)?);
        }
    }
    Ok(Ran {
        dir,
        exits,
        poisoned,
    })
}

/// How many times a play restarts the service after a poison message
/// killed it: enough for a poison row to use up every attempt it has, and
/// for the sweep to dead-letter it.
const POISON_RESTARTS: usize = 12;

/// How long after a fault the service runs again, in simulated ms. After a
/// request lost on its way, a day and an hour: nothing reached the provider,
/// so nothing the service sends then may be a repeat, even once the
/// provider has forgotten the day's keys. After anything else (an answer
/// lost, a commit failed, which may leave a delivered message unmarked), 6
/// hours, across midnight but well inside a key's 24 hours.
fn later_by(fault: Option<&Injected>) -> i64 {
    const HOUR: i64 = 60 * crate::clock::MINUTE;
    match fault.map(|f| &f.fault) {
        Some(Fault::TimeoutBeforeSend { .. }) => 25 * HOUR,
        _ => 6 * HOUR,
    }
}

/// The plan of the process that starts after `crashed` aborted: what the
/// service runs at start-up, then the rest of the plan. A schedule the crash
/// interrupted runs on to its end; a request it interrupted is not made
/// again (its caller saw the connection drop).
fn restart_plan<E: Explorer>(explorer: &E, crashed: &Plan, number: u32) -> Result<Plan> {
    let last = Recorder::open(&crashed.dir, 0)?.last_step(crashed.process)?;
    let resume = match last {
        Some(k) if crashed.steps[k].op == RUN => k,
        Some(k) => k + 1,
        None => 0,
    };
    let mut steps = explorer.startup();
    steps.extend(crashed.steps.iter().skip(resume).cloned());
    Ok(Plan {
        dir: crashed.dir.clone(),
        process: number,
        fixture: Vec::new(),
        // What changed meanwhile changed when the crashed process started.
        meanwhile: Vec::new(),
        steps,
        fault: None,
        provider: crashed.provider.clone(),
        push: crashed.push.clone(),
        seed: crashed.seed,
        host: None,
        starts_at: crashed.starts_at,
        busy_after_commit_ms: crashed.busy_after_commit_ms,
    })
}

/// One fault point, and the kind of fault it is: where it strikes, by what
/// the world can see (the operation, and what its commit wrote), not by
/// when.
struct Point {
    injected: Injected,
    kind: String,
}

/// Every fault point of a fault-free history, in order.
fn fault_points(model: &FaultModel, history: &History) -> Vec<Point> {
    let mut points = Vec::new();
    let mut sends: HashMap<(u32, String), u32> = HashMap::new();
    // Per process and operation: a delivered send whose answer no commit
    // has recorded yet.
    let mut unrecorded: HashSet<(u32, String)> = HashSet::new();
    // Where each point's event is, to find the last of each kind before a
    // restart below.
    let mut at = Vec::new();
    let again = commits_again(history);
    let fails_next = before_a_failed_send(history);
    for (i, event) in history.events.iter().enumerate() {
        let Some(op) = event.op.as_deref() else {
            continue;
        };
        match event.kind {
            Kind::Commit => {
                let nth = event.nth.unwrap_or(0);
                let writes = event.writes.as_deref().unwrap_or("");
                let before = points.len();
                if model.crash_after_commit.contains(&op) {
                    points.push(Point {
                        injected: Injected {
                            process: event.process,
                            fault: Fault::CrashAfterCommit {
                                op: op.to_string(),
                                nth,
                            },
                        },
                        kind: format!("crash after a {op} commit that writes {writes}"),
                    });
                }
                let answer = unrecorded.remove(&(event.process, op.to_string()));
                if model.fail_commit.contains(&op) && !(answer && model.keep_answers) {
                    points.push(Point {
                        injected: Injected {
                            process: event.process,
                            fault: Fault::FailCommit {
                                op: op.to_string(),
                                nth,
                            },
                        },
                        kind: format!("failing {op} commit that writes {writes}"),
                    });
                }
                // A failing commit right before a send its provider fails
                // is a kind of its own: an operation may ready in memory
                // what that send is to settle (a probe let out, a counter,
                // a flag) and lose it to the error, while the process runs
                // on. The sample plays one such point of each operation
                // besides. (A crash there forgets the memory with the rest.)
                if fails_next[i] {
                    let failing: Vec<Point> = points[before..]
                        .iter()
                        .filter(|p| !p.injected.fault.is_crash())
                        .map(|p| Point {
                            injected: p.injected.clone(),
                            kind: format!("failing {op}{BEFORE_A_FAILED_SEND}"),
                        })
                        .collect();
                    points.extend(failing);
                }
                // A crash right after the first of a call's commits is also
                // a kind of its own: what that commit left behind, the call
                // meant to finish with the others (an operation split
                // across transactions), and the crash leaves it alone. The
                // sample plays one such point of each operation and write
                // besides. (A failing commit there ends the call as the
                // crash does, but leaves the process running.)
                if again[i] {
                    let mid: Vec<Point> = points[before..]
                        .iter()
                        .filter(|p| p.injected.fault.is_crash())
                        .map(|p| Point {
                            injected: p.injected.clone(),
                            kind: format!(
                                "crash after the first {op}{MID_CALL}, one that writes {writes}"
                            ),
                        })
                        .collect();
                    points.extend(mid);
                }
            }
            Kind::Send => {
                let n = sends.entry((event.process, op.to_string())).or_insert(0);
                *n += 1;
                let delivered = !event.text.contains("provider failed")
                    && !event.text.contains("rejected for good");
                if delivered {
                    unrecorded.insert((event.process, op.to_string()));
                }
                let answer = model.lose_send.contains(&op);
                if delivered && (answer || model.lose_request.contains(&op)) {
                    let lost = [
                        Fault::TimeoutAfterSend {
                            op: op.to_string(),
                            nth: *n,
                        },
                        Fault::TimeoutBeforeSend {
                            op: op.to_string(),
                            nth: *n,
                        },
                    ];
                    let kinds = lost.into_iter().zip(["answer", "request"]);
                    for (fault, kind) in kinds.skip(usize::from(!answer)) {
                        points.push(Point {
                            injected: Injected {
                                process: event.process,
                                fault,
                            },
                            kind: format!("lost {kind} of a delivered {op} send"),
                        });
                    }
                }
                if delivered && model.crash_after_send.contains(&op) {
                    points.push(Point {
                        injected: Injected {
                            process: event.process,
                            fault: Fault::CrashAfterSend {
                                op: op.to_string(),
                                nth: *n,
                            },
                        },
                        kind: format!("crash after a delivered {op} send"),
                    });
                }
            }
            _ => {}
        }
        at.resize(points.len(), i);
    }
    mark_last_before_restarts(&mut points, &at, history);
    points
}

/// How a fault after a commit that its call follows with another is told
/// apart.
const MID_CALL: &str = " commit that its call follows with another";

/// How a failing commit right before a failed send is told apart.
const BEFORE_A_FAILED_SEND: &str = " commit right before a send its provider fails";

/// Whether a point's kind is one [`sample`] plays apart, after the others.
fn apart(kind: &str) -> bool {
    kind.contains(MID_CALL) || kind.contains(BEFORE_A_FAILED_SEND)
}

/// Per event of `history`: whether it is a commit whose process's next
/// event is a send the provider failed (a 5xx, no answer, a 429).
fn before_a_failed_send(history: &History) -> Vec<bool> {
    let events = &history.events;
    let mut marked = vec![false; events.len()];
    // Per process: its latest commit, while nothing else of it followed.
    let mut last: HashMap<u32, usize> = HashMap::new();
    for (i, event) in events.iter().enumerate() {
        if let Some(at) = last.remove(&event.process) {
            marked[at] = event.kind == Kind::Send && event.text.contains("provider failed");
        }
        if event.kind == Kind::Commit {
            last.insert(event.process, i);
        }
    }
    marked
}

/// Per event of `history`: whether it is the first commit of a call that
/// commits again after it, in the same process.
fn commits_again(history: &History) -> Vec<bool> {
    let mut again = vec![false; history.events.len()];
    // Per process: its call's first commit, and whether another followed.
    let mut first: HashMap<u32, (usize, bool)> = HashMap::new();
    for (i, event) in history.events.iter().enumerate() {
        match event.kind {
            Kind::Commit => match first.get_mut(&event.process) {
                Some((at, followed)) if !*followed => {
                    again[*at] = true;
                    *followed = true;
                }
                Some(_) => {}
                None => {
                    first.insert(event.process, (i, false));
                }
            },
            Kind::Send | Kind::Timeout | Kind::CommitFailed => {}
            _ => {
                first.remove(&event.process);
            }
        }
    }
    again
}

/// Gives the last point of each kind before a process starts (a deploy's
/// restart, a relay joining) a kind of its own: what such a fault leaves
/// behind, only the process that starts next can recover, after however
/// long the service was down. The sample then plays it as surely as the
/// same fault with a pass of the same process still to come.
fn mark_last_before_restarts(points: &mut [Point], at: &[usize], history: &History) {
    // A restart right after a poison message killed the process is no
    // deploy: the service comes back at once, as after any crash.
    let after_poison = |i: usize| {
        i > 0 && {
            let before = &history.events[i - 1];
            before.kind == Kind::Crash && before.subject.is_some()
        }
    };
    let starts: Vec<usize> = history
        .events
        .iter()
        .enumerate()
        .filter(|&(i, e)| e.kind == Kind::Start && !after_poison(i))
        .map(|(i, _)| i)
        .skip(1)
        .collect();
    for start in starts {
        let mut last: HashMap<String, usize> = HashMap::new();
        for (p, point) in points.iter().enumerate() {
            if at[p] < start {
                last.insert(point.kind.clone(), p);
            }
        }
        for p in last.into_values() {
            if !points[p].kind.ends_with(BEFORE_A_START) {
                points[p].kind.push_str(BEFORE_A_START);
            }
        }
    }
}

/// How [`mark_last_before_restarts`] names its kinds.
const BEFORE_A_START: &str = ", the last before a process starts";

/// Chooses `budget` of `points`, the same ones for the same seed: one of
/// every kind first, so that no kind of fault the scenario has goes
/// unplayed however rare it is (the one commit a deadline makes among a
/// hundred claims), then others up to the budget. A scenario with more
/// kinds than the budget plays one of each.
fn sample(points: Vec<Point>, budget: Option<usize>, seed: u64) -> Vec<Injected> {
    // The crashes after the first of a call's commits, then the failing
    // commits right before a failed send, are sampled apart, after the
    // rest: one of each kind that those before did not play already.
    let (apart, points): (Vec<Point>, Vec<Point>) =
        points.into_iter().partition(|p| apart(&p.kind));
    let (mid, before_failures): (Vec<Point>, Vec<Point>) =
        apart.into_iter().partition(|p| p.kind.contains(MID_CALL));
    let mut chosen = sample_kinds(points, budget, seed);
    if budget.is_some() {
        for (group, mix) in [(mid, 0x0f1a_57c0_331e), (before_failures, 0x000b_ef0e_fa11)] {
            let mut group = group;
            Rng::new(seed ^ mix).shuffle(&mut group);
            let mut kinds = HashSet::new();
            for p in group {
                if kinds.insert(p.kind.clone()) && !chosen.contains(&p.injected) {
                    chosen.push(p.injected);
                }
            }
        }
    }
    chosen
}

/// [`sample`] of the points of every kind but those it plays apart.
fn sample_kinds(points: Vec<Point>, budget: Option<usize>, seed: u64) -> Vec<Injected> {
    match budget {
        Some(n) if points.len() > n => {
            let mut points = points;
            Rng::new(seed ^ 0x5eed_fa17).shuffle(&mut points);
            let mut kinds = HashSet::new();
            let (first, rest): (Vec<Point>, Vec<Point>) = points
                .into_iter()
                .partition(|p| kinds.insert(p.kind.clone()));
            let more = n.saturating_sub(first.len());
            first
                .into_iter()
                .chain(rest.into_iter().take(more))
                .map(|p| p.injected)
                .collect()
        }
        _ => points.into_iter().map(|p| p.injected).collect(),
    }
}

/// The shared invariants broken in one play.
/// The invariants `rules` names, judged on one play. With `stranding`, the
/// play's fault may have left messages claimed and waiting (see
/// [`FaultModel::strands`]): a waiting row is not a breach of `settled`.
fn invariants(
    rules: Invariants,
    played: &Played,
    published: &[Published],
    stranding: bool,
) -> Vec<Breach> {
    let mut found = Vec::new();
    if rules.closes_on_answer > 0 {
        let lines = held_after_an_answer(rules.closes_on_answer, published, &played.history);
        if !lines.is_empty() {
            found.push(Breach {
                rule: Rule::ClosesOnAnswer,
                lines,
            });
        }
    }
    if let Some(breaker) = rules.breaker.filter(|_| judges_one_probe(&rules)) {
        let lines = after_a_failed_probe(breaker, rules.one_probe, published, &played.history);
        if !lines.is_empty() {
            found.push(Breach {
                rule: Rule::OneProbe,
                lines,
            });
        }
    }
    if rules.told_once {
        // Per message: how often it was delivered, and its first text.
        let mut seen: BTreeMap<(&str, &str, &str), (u32, &str)> = BTreeMap::new();
        for d in played
            .history
            .deliveries
            .iter()
            .filter(|d| d.outcome == Outcome::Delivered)
        {
            seen.entry((&d.recipient, &d.channel, &d.message))
                .or_insert((0, &d.body))
                .0 += 1;
        }
        let lines: Vec<String> = seen
            .iter()
            .filter(|(_, (n, _))| *n > 1)
            .map(|((to, channel, _), (n, body))| {
                format!("{to} got the same {channel} {n} times: {body:?}")
            })
            .collect();
        if !lines.is_empty() {
            found.push(Breach {
                rule: Rule::ToldOnce,
                lines,
            });
        }
    }
    if rules.settled {
        let lines: Vec<String> = played
            .observation
            .rows
            .iter()
            .filter_map(|row| match (row.status.as_str(), &row.error) {
                _ if row.wrong.is_some() => Some(format!(
                    "{} {}",
                    row.subject,
                    row.wrong.as_deref().unwrap_or_default()
                )),
                ("SENT", _) => None,
                (crate::history::MARKED_SENT, _) => Some(format!(
                    "{} is marked sent, but never reached the provider",
                    row.subject
                )),
                (crate::history::WAITING | "PROCESSING", _) if stranding => None,
                ("FAILED", Some(e)) if !e.trim().is_empty() => None,
                ("FAILED", _) => Some(format!("{} is FAILED with no error kept", row.subject)),
                (crate::history::CANCELLED, Some(e)) if rules.withdraws && !e.trim().is_empty() => {
                    None
                }
                (crate::history::CANCELLED, _) if rules.withdraws => {
                    Some(format!("{} is CANCELLED with no reason kept", row.subject))
                }
                (crate::history::CANCELLED, _) => Some(format!(
                    "{} is CANCELLED, never delivered: no rule of this chapter withdraws a message",
                    row.subject
                )),
                (crate::history::WAITING, _) => Some(format!(
                    "{} was neither delivered nor dead-lettered once the service was idle",
                    row.subject
                )),
                (status, _) => Some(format!(
                    "{} is still {status} once the service is idle",
                    row.subject
                )),
            })
            .chain(misnamed(&played.history, &played.observation.rows))
            .collect();
        if !lines.is_empty() {
            found.push(Breach {
                rule: rules.settled_rule(),
                lines,
            });
        }
    }
    let (again, let_go) = resent(&played.history);
    for (judged, lines) in [(rules.sent_once, again), (rules.recorded, let_go)] {
        if judged && !lines.is_empty() {
            found.push(Breach {
                rule: Rule::Survives,
                lines,
            });
        }
    }
    if rules.keyed {
        let lines = unkeyed(&played.history);
        if !lines.is_empty() {
            found.push(Breach {
                rule: Rule::Keyed,
                lines,
            });
        }
    }
    if !rules.retry_gaps.is_empty() {
        let lines = early(rules.retry_gaps, rules.breaker, &played.history);
        if !lines.is_empty() {
            found.push(Breach {
                rule: Rule::NotEarly,
                lines,
            });
        }
    }
    found
}

/// Dead letters whose error names another answer than the one that ended
/// their message: chapter 5's `last_error` is what the provider said the
/// last time, and chapter 6's sweep says its dispatcher was lost. Only a
/// recipient with one row of the outbox is judged, so that a poison send
/// is known to be this message's.
fn misnamed(history: &History, rows: &[Row]) -> Vec<String> {
    let recipient_of = |row: &Row| row.message.as_ref().map(|(c, r, _)| (c.clone(), r.clone()));
    let sends = history.sends();
    rows.iter()
        .filter(|row| row.status == "FAILED")
        .filter_map(|row| {
            let (channel, recipient, body) = row.message.as_ref()?;
            let mine = recipient_of(row);
            if rows.iter().filter(|r| recipient_of(r) == mine).count() != 1 {
                return None;
            }
            let ended = crate::history::last_answers(history, &sends, (channel, recipient, body))?;
            let kept = crate::history::answer_kind(row.error.as_deref());
            crate::history::names_another_answer(kept, &ended).then(|| {
                let what = match ended[0] {
                    "dispatcher lost" => "its last attempt died with its dispatcher".to_string(),
                    "no answer" => "its last attempt got no answer".to_string(),
                    "refused" => "its last attempt was refused for good".to_string(),
                    answer => format!("its last attempt was answered {answer}"),
                };
                let named = match kept {
                    "dispatcher lost" => "a lost dispatcher",
                    "no answer" => "a timeout",
                    "refused" => "a refusal",
                    "429" => "a 429",
                    _ => "a 503",
                };
                format!(
                    "{} is a dead letter whose error names {named}, but {what}: {:?}",
                    row.subject,
                    row.error.as_deref().unwrap_or_default()
                )
            })
        })
        .collect()
}

/// Sends without a key, messages that went to the provider under more
/// than one, and keys given to more than one message: chapter 2's key is
/// the row's, so every attempt at one message carries the same one, a
/// repeat the provider must drop carries it too, and no other message
/// carries it (the provider would drop that one). One line per message or
/// key, the first few only.
/// Messages that went to the provider again after their send was
/// recorded: a commit of the same process followed it, with no lost
/// answer, failing commit or abort in between (see
/// [`Invariants::sent_once`]).
///
/// And, second, the sends whose answers came back that the call which made
/// them let go of unrecorded (see [`Invariants::recorded`]).
fn resent(history: &History) -> (Vec<String>, Vec<String>) {
    // A message: its channel, its recipient, its text.
    type Message<'a> = (&'a str, &'a str, &'a str);
    /// What one process has sent and not yet recorded.
    #[derive(Default)]
    struct Process<'a> {
        /// Sent since its last commit.
        open: Vec<Message<'a>>,
        /// Of those, the ones no commit came just before either (a commit
        /// between two sends may have recorded the second ahead of it),
        /// since the call that sent them began.
        unrecorded: Vec<Message<'a>>,
        /// Whether its last event was a send, and whether that send joined
        /// `unrecorded`.
        after_send: Option<bool>,
        /// Whether a commit came after its last send, or since its call began.
        primed: bool,
    }
    // The attempt each send event records.
    let sends = history.sends();
    let mut processes: BTreeMap<u32, Process> = BTreeMap::new();
    let mut recorded: Vec<Message> = Vec::new();
    let mut lines = Vec::new();
    let mut let_go = Vec::new();
    for (i, e) in history.events.iter().enumerate() {
        let p = processes.entry(e.process).or_default();
        let sent = p.after_send.take();
        match e.kind {
            Kind::Send => {
                p.after_send = Some(false);
                let Some(d) = sends.get(&i) else {
                    continue;
                };
                if !matches!(d.outcome, Outcome::Delivered | Outcome::Deduplicated) {
                    continue;
                }
                let message = (d.channel.as_str(), d.recipient.as_str(), d.message.as_str());
                if recorded.contains(&message) {
                    let line = format!(
                        "{} to {} went to the provider again after its send was recorded: {:?}",
                        a(&d.channel),
                        d.recipient,
                        d.body
                    );
                    if !lines.contains(&line) {
                        lines.push(line);
                    }
                }
                p.open.push(message);
                if !std::mem::take(&mut p.primed) {
                    p.unrecorded.push(message);
                    p.after_send = Some(true);
                }
            }
            // The answer never came: the service cannot know it was sent.
            // (A request lost on its way has no send before it.)
            Kind::Timeout if sent.is_some() => {
                p.open.pop();
                if sent == Some(true) {
                    p.unrecorded.pop();
                }
            }
            Kind::Commit => {
                recorded.append(&mut p.open);
                p.unrecorded.clear();
                p.primed = true;
            }
            Kind::CommitFailed | Kind::Crash | Kind::Panic => {
                p.open.clear();
                p.unrecorded.clear();
            }
            Kind::Call => p.primed = false,
            // The call lets go of answers it never recorded: after the
            // key window, the next round sends them again.
            Kind::Return | Kind::Error => {
                let op = e.op.as_deref().unwrap_or("the call");
                for (channel, recipient, body) in p.unrecorded.drain(..) {
                    let_go.push(format!(
                        "{} to {recipient} was answered by the provider, but {op} returned with no commit after it to record that: {body:?}",
                        a(channel)
                    ));
                }
            }
            _ => {}
        }
    }
    (lines, let_go)
}

/// "an email", "a push": a message on `channel`.
fn a(channel: &str) -> String {
    match channel.starts_with(['a', 'e', 'i', 'o', 'u']) {
        true => format!("an {channel}"),
        false => format!("a {channel}"),
    }
}

fn unkeyed(history: &History) -> Vec<String> {
    // A message: its channel, its recipient, its text.
    type Message<'a> = (&'a str, &'a str, &'a str);
    let mut keys: BTreeMap<Message, Vec<&str>> = BTreeMap::new();
    // Per channel: each provider keeps its own keys.
    let mut messages: BTreeMap<(&str, &str), Vec<Message>> = BTreeMap::new();
    let mut bare: Vec<String> = Vec::new();
    // Each message's first text, to show it by.
    let mut text: BTreeMap<Message, &str> = BTreeMap::new();
    for d in &history.deliveries {
        let message = (d.channel.as_str(), d.recipient.as_str(), d.message.as_str());
        text.entry(message).or_insert(&d.body);
        match d.key.as_deref().filter(|k| !k.is_empty()) {
            None => {
                let line = format!(
                    "{} to {} went with no key: {:?}",
                    a(&d.channel),
                    d.recipient,
                    d.body
                );
                if !bare.contains(&line) {
                    bare.push(line);
                }
            }
            Some(key) => {
                let seen = keys.entry(message).or_default();
                if !seen.contains(&key) {
                    seen.push(key);
                }
                let named = messages.entry((message.0, key)).or_default();
                if !named.contains(&message) {
                    named.push(message);
                }
            }
        }
    }
    let twice = keys
        .iter()
        .filter(|(_, k)| k.len() > 1)
        .map(|(message, k)| {
            let (channel, to, _) = message;
            format!(
                "one {channel} to {to} went under {} keys: {:?}",
                k.len(),
                text[message]
            )
        });
    let shared = messages.iter().filter(|(_, m)| m.len() > 1).map(|(_, m)| {
        let said: Vec<String> = m
            .iter()
            .map(|message| {
                let (channel, to, _) = message;
                format!("a {channel} to {to}: {:?}", text[message])
            })
            .collect();
        format!(
            "one key went with {} messages: {}",
            m.len(),
            said.join("; ")
        )
    });
    bare.into_iter()
        .chain(twice)
        .chain(shared)
        .take(4)
        .collect()
}

/// Where processes died in one play: a poison message's sends, which kill
/// the process making them, and crashes. Read from the history once per
/// invariant, not once per message.
struct Deaths<'h>(Vec<&'h Event>);

impl<'h> Deaths<'h> {
    fn of(history: &'h History) -> Deaths<'h> {
        Deaths(
            history
                .events
                .iter()
                .filter(|e| e.kind == Kind::Crash)
                .collect(),
        )
    }

    /// When sends to `recipient` killed the process sending them (a poison
    /// message, chapter 6): attempts the provider never saw, which a
    /// breaker did not hold back.
    fn of_sends_to<'a>(&'a self, recipient: &'a str) -> impl Iterator<Item = i64> + 'a {
        self.0
            .iter()
            .filter(move |e| e.subject.as_deref() == Some(recipient))
            .map(|e| e.at_ms)
    }

    /// Whether a process died between `from` and `to`: a message published
    /// before may then wait in a claim nobody answers for, until the sweep
    /// hands it back, whatever the breaker does.
    fn between(&self, from: i64, to: i64) -> bool {
        self.0.iter().any(|e| (from..=to).contains(&e.at_ms))
    }
}

/// A channel that stayed silent for longer than `within` after its
/// provider answered a send, while a message on it waited, never tried: a
/// breaker kept shut after the provider showed it was up. One line per
/// channel, for the first such answer.
fn held_after_an_answer(within: i64, published: &[Published], history: &History) -> Vec<String> {
    let Some(last) = history.deliveries.iter().map(|d| d.at_ms).max() else {
        return Vec::new();
    };
    let deaths = Deaths::of(history);
    let mut lines = Vec::new();
    for channel in ["email", "push"] {
        let attempts: Vec<&Delivery> = history.attempts(channel).collect();
        for answer in &attempts {
            let at = answer.at_ms;
            // A 429 is an answer too: the provider is up, and only asks
            // for less of one address.
            if (answer.outcome == Outcome::Failed && !answer.limited) || at + within >= last {
                continue;
            }
            let next = attempts.iter().map(|d| d.at_ms).filter(|&t| t > at).min();
            if next.is_some_and(|next| next <= at + within) {
                continue;
            }
            let tried = |p: &Published| {
                attempts
                    .iter()
                    .any(|d| d.recipient == p.recipient && d.message == p.body && d.at_ms <= at)
                    || deaths.of_sends_to(&p.recipient).any(|k| k <= at)
            };
            let waiting = published.iter().find(|p| {
                p.channel == channel && p.at <= at && !tried(p) && !deaths.between(p.at, at)
            });
            if let Some(waiting) = waiting {
                let until =
                    next.map_or("the end".to_string(), |n| format!("{} later", span(n - at)));
                lines.push(format!(
                    "the {channel} provider answered {} at {}, yet {} waited, never tried, until {until}",
                    answer.recipient,
                    clock(at),
                    waiting.recipient
                ));
                break;
            }
        }
    }
    lines
}

/// Whether [`Invariants::one_probe`] is judged: it needs the breaker's
/// wait, and how soon a closed breaker lets a waiting message out.
fn judges_one_probe(rules: &Invariants) -> bool {
    rules.one_probe > 0 && rules.breaker.is_some()
}

/// Sends that came sooner than the breaker's wait after a failed probe of
/// the same dispatcher on the same channel (see [`Invariants::one_probe`]).
///
/// Which send was a probe, the provider's side tells without the case's
/// numbers, in one of two ways. A message of its channel waited, never
/// tried, for longer than `held` (how soon a closed breaker lets a waiting
/// message out), and either:
/// - the send ends a silence of its dispatcher on its channel of at least
///   the breaker's wait (less a wake-up), during which that message waited:
///   only an open breaker holds a due message back that long, and from an
///   open breaker the first send is the probe; or
/// - the send went out alone, its dispatcher sending nothing else on its
///   channel at that moment, while the message was already due, and the
///   message still waited, never tried, `held` after the send: a closed
///   breaker sends every due row it claims at once, and would have sent the
///   message within `held`, so after that send the breaker was open. This
///   is the probe that goes out late, because nothing was due when the wait
///   ended.
///
/// A probe that failed (a 503 or no answer; a 429 is the provider
/// answering) opens the breaker again for the whole wait.
fn after_a_failed_probe(
    breaker: Breaker,
    held: i64,
    published: &[Published],
    history: &History,
) -> Vec<String> {
    let wait = breaker.probe_after - breaker.slack;
    let deaths = Deaths::of(history);
    let probes = breaker.probes(&history.deliveries);
    let mut lines = Vec::new();
    for channel in ["email", "push"] {
        let attempts: Vec<&Delivery> = history.attempts(channel).collect();
        let first_try = |p: &Published| {
            attempts
                .iter()
                .filter(|d| d.recipient == p.recipient && d.message == p.body)
                .map(|d| d.began_ms)
                .chain(deaths.of_sends_to(&p.recipient))
                .min()
        };
        let mut processes: Vec<u32> = attempts.iter().map(|d| d.process).collect();
        processes.sort_unstable();
        processes.dedup();
        'process: for process in processes {
            let own: Vec<&&Delivery> = attempts.iter().filter(|d| d.process == process).collect();
            for k in 0..own.len().saturating_sub(1) {
                let (probe, next) = (own[k], own[k + 1]);
                if probe.outcome != Outcome::Failed || probe.limited {
                    continue;
                }
                if next.began_ms - probe.at_ms >= wait {
                    continue;
                }
                // What the breaker held back, another message than the
                // probe's own when there is one.
                let waiting = |p: &&Published, since: i64, until: i64| {
                    p.channel == channel
                        && p.at <= since
                        && first_try(p).is_none_or(|t| t >= until)
                        && !deaths.between(p.at, since)
                };
                let own_message =
                    |p: &Published| p.recipient == probe.recipient && p.body == probe.body;
                let silent = k > 0 && probe.began_ms - own[k - 1].at_ms >= wait;
                let after_silence = published
                    .iter()
                    .filter(|p| silent && waiting(p, probe.began_ms - held, probe.began_ms))
                    .min_by_key(|p| (own_message(p), p.at));
                let alone = own.iter().filter(|d| d.began_ms == probe.began_ms).count() == 1;
                let left_waiting = published
                    .iter()
                    .filter(|p| alone && waiting(p, probe.began_ms, probe.at_ms + held))
                    .filter(|p| !own_message(p))
                    .min_by_key(|p| p.at);
                let (waited, since) = match (after_silence, left_waiting) {
                    (Some(p), _) => (p, p.at.max(own[k - 1].at_ms)),
                    (None, Some(p)) => (p, p.at),
                    (None, None) => continue,
                };
                lines.push(format!(
                    "the {channel} probe to {} failed at {}, yet the same dispatcher sent to {} {} later, not {}: a failed probe keeps the breaker open (it had held {}'s message back since {})",
                    probe.recipient,
                    clock(probe.at_ms),
                    next.recipient,
                    span(next.began_ms - probe.at_ms),
                    span(breaker.probe_after),
                    waited.recipient,
                    clock(since),
                ));
                continue 'process;
            }
        }
        lines.extend(probed_again(channel, history, &probes, published, &deaths));
    }
    lines
}

/// Probes of `channel` sent to the row whose probe had just failed, while
/// a row that was waiting then was never tried: a failed probe goes back
/// behind the rows that waited longer, so that the next probe is another
/// row, or an address that fails on its own shuts its channel for good.
/// `probes` are the failed sends that may have been probes, by their place
/// among the deliveries ([`Breaker::probes`]). One line per dispatcher, at
/// its first such probe.
fn probed_again(
    channel: &str,
    history: &History,
    probes: &BTreeSet<usize>,
    published: &[Published],
    deaths: &Deaths,
) -> Vec<String> {
    let all = &history.deliveries;
    let on_channel: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].channel == channel)
        .collect();
    let mut processes: Vec<u32> = on_channel.iter().map(|&i| all[i].process).collect();
    processes.sort_unstable();
    processes.dedup();
    let mut lines = Vec::new();
    for process in processes {
        let own: Vec<usize> = on_channel
            .iter()
            .copied()
            .filter(|&i| all[i].process == process)
            .collect();
        let again = own.windows(2).find_map(|pair| {
            let (failed, next) = (&all[pair[0]], &all[pair[1]]);
            if !probes.contains(&pair[0])
                || !probes.contains(&pair[1])
                || (&next.recipient, &next.message) != (&failed.recipient, &failed.message)
            {
                return None;
            }
            let tried_before_next = |p: &Published| {
                on_channel.iter().any(|&i| {
                    let d = &all[i];
                    d.recipient == p.recipient && d.message == p.body && d.began_ms < next.began_ms
                })
            };
            let waited = published
                .iter()
                .filter(|p| {
                    p.channel == channel
                        && p.at <= failed.began_ms
                        && (&p.recipient, &p.body) != (&failed.recipient, &failed.message)
                        && !tried_before_next(p)
                        && !deaths.between(p.at, next.began_ms)
                })
                .min_by_key(|p| p.at)?;
            Some(format!(
                "the {channel} probe to {} failed at {}, and the next one, at {}, went to the same row, though {}'s message had waited, never tried, since {}: a failed probe goes back behind the rows that waited longer, so that the next probe is another row",
                failed.recipient,
                clock(failed.at_ms),
                clock(next.began_ms),
                waited.recipient,
                clock(waited.at),
            ))
        });
        lines.extend(again);
    }
    lines
}

/// Retries that came sooner than their gap, per message (channel,
/// recipient and text).
fn early(gaps: &[i64], breaker: Option<Breaker>, history: &History) -> Vec<String> {
    let deliveries = &history.deliveries;
    let probes = breaker.map(|b| b.probes(deliveries)).unwrap_or_default();
    // Each message's attempts, by their place among the deliveries. A gap
    // runs from a failure's answer to the next attempt's beginning.
    let mut by_message: BTreeMap<(&str, &str, &str), Vec<usize>> = BTreeMap::new();
    for (i, d) in deliveries.iter().enumerate() {
        by_message
            .entry((&d.channel, &d.recipient, &d.message))
            .or_default()
            .push(i);
    }
    let mut lines = Vec::new();
    for ((channel, recipient, _), attempts) in by_message {
        let mut failures = 0;
        for pair in attempts.windows(2) {
            let (failed, next) = (&deliveries[pair[0]], &deliveries[pair[1]]);
            if failed.outcome != Outcome::Failed {
                break;
            }
            // A failed probe costs its row nothing: no backoff follows it.
            if probes.contains(&pair[0]) {
                continue;
            }
            failures += 1;
            let Some(&gap) = gaps.get(failures - 1) else {
                break;
            };
            if next.began_ms - failed.at_ms < gap {
                lines.push(format!(
                    "{recipient} ({channel}): attempt {} came {} after failure {failures}, not {}",
                    failures + 1,
                    span(next.began_ms - failed.at_ms),
                    span(gap)
                ));
                break;
            }
        }
    }
    lines
}

/// A message sent again sooner than `after` ms after the send whose answer
/// the injected fault lost (a crash right after it, or the failing commit
/// that was to record it): the claim was taken back while it was young, as
/// it would be from a dispatcher that is only slow. Measured from when each
/// request began: a row's claim is renewed at its send at the latest.
fn swept_early(after: i64, fault: &Injected, played: &Played) -> Vec<String> {
    if after == 0 {
        return Vec::new();
    }
    let deliveries = &played.history.deliveries;
    // Each lost send, by its place among the deliveries.
    let lost: Vec<usize> = match fault.fault {
        // Only a crash that struck lost an answer: the faulted process is
        // the one that aborted, unless the case never made that send.
        Fault::CrashAfterSend { .. } => {
            // Processes are numbered from 1 in the order they started.
            let exit = played.exits.get(fault.process as usize - 1);
            let crashed = exit == Some(&Exit::Aborted) && !played.poisoned.contains(&fault.process);
            deliveries
                .iter()
                .rposition(|d| crashed && d.process == fault.process)
                .into_iter()
                .collect()
        }
        Fault::FailCommit { .. } => unrecorded_at_failure(fault.process, &played.history),
        _ => Vec::new(),
    };
    let said = match fault.fault {
        Fault::FailCommit { .. } => "a failing commit lost the answer of",
        _ => "a crash lost the answer of",
    };
    let mut lines = Vec::new();
    for i in lost {
        let sent = &deliveries[i];
        let again = deliveries[i + 1..].iter().find(|d| {
            d.channel == sent.channel && d.recipient == sent.recipient && d.message == sent.message
        });
        if let Some(again) = again.filter(|a| a.began_ms - sent.began_ms < after) {
            lines.push(format!(
                "{} ({}): sent again {} after the send {said}, before its claim was {} old",
                sent.recipient,
                sent.channel,
                span(again.began_ms - sent.began_ms),
                span(after)
            ));
        }
    }
    lines
}

/// The sends of `process` whose answers its first failed commit was to
/// record: those since its last commit, by their place among the
/// deliveries (a process's n-th send event is its n-th delivery).
fn unrecorded_at_failure(process: u32, history: &History) -> Vec<usize> {
    let mine = |e: &&crate::world::Event| e.process == process;
    let events: Vec<&crate::world::Event> = history.events.iter().filter(mine).collect();
    let Some(failed) = events.iter().position(|e| e.kind == Kind::CommitFailed) else {
        return Vec::new();
    };
    let since = events[..failed]
        .iter()
        .rposition(|e| matches!(e.kind, Kind::Commit | Kind::Start))
        .map_or(0, |c| c + 1);
    let before = events[..since]
        .iter()
        .filter(|e| e.kind == Kind::Send)
        .count();
    let unrecorded = events[since..failed]
        .iter()
        .filter(|e| e.kind == Kind::Send)
        .count();
    let of_process: Vec<usize> = history
        .deliveries
        .iter()
        .enumerate()
        .filter(|(_, d)| d.process == process)
        .map(|(i, _)| i)
        .collect();
    of_process
        .into_iter()
        .skip(before)
        .take(unrecorded)
        .collect()
}

/// A moment of simulated time as `h:mm:ss` from the scenario's start.
pub fn hms(ms: i64) -> String {
    let s = ms.div_euclid(1000);
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// A stretch of simulated time: `5 s`, `5 min`, `1 min 30 s`, `200 ms`.
pub fn span(ms: i64) -> String {
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let s = ms / 1000;
    match (s / 60, s % 60) {
        (0, s) => format!("{s} s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s} s"),
    }
}

/// Differences between the case's fates and the reference's.
fn disagreements(
    yours: &BTreeMap<String, Fate>,
    reference: &BTreeMap<String, Fate>,
    with_detail: bool,
    refused: &[String],
) -> Vec<String> {
    let mut subjects: Vec<&String> = yours.keys().chain(reference.keys()).collect();
    subjects.sort();
    subjects.dedup();
    let mut lines = Vec::new();
    for subject in subjects {
        let mine = yours.get(subject);
        // A refused request owes nothing: its subject may be told nothing.
        let wanted = if refused.iter().any(|r| mentions(subject, r)) {
            None
        } else {
            reference.get(subject)
        };
        let same = match (mine, wanted) {
            (Some(m), Some(w)) => {
                m.told == w.told && m.state == w.state && (!with_detail || m.detail == w.detail)
            }
            (Some(m), None) => m.told == 0,
            (None, Some(w)) => w.told == 0,
            (None, None) => true,
        };
        if same {
            continue;
        }
        let show = |f: Option<&Fate>| {
            f.map(|f| f.said(with_detail))
                .unwrap_or_else(|| "nothing".to_string())
        };
        // The reference's side says only what differs.
        let theirs = match (wanted, mine) {
            (Some(w), Some(m)) => w.differing(m, with_detail),
            _ => show(wanted),
        };
        lines.push(format!(
            "{subject}: {} (the reference: {theirs})",
            show(mine)
        ));
    }
    lines
}

/// The subjects of requests that were refused in a play: whatever they
/// asked for is owed to nobody. A request is refused when it returned an
/// error and none of its commits reached the database: one that errs after
/// its change committed is judged by what committed, not by its answer.
fn refused(model: &FaultModel, history: &History) -> Vec<String> {
    let committed: Vec<(u32, Option<&str>, Option<&str>)> =
        of_requests(model, &history.events, Kind::Commit)
            .map(|e| (e.process, e.op.as_deref(), e.subject.as_deref()))
            .collect();
    of_requests(model, &history.events, Kind::Error)
        .filter(|e| !committed.contains(&(e.process, e.op.as_deref(), e.subject.as_deref())))
        .filter_map(|e| e.subject.clone())
        // A request made again (its subject and more, e.g. "… (again)")
        // that committed asks for what the refused one did: owed after all.
        .filter(|r| {
            !committed.iter().any(|(_, _, s)| {
                s.is_some_and(|s| s != r && s.starts_with(r.as_str()) && mentions(s, r))
            })
        })
        .collect()
}

/// The subjects of requests that committed after the play's fault struck
/// (a crash of the lab's, or a failing commit): what they asked for did not
/// exist when the fault struck, so it cannot be among what the fault
/// stranded. A lost send leaves no mark of its own (a provider may leave
/// sends unanswered in any play), so after one nothing is counted.
fn requested_after_fault(model: &FaultModel, history: &History) -> Vec<String> {
    let struck = history.events.iter().position(|e| match e.kind {
        // A crash with a subject is a poison message's: the world's doing.
        Kind::Crash => e.subject.is_none(),
        Kind::CommitFailed => true,
        _ => false,
    });
    let Some(struck) = struck else {
        return Vec::new();
    };
    of_requests(model, &history.events[struck..], Kind::Commit)
        .filter_map(|e| e.subject.clone())
        .collect()
}

/// Whether `text` names `name` as a whole word: "msg_1 to ann" names
/// "msg_1", "msg_10 to ann" does not.
fn mentions(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(word)
            && !text[at + name.len()..].chars().next().is_some_and(word)
    })
}

/// The events of `kind` that operations taking a request from outside
/// (see [`FaultModel::requests`]) left among `events`.
fn of_requests<'a>(
    model: &'a FaultModel,
    events: &'a [Event],
    kind: Kind,
) -> impl Iterator<Item = &'a Event> {
    events.iter().filter(move |e| {
        e.kind == kind
            && e.op
                .as_deref()
                .is_some_and(|op| model.requests.contains(&op))
    })
}

/// The reference's fate in a fault-free run of each scenario, cached next to
/// its binary (which is named after the reference's source and the lab's
/// build), so the learner's loop pays for it once. What a chapter observes
/// is decided by its check, compiled into `notify` itself: the cache is
/// keyed by this `notify` binary too, so a rebuilt one never reads fates
/// that an older check observed.
struct Reference<'a> {
    case: &'a Case,
    cache: PathBuf,
    memory: Mutex<HashMap<u64, Observation>>,
}

impl<'a> Reference<'a> {
    fn new(case: &'a Case, chapter: &str) -> Reference<'a> {
        let cache = case
            .exe
            .parent()
            .map(|d| d.join(format!("observed-{chapter}")))
            .unwrap_or_default();
        Reference {
            case,
            cache,
            memory: Mutex::new(HashMap::new()),
        }
    }

    fn observe<E: Explorer>(&self, explorer: &E, scenario: &E::Scenario) -> Result<Observation> {
        let text = serde_json::to_string(scenario).context("a scenario is plain data")?;
        let key = fingerprint(format!("{}\n{text}", grader()).as_bytes());
        if let Some(seen) = crate::db::lock(&self.memory).get(&key) {
            return Ok(seen.clone());
        }
        let file = self.cache.join(format!("{key:016x}.json"));
        let observed = match read_json::<Observation>(&file) {
            Some(seen) => seen,
            None => {
                let played = play(explorer, self.case, scenario, None)?;
                if let Some(trouble) = played.trouble(None) {
                    anyhow::bail!(
                        "the reference solution did not finish a generated scenario ({trouble}): {}",
                        explorer.describe(scenario)
                    );
                }
                let _ = std::fs::create_dir_all(&self.cache);
                let staged = file.with_extension(format!("{}.tmp", std::process::id()));
                if std::fs::write(&staged, serde_json::to_vec(&played.observation)?).is_ok() {
                    let _ = std::fs::rename(&staged, &file);
                }
                played.observation
            }
        };
        crate::db::lock(&self.memory).insert(key, observed.clone());
        Ok(observed)
    }
}

/// This `notify` binary, as its size and time: a new build is another grader.
/// A binary that cannot be read gets a name of its own, so nothing is shared.
fn grader() -> &'static str {
    static GRADER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    GRADER.get_or_init(|| {
        std::env::current_exe()
            .and_then(|exe| exe.metadata())
            .and_then(|m| Ok(format!("{}@{:?}", m.len(), m.modified()?)))
            .unwrap_or_else(|_| format!("process {}", std::process::id()))
    })
}

fn read_json<T: DeserializeOwned>(file: &Path) -> Option<T> {
    let bytes = std::fs::read(file).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// What exploring found, as check lines.
pub struct Explored {
    pub verdicts: Vec<Verdict>,
    /// Case processes started, the reference's included.
    pub processes: usize,
}

/// Judging one scenario: every rule it breaks, with the play that breaks it.
struct Judged {
    seed: u64,
    fault: Option<Injected>,
    breaches: Vec<Breach>,
    history: History,
    /// False when the case did not play the scenario to its end (a hang,
    /// an early exit): a smaller scenario would most likely stop the same
    /// way, after waiting as long, so such a failure is not shrunk.
    finished: bool,
}

/// How much was covered, for the PASS lines.
#[derive(Default, Clone, Copy)]
struct Coverage {
    scenarios: usize,
    crashes: usize,
    failing: usize,
    /// Sends whose answer or request was lost.
    lost: usize,
    processes: usize,
    /// The fault points the scenarios had, played or not.
    points: usize,
}

/// Which faults to play in a scenario.
#[derive(Clone, Debug)]
enum Faults {
    /// `n` of its fault points, chosen by the seed; `None`: all of them.
    Sample(Option<usize>),
    /// This one first, when the scenario has it, then up to `n` others.
    Like(Injected, usize),
}

/// Plays one scenario fault-free and under its faults, judging every rule:
/// fault-free, the case must end as the reference does; under a fault, as
/// it did itself without one (a crash or a failing commit may refuse a
/// request, and change nothing else); always, the shared invariants.
fn judge_one<E: Explorer>(
    explorer: &E,
    case: &Case,
    reference: Option<&Reference>,
    seed: u64,
    scenario: &E::Scenario,
    faults: &Faults,
) -> Result<(Vec<Judged>, Coverage)> {
    let model = explorer.faults();
    let rules = explorer.invariants();
    let mut published = explorer.published(scenario);
    for p in &mut published {
        p.body = explorer.message_of(scenario, &p.channel, &p.recipient, &p.body);
    }
    let wanted = match reference {
        Some(r) => Some(r.observe(explorer, scenario)?),
        None => None,
    };
    let normal = play(explorer, case, scenario, None)?;
    let mut coverage = Coverage {
        scenarios: 1,
        processes: normal.exits.len(),
        ..Coverage::default()
    };
    let mut judged = Vec::new();
    let mut breaches = Vec::new();
    let trouble = normal.trouble(None);
    let finished = trouble.is_none();
    if let Some(trouble) = trouble {
        // Nothing can be judged of a run that did not finish, and nothing
        // of it can hold.
        for rule in rules_of(explorer) {
            breaches.push(Breach {
                rule,
                lines: vec![format!("the case did not finish: {trouble}")],
            });
        }
    } else {
        if let Some(wanted) = &wanted {
            let lines = disagreements(&normal.observation.fates, &wanted.fates, true, &[]);
            if !lines.is_empty() {
                breaches.push(Breach {
                    rule: Rule::Agrees,
                    lines,
                });
            }
        }
        breaches.extend(invariants(rules, &normal, &published, false));
    }
    let points = fault_points(&model, &normal.history);
    // A point that stands in two kinds counts once.
    coverage.points = points.iter().filter(|p| !apart(&p.kind)).count();
    let points = match faults {
        Faults::Sample(n) => sample(points, *n, seed),
        Faults::Like(first, n) => {
            // The same fault, in the same process if it is still there (a
            // smaller scenario may have lost a deploy), else in any.
            let same = points
                .iter()
                .map(|p| &p.injected)
                .find(|p| *p == first)
                .or_else(|| {
                    points
                        .iter()
                        .map(|p| &p.injected)
                        .find(|p| p.fault == first.fault)
                })
                .cloned();
            let mut chosen: Vec<Injected> = same.iter().cloned().collect();
            chosen.extend(sample(
                points
                    .into_iter()
                    .filter(|p| Some(&p.injected) != same.as_ref())
                    .collect(),
                Some(*n),
                seed,
            ));
            chosen
        }
    };
    let own = explorer.under_faults(scenario, normal.observation.fates.clone());
    judged.push(Judged {
        seed,
        fault: None,
        breaches,
        history: normal.history,
        finished,
    });
    if !finished {
        return Ok((judged, coverage));
    }
    for fault in points {
        let faulted = play(explorer, case, scenario, Some(&fault))?;
        if fault.is_crash() {
            coverage.crashes += 1;
        } else if fault.is_lost_send() {
            coverage.lost += 1;
        } else {
            coverage.failing += 1;
        }
        coverage.processes += faulted.exits.len();
        let mut breaches = Vec::new();
        let trouble = faulted.trouble(Some(&fault));
        let finished = trouble.is_none();
        if let Some(trouble) = trouble {
            breaches.push(Breach {
                rule: Rule::Survives,
                lines: vec![format!("the case did not finish: {trouble}")],
            });
        } else {
            let refused = refused(&model, &faulted.history);
            let stranding = model.strands.contains(&fault.fault.op());
            let mut fates = explorer.under_faults(scenario, faulted.observation.fates.clone());
            if stranding {
                // A message the fault stranded, untold, is owed to the
                // sweep of a later chapter: not lost, by these rules. One
                // asked for after the fault struck cannot have been
                // stranded by it: it must go out.
                let later = requested_after_fault(&model, &faulted.history);
                for (subject, fate) in fates.iter_mut() {
                    let Some(owed) = own.get(subject) else {
                        continue;
                    };
                    if later.iter().any(|r| mentions(subject, r)) {
                        continue;
                    }
                    if fate.told == 0 && (fate.state == owed.state || explorer.waiting(fate)) {
                        fate.told = owed.told;
                        fate.state = owed.state.clone();
                    } else if fate.told == owed.told && explorer.waiting(fate) {
                        // Stranded after the provider took its send (a
                        // crash right after it, or a failing commit of its
                        // mark): told as often as without the fault, its
                        // row waits, claimed, for the sweep of a later
                        // chapter to settle it.
                        fate.state = owed.state.clone();
                    }
                }
            }
            if explorer.dead_letters_may_arrive() {
                // A dead letter of the play without the fault, told once
                // under it: the fault moved an attempt or a batch, and an
                // attempt that failed before got through. Nothing is lost
                // or sent twice.
                for (subject, fate) in fates.iter_mut() {
                    let Some(owed) = own.get(subject) else {
                        continue;
                    };
                    if owed.told == 0 && owed.state.contains("FAILED") && fate.told == 1 {
                        *fate = owed.clone();
                    }
                    // And the other way: claims the play stranded, each
                    // charged as a lost attempt, spent a message's last
                    // attempt before it got through, or before the commit
                    // that would record its delivery did.
                    if owed.told == 1
                        && fate.told <= 1
                        && fate.state.contains("FAILED")
                        && explorer.spent_on_lost_claims(scenario, subject, &faulted.history)
                    {
                        *fate = owed.clone();
                    }
                }
            }
            let (lines, compared) = match explorer.promised(scenario, &refused) {
                Some(promised) => (
                    disagreements(
                        &fates,
                        &explorer.under_faults(scenario, promised),
                        false,
                        &[],
                    ),
                    "(promised: ",
                ),
                None => (
                    disagreements(&fates, &own, false, &refused),
                    "(without the fault: ",
                ),
            };
            let lines = lines
                .into_iter()
                .map(|l| l.replace("(the reference: ", compared))
                .collect::<Vec<_>>();
            if !lines.is_empty() {
                breaches.push(Breach {
                    rule: Rule::Survives,
                    lines,
                });
            }
            // A crash, or a failing commit that ends a wake-up part-way,
            // strands what the process had claimed until the sweep takes it
            // back: whether a row waited, never tried, for a breaker or for
            // the sweep, only the play without a fault tells.
            breaches.extend(invariants(rules, &faulted, &[], stranding));
            let lines = swept_early(rules.orphaned_after, &fault, &faulted);
            if !lines.is_empty() {
                breaches.push(Breach {
                    rule: Rule::SweptLate,
                    lines,
                });
            }
        }
        judged.push(Judged {
            seed,
            fault: Some(fault),
            breaches,
            history: faulted.history,
            finished,
        });
    }
    Ok((judged, coverage))
}

/// Explores `case` with `explorer`'s generated scenarios under `budget`,
/// comparing with `reference` when there is one, and returns one verdict per
/// rule the chapter judges: agreement, survival, then its invariants.
pub fn explore<E: Explorer>(
    explorer: &E,
    chapter: &str,
    case: &Case,
    reference: Option<&Case>,
    budget: Budget,
) -> Result<Explored> {
    // A case that already stopped part-way through one of the chapter's
    // own scenarios (a hang, an early end) is reported by that finding, and
    // every property waits for it: exploring would only wait on the same
    // stop again, scenario after scenario. A check that explores while its
    // own scenarios still play (check 6) starts before any stop can be
    // noted, so it explores as usual, every run.
    if let Some(stop) = case.incidents().into_iter().find(|i| i.stops_the_plan()) {
        let said = stop.exit.describe();
        let verdicts = rules_of(explorer)
            .into_iter()
            .map(|rule| {
                Verdict::fail(
                    rule.property(),
                    "not explored".to_string(),
                    format!("the case did not finish one of the chapter's own scenarios: {said}"),
                    Vec::new(),
                )
            })
            .collect();
        return Ok(Explored {
            verdicts,
            processes: 0,
        });
    }
    let reference = reference.map(|r| Reference::new(r, chapter));
    let seeds = seeds_of(explorer, budget);
    let results = in_parallel(&seeds, |&seed| {
        let scenario = explorer.generate(seed);
        judge_one(
            explorer,
            case,
            reference.as_ref(),
            seed,
            &scenario,
            &Faults::Sample(budget.faults),
        )
    });
    let mut all = Vec::new();
    let mut coverage = Coverage::default();
    for result in results {
        let (judged, c) = result?;
        all.extend(judged);
        coverage.scenarios += c.scenarios;
        coverage.crashes += c.crashes;
        coverage.failing += c.failing;
        coverage.lost += c.lost;
        coverage.processes += c.processes;
        coverage.points += c.points;
    }
    let rules = rules_of(explorer);
    // Every fault point, or a sample of them chosen by the seeds: say which.
    let sampled = match coverage.crashes + coverage.failing + coverage.lost {
        played if played < coverage.points => format!(", sampled from {}", coverage.points),
        _ => String::new(),
    };
    let lost = match coverage.lost {
        0 => String::new(),
        n => format!(", {}", counted(n, "lost send")),
    };
    let evidence = format!(
        "{}, {}, {}{lost}{sampled}",
        counted(coverage.scenarios, "scenario"),
        counted(coverage.crashes, "crash point"),
        counted(coverage.failing, "failing commit")
    );
    let mut verdicts = Vec::new();
    // One budget of plays for shrinking every broken rule of a check, so a
    // case that breaks them all is not played hundreds of times over.
    let mut shrink_plays = SHRINK_PLAYS;
    for rule in rules {
        if rule == Rule::Agrees && reference.is_none() {
            verdicts.push(Verdict::pass(
                rule.property(),
                "this is the reference solution".to_string(),
            ));
            continue;
        }
        let first = all
            .iter()
            .find(|j| j.breaches.iter().any(|b| b.rule == rule));
        let Some(first) = first else {
            // Agreement is judged on the plays without faults only.
            let evidence = match rule {
                Rule::Agrees | Rule::ClosesOnAnswer | Rule::OneProbe => {
                    format!(
                        "{}, without faults",
                        counted(coverage.scenarios, "scenario")
                    )
                }
                _ => evidence.clone(),
            };
            let mut verdict = Verdict::pass(rule.property(), evidence);
            let mut faults = vec![
                counted(coverage.crashes, "crash point"),
                counted(coverage.failing, "failing commit"),
            ];
            if coverage.lost > 0 {
                faults.push(counted(coverage.lost, "lost send"));
            }
            let last = faults.pop().unwrap_or_default();
            verdict.explored = Some(format!(
                "{}, under {} and {last}",
                counted(coverage.scenarios, "generated scenario"),
                faults.join(", ")
            ));
            verdicts.push(verdict);
            continue;
        };
        let (shrunk, tried) = if first.finished && budget.shrink {
            shrink(
                explorer,
                case,
                reference.as_ref(),
                first,
                rule,
                &mut shrink_plays,
            )?
        } else {
            (None, 0)
        };
        coverage.processes += tried;
        let verdict = match &shrunk {
            Some((judged, described)) => report(explorer, rule, judged, described, &all),
            None => {
                let described = explorer.describe(&explorer.generate(first.seed));
                report(explorer, rule, first, &described, &all)
            }
        };
        verdicts.push(verdict);
    }
    Ok(Explored {
        verdicts,
        processes: coverage.processes,
    })
}

/// "1 crash point", "3 crash points".
/// The properties exploring judges for `explorer`, in the order they are
/// reported.
pub fn rules_of<E: Explorer>(explorer: &E) -> Vec<Rule> {
    let invariants = explorer.invariants();
    let mut rules = vec![Rule::Agrees, Rule::Survives];
    if invariants.told_once {
        rules.push(Rule::ToldOnce);
    }
    if invariants.settled {
        rules.push(invariants.settled_rule());
    }
    if !invariants.retry_gaps.is_empty() {
        rules.push(Rule::NotEarly);
    }
    if invariants.orphaned_after > 0 {
        rules.push(Rule::SweptLate);
    }
    if invariants.closes_on_answer > 0 {
        rules.push(Rule::ClosesOnAnswer);
    }
    if judges_one_probe(&invariants) {
        rules.push(Rule::OneProbe);
    }
    if invariants.keyed {
        rules.push(Rule::Keyed);
    }
    rules
}

/// Shorter lists to try in place of `items` while shrinking, the bigger cuts
/// first: each half, when there are more than 3; then `items` without one of
/// them, when there are from 2 to `each_up_to` (every candidate costs a play
/// or more, and a learner waits for them).
pub fn cut_down<T: Clone>(items: &[T], each_up_to: usize) -> Vec<Vec<T>> {
    let n = items.len();
    let mut cuts = Vec::new();
    if n > 3 {
        cuts.push(items[..n / 2].to_vec());
        cuts.push(items[n / 2..].to_vec());
    }
    if (2..=each_up_to).contains(&n) {
        for i in 0..n {
            let mut fewer = items.to_vec();
            fewer.remove(i);
            cuts.push(fewer);
        }
    }
    cuts
}

/// How many plays a check may spend on shrinking, for all its rules.
const SHRINK_PLAYS: usize = 60;

/// Shrinking plays this many candidates side by side and keeps the first,
/// in the chapter's order, that still breaks the rule: what it finds is
/// what playing them one at a time finds, in about half the time on two
/// cores.
const SHRINK_WAVE: usize = 2;

/// Looks for a smaller scenario that breaks `rule` too, as delta debugging
/// does: the chapter offers smaller candidates (bigger cuts first), each is
/// played (fault-free, then under the same fault when the breach needed
/// one, then a few others) and kept when it still breaks the rule, until no
/// candidate does or the plays run out. Returns the smallest failure found,
/// with its scenario described, and how many processes it took.
fn shrink<E: Explorer>(
    explorer: &E,
    case: &Case,
    reference: Option<&Reference>,
    found: &Judged,
    rule: Rule,
    budget: &mut usize,
) -> Result<(Option<(Judged, String)>, usize)> {
    let mut current = explorer.generate(found.seed);
    let mut best = None;
    let mut processes = 0;
    let faults = match &found.fault {
        Some(f) => Faults::Like(f.clone(), 1),
        None => Faults::Sample(Some(0)),
    };
    // Only agreement asks what the reference made of a scenario: shrinking
    // any other rule leaves it out, and plays the case alone.
    let reference = reference.filter(|_| rule == Rule::Agrees);
    'smaller: loop {
        let candidates = explorer.shrink(&current);
        for wave in candidates.chunks(SHRINK_WAVE) {
            if *budget == 0 {
                break 'smaller;
            }
            let played = in_parallel(wave, |candidate| {
                judge_one(explorer, case, reference, found.seed, candidate, &faults)
            });
            // Every process started counts; the budget, and what is kept,
            // go as if the candidates had been played one by one, so the
            // smallest failure is the one a play at a time would find.
            processes += played
                .iter()
                .flatten()
                .map(|(_, c)| c.processes)
                .sum::<usize>();
            for (candidate, result) in wave.iter().zip(played) {
                if *budget == 0 {
                    break 'smaller;
                }
                let (judged, c) = result?;
                *budget = budget.saturating_sub(1 + c.crashes + c.failing);
                if let Some(mut hit) = judged
                    .into_iter()
                    .find(|j| j.breaches.iter().any(|b| b.rule == rule))
                {
                    hit.breaches.retain(|b| b.rule == rule);
                    best = Some((hit, explorer.describe(candidate)));
                    current = candidate.clone();
                    continue 'smaller;
                }
            }
        }
        break;
    }
    Ok((best, processes))
}

/// How many lines of a breach a report spells out.
const SHOWN: usize = 6;

/// The verdict of a broken rule, from its (shrunk) failure.
fn report<E: Explorer>(
    explorer: &E,
    rule: Rule,
    found: &Judged,
    described: &str,
    all: &[Judged],
) -> Verdict {
    let broken = all
        .iter()
        .filter(|j| j.breaches.iter().any(|b| b.rule == rule))
        .count();
    let evidence = format!("{broken} of {} plays", all.len());
    let fault = found
        .fault
        .as_ref()
        .map(|f| format!(", {}, then a restart", f.describe()))
        .unwrap_or_default();
    let fault = match &found.fault {
        Some(f) if !f.is_crash() => format!(", {}", f.describe()),
        _ => fault,
    };
    let _ = explorer;
    let lines: Vec<String> = found
        .breaches
        .iter()
        .filter(|b| b.rule == rule)
        .flat_map(|b| b.lines.iter().cloned())
        .collect();
    let mut details: Vec<String> = lines.iter().take(SHOWN).cloned().collect();
    if lines.len() > SHOWN {
        details.push(format!("... and {} more", lines.len() - SHOWN));
    }
    let mut verdict = Verdict::fail(
        rule.property(),
        evidence,
        format!(
            "generated scenario (seed {}): {described}{fault}:",
            found.seed
        ),
        details,
    );
    verdict.seed = Some(found.seed);
    verdict.story = found.history.events.clone();
    if found.fault.is_some() {
        verdict.timeline = found.history.events.clone();
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::mentions;

    #[test]
    fn a_subject_names_a_request_only_as_a_whole_word() {
        assert!(mentions("msg_1 to ann@example.com", "msg_1"));
        assert!(mentions("msg_1", "msg_1"));
        assert!(mentions("msg_1 (again)", "msg_1"));
        assert!(!mentions("msg_10 to ann@example.com", "msg_1"));
        assert!(!mentions("joann@example.com", "ann@example.com"));
        assert!(mentions("invite ann@example.com", "ann@example.com"));
        assert!(!mentions("", "msg_1"));
    }
}
