//! Check 06: orphans, the sweep and its fence.
//!
//! Six kinds of scenario, each in a fresh folder, with the dispatcher waking every
//! 2 s and the sweep running every minute of simulated time:
//! - a dispatcher killed straight after its claim commits, then a new one;
//! - a poison row, whose send kills every dispatcher that tries it, claimed
//!   together with a row the provider refuses for good, which the first
//!   dispatcher dead-letters before it dies;
//! - a dispatcher that is merely slow: its send takes minutes, while a
//!   second dispatcher process runs its schedule beside it, its sweep
//!   lined up to run 10 s before the send ends;
//! - a late finisher: a send hangs past the sweep's threshold, the second
//!   process hands the row on and delivers it, and then the hung send comes
//!   back with a 503;
//! - the same, but the hung send comes back while the second process is
//!   itself still sending the row;
//! - a long batch, sent row by row while the second process runs beside
//!   one of its sends.
//!
//! The slow and late scenarios run two real processes on a shared clock:
//! one blocks in its send while the other runs minutes of simulated time.
//! Every wait in them is on something the world records, never on real
//! time, so the race goes the same way on an idle machine and a busy one:
//! the second process starts once the first one's send has begun; the
//! blocked send answers when the clock reaches the end of the other one's
//! run or, where it must land in the middle of the other one's own send,
//! once that send has begun, and that send answers once the first process
//! has ended. Each hold also ends when the process it waits for has ended,
//! so no process waits for one that died.
//! Seeded random batches vary the people, how many rows the killed
//! dispatcher held, how long the slow send takes, how long the late one
//! hangs and how it ends (any answer, under either host name); they also
//! play a long batch with rows waiting past the threshold behind the send
//! the second process runs beside, and a poison row that fails before it
//! kills. Beside them, the check explores generated scenarios under a crash
//! or a failing commit in `publish`, `dispatch` and `sweep` (see
//! [`Generated`]).

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::{MINUTE, SECOND};
use lab::explore::clock;
use lab::explore::{
    cut_down, explore, span, Dimension, Explorer, Fate, FaultModel, Invariants, Observation, Row,
    Run,
};
use lab::history::{answer_kind, read_outbox, read_pairs, History, Queued};
use lab::report::{judge, Finding, Verdict};
use lab::rng::Rng;
use lab::runner::{scenario_dir, Case, Exit};
use lab::scenario::{Fault, Moment, Plan, ProviderScript, Step};
use lab::serve::Schedule;
use lab::world::{Delivery, Outcome, Recorder};

use super::dispatch_world::{answered, provider, Addressed, Script, NAMES, RETRY_GAPS};

pub const CHAPTER: Chapter = Chapter {
    number: 6,
    title: "orphans: the sweep and its fence",
    case_file: "cases/case06_orphans.rs",
    text_file: "chapters/06-orphans.md",
    bin: "case06",
    shipped_hash: 0x23f1_82a8_5bcb_564e,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&Generated, budget),
    bands: |history, _| lab::picture::bands(&Generated, history),
};

const EVENTUALLY: &str =
    "every row a lost dispatcher held goes out again at once, and is delivered, or FAILED once its attempts run out";
const LIVE: &str = "no live send is swept";
const LATE: &str = "a late finisher changes nothing";

/// A process counts as hung only after this long (or `--timeout`, if
/// longer): a busy machine slows the minutes of simulated time, and in the
/// racing scenarios one process waits for the other.
const PATIENCE: Duration = Duration::from_secs(30);
/// How often the dispatcher wakes, and how often the sweep runs.
const WAKE_UP: i64 = 2 * SECOND;
const SWEEP: i64 = MINUTE;
/// Attempts a row gets in all (chapter 5): a poison row must be dead-lettered
/// after exactly this many dispatchers were lost on it.
const ATTEMPTS: usize = 4;
/// Chapter 5's backoff: after the n-th failed attempt, the next one waits
/// at least this long.
/// How long the dispatcher that replaces a killed one runs: the sweep hands
/// the orphans back at 5 or 6 min, and they go out at once.
const AFTER_CRASH: i64 = 8 * MINUTE;
/// How long each dispatcher lives in the poison scenario, at most: a sweep
/// after 5 min, then room for up to a 5 min backoff, then the claim.
const POISON_RUN: i64 = 12 * MINUTE;
/// How long the second dispatcher runs when the first one's answer comes
/// back during its resend: the resend goes out near 6:00.
const RESEND_RUN: i64 = 7 * MINUTE;
/// The sweep's threshold in the chapter: no claim is handed back sooner.
const ORPHANED_AFTER: i64 = 5 * MINUTE;
/// How long before a slow send ends the second dispatcher's last sweep runs:
/// a sweep that hands back a claim younger than the send is caught, since
/// the dispatcher's next wake-up sends the row again while the send runs.
const SWEEP_LEAD: i64 = 10 * SECOND;
/// How long dispatcher 1 runs its schedule when a random batch's slow send
/// follows 503s: a row's fourth attempt comes at 5:35, after gaps of 5 s,
/// 30 s and 5 min, and the slow send holds the schedule from its start.
const RETRIED_BY: i64 = 6 * MINUTE;
/// How soon after its claim an orphan goes out again, at the latest: the
/// sweep hands it back due now at its first turn once the claim is older
/// than the threshold, and the dispatcher's next wake-up sends it.
const RESENT_BY: i64 = ORPHANED_AFTER + SWEEP + WAKE_UP;
/// The longest a row waits, by any rule of chapters 6 to 8, before
/// something is done about it: chapter 8's fallback deadline, counted from
/// when the row was queued.
const LONGEST_WAIT: i64 = 10 * MINUTE;
/// Dispatchers started on the poison row before the check calls it a loop.
const POISON_PROCESSES: u32 = 8;
/// Process numbers of the racing scenarios.
const FIRST: u32 = 1;
const SECOND_RELAY: u32 = 2;
/// The dispatcher that runs the next day, after a late finisher's race.
const NEXT_DAY_RELAY: u32 = 3;
/// A day and an hour: past the 24 hours a provider remembers a key.
const NEXT_DAY: i64 = 25 * 60 * MINUTE;

/// Someone a scenario tells something, on the channel they chose.
#[derive(Clone, Debug)]
struct Person {
    name: String,
    channel: &'static str,
    text: String,
}

impl Addressed for Person {
    fn name(&self) -> &str {
        &self.name
    }

    fn channel(&self) -> &str {
        self.channel
    }
}

impl Person {
    fn publish(&self) -> Step {
        let notice = serde_json::json!({
            "person": self.name,
            "kind": "date_chosen",
            "text": self.text,
        });
        Step::with("publish", notice, &self.recipient())
    }
}

const EVENTS: [&str; 4] = [
    "Board games: Friday 20:00 it is",
    "Climbing trip: Saturday it is",
    "Team lunch: Wednesday 12:30 it is",
    "Choir rehearsal: Monday 18:00 it is",
];

/// What a scenario does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum What {
    /// The dispatcher is killed straight after its claim commits.
    Crash,
    /// The row's send kills every dispatcher that tries it.
    Poison,
    /// The first dispatcher's send takes minutes; the second one must leave it alone.
    Slow,
    /// The first dispatcher's send hangs, the second delivers the row, then
    /// the first one's 503 comes back.
    LateAfter,
    /// The same, but the 503 comes back while the second one is still sending.
    LateDuring,
    /// The first dispatcher claims a batch and sends it row by row, each
    /// send well under the threshold, the whole batch over it; the second
    /// one's sweep must leave every row alone.
    LongBatch,
}

/// How the first dispatcher's hung send ends, in the late scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// A 503: the row may be tried again.
    Unavailable,
    /// Refused for good (a 422): the row would be a dead letter.
    Refused,
    /// No answer at all: the send times out.
    Silent,
}

impl Answer {
    const ALL: [Answer; 3] = [Answer::Unavailable, Answer::Refused, Answer::Silent];

    fn said(self) -> &'static str {
        match self {
            Answer::Unavailable => "with a 503",
            Answer::Refused => "refused for good (a 422)",
            Answer::Silent => "with no answer (a timeout)",
        }
    }

    /// The first dispatcher's script for `recipient`, answering this way.
    fn script(self, recipient: String) -> ProviderScript {
        let one = vec![recipient];
        match self {
            Answer::Unavailable => ProviderScript {
                unreachable: one,
                ..ProviderScript::default()
            },
            Answer::Refused => ProviderScript {
                rejected: one,
                ..ProviderScript::default()
            },
            Answer::Silent => ProviderScript {
                unanswered: one,
                ..ProviderScript::default()
            },
        }
    }
}

/// How long each send of the long batch takes: the chapter's four rows take
/// 6 min 40 s in all, and the sweep at 6:00 meets the last one mid-send.
const BATCH_SEND: i64 = 100 * SECOND;

/// The host name both dispatchers share when the second one is the first
/// one restarted under its name (a pod rescheduled while the old one, cut
/// off, still runs).
const SHARED_HOST: &str = "dispatcher-0";

/// One scenario of one batch.
#[derive(Clone, Debug)]
struct Scenario {
    what: What,
    /// `None` for the chapter's own batch.
    seed: Option<u64>,
    people: Vec<Person>,
    /// Poison: someone whose address the provider refuses for good (a 422),
    /// published first, so the first dispatcher dead-letters their row
    /// before the poison row kills it.
    refused: Option<Person>,
    /// Slow: how long the send takes. Late: how long the second process
    /// runs while the first one's send hangs. Long batch: how long the
    /// whole batch takes.
    span: i64,
    /// Both dispatchers run under one host name, so one name in
    /// `claimed_by`: the restarted one took the name of the one that hangs.
    same_host: bool,
    /// Late: how the hung send ends.
    late: Answer,
    /// Long batch: how long each send takes, and the row beside whose send
    /// dispatcher 2 runs (the rows after it wait past the threshold).
    send: i64,
    held: usize,
    /// Long batch: dispatcher 1's held send answers as soon as dispatcher
    /// 2 begins to send a row it took over, and dispatcher 2's sends answer
    /// only once dispatcher 1 has ended: dispatcher 1 goes on with its
    /// batch while the rows it lost are being sent by another.
    resume_mid_send: bool,
    /// Long batch: the first row whose send fails on dispatcher 1's
    /// provider, and every one after it. A busy batch's quick sends give a
    /// breaker (chapter 7 on) enough of them to open on the held send's
    /// failure, just after dispatcher 2 took over the rest of the batch.
    failing_from: Option<usize>,
    /// Poison: how many 503s the row meets before its sends start to kill.
    fails_first: u32,
    /// Slow: rows published before the slow one and claimed with it, each
    /// with how long its send takes. A dispatcher that sends them first
    /// begins the slow send on a claim that much older.
    ahead: Vec<(Person, i64)>,
    /// Slow: how long the row waits in the outbox before dispatcher 1
    /// claims it. Its claim is young while the row itself is past the
    /// sweep's threshold, and past any later chapter's deadline before the
    /// send ends.
    waited: i64,
    /// Late: how many rows of one claim failed together, their provider
    /// down, before the send that hangs: enough for a breaker as chapter 7
    /// states it to open, so there the hung send is its probe. 0: one row.
    failed_together: usize,
}

/// The chapter's people and numbers, or a batch drawn from a seed.
struct Batch {
    seed: Option<u64>,
    people: Vec<Person>,
    slow: i64,
    late: i64,
    /// How the late send ends, and whether its dispatcher shares the
    /// second one's host name.
    answer: Answer,
    same_host: bool,
    /// The long batch: its rows and how long each send takes.
    long: Vec<Person>,
    send: i64,
    /// The busy long batch: each of its quick sends takes this long.
    quick: i64,
    /// The poison row's 503s before it starts to kill.
    fails_first: u32,
    /// Rows claimed with a slow send and sent before it, with how long
    /// each send takes: a random batch's.
    ahead: Vec<(Person, i64)>,
    /// A random batch's slow send again, on a push that waited this long
    /// in the outbox before its claim.
    waited: i64,
    /// A random batch's late answer again, to the send after a whole claim
    /// of this many rows failed together.
    together: usize,
}

/// The row of a long batch beside whose send dispatcher 2 runs, from that
/// send's start to its end: the first one whose send lasts until a sweep
/// of dispatcher 2 past the threshold, which then meets every row after it
/// still under the batch's claim of 0:00, unless each was renewed.
fn held_row(send: i64) -> usize {
    (0..)
        .find(|&h| h as i64 * send + SWEEP * (send / SWEEP) > ORPHANED_AFTER)
        .expect("some row of a long enough batch is held")
}

/// `count` people by email, all told `text`: the names, then the names
/// again with a number.
fn crowd(text: &str, count: usize) -> Vec<Person> {
    (0..count)
        .map(|k| Person {
            name: match k / NAMES.len() {
                0 => NAMES[k].to_string(),
                n => format!("{}{}", NAMES[k % NAMES.len()], n + 1),
            },
            channel: "email",
            text: text.to_string(),
        })
        .collect()
}

/// The first failing row of a busy batch whose sends take `send` each: the
/// latest from which a breaker as chapter 7 states it (over the last
/// minute, at least 5 sends, more than half failed) opens as the held send
/// fails, however late in its wake-up dispatcher 2 lets that send answer,
/// and not on the send before.
fn failing_from(held: usize, send: i64) -> usize {
    let breaker = super::check07_breaker::BREAKER;
    let opens = |row: usize, from: usize, late: i64| {
        let at = (row as i64 + 1) * send + late;
        let window = (0..=row).filter(|&i| (i as i64 + 1) * send > at - breaker.window);
        let (sent, failed) = window.fold((0, 0), |(n, f), i| (n + 1, f + usize::from(i >= from)));
        sent >= breaker.opens_after && 2 * failed > sent
    };
    (1..held)
        .rev()
        .find(|&from| {
            (0..=2 * WAKE_UP)
                .step_by(500)
                .all(|late| opens(held, from, late))
                && !opens(held - 1, from, 0)
        })
        .expect("a busy batch has enough sends in a minute to open a breaker")
}

impl Batch {
    fn chapter() -> Batch {
        let text = EVENTS[0].to_string();
        let people: Vec<Person> = [
            ("dana", "email"),
            ("eli", "email"),
            ("fay", "push"),
            ("gus", "email"),
        ]
        .iter()
        .map(|&(name, channel)| Person {
            name: name.to_string(),
            channel,
            text: text.clone(),
        })
        .collect();
        Batch {
            seed: None,
            long: people.clone(),
            people,
            // Just under the threshold: any sweep that hands back a claim
            // younger than 4 min 40 s meets it.
            slow: 4 * MINUTE + 50 * SECOND,
            late: 8 * MINUTE,
            answer: Answer::Unavailable,
            same_host: false,
            send: BATCH_SEND,
            quick: 8 * SECOND,
            fails_first: 0,
            ahead: Vec::new(),
            waited: 0,
            together: 0,
        }
    }

    /// Other names and channels, 2 to 6 rows held by the killed dispatcher,
    /// a slow send of 2 to 4 min 50 s or one just past the threshold, on
    /// any of its row's attempts, a hang of 7 to 9 min, on any of its row's
    /// attempts too (on the last, the sweep must dead-letter it), that ends in any
    /// answer, under the other dispatcher's host name or its own, a long
    /// batch of sends of 70 to 140 s with one or two rows past the held
    /// one, and a poison row that fails one to three times before it
    /// kills. The answer, the host and the poison's failures go by the
    /// seed, so that any three seeds in a row play every answer.
    fn random(seed: u64) -> Batch {
        let mut rng = Rng::new(seed);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let count = rng.between(2, 6) as usize;
        let person = |rng: &mut Rng, name: &str| Person {
            name: name.to_string(),
            channel: if rng.between(0, 2) == 0 {
                "push"
            } else {
                "email"
            },
            text: rng.pick(&EVENTS).to_string(),
        };
        let people = names[..count].iter().map(|n| person(&mut rng, n)).collect();
        // Every other batch's slow send is a boundary: it outlives the
        // threshold by the sweep's lead, so the sweep meets its claim
        // exactly 5 minutes old, which is not yet "more than 5 minutes".
        let drawn = rng.between(120, 290) as i64 * SECOND;
        let slow = match seed % 2 {
            0 => ORPHANED_AFTER + SWEEP_LEAD,
            _ => drawn,
        };
        let late = rng.between(420, 540) as i64 * SECOND;
        let send = rng.between(70, 140) as i64 * SECOND;
        let rows = held_row(send) + 1 + rng.between(1, 2) as usize;
        let long = names[..rows].iter().map(|n| person(&mut rng, n)).collect();
        // Drawn last, so the rest of the batch is drawn as before.
        let quick = rng.between(7, 9) as i64 * SECOND;
        // One to three rows ahead of a slow send in its claim, of 20 to 70
        // s each: the slow send then begins on a claim up to 3:30 old.
        let ahead = names[names.len() - rng.between(1, 3) as usize..]
            .iter()
            .map(|n| {
                let p = person(&mut rng, n);
                (p, rng.between(20, 70) as i64 * SECOND)
            })
            .collect();
        Batch {
            seed: Some(seed),
            people,
            slow,
            late,
            answer: Answer::ALL[(seed % 3) as usize],
            same_host: seed % 2 == 1,
            long,
            send,
            quick,
            // Up to a row's last attempt: its dead letter then follows
            // 503s alone, and must still say its dispatcher was lost.
            fails_first: 1 + (seed % 3) as u32,
            ahead,
            // Drawn last too. The send begins with the row that much older
            // than its claim and ends past the row's tenth minute.
            waited: LONGEST_WAIT - slow
                + rng.between(15, slow as u64 / SECOND as u64 - 15) as i64 * SECOND,
            together: rng.between(5, 7) as usize,
        }
    }

    /// The batch's scenarios; the chapter's own batch also plays the late
    /// answer under both names, during a resend too, and a late refusal.
    fn scenarios(&self, all: bool) -> Vec<Scenario> {
        let one = || vec![self.people[0].clone()];
        let held = held_row(self.send);
        let scenario = |what, people, span| Scenario {
            what,
            seed: self.seed,
            people,
            waited: 0,
            failed_together: 0,
            refused: None,
            span,
            same_host: false,
            late: self.answer,
            send: self.send,
            held,
            resume_mid_send: false,
            failing_from: None,
            fails_first: self.fails_first,
            ahead: Vec::new(),
        };
        let mut scenarios = vec![
            scenario(What::Crash, self.people.clone(), AFTER_CRASH),
            scenario(What::Slow, one(), self.slow),
        ];
        // The slow send after other rows of its claim: the claim's age is
        // that of one send only where each send renews it.
        if !self.ahead.is_empty() {
            scenarios.push(Scenario {
                ahead: self.ahead.clone(),
                fails_first: 0,
                ..scenario(What::Slow, one(), self.slow)
            });
        }
        // The slow send of a push that waited in the outbox before its
        // claim: a young claim on an old row, sent across its tenth minute.
        if self.waited > 0 {
            let push = Person {
                channel: "push",
                ..self.people[0].clone()
            };
            scenarios.push(Scenario {
                waited: self.waited,
                fails_first: 0,
                ..scenario(What::Slow, vec![push], self.slow)
            });
        }
        scenarios.push(Scenario {
            same_host: self.same_host,
            ..scenario(What::LateAfter, one(), self.late)
        });
        // A late 503 to the send after a whole claim failed: where a
        // breaker opened on those failures, that send is its probe, and a
        // failed probe's row goes back to whoever holds it now.
        if self.together > 0 {
            scenarios.push(Scenario {
                same_host: self.same_host,
                late: Answer::Unavailable,
                fails_first: 1,
                failed_together: self.together,
                ..scenario(
                    What::LateAfter,
                    crowd(&self.people[0].text, self.together),
                    self.late,
                )
            });
        }
        if all {
            scenarios.push(Scenario {
                same_host: true,
                ..scenario(What::LateAfter, one(), self.late)
            });
            // A late refusal, on the batch's push: an answer that would
            // dead-letter the row, and so, from chapter 8 on, queue its
            // fallback email, had the row still been this dispatcher's.
            if let Some(push) = self.people.iter().find(|p| p.channel == "push") {
                scenarios.push(Scenario {
                    late: Answer::Refused,
                    ..scenario(What::LateAfter, vec![push.clone()], self.late)
                });
            }
            scenarios.push(scenario(What::LateDuring, one(), RESEND_RUN));
            scenarios.push(Scenario {
                same_host: true,
                ..scenario(What::LateDuring, one(), RESEND_RUN)
            });
        } else {
            // A random batch's late answer also comes back during the
            // resend, however it ends and under whichever name: a refusal
            // or a timeout then meets the row another dispatcher holds.
            scenarios.push(Scenario {
                same_host: self.same_host,
                ..scenario(What::LateDuring, one(), RESEND_RUN)
            });
        }
        // The long batch's second dispatcher shares the first one's host
        // name when the late one does, and in the chapter's batch both
        // ways, as every race there: a renewal must be fenced by more than
        // the name.
        let long = |same_host| Scenario {
            same_host,
            ..scenario(
                What::LongBatch,
                self.long.clone(),
                (held as i64 + 1) * self.send,
            )
        };
        scenarios.push(long(self.same_host));
        if all && !self.same_host {
            scenarios.push(long(true));
        }
        // A random batch has rows after the held one: dispatcher 1 also
        // goes on with them while dispatcher 2, under its name, is sending
        // them.
        if !all {
            scenarios.push(Scenario {
                resume_mid_send: true,
                ..long(true)
            });
        }
        // A busy batch: as many quick sends as take it past the threshold,
        // whose provider starts failing dispatcher 1's sends just before
        // dispatcher 2 takes over its tail. A breaker that opens then hands
        // the rest back: only what is still its own.
        let held = held_row(self.quick);
        scenarios.push(Scenario {
            send: self.quick,
            held,
            resume_mid_send: true,
            failing_from: Some(failing_from(held, self.quick)),
            ..scenario(
                What::LongBatch,
                crowd(&self.people[0].text, held + 2),
                (held as i64 + 1) * self.quick,
            )
        });
        let mut poison = scenario(What::Poison, one(), POISON_RUN);
        poison.refused = self.people.get(1).cloned();
        scenarios.push(poison);
        scenarios
    }
}

impl Scenario {
    /// How many failed attempts a random batch's slow or hung row meets
    /// before the send dispatcher 1 is held on: that send may be any of
    /// its attempts, the last one too.
    fn failures_before_held(&self) -> u32 {
        match (self.what, self.seed) {
            (What::Slow | What::LateAfter, Some(_)) => self.fails_first,
            _ => 0,
        }
    }

    /// Whether the held send is the row's last attempt and outlives the
    /// threshold: the sweep must then dead-letter it, and its late answer
    /// must leave that dead letter as it is.
    fn hangs_on_last_attempt(&self) -> bool {
        self.what == What::LateAfter && self.failures_before_held() as usize + 1 >= ATTEMPTS
    }

    fn batch(&self) -> String {
        match self.seed {
            None => "the chapter's batch".to_string(),
            Some(seed) => format!("random batch (seed {seed})"),
        }
    }

    fn name(&self) -> String {
        let who = self.people[0].recipient();
        let what = match self.what {
            What::Crash => format!(
                "the dispatcher is killed after claiming {} {}, then a new one runs",
                self.people.len(),
                if self.people.len() == 1 {
                    "row"
                } else {
                    "rows"
                }
            ),
            What::Poison => {
                let kills = match self.fails_first {
                    0 => format!("every send to {who} kills its dispatcher"),
                    1 => format!("{who}'s first send meets a 503, and every later one kills its dispatcher"),
                    n => format!("{who}'s first {n} sends meet a 503, and every later one kills its dispatcher"),
                };
                match &self.refused {
                    Some(r) => format!("{kills}, and {} is refused for good", r.recipient()),
                    None => kills,
                }
            }
            What::Slow => match self.failures_before_held() {
                n @ 1.. => format!(
                    "{who}'s first {} a 503, then dispatcher 1's attempt {} takes {} while dispatcher 2 runs",
                    match n {
                        1 => "send meets".to_string(),
                        n => format!("{n} sends meet"),
                    },
                    n + 1,
                    span(self.span)
                ),
                _ if self.waited > 0 => format!(
                    "{who}'s row, queued at 0:00, waits until dispatcher 1 claims it at {}; its send takes {} while dispatcher 2 runs",
                    clock(self.waited),
                    span(self.span)
                ),
                _ if !self.ahead.is_empty() => format!(
                    "dispatcher 1 claims {} rows at 0:00, {} and {who}; its sends take {} and {}, and the one to {who} runs while dispatcher 2 does",
                    self.ahead.len() + 1,
                    self.ahead
                        .iter()
                        .map(|(p, _)| p.recipient())
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.ahead
                        .iter()
                        .map(|(_, ms)| span(*ms))
                        .collect::<Vec<_>>()
                        .join(", "),
                    span(self.span)
                ),
                _ => format!(
                    "dispatcher 1's send to {who} takes {} while dispatcher 2 runs",
                    span(self.span)
                ),
            },
            What::LateAfter if self.failed_together > 0 => {
                self.under_host(format!(
                    "dispatcher 1 claims {} rows at 0:00 while its provider is down, and its sends fail; its send number {} (a probe, where a breaker has opened) hangs for {}, then fails",
                    self.people.len(),
                    self.people.len() + 1,
                    span(self.span)
                ))
            }
            What::LateAfter => {
                let ends = match self.late {
                    Answer::Unavailable => "fails".to_string(),
                    other => format!("ends {}", other.said()),
                };
                let hang = match self.failures_before_held() {
                    0 => format!(
                        "dispatcher 1's send to {who} hangs for {}, then {ends}",
                        span(self.span)
                    ),
                    n => format!(
                        "{who}'s first {} while its provider is down, then dispatcher 1's attempt {} hangs for {}, then {ends}",
                        match n {
                            1 => "send fails".to_string(),
                            n => format!("{n} sends fail"),
                        },
                        n + 1,
                        span(self.span)
                    ),
                };
                self.under_host(hang)
            }
            What::LongBatch => {
                let beside = match self.held + 1 == self.people.len() {
                    true => "its last send".to_string(),
                    false => format!("its send of row {}", self.held + 1),
                };
                let batch = format!(
                    "dispatcher 1 claims {} rows at 0:00 and sends them one by one, {} or more each; dispatcher 2 runs beside {beside}, from {} to {}",
                    self.people.len(),
                    span(self.send),
                    clock(self.span - self.send),
                    clock(self.span + self.failing_from.map_or(0, |_| MINUTE))
                );
                let batch = match self.same_host {
                    true => format!("{batch}, under dispatcher 1's host name, {SHARED_HOST}"),
                    false => batch,
                };
                let batch = match self.resume_mid_send {
                    true => format!("{batch}; dispatcher 1 goes on with its batch once dispatcher 2 begins to send the rows it took over"),
                    false => batch,
                };
                match self.failing_from {
                    Some(row) => format!(
                        "{batch}; the provider fails dispatcher 1's sends from row {} on, so a breaker as the chapter states it opens as the send dispatcher 2 runs beside fails",
                        row + 1
                    ),
                    None => batch,
                }
            }
            What::LateDuring if self.same_host => format!(
                "dispatcher 1's send to {who} hangs, then fails while dispatcher 2 resends it; dispatcher 2 is dispatcher 1 restarted under its host name, {SHARED_HOST}"
            ),
            What::LateDuring => format!(
                "dispatcher 1's send to {who} hangs, then fails while dispatcher 2 resends it"
            ),
        };
        format!("{}, {what}:", self.batch())
    }

    /// A late scenario's story, with the host name its dispatchers share.
    fn under_host(&self, story: String) -> String {
        match self.same_host {
            true => format!("{story}; dispatcher 2 is dispatcher 1 restarted under its host name, {SHARED_HOST}"),
            false => story,
        }
    }

    fn recipient(&self) -> String {
        self.people[0].recipient()
    }

    /// The rows whose send dispatcher 1 may be held on: after a whole
    /// claim failed, any of them; otherwise the scenario's own row.
    fn held(&self) -> &[Person] {
        match self.failed_together {
            0 => &self.people[..1],
            _ => &self.people[..],
        }
    }

    fn plan(&self, dir: &Path, process: u32, steps: Vec<Step>) -> Plan {
        Plan {
            dir: dir.to_path_buf(),
            process,
            steps,
            seed: self.seed.unwrap_or(0),
            ..Plan::default()
        }
    }

    /// Everyone the scenario tells something, in the order they are told.
    fn everyone(&self) -> impl Iterator<Item = &Person> {
        self.refused
            .iter()
            .chain(self.ahead.iter().map(|(p, _)| p))
            .chain(&self.people)
    }

    fn setup(&self, dir: &Path, mut steps: Vec<Step>) -> Plan {
        let mut publish: Vec<Step> = self.everyone().map(Person::publish).collect();
        publish.append(&mut steps);
        let mut plan = self.plan(dir, 1, publish);
        plan.fixture = self.everyone().map(Person::fixture).collect();
        plan
    }
}

/// The dispatcher's and the sweep's schedule until `until`.
fn schedule(until: i64) -> Step {
    Schedule::of(until, &[("dispatch", WAKE_UP), ("sweep", SWEEP)])
}

/// The dispatcher alone until `until`: the second process of the slow
/// scenario wakes as usual, and starts its sweep's minute then.
fn dispatch_only(until: i64) -> Step {
    Schedule::of(until, &[("dispatch", WAKE_UP)])
}

/// The sweep alone until `until`. While the only row is claimed by a
/// dispatcher whose send runs for minutes, the dispatcher's wake-ups have
/// nothing to claim, and no correct sweep hands a claim back within 5 min:
/// skipping them keeps the racing process's first minutes cheap.
fn sweeps_only(until: i64) -> Step {
    Schedule::of(until, &[("sweep", SWEEP)])
}

/// What one scenario left behind.
struct Played {
    scenario: Scenario,
    /// (process, how it ended), in the order they ran.
    exits: Vec<(u32, Exit)>,
    history: History,
    rows: Vec<Row>,
    /// Each row's own `status` column, where the case keeps one: what the
    /// story of `notify run 6` shows, never what a property judges.
    marks: Vec<(String, String)>,
    unreadable: Option<String>,
    /// For the racing scenarios: whether the interleaving they need happened.
    arranged: bool,
    /// The clock when each replacement dispatcher started, which is when
    /// the one before it died.
    restarts: Vec<i64>,
}

impl Played {
    /// An ending no correct case has: a panic, a hang, an unplanned abort.
    fn trouble(&self) -> Option<String> {
        let planned = matches!(self.scenario.what, What::Crash | What::Poison);
        for (process, exit) in &self.exits {
            let crash_point = match self.scenario.what {
                What::Crash => *process == 1,
                What::Poison => true,
                _ => false,
            };
            match exit {
                Exit::Finished => {}
                Exit::Aborted if planned && crash_point => {}
                other => return Some(format!("dispatcher {process} {}", other.describe())),
            }
        }
        if !self.arranged {
            let failures = self.scenario.failures_before_held();
            let together = self.scenario.failed_together;
            if together > 0 {
                return Some(format!(
                    "dispatcher 1 made no send number {} by {}, with {together} rows failed and due (chapter 5 retries a failed send after 5 s, and chapter 7's breaker lets a probe through every 30 s), so there was no race to judge",
                    together + 1,
                    clock(RETRIED_BY),
                ));
            }
            if failures > 0 {
                return Some(format!(
                    "dispatcher 1 never began attempt {} of the row after its {failures} 503s (chapter 5 gives a row four attempts), so there was no race to judge",
                    failures + 1,
                ));
            }
            return Some(
                "dispatcher 1 did not send the row when it woke at 0:00 with the row due, \
                 so there was no race to judge"
                    .to_string(),
            );
        }
        self.unreadable.clone()
    }

    fn attempts(&self, p: &Person) -> Vec<&Delivery> {
        let recipient = p.recipient();
        self.history
            .attempts(p.channel)
            .filter(|d| d.recipient == recipient)
            .collect()
    }

    /// The row's own status column, for the story; the contract's word
    /// when the case keeps none.
    fn mark(&self, p: &Person) -> String {
        let key = format!("{} {}", p.channel, p.recipient());
        self.marks
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, status)| status.clone())
            .unwrap_or_else(|| self.left(p).status)
    }

    /// How the contract places `p`'s message: a row deleted once its
    /// message was delivered is SENT all the same.
    fn left(&self, p: &Person) -> Row {
        let key = format!("{} {}", p.channel, p.recipient());
        let delivered = self
            .attempts(p)
            .iter()
            .any(|d| d.outcome == Outcome::Delivered);
        self.rows
            .iter()
            .find(|r| r.subject == key)
            .cloned()
            .unwrap_or(Row {
                status: match delivered {
                    true => "SENT".to_string(),
                    false => "missing from the outbox".to_string(),
                },
                subject: key,
                error: None,
                message: None,
                wrong: None,
            })
    }

    /// Whether dispatcher 2 delivered the row dispatcher 1 had claimed.
    fn handed_on(&self) -> bool {
        self.attempts(&self.scenario.people[0])
            .iter()
            .any(|d| d.process == SECOND_RELAY && d.outcome == Outcome::Delivered)
    }

    fn crashes(&self) -> usize {
        self.exits
            .iter()
            .filter(|(_, e)| *e == Exit::Aborted)
            .count()
    }

    /// "6:02 sent by dispatcher 2"
    fn story(&self, p: &Person) -> String {
        let attempts = self.attempts(p);
        if attempts.is_empty() {
            return "none".to_string();
        }
        attempts
            .iter()
            .map(|d| format!("{} {}", clock(d.at_ms), said(d.outcome)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn said(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Delivered => "sent",
        Outcome::Deduplicated => "repeat",
        Outcome::Failed => "503",
        Outcome::Rejected => "422",
    }
}

/// The simulated time now, as the world's clock reads it.
fn world_clock(dir: &Path) -> Result<i64> {
    lab::world::read_clock(dir)
}

fn play(case: &Case, scenario: &Scenario) -> Result<Played> {
    match scenario.what {
        What::Crash | What::Poison => play_restarts(case, scenario),
        What::Slow | What::LateAfter | What::LateDuring | What::LongBatch => {
            play_race(case, scenario)
        }
    }
}

fn finish(
    scenario: &Scenario,
    dir: &Path,
    exits: Vec<(u32, Exit)>,
    arranged: impl Fn(&History) -> bool,
) -> Result<Played> {
    let history = History::read(dir)?;
    let (rows, unreadable) = match read_outbox(dir, &history, Queued::key) {
        Ok(rows) => (rows, None),
        Err(err) => (Vec::new(), Some(format!("{err:#}"))),
    };
    let marks = read_pairs(
        dir,
        "SELECT channel || ' ' || recipient, status FROM outbox ORDER BY id",
    )
    .unwrap_or_default();
    Ok(Played {
        scenario: scenario.clone(),
        marks,
        arranged: arranged(&history),
        exits,
        history,
        rows,
        unreadable,
        restarts: Vec::new(),
    })
}

/// The killed dispatcher and its replacement, or the poison row and every
/// dispatcher it kills.
fn play_restarts(case: &Case, scenario: &Scenario) -> Result<Played> {
    let dir = scenario_dir()?;
    let dir = dir.path();
    let poison = scenario.what == What::Poison;
    let script = ProviderScript {
        crash_on: if poison {
            vec![scenario.recipient()]
        } else {
            Vec::new()
        },
        rejected: scenario.refused.iter().map(Person::recipient).collect(),
        flaky: match poison && scenario.fails_first > 0 {
            true => vec![(scenario.recipient(), scenario.fails_first)],
            false => Vec::new(),
        },
        ..ProviderScript::default()
    };
    let mut first = if poison {
        scenario.setup(dir, vec![schedule(scenario.span)])
    } else {
        let mut plan = scenario.setup(dir, vec![Step::new("dispatch")]);
        plan.fault = Some(Fault::CrashAfterCommit {
            op: "dispatch".to_string(),
            nth: 1,
        });
        plan
    };
    first.provider = script.clone();
    first.push = script.clone();
    let mut exits = vec![(1, case.start(&first)?)];
    let mut restarts = Vec::new();
    let last = if poison { POISON_PROCESSES } else { 2 };
    for process in 2..=last {
        let ended = &exits.last().expect("one process ran").1;
        let go_on = match ended {
            Exit::Aborted => true,
            // The killed dispatcher's claim did not crash it: the check
            // still replaces it, to see what becomes of its rows.
            Exit::Finished => !poison,
            _ => false,
        };
        if !go_on {
            break;
        }
        let now = world_clock(dir)?;
        restarts.push(now);
        let mut plan = scenario.plan(dir, process, vec![schedule(now + scenario.span)]);
        plan.provider = script.clone();
        plan.push = script.clone();
        exits.push((process, case.start(&plan)?));
    }
    let mut played = finish(scenario, dir, exits, |_| true)?;
    played.restarts = restarts;
    Ok(played)
}

/// Two dispatchers on one database and one clock. The first publishes the
/// notice, claims the row at 0:00 and blocks in its send. The second starts
/// once the world shows that send has begun, so it neither creates the
/// database beside the first nor claims the row before it, and runs its
/// schedule. The first send answers when the second process has moved the
/// clock to the end of its run, or, mid-resend, once the second process has
/// begun its own send of the row, which answers only once the first
/// process has ended. Each hold also ends when the process it waits for has
/// ended, whatever became of it.
fn play_race(case: &Case, scenario: &Scenario) -> Result<Played> {
    let dir = scenario_dir()?;
    let dir = dir.path();
    // The parent watches the world for the first send, so it makes the
    // world before either process starts.
    let world = Recorder::open(dir, 0)?;
    let recipient = scenario.recipient();
    let hold_limit_ms = (case.timeout * 3 / 2).as_millis() as u64;
    // A random batch's slow send may be the row's second, third or last
    // attempt: dispatcher 1 runs its schedule through the 503s before it.
    let earlier = scenario.failures_before_held();
    // A slow send after other rows of its claim, or on a row that waited
    // for its claim, is held on its own, as one after 503s is, and begins
    // when they are done.
    let ahead = !scenario.ahead.is_empty() || scenario.waited > 0;
    let mut first = match earlier {
        0 if scenario.waited > 0 => scenario.setup(
            dir,
            vec![Step::advance(scenario.waited), Step::new("dispatch")],
        ),
        0 => scenario.setup(dir, vec![Step::new("dispatch")]),
        _ => scenario.setup(dir, vec![schedule(RETRIED_BY)]),
    };
    let answer = match scenario.what {
        What::Slow if earlier > 0 => ProviderScript {
            flaky: vec![(recipient.clone(), earlier)],
            hold_nth: Some((earlier + 1, vec![Moment::Ended(SECOND_RELAY)])),
            ..ProviderScript::default()
        },
        What::Slow if ahead => ProviderScript {
            sim_latency_each: scenario
                .ahead
                .iter()
                .map(|(p, ms)| (p.recipient(), *ms))
                .collect(),
            hold_each: vec![(recipient.clone(), vec![Moment::Ended(SECOND_RELAY)])],
            ..ProviderScript::default()
        },
        What::Slow => ProviderScript::default(),
        // A hung send after a whole claim failed: dispatcher 1's provider
        // stays down, so the send answers a 503 whenever it is let go.
        What::LateAfter if scenario.failed_together > 0 => ProviderScript {
            outages: vec![(0, i64::MAX)],
            hold_nth: Some((
                scenario.failed_together as u32 + 1,
                vec![Moment::Ended(SECOND_RELAY)],
            )),
            ..ProviderScript::default()
        },
        // A hung send after failures: the provider is down until the gap
        // after the last of them, which no earlier attempt outlives and no
        // later one comes before, and then answers as the late answer says.
        What::LateAfter if earlier > 0 => ProviderScript {
            outages: vec![(0, RETRY_GAPS[earlier as usize - 1])],
            hold_nth: Some((earlier + 1, vec![Moment::Ended(SECOND_RELAY)])),
            ..scenario.late.script(recipient.clone())
        },
        _ => scenario.late.script(recipient.clone()),
    };
    let slow = ProviderScript {
        announce: earlier == 0 && !ahead,
        // The slow send after 503s is held on its own (`hold_nth`), and so
        // is one after other rows (`hold_each`).
        hold_until_any: match earlier {
            0 if !ahead => vec![
                if scenario.what == What::LateDuring {
                    Moment::Sending(SECOND_RELAY)
                } else {
                    Moment::Clock(scenario.span)
                },
                Moment::Ended(SECOND_RELAY),
            ],
            _ => Vec::new(),
        },
        hold_limit_ms,
        ..answer
    };
    let slow = if scenario.what == What::LongBatch {
        // Every send takes 100 s of the service's time. The batch's last
        // send, whichever row it carries, is the one dispatcher 2 starts
        // on: it is announced, and answers once dispatcher 2 has run its
        // schedule, sweeps included.
        ProviderScript {
            sim_latency_ms: scenario.send,
            hold_nth: Some((
                scenario.held as u32 + 1,
                match scenario.resume_mid_send {
                    true => vec![Moment::Sending(SECOND_RELAY), Moment::Ended(SECOND_RELAY)],
                    false => vec![Moment::Ended(SECOND_RELAY)],
                },
            )),
            hold_limit_ms,
            // Each send meets the outage when it answers, at its end.
            outages: match scenario.failing_from {
                Some(row) => vec![(row as i64 * scenario.send + scenario.send / 2, i64::MAX)],
                None => Vec::new(),
            },
            ..ProviderScript::default()
        }
    } else {
        slow
    };
    first.provider = slow.clone();
    first.push = slow;
    // A short threshold must meet a running dispatcher here: the sweep's
    // minute starts so that it runs 10 s before the send ends, and any
    // threshold under the send's age then is caught. The send begins at
    // `began`.
    let slow_steps = |began: i64| {
        let phase = (scenario.span - SWEEP_LEAD).rem_euclid(SWEEP);
        let mut steps = Vec::new();
        if phase > 0 {
            steps.push(dispatch_only(began + phase));
        }
        steps.push(schedule(began + scenario.span));
        steps
    };
    let mut second = scenario.plan(
        dir,
        SECOND_RELAY,
        match scenario.what {
            What::Slow => slow_steps(0),
            // From the last row's send (at 5:00) to the end of its turn:
            // the sweep runs at once and a minute later.
            What::LongBatch if scenario.failing_from.is_none() => vec![schedule(scenario.span)],
            // A busy batch's failed rows are due at once: dispatcher 2
            // sweeps first, so that its first send, which lets dispatcher 1
            // go on, comes once it has taken over the batch's tail. It then
            // retries the failed rows.
            What::LongBatch => vec![Step::new("sweep"), schedule(scenario.span + MINUTE)],
            _ => vec![sweeps_only(ORPHANED_AFTER), schedule(scenario.span)],
        },
    );
    if scenario.same_host {
        first.host = Some(SHARED_HOST.to_string());
        second.host = Some(SHARED_HOST.to_string());
    }
    if scenario.what == What::LateDuring || scenario.resume_mid_send {
        let resend = match scenario.failing_from {
            None => ProviderScript {
                announce: true,
                hold_until_any: vec![Moment::Ended(FIRST)],
                hold_limit_ms,
                ..ProviderScript::default()
            },
            // A busy batch: dispatcher 2's retries of the failed rows go
            // out at once; its send of a row of the tail it took over is
            // the one dispatcher 1 goes on at, and is still running when
            // dispatcher 1's breaker opens.
            Some(_) => ProviderScript {
                hold_each: scenario.people[scenario.held + 1..]
                    .iter()
                    .map(|p| (p.recipient(), vec![Moment::Ended(FIRST)]))
                    .collect(),
                hold_limit_ms,
                ..ProviderScript::default()
            },
        };
        second.provider = resend.clone();
        second.push = resend;
    }
    // If the first process ends before it has made the database, the
    // second one makes it.
    second.fixture = first.fixture.clone();
    // The first process waits for the second one, which starts later: it
    // may run for longer before it counts as hung.
    let held = Case {
        timeout: case.timeout * 2,
        ..case.clone()
    };
    let mut began = 0;
    let exits = std::thread::scope(|scope| -> Result<Vec<(u32, Exit)>> {
        let running = scope.spawn(|| ended(dir, FIRST, held.start(&first)));
        while !running.is_finished() && !world.reached(Moment::Sending(FIRST))? {
            std::thread::sleep(Duration::from_millis(1));
        }
        if earlier > 0 || ahead {
            began = world_clock(dir)?;
            second.steps = match scenario.what {
                What::Slow => slow_steps(began),
                _ => vec![
                    sweeps_only(began + ORPHANED_AFTER),
                    schedule(began + scenario.span),
                ],
            };
        }
        let second = ended(dir, SECOND_RELAY, case.start(&second));
        let first = running
            .join()
            .expect("the thread running dispatcher 1 does not panic");
        Ok(vec![(FIRST, first?), (SECOND_RELAY, second?)])
    })?;
    let mut exits = exits;
    if matches!(scenario.what, What::LateAfter | What::LateDuring) {
        // The service runs again the next day, once the provider has
        // forgotten the row's key: a row the late answer left owed, whatever
        // its columns say, goes out again then.
        let next_day = scenario.plan(
            dir,
            NEXT_DAY_RELAY,
            vec![
                Step::advance(NEXT_DAY),
                schedule(scenario.span + NEXT_DAY + 10 * MINUTE),
            ],
        );
        exits.push((NEXT_DAY_RELAY, case.start(&next_day)?));
    }
    if scenario.failing_from.is_some() {
        // A busy batch's last failures may come after dispatcher 2 has
        // ended: a third dispatcher retries whatever is still owed.
        let now = world_clock(dir)?;
        let drain = scenario.plan(dir, NEXT_DAY_RELAY, vec![schedule(now + 2 * MINUTE)]);
        exits.push((NEXT_DAY_RELAY, case.start(&drain)?));
    }
    let what = scenario.what;
    let span = began + scenario.span;
    let held: Vec<String> = scenario.held().iter().map(Person::recipient).collect();
    finish(scenario, dir, exits, move |history| {
        held.iter().any(|r| arranged(what, span, r, history))
    })
}

/// Records in the world that `process` has ended, however it ended, so no
/// send held for it waits any longer.
fn ended(dir: &Path, process: u32, exit: Result<Exit>) -> Result<Exit> {
    Recorder::open(dir, process)?.record_ended(process)?;
    exit
}

/// Whether the race went as the scenario needs: dispatcher 1 claimed the
/// row first, and its answer came after dispatcher 2's moment (the end of
/// its run, or the middle of its own send of the row). The holds make sure
/// of it whenever dispatcher 1 sends the row at 0:00.
fn arranged(what: What, span: i64, recipient: &str, history: &History) -> bool {
    // Every row of the batch waits for its own turn on the clock, in
    // whatever order dispatcher 1 sends them.
    if what == What::LongBatch {
        return history.deliveries.iter().any(|d| d.process == FIRST);
    }
    let attempts: Vec<&Delivery> = history
        .deliveries
        .iter()
        .filter(|d| d.recipient == recipient)
        .collect();
    let Some(first) = attempts.iter().position(|d| d.process == FIRST) else {
        return false;
    };
    match what {
        What::LateDuring => {
            let resent = attempts
                .iter()
                .position(|d| d.process == SECOND_RELAY && d.outcome == Outcome::Delivered);
            match resent {
                // Never handed on: nothing raced.
                None => !attempts.iter().any(|d| d.process == SECOND_RELAY),
                Some(r) => first < r && attempts[first].at_ms >= attempts[r].at_ms,
            }
        }
        // The held send is dispatcher 1's last: a slow row's 503s come
        // before it.
        _ => attempts[first..]
            .iter()
            .rfind(|d| d.process == FIRST)
            .is_some_and(|d| d.at_ms >= span),
    }
}

/// `notify run 6`: the chapter's dispatcher killed holding its claims.
fn run(case: &Case) -> Result<String> {
    let case = &case.patient(PATIENCE);
    let batch = Batch::chapter();
    let scenario = batch
        .scenarios(false)
        .into_iter()
        .find(|s| s.what == What::Crash)
        .expect("the chapter has a crash");
    let played = play(case, &scenario)?;
    let people = &scenario.people;
    let mut out = format!(
        "{} people are told \"{}\"\n\
         the dispatcher claims their {} rows at 0:00, and is killed before it sends any\n\
         a new dispatcher starts at once and runs for {} minutes, with the sweep every minute\n\n",
        people.len(),
        people[0].text,
        people.len(),
        AFTER_CRASH / MINUTE
    );
    let stories: Vec<String> = people.iter().map(|p| played.story(p)).collect();
    let width = stories.iter().map(String::len).max().unwrap_or(0).max(8);
    out.push_str(&format!(
        "  {:<9}{:<18}{:<width$}  row at {}\n",
        "channel",
        "recipient",
        "attempts",
        clock(AFTER_CRASH)
    ));
    for (p, story) in people.iter().zip(&stories) {
        out.push_str(&format!(
            "  {:<9}{:<18}{story:<width$}  {}\n",
            p.channel,
            p.recipient(),
            played.mark(p)
        ));
    }
    let delivered = people
        .iter()
        .filter(|p| {
            played
                .attempts(p)
                .iter()
                .any(|d| d.outcome == Outcome::Delivered)
        })
        .count();
    out.push_str(&format!("\ndelivered: {delivered} of {}\n", people.len()));
    let stuck = people
        .iter()
        .filter(|p| played.mark(p) == "PROCESSING")
        .count();
    if stuck > 0 {
        out.push_str(&format!(
            "still PROCESSING, claimed at 0:00 by a dispatcher that no longer exists: {stuck}\n\
             nothing will ever send them\n"
        ));
    }
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let case = &case.patient(PATIENCE);
    let mut scenarios = Batch::chapter().scenarios(true);
    for &seed in &options.seeds {
        scenarios.extend(Batch::random(seed).scenarios(false));
    }
    let reference = options.reference.as_ref().map(|r| r.patient(PATIENCE));
    // Every scenario at once: the racing ones spend their time asleep, and
    // exploring the generated scenarios keeps the cores busy meanwhile.
    let (played, explored) = std::thread::scope(|scope| {
        let exploring =
            scope.spawn(|| explore(&Generated, "06", case, reference.as_ref(), options.budget));
        let running: Vec<_> = scenarios
            .iter()
            .map(|s| scope.spawn(move || play(case, s)))
            .collect();
        let played = running
            .into_iter()
            .map(|h| h.join().expect("a scenario thread does not panic"))
            .collect::<Result<Vec<Played>>>();
        let explored = exploring.join().expect("exploring does not panic");
        (played, explored)
    });
    let (played, explored) = (played?, explored?);
    let processes: usize = played.iter().map(|p| p.exits.len()).sum();
    let of = |what: What| played.iter().filter(move |p| p.scenario.what == what);
    let orphans: usize = of(What::Crash).map(|p| p.scenario.people.len()).sum();
    let mut verdicts = vec![judge(
        EVENTUALLY,
        format!(
            "{orphans} orphans delivered, {} poison rows FAILED after {ATTEMPTS} attempts",
            of(What::Poison).count()
        ),
        of(What::Crash).chain(of(What::Poison)).find_map(eventually),
    )];
    verdicts.extend(race_verdicts(&played, ""));
    verdicts.extend(explored.verdicts);
    Ok(Checked {
        verdicts,
        processes: processes + explored.processes,
    })
}

/// Chapter 6's two verdicts on its races, each property's name after
/// `prefix`: no live send swept (the slow send, the long batch), and no late
/// answer changing anything (the late ones, the long batch).
fn race_verdicts(played: &[Played], prefix: &str) -> [Verdict; 2] {
    let of = |what: What| played.iter().filter(move |p| p.scenario.what == what);
    let batches = of(What::LongBatch).count();
    let handed_on: usize = of(What::LongBatch)
        .map(|p| {
            p.scenario
                .people
                .iter()
                .filter(|r| {
                    // Taken over by the sweep, not a retry of dispatcher 1's
                    // failure.
                    let attempts = p.attempts(r);
                    attempts.first().is_some_and(|d| d.process != FIRST)
                        && attempts
                            .iter()
                            .any(|d| d.process == SECOND_RELAY && d.outcome == Outcome::Delivered)
                })
                .count()
        })
        .sum();
    let late = || of(What::LateAfter).chain(of(What::LateDuring));
    [
        judge(
            &format!("{prefix}{LIVE}"),
            format!(
                "{} slow sends and {batches} long batches left alone",
                of(What::Slow).count()
            ),
            of(What::Slow).chain(of(What::LongBatch)).find_map(live),
        ),
        judge(
            &format!("{prefix}{LATE}"),
            format!(
                "{} of {} rows handed on and {} dead-lettered at their last attempt, none changed by the late answer; {handed_on} rows of {batches} long batches handed on, none sent again",
                late().filter(|p| p.handed_on()).count(),
                late().count(),
                late()
                    .filter(|p| p.scenario.hangs_on_last_attempt())
                    .count(),
            ),
            late().chain(of(What::LongBatch)).find_map(late_finding),
        ),
    ]
}

/// Chapter 6's races, played on the case of a later chapter whose service
/// keeps chapter 6's operations and people (chapters 7 and 8): a slow
/// send, late answers, and a long batch whose second dispatcher sweeps
/// while the first still sends. A fence, a renewal or a dispatcher's name
/// matters only when two dispatchers overlap, so every later chapter plays
/// them again. Returns chapter 6's two verdicts on them, and the processes
/// played.
pub(crate) fn races(case: &Case, seeds: &[u64]) -> Result<(Vec<Verdict>, usize)> {
    let case = &case.patient(PATIENCE);
    let mut scenarios = Batch::chapter().scenarios(true);
    for &seed in seeds {
        scenarios.extend(Batch::random(seed).scenarios(false));
    }
    scenarios.retain(|s| !matches!(s.what, What::Crash | What::Poison));
    let played = std::thread::scope(|scope| {
        let running: Vec<_> = scenarios
            .iter()
            .map(|s| scope.spawn(move || play(case, s)))
            .collect();
        running
            .into_iter()
            .map(|h| h.join().expect("a scenario thread does not panic"))
            .collect::<Result<Vec<Played>>>()
    })?;
    let processes = played.iter().map(|p| p.exits.len()).sum();
    Ok((race_verdicts(&played, "chapter 6: ").to_vec(), processes))
}

fn trouble_finding(played: &Played) -> Option<Finding> {
    played.trouble().map(|trouble| {
        Finding::unfinished(
            format!("{} {trouble}", played.scenario.name()),
            played.scenario.seed,
        )
    })
}

/// The crash: every orphan delivered once and SENT. The poison row: FAILED
/// after exactly [`ATTEMPTS`] lost dispatchers.
fn eventually(played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(played) {
        return Some(f);
    }
    let s = &played.scenario;
    let (evidence, details) = match s.what {
        What::Crash => {
            let mut details = Vec::new();
            for p in &s.people {
                let sent = played
                    .attempts(p)
                    .iter()
                    .filter(|d| d.outcome == Outcome::Delivered)
                    .count();
                let left = played.left(p);
                if sent != 1 || left.status != "SENT" {
                    let story = match played.story(p).as_str() {
                        "none" => "no attempt reached the provider".to_string(),
                        attempts => format!("attempts {attempts}"),
                    };
                    details.push(format!(
                        "{} ({}): {story}; left {}.",
                        p.recipient(),
                        p.channel,
                        left.status
                    ));
                }
            }
            if details.is_empty() {
                return resent_late(played);
            }
            let ok = s.people.len() - details.len();
            (format!("{ok} of {} delivered", s.people.len()), details)
        }
        _ => {
            let p = &s.people[0];
            let left = played.left(p);
            let lost = played.crashes();
            let failed_first = s.fails_first as usize;
            if left.status == "FAILED" && lost + failed_first == ATTEMPTS {
                return poison_waited(played)
                    .or_else(|| poison_error(played, &left))
                    .or_else(|| s.refused.as_ref().and_then(|r| refused_again(played, r)));
            }
            let still = played
                .exits
                .last()
                .is_some_and(|(_, e)| *e == Exit::Aborted);
            let evidence = if still {
                format!("{lost} dispatchers lost, still {}", left.status)
            } else {
                format!("{lost} dispatchers lost, then {}", left.status)
            };
            let error = left
                .error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            let mut details = vec![format!(
                "{} ({}) kills the dispatcher that sends it; {lost} were lost on it, and the row is {}{error}.",
                p.recipient(),
                p.channel,
                left.status
            )];
            if still {
                details.push(format!(
                    "after {POISON_PROCESSES} dispatchers it was still being handed back: it would go on forever."
                ));
            } else if left.status == "FAILED" {
                let attempts = match failed_first {
                    0 => format!("{lost} attempts"),
                    n => format!("{n} 503s and {lost} lost dispatchers"),
                };
                details.push(format!(
                    "it was dead-lettered after {attempts}; each lost send is an attempt, and a row gets {ATTEMPTS}."
                ));
            } else {
                details.push(
                    "the last dispatcher ran its schedule and left it there: nothing will ever send it."
                        .to_string(),
                );
            }
            (evidence, details)
        }
    };
    Some(Finding {
        evidence,
        scenario: s.name(),
        details,
        seed: s.seed,
        timeline: played.history.events.clone(),
        ..Default::default()
    })
}

/// The crash: the orphans were claimed at 0:00, so each goes out again by
/// [`RESENT_BY`], handed back due now.
fn resent_late(played: &Played) -> Option<Finding> {
    let s = &played.scenario;
    let details: Vec<String> = s
        .people
        .iter()
        .filter_map(|p| {
            let attempts = played.attempts(p);
            let sent = attempts.iter().find(|d| d.outcome == Outcome::Delivered)?;
            (sent.at_ms > RESENT_BY).then(|| {
                format!(
                    "{} ({}): claimed at 0:00 by the killed dispatcher, delivered at {}.",
                    p.recipient(),
                    p.channel,
                    clock(sent.at_ms)
                )
            })
        })
        .collect();
    if details.is_empty() {
        return None;
    }
    let mut details = details;
    details.push(format!(
        "the sweep hands an orphan back due now at its first turn after the claim is {} old, and the next wake-up sends it: by {}, with the sweep every minute and the dispatcher every {} s.",
        span(ORPHANED_AFTER),
        clock(RESENT_BY),
        WAKE_UP / SECOND
    ));
    Some(Finding {
        evidence: format!(
            "{} of {} orphans sent after {}",
            details.len() - 1,
            s.people.len(),
            clock(RESENT_BY)
        ),
        scenario: s.name(),
        details,
        seed: s.seed,
        timeline: played.history.events.clone(),
        ..Default::default()
    })
}

/// The poison row: each dispatcher after the first claims it again by
/// [`RESENT_BY`] after the one before it died.
fn poison_waited(played: &Played) -> Option<Finding> {
    let s = &played.scenario;
    let (died, next) = played
        .restarts
        .windows(2)
        .map(|w| (w[0], w[1]))
        .find(|(died, next)| next - died > RESENT_BY)?;
    Some(Finding {
        evidence: format!(
            "an orphan waited {} to go out again, not {}",
            span(next - died),
            span(RESENT_BY)
        ),
        scenario: s.name(),
        details: vec![
            format!(
                "a dispatcher died sending {} at {}; the next one took the row and died on it at {}.",
                s.recipient(),
                clock(died),
                clock(next)
            ),
            format!(
                "the sweep hands an orphan back due now, whatever its count of attempts: the backoff is for a provider's failures, and this attempt was lost with its dispatcher. It goes out again by {} after the claim.",
                span(RESENT_BY)
            ),
        ],
        seed: s.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}

/// The poison row's dead letter keeps why it died: its last attempt was
/// lost with its dispatcher, not refused or failed by the provider.
fn poison_error(played: &Played, left: &Row) -> Option<Finding> {
    let kind = answer_kind(left.error.as_deref());
    if !blames_a_send(kind) {
        return None;
    }
    let s = &played.scenario;
    let kept = match &left.error {
        Some(error) => format!("\"{error}\""),
        None => "no error".to_string(),
    };
    Some(Finding {
        evidence: format!("dead letter keeps {kind}, not its lost dispatcher"),
        scenario: s.name(),
        details: vec![
            format!(
                "{} ({}): its last attempt died with its dispatcher, and the sweep dead-lettered it with {kept}.",
                s.recipient(),
                s.people[0].channel
            ),
            "an operator reads the dead letter's error to know what to fix: here, the crash, not the provider.".to_string(),
        ],
        seed: s.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}

/// The row the provider refused for good is a dead letter from its first
/// attempt on: no sweep brings it back, and it is never sent again.
fn refused_again(played: &Played, r: &Person) -> Option<Finding> {
    let attempts = played.attempts(r);
    if attempts.len() <= 1 {
        return None;
    }
    let s = &played.scenario;
    let mut details = vec![format!(
        "{} ({}) is refused for good by the provider; dispatcher 1 made its row FAILED at 0:00, before the poison row killed it.",
        r.recipient(),
        r.channel
    )];
    for d in &attempts[1..] {
        details.push(format!(
            "the dead letter was sent again at {} by dispatcher {} ({}).",
            clock(d.at_ms),
            d.process,
            said(d.outcome)
        ));
    }
    details.push(
        "the sweep hands back only rows still PROCESSING: a FAILED row is finished.".to_string(),
    );
    Some(Finding {
        evidence: match attempts.len() - 1 {
            1 => "a dead letter sent again".to_string(),
            n => format!("a dead letter sent {n} more times"),
        },
        scenario: s.name(),
        details,
        seed: s.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}

/// A slow send must not be handed on: dispatcher 2 never attempts the row.
fn live(played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(played) {
        return Some(f);
    }
    if played.scenario.what == What::LongBatch {
        return live_batch(played);
    }
    let p = &played.scenario.people[0];
    let attempts = played.attempts(p);
    let second: Vec<&&Delivery> = attempts
        .iter()
        .filter(|d| d.process == SECOND_RELAY)
        .collect();
    // The held send is dispatcher 1's last attempt, after any 503s.
    let first = attempts.iter().rfind(|d| d.process == FIRST)?;
    let Some(resent) = second.first() else {
        // Dead-lettered while its send ran: the sweep took a claim that was
        // not old, on the row's last attempt, or a later chapter's deadline
        // took a row that was being sent.
        let left = played.left(p);
        return (first.outcome == Outcome::Delivered && left.status == "FAILED").then(|| Finding {
            evidence: "1 live send dead-lettered".to_string(),
            scenario: played.scenario.name(),
            details: vec![
                format!(
                    "dispatcher 1 began its last attempt at the row {} before it came back, at {} (delivered).",
                    span(played.scenario.span),
                    clock(first.at_ms)
                ),
                format!(
                    "dispatcher 2 dead-lettered the row while that send ran ({}), so an operator reads a dead letter for a message that was delivered.",
                    left.error.as_deref().unwrap_or("no error kept")
                ),
            ],
            seed: played.scenario.seed,
            ..Default::default()
        });
    };
    Some(Finding {
        evidence: "1 live send swept".to_string(),
        scenario: played.scenario.name(),
        details: vec![
            format!(
                "dispatcher 1 claimed the row and started sending it {} before that send came back.",
                span(played.scenario.span)
            ),
            format!(
                "dispatcher 2 handed it on and sent it again at {} ({}), while that send was still running.",
                clock(resent.at_ms),
                said(resent.outcome)
            ),
            format!(
                "dispatcher 1's send came back at {} ({}).",
                clock(first.at_ms),
                said(first.outcome)
            ),
        ],
        seed: played.scenario.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}

/// The long batch: no row was sent by dispatcher 2 while dispatcher 1 was
/// sending it. A row dispatcher 2 alone sent was handed on before its turn
/// came, which is no harm.
fn live_batch(played: &Played) -> Option<Finding> {
    let people = &played.scenario.people;
    // An attempt is recorded when its answer comes: dispatcher 2's send of
    // a row came while dispatcher 1's was still running if it is recorded
    // before dispatcher 1's.
    // Dispatcher 2 has ended before dispatcher 1 moves past the held row:
    // the rows after it were never being sent while dispatcher 2 ran.
    // The rows in the order dispatcher 1 sent them, whatever order that is.
    let mut order: Vec<(&Person, i64)> = people
        .iter()
        .filter_map(|p| {
            let first = played
                .attempts(p)
                .into_iter()
                .find(|d| d.process == FIRST)?;
            Some((p, first.at_ms))
        })
        .collect();
    order.sort_by_key(|(_, at)| *at);
    let held = played.scenario.held;
    let (k, p) = order
        .iter()
        .map(|(p, _)| *p)
        .enumerate()
        .take(held + 1)
        .find(|(_, p)| {
            // In the order the world recorded them: a retry of dispatcher
            // 1's failure may come at the same simulated moment.
            let attempts = played.attempts(p);
            let first = attempts.iter().position(|d| d.process == FIRST);
            let second = attempts.iter().position(|d| d.process == SECOND_RELAY);
            matches!((first, second), (Some(f), Some(s)) if s < f)
        })?;
    let attempts = played.attempts(p);
    let resent = attempts.iter().find(|d| d.process == SECOND_RELAY)?;
    let first = attempts.iter().find(|d| d.process == FIRST)?;
    Some(Finding {
        evidence: "1 live send swept".to_string(),
        scenario: played.scenario.name(),
        details: vec![
            format!(
                "dispatcher 1 claimed {} rows at 0:00, and began its send to {} at {}, its row {} of the batch.",
                people.len(),
                p.recipient(),
                clock(k as i64 * played.scenario.send),
                k + 1
            ),
            format!(
                "dispatcher 2's sweep handed that row on, and dispatcher 2 sent it again at {} ({}), while dispatcher 1's send was still running.",
                clock(resent.at_ms),
                said(resent.outcome)
            ),
            format!(
                "dispatcher 1's send came back at {} ({}). No send took 5 minutes; the claim was older than the threshold because the batch was.",
                clock(first.at_ms),
                said(first.outcome)
            ),
        ],
        seed: played.scenario.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}

/// Once dispatcher 2 has delivered the row, dispatcher 1's late answer must
/// change nothing: the row ends SENT and is never sent again.
fn late_finding(played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(played) {
        return Some(f);
    }
    if let Some(f) = stray(played) {
        return Some(f);
    }
    if played.scenario.what == What::LongBatch {
        return late_batch(played);
    }
    if played.scenario.hangs_on_last_attempt() {
        return late_dead_letter(played);
    }
    played
        .scenario
        .held()
        .iter()
        .find_map(|p| late_row(played, p))
}

/// One row of a late scenario: once dispatcher 2 delivered it, dispatcher
/// 1's late answer changed nothing and nobody sent it again.
fn late_row(played: &Played, p: &Person) -> Option<Finding> {
    let attempts = played.attempts(p);
    let delivered = attempts
        .iter()
        .position(|d| d.outcome == Outcome::Delivered && d.process == SECOND_RELAY)?;
    let late = attempts.iter().rfind(|d| d.process == FIRST)?;
    let again: Vec<&&Delivery> = attempts[delivered + 1..]
        .iter()
        .filter(|d| d.process != FIRST)
        .collect();
    let left = played.left(p);
    if left.status == "SENT" && again.is_empty() {
        return None;
    }
    let mut details = vec![
        format!(
            "dispatcher 1 claimed the row to {}; its send hung.",
            p.recipient()
        ),
        format!(
            "dispatcher 2's sweep handed it on, and dispatcher 2 delivered it at {}.",
            clock(attempts[delivered].at_ms)
        ),
        format!(
            "dispatcher 1's send came back at {} {}, and its answer was recorded.",
            clock(late.at_ms),
            played.scenario.late.said()
        ),
    ];
    for d in &again {
        details.push(format!(
            "the row was sent again at {} ({}).",
            when(d.at_ms),
            said(d.outcome)
        ));
    }
    details.push(format!("the row is left {}.", left.status));
    let evidence = match again.len() {
        0 => format!("delivered, then left {}", left.status),
        1 => "delivered, then attempted again".to_string(),
        n => format!("delivered, then attempted {n} more times"),
    };
    Some(finding(played, evidence, details))
}

/// A hung send that was its row's last attempt: the sweep takes the claim
/// once it is past the threshold and, the attempts spent, dead-letters the
/// row, saying its dispatcher was lost. The answer that comes back later
/// changes nothing: the row stays that dead letter, and nobody sends it
/// again, that day or the next.
fn late_dead_letter(played: &Played) -> Option<Finding> {
    let s = &played.scenario;
    let p = &s.people[0];
    let attempts = played.attempts(p);
    let late = attempts.iter().rfind(|d| d.process == FIRST)?;
    let again: Vec<&&Delivery> = attempts.iter().filter(|d| d.process != FIRST).collect();
    let left = played.left(p);
    let kind = answer_kind(left.error.as_deref());
    if left.status == "FAILED" && !blames_a_send(kind) && again.is_empty() {
        return None;
    }
    let earlier = s.failures_before_held();
    let mut details = vec![
        format!(
            "{} ({}): its first {earlier} sends failed, and dispatcher 1's attempt {}, its last, hung past the sweep's threshold.",
            p.recipient(),
            p.channel,
            earlier + 1
        ),
        "the sweep had to dead-letter the row then, saying its dispatcher was lost: its four attempts were spent.".to_string(),
        format!(
            "dispatcher 1's send came back at {} {}.",
            clock(late.at_ms),
            s.late.said()
        ),
    ];
    for d in &again {
        details.push(format!(
            "the row was sent again at {} by dispatcher {} ({}).",
            when(d.at_ms),
            d.process,
            said(d.outcome)
        ));
    }
    let kept = match &left.error {
        Some(error) => format!("with \"{error}\""),
        None => "with no error".to_string(),
    };
    details.push(format!("the row is left {} {kept}.", left.status));
    let evidence = match (again.len(), left.status.as_str()) {
        (1.., _) => "a dead letter sent again".to_string(),
        (_, "FAILED") => format!("dead letter keeps {kind}, not its lost dispatcher"),
        (_, status) => format!("left {status} after its last attempt"),
    };
    Some(finding(played, evidence, details))
}

/// Whether a dead letter's error, of this [`answer_kind`], names what a
/// provider answered (or nothing at all) where its last attempt died with
/// its dispatcher: the sweep's dead letter must say the dispatcher was lost.
fn blames_a_send(kind: &str) -> bool {
    matches!(
        kind,
        "503" | "429" | "refused" | "no answer" | "no error kept"
    )
}

/// A finding about a race: its evidence and details, told on its
/// scenario with its whole story.
fn finding(played: &Played, evidence: String, details: Vec<String>) -> Finding {
    Finding {
        evidence,
        scenario: played.scenario.name(),
        details,
        seed: played.scenario.seed,
        story: played.history.events.clone(),
        ..Default::default()
    }
}

/// A moment of a race, on the clock of its day: "8:00 the next day" for
/// the dispatcher that runs [`NEXT_DAY`] later.
fn when(ms: i64) -> String {
    match ms >= NEXT_DAY {
        true => format!("{} the next day", clock(ms - NEXT_DAY)),
        false => clock(ms),
    }
}

/// A late answer changes nothing, so nothing but the scenario's own
/// messages reaches a provider: not a message to someone else, nor one on
/// another channel (a later chapter's fallback email, queued on an answer
/// that came after the row was handed on, tells its person twice).
fn stray(played: &Played) -> Option<Finding> {
    let s = &played.scenario;
    // A push the sweep dead-lettered owes its person chapter 8's fallback
    // email: that one is theirs too.
    let fallback = |p: &Person, d: &Delivery| {
        s.hangs_on_last_attempt()
            && p.channel == "push"
            && d.channel == "email"
            && p.email() == d.recipient
    };
    let own = |d: &Delivery| {
        s.people
            .iter()
            .any(|p| (p.channel == d.channel && p.recipient() == d.recipient) || fallback(p, d))
    };
    let strays: Vec<&Delivery> = played
        .history
        .deliveries
        .iter()
        .filter(|d| !own(d))
        .collect();
    let first = strays.first()?;
    let mut details = vec![format!(
        "nothing was owed but {}: the late answer must change nothing.",
        s.people
            .iter()
            .map(|p| format!("{} ({})", p.recipient(), p.channel))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    for d in &strays {
        details.push(format!(
            "dispatcher {} also sent {} \"{}\" by {} at {} ({}).",
            d.process,
            d.recipient,
            d.body,
            d.channel,
            when(d.at_ms),
            said(d.outcome)
        ));
    }
    Some(finding(
        played,
        format!("{} was also sent {}", first.recipient, first.channel),
        details,
    ))
}

/// The long batch: a row dispatcher 2 delivered after the sweep handed it
/// on is dispatcher 1's no more. Dispatcher 1 does not send it again when
/// its turn in the batch comes, and every row ends delivered.
fn late_batch(played: &Played) -> Option<Finding> {
    let s = &played.scenario;
    let mut details = Vec::new();
    let mut again = 0;
    // When dispatcher 1's held send answered: the batch's rows after it
    // were handed on by then, whoever sends them.
    let mut firsts: Vec<i64> = played
        .history
        .deliveries
        .iter()
        .filter(|d| d.process == FIRST)
        .map(|d| d.at_ms)
        .collect();
    firsts.sort();
    let resumed = firsts.get(s.held).copied();
    for (k, p) in s.people.iter().enumerate() {
        let attempts = played.attempts(p);
        let taken = attempts.iter().find(|d| d.process == SECOND_RELAY);
        let stolen = attempts
            .iter()
            .find(|d| d.process == FIRST && resumed.is_some_and(|r| d.at_ms > r) && taken.is_some())
            .filter(|d| {
                !attempts.iter().any(|x| {
                    x.process == SECOND_RELAY
                        && x.outcome == Outcome::Delivered
                        && x.at_ms < d.at_ms
                })
            });
        if let (Some(taken), Some(d)) = (taken, stolen) {
            again += 1;
            details.push(format!(
                "row {} ({}): dispatcher 2's sweep handed it on and dispatcher 2 sent it (its answer at {}); dispatcher 1 went on with its batch and sent it too, at {} ({}).",
                k + 1,
                p.recipient(),
                clock(taken.at_ms),
                clock(d.at_ms),
                said(d.outcome)
            ));
        }
        // No process here dies or loses an answer: once a row is
        // delivered, whoever sends it again lost the record of it.
        let delivered = attempts
            .iter()
            .position(|d| d.outcome == Outcome::Delivered);
        if let Some(h) = delivered {
            let by = attempts[h].process;
            // Dispatcher 1's send of a row taken from it is told above.
            let told = |d: &&Delivery| stolen.is_some_and(|s| std::ptr::eq(*s, *d));
            // A send recorded later began later when its process made the
            // delivery (one send at a time), started after it (dispatcher
            // 3), or is dispatcher 1 going on past its held send. Dispatcher
            // 2's held send may have begun before dispatcher 1's delivery.
            let began_after = |d: &&Delivery| {
                d.process == by
                    || d.process == NEXT_DAY_RELAY
                    || (by, d.process) == (SECOND_RELAY, FIRST)
            };
            for d in attempts[h + 1..]
                .iter()
                .filter(|d| !told(d) && began_after(d))
            {
                again += 1;
                details.push(match (by, d.process) {
                    (SECOND_RELAY, FIRST) => format!(
                        "row {} ({}): dispatcher 2 delivered it at {} after its sweep handed it on; dispatcher 1 reached it in its batch and sent it again at {} ({}).",
                        k + 1,
                        p.recipient(),
                        clock(attempts[h].at_ms),
                        clock(d.at_ms),
                        said(d.outcome)
                    ),
                    _ => format!(
                        "row {} ({}): dispatcher {by} delivered it at {}; dispatcher {} sent it again at {} ({}), though no process died and no answer was lost: the row's delivery went unrecorded.",
                        k + 1,
                        p.recipient(),
                        clock(attempts[h].at_ms),
                        d.process,
                        clock(d.at_ms),
                        said(d.outcome)
                    ),
                });
            }
        }
        let left = played.left(p);
        if left.status != "SENT" {
            details.push(format!(
                "row {} ({}): attempts {}; left {}.",
                k + 1,
                p.recipient(),
                played.story(p),
                left.status
            ));
        }
    }
    if details.is_empty() {
        return None;
    }
    details.push(
        "a row the sweep handed on belongs to whoever claims it next: the dispatcher that claimed it first finds out when it renews or records, and leaves it alone."
            .to_string(),
    );
    let evidence = match again {
        0 => "a row of the batch not delivered".to_string(),
        1 => "delivered, then attempted again".to_string(),
        n => format!("{n} delivered rows attempted again"),
    };
    Some(finding(played, evidence, details))
}

/// Chapter 6's world for the explorer: chapter 5's world (one to ten people
/// on either channel, mostly a few, each row's provider script drawn from
/// everything chapter 5 speaks about, notices arriving over two minutes,
/// sometimes a deploy), with the sweep running every minute beside the
/// dispatcher, rows in backoff and dead letters while it runs, sometimes a
/// provider whose sends take seconds of the service's time, sometimes an
/// outage or a hang of a channel in the first five minutes, and sometimes
/// rows a dispatcher lost before the scenario began: PROCESSING in the
/// fixture, claimed up to 4 min 30 s before the start, which the sweep must
/// hand back in a run without faults (so its commits are fault points
/// too). The fixture writes them in the outbox's columns as the case ships
/// them, `claimed_at` among them, which the chapter has the sweep read.
///
/// From this chapter on a crash inside `dispatch` is survivable: the sweep
/// hands its orphans on. So faults go after every commit of `publish`,
/// `dispatch` and `sweep`, into every one of their commits, and after every
/// send the provider accepted in `dispatch` (the key keeps the re-send from
/// telling anyone twice).
///
/// A lost attempt counts (the chapter's rule), so under a fault a row may
/// have one provider attempt fewer than without it. The generator keeps to
/// rows that can spare one, or no case could end as it did without the
/// fault: a provider that fails a row three times and then takes it would
/// see it dead-lettered after a lost attempt, by the rules. So a row's
/// script fails it at most twice, and at most once on a channel with an
/// outage or a hang (which lasts under 30 s, so it fails at most two of a
/// row's attempts, both before its third, and ends before 5:00, so it
/// never meets a row the sweep handed back).
/// A lost row of the fixture has spent an attempt already; its `attempts`
/// says how many it made before (0), as the reference counts them, and a
/// correct case that counts an attempt when it claims reads one fewer
/// spent. So lost rows keep to scripts whose ending does not depend on it:
/// fine, failing once (never on a channel in trouble), or refused for good.
///
/// Chapter 5's backoff still holds as the provider sees it: the sweep hands
/// an orphan back due at once, but over 5 min after its claim, which came no
/// sooner than its backoff allowed; and since the lost attempt counts, every
/// later wait is the one for the row's count of attempts, never shorter than
/// the one for the failures the provider saw.
struct Generated;

/// How long a generated scenario runs after its last notice arrives, and
/// at least when a row a dispatcher lost before the start is in it. A new
/// row settles within 11:40 of its arrival: it fails its first three
/// attempts (at +0, +5 s and +35 s; at most two on a channel in trouble)
/// and goes out at +5:35, or it loses an attempt under a fault, is handed
/// back 5 to 6 min later, and may still wait 30 s and 5 min. A lost row is
/// handed back by 6:00, may lose another attempt (handed back again by
/// 12:00), fail, and wait 5 min: near 17:05. A slow provider's batch can
/// hold each attempt up by half a minute: 14 min, and 19 min. Exploring 150
/// seeds under every fault with just those passes the reference; each has 4
/// min of room besides.
const GENERATED_TAIL: i64 = 18 * MINUTE;
const GENERATED_LOST_END: i64 = 23 * MINUTE;

/// Someone a generated scenario tells something.
#[derive(Clone, Debug, Serialize)]
struct Entry {
    name: String,
    channel: &'static str,
    text: String,
    /// When the notice is published; 0 for a row that is already there.
    at: i64,
    script: Script,
    /// Whether a lost dispatcher holds it: the first such row's first send
    /// loses the dispatcher sending it (the host dies mid-send), and that
    /// row and the lost rows claimed behind it wait for the sweep, as the
    /// case itself left them.
    lost: bool,
}

impl Addressed for Entry {
    fn name(&self) -> &str {
        &self.name
    }

    fn channel(&self) -> &str {
        self.channel
    }
}

/// A stretch of simulated time in which one channel's provider fails every
/// send: an outage (503s), or a hang (no answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
struct Trouble {
    channel: &'static str,
    hang: bool,
    from: i64,
    until: i64,
}

/// One generated scenario.
#[derive(Clone, Debug, Serialize)]
struct Workload {
    seed: u64,
    entries: Vec<Entry>,
    troubles: Vec<Trouble>,
    /// Channels whose every send takes this many ms of the service's time.
    slow: Vec<(&'static str, i64)>,
    /// A deploy: the first process stops here and a new one carries on.
    restart_at: Option<i64>,
    end: i64,
}

impl Workload {
    fn generated(seed: u64) -> Workload {
        // Seeds a generator with a scrambled seed: SplitMix's streams for
        // nearby seeds would otherwise run along the same numbers.
        let mut rng = Rng::new(Rng::new(seed ^ 0x0606_0606).next_u64());
        // What widens the world past its first shape is drawn from a stream
        // of its own, so that the rest is drawn as before.
        let mut more = Rng::new(seed ^ 0x0606_5eed_0dea);
        // And what takes a range to its rules' boundary, from a third.
        let mut budget = Rng::new(seed ^ 0x0606_b0d6_e7ed);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let channels = ["email", "push"];
        let troubles: Vec<Trouble> = channels
            .into_iter()
            .filter_map(|channel| {
                if rng.between(0, 2) != 0 {
                    return None;
                }
                let from = rng.between(0, 270) as i64 * SECOND;
                Some(Trouble {
                    channel,
                    hang: rng.between(0, 1) == 0,
                    from,
                    until: from + rng.between(10, 28) as i64 * SECOND,
                })
            })
            .collect();
        let mut slow = Vec::new();
        for channel in channels {
            if rng.between(0, 2) == 0 {
                slow.push((channel, rng.between(1, 3) as i64 * SECOND));
            }
        }
        // Mostly a few people, whom a failure shrinks to quickly; a batch
        // of up to ten one time in three.
        let count = match rng.between(0, 2) {
            0 => rng.between(4, 10),
            _ => rng.between(1, 4),
        } as usize;
        let entries: Vec<Entry> = names[..count]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let channel = if rng.between(0, 2) == 0 {
                    "push"
                } else {
                    "email"
                };
                let troubled = troubles.iter().any(|t| t.channel == channel);
                // (The second draw once placed a lost claim before the
                // start; it keeps the rest of the world as it was drawn.)
                let lost = (rng.between(0, 3) == 0).then(|| rng.between(0, 4));
                let script = match (lost, rng.between(0, 9)) {
                    (None, 0..=3) | (Some(_), 0..=4) => Script::Fine,
                    (None, 4 | 5) if troubled => Script::Flaky(1),
                    (None, 4 | 5) => Script::Flaky(rng.between(1, 2) as u32),
                    (Some(_), 5..=7) if troubled => Script::Fine,
                    (Some(_), 5..=7) => Script::Flaky(1),
                    (Some(_), _) | (None, 7) => Script::Refused,
                    (None, 6) => Script::Dead,
                    (None, _) => Script::Unanswered,
                };
                // A row a lost dispatcher held may also be one whose every
                // send fails: its lost attempt and its failed ones make four
                // in all.
                let script = match (lost, more.between(0, 2)) {
                    (Some(_), 0) => Script::Dead,
                    _ => script,
                };
                // Or one that fails twice: its lost attempt and its two
                // failures leave it the last of its four, so a lost attempt
                // counted twice makes it a dead letter.
                let script = match (lost, script, budget.between(0, 1)) {
                    (Some(_), Script::Flaky(1), 0) => Script::Flaky(2),
                    _ => script,
                };
                let at = if lost.is_none() && rng.between(0, 1) == 0 {
                    rng.between(0, 120) as i64 * SECOND
                } else {
                    0
                };
                Entry {
                    name: name.to_string(),
                    channel,
                    text: format!("{} (#{i})", rng.pick(&EVENTS)),
                    at,
                    script,
                    lost: lost.is_some(),
                }
            })
            .collect();
        let restart_at = (rng.between(0, 2) == 0).then(|| rng.between(30, 600) as i64 * SECOND);
        let last = entries.iter().map(|e| e.at).max().unwrap_or(0);
        let end = match entries.iter().any(|e| e.lost) {
            true => (last + GENERATED_TAIL).max(GENERATED_LOST_END),
            false => last + GENERATED_TAIL,
        };
        Workload {
            seed,
            entries,
            troubles,
            slow,
            restart_at,
            end,
        }
    }

    fn provider(&self, channel: &str) -> ProviderScript {
        let scripts: Vec<(String, Script)> = self
            .entries
            .iter()
            .filter(|e| e.channel == channel)
            .map(|e| (e.recipient(), e.script))
            .collect();
        let windows = |hang: bool| {
            self.troubles
                .iter()
                .filter(|t| t.channel == channel && t.hang == hang)
                .map(|t| (t.from, t.until))
                .collect()
        };
        ProviderScript {
            sim_latency_ms: self
                .slow
                .iter()
                .find(|(c, _)| *c == channel)
                .map_or(0, |(_, ms)| *ms),
            // The first lost row's first send loses its dispatcher, with
            // every lost row still claimed behind it.
            crash_first: self
                .entries
                .iter()
                .find(|e| e.lost)
                .filter(|e| e.channel == channel)
                .map(|e| (e.recipient(), 1))
                .into_iter()
                .collect(),
            outages: windows(false),
            hangs: windows(true),
            ..provider(&scripts, 0)
        }
    }

    /// The steps that cover simulated time `[from, to)`: the notices due in
    /// it, with the dispatcher and the sweep on their schedule in between.
    fn steps(&self, from: i64, to: i64) -> Vec<Step> {
        let mut arrivals: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| (from..to).contains(&e.at))
            .collect();
        // The lost rows come last of their moment, so that the dispatcher
        // lost on the first of them holds them all, and nothing else.
        arrivals.sort_by_key(|e| (e.at, e.lost));
        let mut steps = Vec::new();
        let mut now = from;
        for e in arrivals {
            if e.at > now {
                steps.push(schedule(e.at));
                now = e.at;
            }
            let notice = serde_json::json!({
                "person": e.name,
                "kind": "date_chosen",
                "text": e.text,
            });
            steps.push(Step::with("publish", notice, &e.recipient()));
        }
        steps.push(schedule(to));
        steps
    }

    fn plans(&self, dir: &Path) -> Vec<Plan> {
        let cut = self.restart_at.unwrap_or(self.end);
        let plan = |process: u32, steps: Vec<Step>| Plan {
            dir: dir.to_path_buf(),
            process,
            steps,
            provider: self.provider("email"),
            push: self.provider("push"),
            seed: self.seed,
            ..Plan::default()
        };
        let mut first = plan(1, self.steps(0, cut));
        first.fixture = self.entries.iter().map(Entry::fixture).collect();
        let mut plans = vec![first];
        if self.restart_at.is_some() {
            plans.push(plan(2, self.steps(cut, self.end)));
        }
        plans
    }
}

/// The situations chapter 6's rules turn on.
const DIMENSIONS: &[Dimension<Workload>] = &[
    Dimension {
        name: "a row a lost dispatcher claimed, younger than the sweep's threshold",
        reached: |w| w.entries.iter().any(|e| e.lost),
    },
    Dimension {
        name: "a lost claim on a row whose own sends fail",
        reached: |w| w.entries.iter().any(|e| e.lost && e.script != Script::Fine),
    },
    Dimension {
        name: "a lost claim on a row that fails twice: its fourth attempt is its last",
        reached: |w| {
            w.entries
                .iter()
                .any(|e| e.lost && e.script == Script::Flaky(2))
        },
    },
    Dimension {
        name: "a lost claim on a row whose every send fails: its attempts run out",
        reached: |w| w.entries.iter().any(|e| e.lost && e.script == Script::Dead),
    },
    Dimension {
        name: "a row that fails on a channel whose sends take simulated seconds",
        reached: |w| {
            w.entries.iter().any(|e| {
                e.script != Script::Fine
                    && e.script != Script::Refused
                    && w.slow.iter().any(|(channel, _)| *channel == e.channel)
            })
        },
    },
    Dimension {
        name: "sends that take simulated seconds, in a batch of several rows",
        reached: |w| {
            w.slow
                .iter()
                .any(|(channel, _)| w.entries.iter().filter(|e| e.channel == *channel).count() >= 3)
        },
    },
    Dimension {
        name: "a provider that hangs: sends time out",
        reached: |w| w.troubles.iter().any(|t| t.hang),
    },
    Dimension {
        name: "a provider down for a while",
        reached: |w| w.troubles.iter().any(|t| !t.hang),
    },
    Dimension {
        name: "an address that always fails",
        reached: |w| w.entries.iter().any(|e| e.script == Script::Dead),
    },
    Dimension {
        name: "a send whose answer never comes",
        reached: |w| w.entries.iter().any(|e| e.script == Script::Unanswered),
    },
    Dimension {
        name: "a deploy while a lost claim waits for the sweep",
        reached: |w| w.restart_at.is_some() && w.entries.iter().any(|e| e.lost),
    },
];

impl Explorer for Generated {
    type Scenario = Workload;

    fn generate(&self, seed: u64) -> Workload {
        Workload::generated(seed)
    }

    fn plans(&self, workload: &Workload, dir: &Path) -> Vec<Plan> {
        workload.plans(dir)
    }

    fn dimensions(&self) -> &'static [Dimension<Workload>] {
        DIMENSIONS
    }

    fn faults(&self) -> FaultModel {
        FaultModel::DISPATCHER
    }

    /// A dead letter here says only that attempts ran out or a claim was
    /// lost: a fault's timing may rightly let one of them through.
    fn dead_letters_may_arrive(&self) -> bool {
        true
    }

    /// A row at its attempts' edge may rightly end a dead letter when a
    /// crash or a failing commit of `dispatch` stranded its claim once
    /// more: the sweep charges each lost claim.
    fn spent_on_lost_claims(&self, workload: &Workload, subject: &str, history: &History) -> bool {
        workload.entries.iter().any(|e| {
            e.label() == subject
                && history.spent_on_lost_claims(
                    "dispatch",
                    (e.channel, &e.recipient(), &e.text),
                    ATTEMPTS,
                )
        })
    }

    fn invariants(&self) -> Invariants {
        Invariants {
            recorded: true,
            told_once: true,
            settled: true,
            keyed: true,
            retry_gaps: &RETRY_GAPS,
            orphaned_after: ORPHANED_AFTER,
            ..Invariants::default()
        }
    }

    fn observe(&self, workload: &Workload, run: &Run) -> Result<Observation> {
        let rows = read_outbox(run.dir, run.history, Queued::label)?;
        // The first lost row's send is the one its dispatcher died in; the
        // other lost rows were held with it only if the design claims them
        // in one batch, which the rules leave to it (a dispatcher may claim
        // one row at a time), so their lost attempt may not be one.
        let dying = workload.entries.iter().position(|e| e.lost);
        let fates = workload
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let recipient = e.recipient();
                let attempts: Vec<Outcome> = run
                    .history
                    .attempts(e.channel)
                    .filter(|d| d.recipient == recipient)
                    .map(|d| d.outcome)
                    .collect();
                let told = attempts
                    .iter()
                    .filter(|o| **o == Outcome::Delivered)
                    .count() as u32;
                let state = match rows.iter().find(|r| r.subject == e.label()) {
                    Some(r) => r.status.clone(),
                    None if told > 0 => "SENT".to_string(),
                    None => "not in the outbox".to_string(),
                };
                // Which answer a dead letter keeps is fixed without faults
                // only: a crash mid-attempt rightly makes it a lost dispatcher.
                let kept = rows
                    .iter()
                    .find(|r| r.subject == e.label() && r.status == "FAILED")
                    .map(|r| format!(" (dead letter: {})", answer_kind(r.error.as_deref())))
                    .unwrap_or_default();
                let answers: Vec<&str> = attempts.iter().map(|o| answered(*o)).collect();
                let maybe_held = e.lost && Some(i) != dying;
                let detail = match answers.len() {
                    n if maybe_held && n > 0 && attempts.iter().all(|o| *o == Outcome::Failed) => {
                        format!("every attempt failed{kept}")
                    }
                    0 => format!("no attempt{kept}"),
                    1 => format!("1 attempt: {}{kept}", answers[0]),
                    n => format!("{n} attempts: {}{kept}", answers.join(", ")),
                };
                (
                    e.label(),
                    Fate {
                        told,
                        state,
                        detail,
                    },
                )
            })
            .collect();
        Ok(Observation { fates, rows })
    }

    fn shrink(&self, workload: &Workload) -> Vec<Workload> {
        let mut smaller = Vec::new();
        if workload.restart_at.is_some() {
            smaller.push(Workload {
                restart_at: None,
                ..workload.clone()
            });
        }
        for i in 0..workload.troubles.len() {
            let mut troubles = workload.troubles.clone();
            troubles.remove(i);
            smaller.push(Workload {
                troubles,
                ..workload.clone()
            });
        }
        for i in 0..workload.slow.len() {
            let mut slow = workload.slow.clone();
            slow.remove(i);
            smaller.push(Workload {
                slow,
                ..workload.clone()
            });
        }
        smaller.extend(
            cut_down(&workload.entries, usize::MAX)
                .into_iter()
                .map(|entries| Workload {
                    entries,
                    ..workload.clone()
                }),
        );
        smaller
    }

    fn describe(&self, workload: &Workload) -> String {
        let entries: Vec<String> = workload
            .entries
            .iter()
            .map(|e| {
                let script = e.script.said().unwrap_or_else(|| "fine".into());
                match e.lost {
                    true => format!(
                        "{} {script} at {}, held by a dispatcher lost mid-send",
                        e.label(),
                        clock(e.at)
                    ),
                    false => format!("{} {script} at {}", e.label(), clock(e.at)),
                }
            })
            .collect();
        let troubles: Vec<String> = workload
            .troubles
            .iter()
            .map(|t| {
                format!(
                    "; {} {} {} to {}",
                    t.channel,
                    if t.hang { "hangs" } else { "down" },
                    clock(t.from),
                    clock(t.until)
                )
            })
            .collect();
        let slow: Vec<String> = workload
            .slow
            .iter()
            .map(|(channel, ms)| format!("; every {channel} send takes {}", span(*ms)))
            .collect();
        let restart = workload
            .restart_at
            .map(|at| format!("; the dispatcher restarts at {}", clock(at)))
            .unwrap_or_default();
        format!(
            "{}{}{}{restart}",
            entries.join(", "),
            troubles.concat(),
            slow.concat()
        )
    }
}
