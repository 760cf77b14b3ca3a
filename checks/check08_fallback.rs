//! Check 08: push falls back to email.
//!
//! Plays the dispatcher over simulated time while things happen that people
//! hear about by push: each is told to a handful of people, and one phone
//! among them has trouble (always rate limited, no longer registered, or
//! rate limited a few times before it works). The chapter's own worlds
//! come first, each a [`World`] with a name. Its batch has one trouble of
//! each kind, with both important and ordinary kinds, and is replayed with
//! the process aborting straight after the commit that records each
//! important push's final failure, then restarted; and once more with the
//! process aborting straight after the commit that claims an important
//! push's last attempt, so that the sweep is what dead-letters it, and
//! after the one that claims a flaky phone's third attempt, which the sweep
//! hands back with one attempt left. Another world has one push's last
//! attempt answer late, after another dispatcher's sweep has dead-lettered
//! it and sent the fallback, and a last one has the push provider down for
//! longer than the deadline: an important push still waiting 10 minutes
//! after it was queued goes by email instead. The check judges what the
//! world saw: which pushes and emails reached whom, and when, and which
//! outbox rows ended FAILED. Then the lab explores worlds of the same type
//! drawn from seeds (see [`Generated`]): news of every kind, phones and
//! addresses with every kind of trouble, a push provider down for a while,
//! deploys, each played against the reference solution and under crashes
//! and failing commits.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::{MINUTE, SECOND};
use lab::explore::{clock, span};
use lab::explore::{
    explore, Dimension, Explorer, Fate, FaultModel, Invariants, Observation, Row, Run,
};
use lab::history::{read_ledger, History, Queued};
use lab::picture::{Band, Tone};
use lab::report::{self, Finding, Verdict};
use lab::rng::Rng;
use lab::runner::{first_trouble, in_parallel, scenario_dir, Case, Exit};
use lab::scenario::{Fault, Moment, Plan, ProviderScript, Step};
use lab::serve::{Schedule, RUN};
use lab::world::{Delivery, Event, Kind, Outcome, Recorder};

use super::dispatch_world::{
    answered, provider, Addressed, Notice, Script, ALWAYS, NAMES, RETRY_GAPS,
};

pub const CHAPTER: Chapter = Chapter {
    number: 8,
    title: "push falls back to email",
    case_file: "cases/case08_fallback.rs",
    text_file: "chapters/08-push-falls-back.md",
    bin: "case08",
    shipped_hash: 0xb012_7ebb_30f9_6e11,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&Generated, budget),
    bands,
};

/// The picture's bands: chapter 7's and chapter 5's rules, and the 10
/// minutes each push may wait before its person is emailed instead.
fn bands(history: &History, _plans: &[Vec<Plan>]) -> Vec<Band> {
    let mut bands = lab::picture::bands(&Generated, history);
    let published = history
        .events
        .iter()
        .filter(|e| e.kind == Kind::Call && e.text == "publish");
    for e in published {
        let who = e.subject.as_deref().unwrap_or_default();
        bands.push(Band {
            channel: Some("push".to_string()),
            from_ms: e.at_ms,
            to_ms: e.at_ms + WAIT_AT_MOST,
            label: format!(
                "{}: an important push waits at most {}",
                who.split('@').next().unwrap_or(who),
                span(WAIT_AT_MOST)
            ),
            tone: Tone::Deadline,
        });
    }
    bands
}

const TOLD: &str = "every important notification reaches its person on some channel";
const ONE_EACH: &str = "exactly one fallback email per dead-lettered important push";
const IMPORTANT_ONLY: &str = "no fallback for other kinds";
const NOT_EARLY: &str = "no fallback while push attempts remain";
const CRASH: &str = "a crash right after the push is dead-lettered still sends the email, once";
const DEADLINE: &str =
    "an important push still waiting after 10 min goes by email instead, and only by email; other kinds wait for the provider";

/// How long an important push may wait, from the moment it was queued,
/// before the person must be emailed instead.
const WAIT_AT_MOST: i64 = 10 * MINUTE;
/// How soon after that the email must have reached them: the wake-up that
/// sees the push overdue, and the one that sends the email.
const DEADLINE_SLACK: i64 = 2 * TICK;
/// The `Retry-After` of the push provider's 429s, in seconds.
const RETRY_AFTER_S: i64 = 60;

/// Attempts a push gets before it is dead-lettered, as chapter 5 fixes them.
const ATTEMPTS: usize = 4;

/// The kinds that must reach people whatever happens to their push.
const IMPORTANT: [&str; 3] = ["date_chosen", "event_cancelled", "event_reopened"];

/// The dispatcher wakes this often, and the sweep runs this often.
const TICK: i64 = 2 * SECOND;
const SWEEP: i64 = MINUTE;
/// Things happen this far apart, so one phone's retries never meet the next.
const EVERY: i64 = 2 * MINUTE;
/// How long a restart runs after a crash, at least: the dispatcher wakes
/// sixty times and the sweep runs twice.
const AFTER_CRASH: i64 = 2 * MINUTE;
/// How long the dispatcher runs on after a push's last attempt whose
/// dispatcher was lost: the claim is orphaned after 5 min, the sweep runs
/// every minute, and the fallback email goes out in the ticks after it.
const SWEPT_AFTER: i64 = 9 * MINUTE;
/// The late answer: a first process publishes and makes the push's first
/// attempts until `HANDOVER`; a second (`LATE`) takes over and blocks in the
/// push's last attempt; a third (`SWEEPER`) runs the dispatcher and the
/// sweep until `SWEEPER_UNTIL` and ends, and only then does the second
/// process's send answer. It runs on until `LATE_UNTIL`.
const HANDOVER: i64 = 5 * MINUTE;
const LATE: u32 = 2;
const SWEEPER: u32 = 3;
const SWEEPER_UNTIL: i64 = 15 * MINUTE;
const LATE_UNTIL: i64 = 18 * MINUTE;
/// The long outage: the push provider is down from 0:00 to `OUTAGE_ENDS`,
/// longer than an important push may wait; news lands at 0:00 and at
/// `OUTAGE_NEWS`, whose push may wait until 16:00 and gets through first.
const OUTAGE_ENDS: i64 = 14 * MINUTE;
const OUTAGE_NEWS: i64 = 6 * MINUTE;
/// News during the long outage whose deadline, 12:00, falls after the
/// first news's and still inside the outage.
const REOPENED: i64 = 2 * MINUTE;
const OUTAGE_UNTIL: i64 = 17 * MINUTE;
/// A process counts as hung only after this long (or `--timeout`, if longer).
const PATIENCE: Duration = Duration::from_secs(30);

const EVENTS: [&str; 5] = [
    "the picnic",
    "board games night",
    "the hiking trip",
    "the pub quiz",
    "the book club",
];
const OTHER_KINDS: [&str; 3] = ["comment_added", "rsvp_received", "photos_shared"];

fn text(kind: &str, event: &str) -> String {
    match kind {
        "event_cancelled" => format!("{} is cancelled", capital(event)),
        "event_reopened" => format!("{} is back on", capital(event)),
        "date_chosen" => format!("{} is on Sunday", capital(event)),
        "comment_added" => format!("Sam commented on {event}"),
        "rsvp_received" => format!("Omar is going to {event}"),
        _ => format!("Pia shared photos from {event}"),
    }
}

fn capital(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn and_list(times: &[i64]) -> String {
    let times: Vec<String> = times.iter().map(|&t| clock(t)).collect();
    match times.split_last() {
        None => "no time at all".to_string(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// What one world left behind.
struct Played {
    world: World,
    fault: Option<Fault>,
    exits: Vec<Exit>,
    history: History,
    /// Every outbox row at the end, as the contract places it.
    rows: Vec<Queued>,
}

impl Played {
    /// An ending no correct case has: a panic, a hang, an unplanned abort.
    fn trouble(&self) -> Option<String> {
        let planned = matches!(self.fault, Some(Fault::CrashAfterCommit { .. }));
        first_trouble(&self.exits, "case", planned)
    }

    /// Pushes to `p` that reached the phone.
    fn push_delivered_at(&self, p: &Told) -> Option<i64> {
        let text = p.text();
        self.history
            .delivered("push")
            .find(|d| d.recipient == p.member.device() && d.body == text)
            .map(|d| d.at_ms)
    }

    /// Every push attempt for `p`, in order.
    fn push_attempts(&self, p: &Told) -> Vec<i64> {
        let text = p.text();
        self.history
            .attempts("push")
            .filter(|d| d.recipient == p.member.device() && d.body == text)
            .map(|d| d.at_ms)
            .collect()
    }

    /// Every push attempt for `p`, in order, but those of the process whose
    /// answer came late: the sweep had given that attempt up already.
    fn push_attempts_answered_by(&self, p: &Told, late: Option<u32>) -> Vec<i64> {
        let text = p.text();
        self.history
            .attempts("push")
            .filter(|d| d.recipient == p.member.device() && d.body == text)
            .filter(|d| Some(d.process) != late)
            .map(|d| d.at_ms)
            .collect()
    }

    /// When emails with `p`'s news reached its person, in order. The
    /// email carries the news and may say more ("in case you missed our
    /// notification"), as the chapter advises.
    fn emails_about(&self, p: &Told) -> Vec<i64> {
        let text = p.text();
        self.history
            .emails_to(&p.member.email())
            .filter(|d| d.body.contains(&text))
            .map(|d| d.at_ms)
            .collect()
    }

    /// When an email with `p`'s text was sent to its person, whatever
    /// the email provider answered: when the service fell back. An email
    /// provider that refuses the address does not hide the moment.
    fn fallbacks_for(&self, p: &Told) -> Vec<i64> {
        let (text, email) = (p.text(), p.member.email());
        self.history
            .attempts("email")
            .filter(|d| d.recipient == email && d.body.contains(&text))
            .map(|d| d.at_ms)
            .collect()
    }

    /// When emails reached `person`, in order.
    fn emails_to(&self, person: &Member) -> Vec<i64> {
        self.history
            .emails_to(&person.email())
            .map(|d| d.at_ms)
            .collect()
    }

    /// Where an email with `p`'s text went, if not to its person nor to
    /// someone told the same news by email: the fallback sent to the
    /// wrong recipient.
    fn misaddressed(&self, p: &Told) -> Option<String> {
        let text = p.text();
        let told_by_email = |to: &str| {
            self.world
                .notices()
                .any(|q| q.member.channel == "email" && q.member.email() == to && q.text() == text)
        };
        self.history
            .emails()
            .find(|d| {
                d.body.contains(&text)
                    && d.recipient != p.member.email()
                    && !told_by_email(&d.recipient)
            })
            .map(|d| d.recipient.clone())
    }

    /// What became of `p`'s fallback email, for a person never told.
    fn no_email(&self, p: &Told) -> String {
        match self.misaddressed(p) {
            Some(to) => format!("an email went to {to}, not to {}", p.member.email()),
            None => "no email was queued".to_string(),
        }
    }

    /// The status of the outbox row pushing `p`, if there is one.
    fn push_status(&self, p: &Told) -> Option<&str> {
        let text = p.text();
        self.rows
            .iter()
            .find(|q| q.channel == "push" && q.recipient == p.member.device() && q.body == text)
            .map(|q| q.status.as_str())
    }

    /// The push to `p` was dead-lettered: it never got through and its row
    /// is FAILED.
    fn dead_lettered(&self, p: &Told) -> bool {
        self.push_delivered_at(p).is_none() && self.push_status(p) == Some("FAILED")
    }
}

/// Plays a world; with a crash fault, restarts the case after the abort
/// and runs it until `AFTER_CRASH` past the crash.
fn play(case: &Case, w: &World, fault: Option<Fault>) -> Result<Played> {
    let dir = scenario_dir()?;
    let case = case.patient(PATIENCE);
    let steps = w.steps(0, w.end());
    let mut exits = vec![case.start(&w.plan(dir.path(), 1, fault.clone(), steps.clone()))?];
    if exits[0] == Exit::Aborted && fault.is_some() {
        let crashed_at = History::read(dir.path())?
            .deliveries
            .last()
            .map_or(0, |d| d.at_ms);
        // The restart carries on where the crash left the plan: a schedule
        // it interrupted runs on, a publish it made is not made again.
        let resume = match Recorder::open(dir.path(), 0)?.last_step(1)? {
            Some(k) if steps[k].op == RUN => k,
            Some(k) => k + 1,
            None => 0,
        };
        let mut rest: Vec<Step> = steps[resume..].to_vec();
        let until = crashed_at + AFTER_CRASH;
        if until > w.end() {
            rest.push(w.schedule(until));
        }
        exits.push(case.start(&w.plan(dir.path(), 2, None, rest))?);
    }
    let history = History::read(dir.path())?;
    let rows = read_ledger(dir.path(), &history)?;
    Ok(Played {
        world: w.clone(),
        fault,
        exits,
        history,
        rows,
    })
}

/// Plays a generated world without a fault, as the explorer does.
fn play_generated(case: &Case, w: &World) -> Result<Played> {
    let (dir, exits) = lab::explore::play_plain(&Generated, &case.patient(PATIENCE), w)?;
    let history = History::read(dir.path())?;
    let rows = read_ledger(dir.path(), &history)?;
    Ok(Played {
        world: w.clone(),
        fault: None,
        exits,
        history,
        rows,
    })
}

/// Plays [`World::late`]: three processes on one database and one clock.
/// The first publishes and makes the push's first attempts. The second
/// takes over and blocks in the push's last attempt until the third has
/// ended. The third starts once the world shows that send has begun, and
/// runs the dispatcher and the sweep, which finds the claim orphaned.
fn play_late(case: &Case, w: &World) -> Result<Played> {
    let dir = scenario_dir()?;
    let dir = dir.path();
    let case = case.patient(PATIENCE);
    let mut exits = vec![case.start(&w.plan(dir, 1, None, w.steps(0, HANDOVER)))?];
    // The parent watches the world for the held send.
    let world = Recorder::open(dir, 0)?;
    let mut late = w.plan(dir, LATE, None, vec![w.schedule(LATE_UNTIL)]);
    late.push.announce = true;
    late.push.hold_until_any = vec![Moment::Ended(SWEEPER)];
    late.push.hold_limit_ms = (case.timeout * 3 / 2).as_millis() as u64;
    let sweeper = w.plan(dir, SWEEPER, None, vec![w.schedule(SWEEPER_UNTIL)]);
    // The second process waits for the third, which starts later: it may
    // run for longer before it counts as hung.
    let held = Case {
        timeout: case.timeout * 2,
        ..case.clone()
    };
    let (late, sweeper) = std::thread::scope(|scope| -> Result<(Exit, Exit)> {
        let running = scope.spawn(|| ended(dir, LATE, held.start(&late)));
        while !running.is_finished() && !world.reached(Moment::Sending(LATE))? {
            std::thread::sleep(Duration::from_millis(1));
        }
        let sweeper = ended(dir, SWEEPER, case.start(&sweeper));
        let late = running
            .join()
            .expect("the thread running dispatcher 2 does not panic");
        Ok((late?, sweeper?))
    })?;
    exits.extend([late, sweeper]);
    let history = History::read(dir)?;
    Ok(Played {
        world: w.clone(),
        fault: None,
        exits,
        rows: read_ledger(dir, &history)?,
        history,
    })
}

/// Records in the world that `process` has ended, however it ended, so no
/// send held for it waits any longer.
fn ended(dir: &Path, process: u32, exit: Result<Exit>) -> Result<Exit> {
    Recorder::open(dir, process)?.record_ended(process)?;
    exit
}

/// `notify run 8`: the chapter's batch, told as a story.
fn run(case: &Case) -> Result<String> {
    let played = play(case, &World::chapter(), None)?;
    let w = &played.world;
    let mut out = String::from(
        "four things happen, two minutes apart; each is told by push to five people\n\n",
    );
    for t in w.troubled() {
        out.push_str(&format!(
            "  {:>4}  {:<16} {:<36} {}'s phone {}\n",
            clock(t.news.at),
            t.news.kind,
            t.text(),
            t.member.name,
            t.member.push.trouble()
        ));
    }
    out.push_str("\nthe troubled phones:\n");
    let mut untold = Vec::new();
    for p in w.troubled() {
        let attempts = played.push_attempts(&p);
        let push = match (played.push_delivered_at(&p), played.push_status(&p)) {
            (Some(at), _) => format!("push delivered at {}", clock(at)),
            (None, Some("FAILED")) if attempts.len() == 1 => {
                format!("push refused at {}", clock(attempts[0]))
            }
            (None, Some("FAILED")) => format!(
                "push dead-lettered at {}",
                clock(attempts.last().copied().unwrap_or(0))
            ),
            (None, status) => format!("push {}", status.unwrap_or("never queued")),
        };
        let emails = played.emails_to(p.member);
        let email = match emails.as_slice() {
            [] => "no email".to_string(),
            [at] => format!("email at {}", clock(*at)),
            many => format!("{} emails", many.len()),
        };
        out.push_str(&format!(
            "  {:<5} {:<16} {:<30} {email}\n",
            p.member.name, p.news.kind, push
        ));
        if p.important() && played.push_delivered_at(&p).is_none() && emails.is_empty() {
            untold.push(p);
        }
    }
    if untold.is_empty() {
        out.push_str("\neveryone heard about every important change\n");
    } else {
        out.push_str(&format!(
            "\nnever told about an important change: {}\n",
            untold.len()
        ));
        for p in untold {
            out.push_str(&format!(
                "  {} was never told: {}.\n",
                p.member.name,
                p.text()
            ));
        }
    }
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// One crash play of the chapter's batch: the troubled push it is about,
/// by its notice's number.
struct Crash {
    push: u32,
    played: Played,
    /// The commit the process aborted after.
    nth: u32,
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    // An important push's last attempt answers after the sweep has
    // dead-lettered it and queued the fallback: played beside the others.
    let (chapter, late, outage) = (World::chapter(), World::late(), World::outage());
    // The chapter's properties read every world the explorer plays too,
    // whose seeds are chosen to reach each situation its rules turn on.
    let generated: Vec<World> = lab::explore::seeds_of(&Generated, options.budget)
        .into_iter()
        .map(World::generated)
        .collect();
    let (played, late_played, outage_played, generated_played) = std::thread::scope(|scope| {
        let late_run = scope.spawn(|| play_late(case, &late));
        let outage_run = scope.spawn(|| play(case, &outage, None));
        let generated_run = scope.spawn(|| {
            in_parallel(&generated, |w| play_generated(case, w))
                .into_iter()
                .collect::<Result<Vec<_>>>()
        });
        let played = play(case, &chapter, None);
        let late_played = late_run
            .join()
            .expect("the thread playing the late answer does not panic");
        let outage_played = outage_run
            .join()
            .expect("the thread playing the long outage does not panic");
        let generated_played = generated_run
            .join()
            .expect("the thread playing the generated worlds does not panic");
        (played, late_played, outage_played, generated_played)
    });
    let (played, late_played, outage_played, generated_played) =
        (played?, late_played?, outage_played?, generated_played?);

    // For each important push the chapter's batch dead-lettered, crash
    // straight after the first dispatch commit that follows its last attempt:
    // the commit that records it FAILED.
    let points: Vec<(u32, u32)> = chapter
        .troubled()
        .filter(|p| p.important() && played.dead_lettered(p))
        .filter_map(|p| commit_after_last_push(&played.history, &p).map(|n| (p.number, n)))
        .collect();
    let crashes = |points: &[(u32, u32)]| -> Result<Vec<Crash>> {
        in_parallel(points, |&(push, nth)| {
            let fault = Fault::CrashAfterCommit {
                op: "dispatch".into(),
                nth,
            };
            play(case, &chapter, Some(fault)).map(|played| Crash { push, played, nth })
        })
        .into_iter()
        .collect()
    };

    // The important push the chapter's batch dead-lettered after its
    // retries is played again with its dispatcher lost during the last
    // attempt: the process aborts straight after the dispatch commit that
    // claims it, so the sweep is what dead-letters it, after a restart.
    // The lost attempt counts: a push whose third attempt is lost this way
    // still has its fourth, and falls back only after it.
    let lose = |p: &Told, attempt: usize, which: &str| {
        let at = *played.push_attempts(p).get(attempt)?;
        let nth = commit_before_push(&played.history, p, attempt)?;
        let mut w = World::chapter();
        w.name = Some(format!(
            "the chapter's batch, its dispatcher lost during {}'s {which} push (crash after dispatch commit {nth}, the last before that send), then a restart",
            p.member.device()
        ));
        w.lost = Some(p.member.device());
        w.ends_at = Some(w.end().max(at + SWEPT_AFTER));
        Some((w, nth))
    };
    let last_lost = chapter
        .troubled()
        .filter(|p| p.important() && played.dead_lettered(p) && played.push_attempts(p).len() > 1)
        .find_map(|p| lose(&p, played.push_attempts(&p).len() - 1, "last"));
    let third_lost = chapter
        .troubled()
        .filter(|p| p.important() && p.member.push == Script::Limited(3))
        .find_map(|p| lose(&p, 2, "third"));
    let lost: Vec<(World, u32)> = last_lost.into_iter().chain(third_lost).collect();
    let (crashes, lost_played) = std::thread::scope(|scope| {
        let lost_run = scope.spawn(|| -> Result<Vec<Played>> {
            lost.iter()
                .map(|(w, nth)| {
                    let fault = Fault::CrashAfterCommit {
                        op: "dispatch".into(),
                        nth: *nth,
                    };
                    play(case, w, Some(fault))
                })
                .collect()
        });
        let crashes = crashes(&points);
        let lost_played = lost_run
            .join()
            .expect("the thread playing the lost dispatcher does not panic");
        (crashes, lost_played)
    });
    let (crashes, lost_played) = (crashes?, lost_played?);

    let mut all: Vec<&Played> = vec![&played];
    all.extend(&lost_played);
    all.extend([&late_played, &outage_played]);
    // Which kinds fall back, and when, are rules whatever the email
    // provider does; who is told, and by one email, are judged where email
    // works throughout (the explorer's worlds are judged on them against
    // the reference).
    let mut wide = all.clone();
    wide.extend(&generated_played);
    let mut verdicts = vec![
        judge(TOLD, &all, told),
        judge(ONE_EACH, &all, one_each),
        judge(IMPORTANT_ONLY, &wide, important_only),
        judge(NOT_EARLY, &wide, not_early),
        crash_verdict(&played, &crashes),
        judge(DEADLINE, &[&outage_played], deadline),
    ];
    // Chapter 6's races spend their time asleep: they run beside the
    // exploring.
    let (explored, raced) = std::thread::scope(|scope| {
        let racing = scope.spawn(|| super::check06_orphans::races(case, &options.seeds));
        let explored = explore(
            &Generated,
            "08",
            case,
            options.reference.as_ref(),
            options.budget,
        );
        (explored, racing.join().expect("racing does not panic"))
    });
    let (explored, (raced, racers)) = (explored?, raced?);
    verdicts.extend(explored.verdicts);
    verdicts.extend(raced);
    let processes: usize = wide
        .into_iter()
        .chain(crashes.iter().map(|c| &c.played))
        .map(|p| p.exits.len())
        .sum();
    Ok(Checked {
        verdicts,
        processes: processes + explored.processes + racers,
    })
}

/// The number of the first `dispatch` commit after the last push attempt
/// for `p`, in the first process.
fn commit_after_last_push(history: &History, p: &Told) -> Option<u32> {
    let device = p.member.device();
    let last = history
        .events
        .iter()
        .rposition(|e| e.kind == Kind::Send && e.subject.as_deref() == Some(device.as_str()))?;
    history.events[last..]
        .iter()
        .find(|e| e.kind == Kind::Commit && e.op.as_deref() == Some("dispatch") && e.process == 1)
        .and_then(|e| e.nth)
}

/// The number of the last `dispatch` commit before push attempt `attempt`
/// (from 0) for `p`, in the first process: the one that claimed the row for it.
fn commit_before_push(history: &History, p: &Told, attempt: usize) -> Option<u32> {
    let device = p.member.device();
    let (sent, _) = history
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == Kind::Send && e.subject.as_deref() == Some(device.as_str()))
        .nth(attempt)?;
    history.events[..sent]
        .iter()
        .rev()
        .find(|e| e.kind == Kind::Commit && e.op.as_deref() == Some("dispatch") && e.process == 1)
        .and_then(|e| e.nth)
}

/// What a rule says of one played world: its evidence, or the finding
/// that breaks it.
type Judged = std::result::Result<String, Box<Finding>>;

/// Judges one property over the worlds in order: the first that breaks
/// it names the failure; if none does, the chapter's batch gives the evidence.
fn judge(property: &str, played: &[&Played], rule: fn(&Played) -> Judged) -> Verdict {
    let mut evidence = None;
    let finding = played.iter().find_map(|played| {
        if let Some(trouble) = played.trouble() {
            let finding = failing(&played.world, trouble.clone(), vec![format!("{trouble}.")]);
            return Some(Finding {
                story: played.history.events.clone(),
                ..*finding
            });
        }
        match rule(played) {
            Ok(e) => {
                evidence.get_or_insert(e);
                None
            }
            Err(f) => Some(Finding {
                story: played.history.events.clone(),
                ..*f
            }),
        }
    });
    report::judge(property, evidence.unwrap_or_default(), finding)
}

/// "ada's event_cancelled \"The picnic is cancelled\""
fn about(p: &Told) -> String {
    format!("{}'s {} \"{}\"", p.member.name, p.news.kind, p.text())
}

fn failing(w: &World, evidence: String, details: Vec<String>) -> Box<Finding> {
    Box::new(Finding {
        evidence,
        scenario: w.scene(),
        details,
        seed: w.name.is_none().then_some(w.seed),
        ..Default::default()
    })
}

fn told(played: &Played) -> Judged {
    let w = &played.world;
    let important: Vec<Told> = w
        .notices()
        .filter(|p| p.important() && p.member.channel == "push")
        .collect();
    let untold: Vec<&Told> = important
        .iter()
        .filter(|p| played.push_delivered_at(p).is_none() && played.emails_about(p).is_empty())
        .collect();
    let tally = format!(
        "{} of {} told",
        important.len() - untold.len(),
        important.len()
    );
    if untold.is_empty() {
        return Ok(tally);
    }
    let details = untold
        .iter()
        .map(|p| {
            format!(
                "{} was never told: \"{}\". The push {}; {}.",
                p.member.name,
                p.text(),
                match played.push_status(p) {
                    Some("FAILED") => format!(
                        "failed at {} and was dead-lettered",
                        and_list(&played.push_attempts(p))
                    ),
                    status => format!(
                        "was tried at {} and is {}",
                        and_list(&played.push_attempts(p)),
                        status.unwrap_or("not in the outbox")
                    ),
                },
                played.no_email(p)
            )
        })
        .collect();
    Err(failing(w, tally, details))
}

fn one_each(played: &Played) -> Judged {
    let w = &played.world;
    let dead: Vec<Told> = w
        .notices()
        .filter(|p| p.member.channel == "push" && p.important() && played.dead_lettered(p))
        .collect();
    let wrong: Vec<(&Told, usize)> = dead
        .iter()
        .map(|p| (p, played.emails_about(p).len()))
        .filter(|&(_, n)| n != 1)
        .collect();
    let emails: usize = dead.iter().map(|p| played.emails_about(p).len()).sum();
    let tally = format!(
        "{emails} email{} for {} dead-lettered push{}",
        if emails == 1 { "" } else { "s" },
        dead.len(),
        if dead.len() == 1 { "" } else { "es" }
    );
    if wrong.is_empty() {
        return Ok(tally);
    }
    let details = wrong
        .iter()
        .map(|(p, n)| match n {
            0 => format!(
                "{} was dead-lettered and {}: {} was never told.",
                about(p),
                played.no_email(p),
                p.member.name
            ),
            n => format!(
                "{} was dead-lettered and {} got {n} emails about it.",
                about(p),
                p.member.email()
            ),
        })
        .collect();
    Err(failing(w, tally, details))
}

fn important_only(played: &Played) -> Judged {
    let w = &played.world;
    let others: Vec<Told> = w
        .notices()
        .filter(|p| p.member.channel == "push" && !p.important() && played.dead_lettered(p))
        .collect();
    let emailed: Vec<&Told> = others
        .iter()
        .filter(|p| !played.fallbacks_for(p).is_empty())
        .collect();
    let tally = format!(
        "{} email{} for {} other push{} dead-lettered",
        emailed.len(),
        if emailed.len() == 1 { "" } else { "s" },
        others.len(),
        if others.len() == 1 { "" } else { "es" }
    );
    if emailed.is_empty() {
        return Ok(tally);
    }
    let details = emailed
        .iter()
        .map(|p| {
            format!(
                "{} was dead-lettered, and {} was emailed about it; only {} fall back.",
                about(p),
                p.member.email(),
                IMPORTANT.join(", ")
            )
        })
        .collect();
    Err(failing(w, tally, details))
}

fn not_early(played: &Played) -> Judged {
    let w = &played.world;
    let mut through = 0;
    let mut details = Vec::new();
    for p in w.notices().filter(|p| p.member.channel == "push") {
        let p = &p;
        let emails = played.fallbacks_for(p);
        let attempts = played.push_attempts_answered_by(p, w.late);
        // An important push that waited this long goes by email, however
        // many attempts it has left.
        let overdue = p.news.at + WAIT_AT_MOST;
        match played.push_delivered_at(p) {
            Some(at) => {
                through += 1;
                if let Some(&first) = emails.first() {
                    details.push(format!(
                        "{}: the push got through at {} (attempt {} of {}), yet an email went out at {}.",
                        about(p),
                        clock(at),
                        attempts.iter().position(|&t| t == at).map_or(0, |i| i + 1),
                        attempts.len(),
                        clock(first)
                    ));
                }
            }
            None => {
                let last = attempts.last().copied().unwrap_or(0);
                if let Some(&early) = emails.iter().find(|&&t| t < last && t < overdue) {
                    details.push(format!(
                        "{}: an email went out at {}, before the push's last attempt at {}.",
                        about(p),
                        clock(early),
                        clock(last)
                    ));
                    continue;
                }
                // A push the provider never refused falls back after its
                // four attempts, counting one its dispatcher lost: the sweep
                // counts it, though it never reached the provider.
                let refused = p.member.push == Script::Refused;
                let lost = usize::from(w.lost.as_deref() == Some(p.member.device().as_str()));
                let made = attempts.len() + lost;
                let early = emails.first().filter(|&&t| t < overdue);
                if let (Some(&first), false, true) = (early, refused, made < ATTEMPTS) {
                    let with_lost = match lost {
                        0 => String::new(),
                        _ => " (one lost with its dispatcher)".to_string(),
                    };
                    details.push(format!(
                        "{}: an email went out at {} after {made} of the push's {ATTEMPTS} attempts{with_lost}; the last was still to come.",
                        about(p),
                        clock(first),
                    ));
                }
            }
        }
    }
    let tally = format!("0 emails for {through} pushes that got through");
    if details.is_empty() {
        return Ok(tally);
    }
    Err(failing(
        w,
        format!("{} fell back too early", details.len()),
        details,
    ))
}

/// During a push outage longer than the deadline: an important push not
/// through within 10 min of being queued goes by email, at the wake-up
/// that sees it overdue or the next, and then never by push. A push of
/// another kind has no deadline: it waits for the provider and gets
/// through once it is back, whatever the deadline does to the pushes
/// beside it.
fn deadline(played: &Played) -> Judged {
    let w = &played.world;
    let mut emailed = 0;
    let mut pushed = 0;
    let mut details = Vec::new();
    let important = w
        .notices()
        .filter(|p| p.member.channel == "push" && p.important());
    for p in important {
        let p = &p;
        let due = p.news.at + WAIT_AT_MOST;
        let emails = played.emails_about(p);
        match (played.push_delivered_at(p), emails.first()) {
            (Some(at), Some(&email)) => details.push(format!(
                "{}: told on both channels, by email at {} and by push at {}.",
                about(p),
                clock(email),
                clock(at)
            )),
            (Some(at), None) if at > due => details.push(format!(
                "{}: queued at {}, the push waited for the provider and got through at {}, {} later; \
                 by {} {} should have been emailed instead.",
                about(p),
                clock(p.news.at),
                clock(at),
                span(at - p.news.at),
                clock(due),
                p.member.name
            )),
            (Some(_), None) => pushed += 1,
            (None, Some(&email)) if email > due + DEADLINE_SLACK => details.push(format!(
                "{}: queued at {}, emailed only at {}; the push was overdue at {}.",
                about(p),
                clock(p.news.at),
                clock(email),
                clock(due)
            )),
            (None, Some(_)) => emailed += 1,
            (None, None) => details.push(format!(
                "{}: queued at {}, never told: no push got through, and no email by the end at {}.",
                about(p),
                clock(p.news.at),
                clock(w.end())
            )),
        }
    }
    let others: Vec<Told> = w
        .notices()
        .filter(|p| p.member.channel == "push" && !p.important())
        .collect();
    let mut waited = 0;
    for p in &others {
        match played.push_delivered_at(p) {
            Some(_) => waited += 1,
            None => details.push(format!(
                "{}: queued at {}, never delivered ({} at {}): a push of this kind has no deadline, it waits for the provider.",
                about(p),
                clock(p.news.at),
                played.push_status(p).unwrap_or("not in the outbox"),
                clock(w.end())
            )),
        }
    }
    let total = emailed + pushed + waited + details.len();
    if details.is_empty() {
        return Ok(format!(
            "{emailed} of {} by email within 10 min {} s, {pushed} by push in time; {waited} of {} other pushes after the outage",
            emailed + pushed,
            DEADLINE_SLACK / SECOND,
            others.len()
        ));
    }
    let mut f = failing(w, format!("{} of {total} not", details.len()), details);
    f.details.push(format!(
        "the push provider was down from 0:00 to {}; an important push may wait 10 min for it, then the person is emailed instead.",
        clock(OUTAGE_ENDS)
    ));
    Err(f)
}

fn crash_verdict(normal: &Played, crashes: &[Crash]) -> Verdict {
    let w = &normal.world;
    if let Some(trouble) = normal.trouble() {
        return Verdict::fail(
            CRASH,
            trouble.clone(),
            format!("{}, played as is:", w.title()),
            vec![format!("{trouble}.")],
        );
    }
    if crashes.is_empty() {
        return Verdict::fail(
            CRASH,
            "no crash point".to_string(),
            format!("{}, played as is:", w.title()),
            vec![
                "no important push was dead-lettered, so there was nothing to crash after."
                    .to_string(),
            ],
        );
    }
    for c in crashes {
        let fault = c
            .played
            .fault
            .as_ref()
            .map(Fault::describe)
            .unwrap_or_default();
        let push = w.notice(c.push);
        let scenario = format!(
            "{}, {fault}, the one after {}'s last push, then a restart:",
            w.title(),
            push.member.device()
        );
        if let Some(trouble) = c.played.trouble() {
            return Verdict::fail(
                CRASH,
                trouble.clone(),
                scenario,
                vec![format!("{trouble}.")],
            );
        }
        let emails = c.played.emails_to(push.member);
        if emails.len() == 1 {
            continue;
        }
        let (evidence, detail) = match emails.len() {
            0 => (
                "1 lost".to_string(),
                format!(
                    "{} was dead-lettered, then the process died; after the restart no email reached {}.",
                    about(&push),
                    push.member.email()
                ),
            ),
            n => (
                format!("{} told {n} times", push.member.name),
                format!(
                    "{} was dead-lettered, then the process died; after the restart {} got {n} emails.",
                    about(&push),
                    push.member.email()
                ),
            ),
        };
        let mut v = Verdict::fail(CRASH, evidence, scenario, vec![detail]);
        v.timeline = crash_timeline(&c.played.history, &push, c.nth);
        return v;
    }
    Verdict::pass(
        CRASH,
        format!(
            "{} crash point{}",
            crashes.len(),
            if crashes.len() == 1 { "" } else { "s" }
        ),
    )
}

/// The events a learner needs to follow one crash: the person's publish and
/// sends, the commit the process died after, the crash and the restart.
fn crash_timeline(history: &History, p: &Told, nth: u32) -> Vec<Event> {
    let device = p.member.device();
    let email = p.member.email();
    let tag = p.tag();
    history
        .events
        .iter()
        .filter(|e| {
            let about = [&device, &email, &tag]
                .iter()
                .any(|s| e.subject.as_deref() == Some(s.as_str()));
            let crash_commit = e.kind == Kind::Commit
                && e.process == 1
                && e.op.as_deref() == Some("dispatch")
                && e.nth == Some(nth);
            (about && e.kind != Kind::Return)
                || crash_commit
                || matches!(e.kind, Kind::Start | Kind::Crash | Kind::Panic)
        })
        .cloned()
        .collect()
}

impl Script {
    /// Whether its sends count against the provider in a breaker: 5xx and
    /// timeouts do, refusals do not.
    fn fails(self) -> bool {
        matches!(self, Script::Flaky(_) | Script::Dead | Script::Unanswered)
    }
}

/// Someone in a generated world: the channel they chose, whether they
/// have a phone, and how each provider treats them.
#[derive(Clone, Debug, Serialize)]
struct Member {
    name: &'static str,
    channel: &'static str,
    phone: bool,
    push: Script,
    mail: Script,
}

impl Member {
    /// A phone with nothing wrong with it: a push to it gets through.
    fn working_phone(&self) -> bool {
        self.channel == "push" && self.push == Script::Fine
    }
}

impl Addressed for Member {
    fn name(&self) -> &str {
        self.name
    }

    fn channel(&self) -> &str {
        self.channel
    }
}

/// Something that happens at `at`, told to some members: each notice has
/// its own number, and so its own text.
#[derive(Clone, Debug, Serialize)]
struct News {
    at: i64,
    kind: &'static str,
    event: &'static str,
    /// (number, member) in the order the notices are published: a phone
    /// or an address with trouble first.
    told: Vec<(u32, &'static str)>,
    /// Whether its texts go without their numbers, as in the chapter's own
    /// worlds, where each news has a text of its own.
    plain: bool,
}

impl News {
    fn text(&self, number: u32) -> String {
        match self.plain {
            true => text(self.kind, self.event),
            false => format!("{} (#{number})", text(self.kind, self.event)),
        }
    }
}

/// A stretch during which the push provider fails every send (a 503), or
/// hangs (every send times out).
#[derive(Clone, Copy, Debug, Serialize)]
struct Down {
    from: i64,
    to: i64,
    hang: bool,
}

/// One generated world: members, news over time, the push provider down
/// for a while, deploys that restart the service.
#[derive(Clone, Debug, Serialize)]
struct World {
    seed: u64,
    /// How often the dispatcher wakes, [`WORLD_TICK`] or [`ODD_TICK`]: part of the world,
    /// so that the reference's cached runs of it follow a change.
    tick: i64,
    members: Vec<Member>,
    news: Vec<News>,
    down: Option<Down>,
    deploys: Vec<i64>,
    /// The Retry-After, in seconds, the push provider gives a phone it
    /// rate limits: a minute, or, in one world in three, long enough that
    /// four attempts outlast the deadline with the breaker closed.
    slow_down_s: i64,
    /// The chapter's name for one of its own worlds; none for a generated
    /// one.
    name: Option<String>,
    /// When one of the chapter's own worlds ends; a generated one ends
    /// long after the last thing happens (see [`World::end`]).
    ends_at: Option<i64>,
    /// The process whose push answers only after the sweep has given up on
    /// it, if any: its attempt is not the last one a fallback must wait for.
    late: Option<u32>,
    /// The device whose push lost one attempt with its dispatcher, if any:
    /// the sweep counts that attempt, though it never reached the provider.
    lost: Option<String>,
}

/// One notice of a generated world, with what the rules say about it.
struct Told<'a> {
    number: u32,
    news: &'a News,
    member: &'a Member,
}

impl Told<'_> {
    fn text(&self) -> String {
        self.news.text(self.number)
    }

    /// Whether it is of a kind that must reach its person whatever happens
    /// to their push.
    fn important(&self) -> bool {
        IMPORTANT.contains(&self.news.kind)
    }

    /// What a publish step is about; every subject of the notice contains it.
    fn tag(&self) -> String {
        format!("#{} {}", self.number, self.member.name)
    }

    /// "#3 ada's push (event_cancelled)"
    fn subject(&self, channel: &str) -> String {
        format!("{}'s {channel} ({})", self.tag(), self.news.kind)
    }
}

/// The longest a push provider stays down in a generated world. A message's
/// fourth attempt comes at least 5 min 30 s after its first failure inside
/// a stretch (5 s, 30 s and 5 min apart, or 30 s and 5 min when a crash
/// cost it an attempt before), so a message the provider would take is
/// never dead-lettered by the stretch alone: however the breaker, a
/// restart or a crash move its attempts about, it ends SENT. That keeps
/// what a crash may change within what the rules promise.
///
/// A message can still be dead-lettered with the provider back, by a crash
/// that loses the claim of its fourth attempt (the sweep counts it): so no
/// message may fail three times in a stretch before the crash comes. The
/// breaker opens at once, as news reaches six phones, and each restart
/// closes it and costs the messages one more failure: the stretch has one
/// deploy at most.
const LONGEST_DOWN: i64 = 5 * MINUTE + 30 * SECOND;

/// The long Retry-Afters a world may draw, in seconds. Over 200 s, a push
/// rate limited every time waits past its 10 minutes before its fourth
/// attempt (at 0, one Retry-After, two, then 5 min more): with the breaker
/// closed, the deadline is what tells its person. Under 270 s, a phone
/// limited twice still gets its push through (at two Retry-Afters), and a
/// push limited every time is settled by email before the quiet time ahead
/// of an outage.
const SLOW_DOWN: (i64, i64) = (210, 270);

/// One outage in three outlasts the deadline instead, by 30 s to 4 min:
/// every push queued in its first minutes waits out its 10 minutes, and
/// the deadline, not a dead letter, is what tells its person. Only news of
/// the kinds people act on lands during such an outage: whether one of
/// its pushes reaches its phone late or its email goes instead, its
/// person is told once, which is all the rules fix when restarts and
/// crashes may spend its attempts.
const LONG_DOWN: (i64, i64) = (WAIT_AT_MOST + 30 * SECOND, WAIT_AT_MOST + 4 * MINUTE);

/// How long before a stretch, and after it, no phone that has trouble of
/// its own is told anything, so that its attempts and the outage's probes
/// never meet: a probe to a phone that always fails would keep the breaker
/// open while the provider is back, until another row took its place, and
/// how long that takes is the world's luck. Before the stretch, a
/// troubled message must be done with, and a crash can move its attempts
/// by up to 11 min 30 s.
/// After it, the breaker must have closed: the messages it held back are
/// due again within 5 min of their last failure, or 6 min of a claim a
/// crash lost, and the first of them to be tried goes through.
const QUIET_BEFORE: i64 = 12 * MINUTE;
const QUIET_AFTER: i64 = 7 * MINUTE;

/// How often the dispatcher wakes in a generated world. Every wake-up is a
/// few statements and a step of the clock, and a world lasts twenty
/// minutes or so: waking every 5 s instead of every 2 s makes exploring
/// more than twice as cheap, and changes nothing the rules fix but the
/// times, which the reference's run of the same world shares.
const WORLD_TICK: i64 = 5 * SECOND;

/// How often the dispatcher wakes in one world out of four (seeds 3, 7,
/// 11, ...): with a tick of 5 s, a retry 1 s after its failure goes at the
/// same wake-up as one 5 s after it, and chapter 5's first wait could be
/// anything up to 5 s.
const ODD_TICK: i64 = 3 * SECOND;

/// How long the service runs on after the last thing happens. A push that
/// never gets through makes its last attempt 5 min 35 s after it is
/// published when the provider fails it, or 7 min after when it answers
/// 429 with `Retry-After: 60` (1 min, 1 min, then 5 min); its email goes a
/// wake-up after its dead letter. When a crash right after that last
/// attempt's claim orphans it, the sweep takes it back 5 to 6 min later
/// and dead-letters it, so its email comes by 13 min 10 s or so.
const SETTLE: i64 = 14 * MINUTE + 30 * SECOND;

/// How much longer a world with a poison message runs: its four
/// attempts, each but the 429s ended by the sweep 5 to 6 min later. A
/// poison email may be a fallback, due only once its push is dead-lettered,
/// and a failing commit may leave a claim (the push's last, or one of the
/// email's) for the sweep to end 5 to 6 min later. Latest of all, a crash
/// that loses the claim of the push's last attempt (5 min 35 s after it
/// is published) leaves the sweep to dead-letter it about 11 min 40 s
/// after its publish; the fallback's four fatal sends, each ended by the
/// sweep, and the sweep that dead-letters it then take about 24 min 10 s
/// more: 35 min 50 s in all, past what [`SETTLE`] and 18 minutes cover.
/// 23 minutes cover it.
const POISON_SETTLE: i64 = 23 * MINUTE;

impl World {
    /// A world drawn from `seed` over everything chapter 8 speaks about.
    ///
    /// News of every kind reaches two to six phones that work, some
    /// readers of email (with or without a phone) and at most one phone
    /// with trouble (flaky, dead, never answering, refused). One phone at
    /// most in the whole world fails with a 5xx or a timeout (a refusal
    /// never counts against the provider). A dead one is told with two
    /// working phones: its third failure opens the push breaker on a
    /// provider that works, as chapter 7's rule has it (three of five sends
    /// in a minute); the next news, which tells a working phone, is the
    /// probe that closes it. One that never answers is told with three:
    /// three failures of six, exactly half, keep the breaker closed.
    /// As the last news, it is told with four working phones, which keep
    /// the breaker closed: no later push would come to take the probe's
    /// place from it once its last retry is due. Likewise one email
    /// address at most fails: a reader's, told with four working readers,
    /// or the address a troubled phone's fallback goes to, failing once.
    /// Half the worlds have the push provider down or hanging for one to
    /// five and a half minutes, from a moment when news is told to every
    /// working phone, so that the breaker opens on an outage.
    fn generated(seed: u64) -> World {
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 8);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let mut names = names.into_iter();
        let mut next = |channel, phone, push, mail| Member {
            name: names.next().expect("20 names are enough"),
            channel,
            phone,
            push,
            mail,
        };
        let down = rng.between(0, 1) == 1;
        // With the push provider down, six: the news that lands as it goes
        // down reaches all of them, and the breaker opens on the fifth
        // failure with a message of that batch still to send, which goes
        // back to the queue untouched.
        let working = rng.between(if down { 5 } else { 4 }, 5) + u64::from(down);
        let mut members: Vec<Member> = (0..working)
            .map(|_| next("push", true, Script::Fine, Script::Fine))
            .collect();
        // The one address of the world that fails, if any: a reader's, or
        // the address a troubled phone's fallback goes to.
        let (failing_reader, failing_fallback) = match rng.between(0, 5) {
            0 | 1 => (true, false),
            2..=4 => (false, true),
            _ => (false, false),
        };
        // A fifth of the worlds have a poison message, drawn from a stream
        // of its own: the first troubled phone's push, the address its
        // fallback goes to, or a reader's email. Its first sends are
        // refused with a 429 or none are; the sweep ends it either way.
        let mut venom = Rng::new(seed ^ 0x0808_9015_0e5a);
        // Whether a poison push is of a kind that falls back: its own
        // stream too, so that the rest of the world stays as it was.
        let mut kind_of_poison = Rng::new(seed ^ 0x0808_0b1d_7e57);
        let mut poison = (venom.between(0, 4) == 0).then(|| {
            let n = [0, 2, 3][venom.between(0, 2) as usize];
            (venom.between(0, 2), Script::Poison(n))
        });
        // Readers of email: some have a phone too, which nothing uses.
        let readers = if failing_reader { 4 } else { rng.between(0, 3) };
        for i in 0..readers {
            let phone = rng.between(0, 1) == 1;
            let mail = match poison {
                Some((2, script)) if i == 0 => {
                    poison = None;
                    script
                }
                _ => Script::Fine,
            };
            members.push(next("email", phone, Script::Fine, mail));
        }
        let refusing = rng.between(0, 2) > 0;
        if refusing {
            members.push(next("email", false, Script::Fine, Script::Refused));
        }
        let failing = failing_reader.then(|| {
            let mail = match rng.between(0, 3) {
                0 => Script::Dead,
                1 => Script::Unanswered,
                n => Script::Flaky(n as u32 - 1),
            };
            next("email", false, Script::Fine, mail)
        });

        let count = rng.between(2, 4) as usize;
        let mut times = Vec::new();
        let mut at = rng.between(0, 30) as i64 * SECOND;
        for _ in 0..count {
            times.push(at);
            at += rng.between(120, 180) as i64 * SECOND;
        }
        // Drawn from a stream of its own, so the rest of the world is drawn
        // as before.
        let mut long = Rng::new(seed ^ 0x0808_1000_d0e5);
        let long_down = long.between(0, 2) == 0;
        // Half the long outages carry news of every kind, and no deploy:
        // a push that does not fall back waits it out and is delivered
        // after, its attempts spent by at most the one restart a crash
        // makes, never four.
        let any_kind = long_down && long.between(0, 1) == 0;
        let down = down.then(|| {
            let k = rng.between(0, count as u64 - 1) as usize;
            let length = rng.between(60, (LONGEST_DOWN / SECOND) as u64) as i64 * SECOND;
            let length = match long_down {
                true => {
                    long.between((LONG_DOWN.0 / SECOND) as u64, (LONG_DOWN.1 / SECOND) as u64)
                        as i64
                        * SECOND
                }
                false => length,
            };
            Down {
                from: times[k],
                to: times[k] + length,
                hang: rng.between(0, 2) == 0,
            }
        });
        let quiet =
            |t: i64| down.is_some_and(|d| (d.from - QUIET_BEFORE..d.to + QUIET_AFTER).contains(&t));
        if times.iter().all(|&t| quiet(t)) {
            let d = down.expect("only a stretch makes time quiet");
            let last = *times.last().expect("two moments at least");
            let after = (d.to + QUIET_AFTER).max(last + 2 * MINUTE);
            times.push(after + rng.between(0, 60) as i64 * SECOND);
        }

        let mut news = Vec::new();
        let mut number = 0;
        let mut doomed_yet = false;
        let mut failing_phone = false;
        let mut failing_told = false;
        let mut troubled_members = Vec::new();
        for (i, &at) in times.iter().enumerate() {
            let starts_down = down.is_some_and(|d| d.from == at);
            // Its troubled phone, if any: the first one outside the quiet
            // time never takes a push, and has important news.
            let troubled = if quiet(at) || (doomed_yet && rng.between(0, 2) == 0) {
                None
            } else {
                let push = match (doomed_yet, rng.between(0, 5)) {
                    _ if failing_phone => Script::Refused,
                    (false, 0 | 1) | (true, 0) => Script::Dead,
                    (false, 2) | (true, 1) => Script::Unanswered,
                    (false, 5) => Script::Limited(ALWAYS),
                    (false, _) | (true, 2 | 3) => Script::Refused,
                    (true, 4) => Script::Flaky(1),
                    (true, _) => Script::Limited(2),
                };
                // A third of the worlds make their first troubled phone a
                // poison one instead, drawn from a stream of its own.
                let venom = if doomed_yet { None } else { poison.take() };
                let push = match venom {
                    Some((0 | 2, script)) => script,
                    _ => push,
                };
                failing_phone |= push.fails();
                let mail = match (doomed_yet, rng.between(0, 4)) {
                    (false, _) if failing_fallback => Script::Flaky(1),
                    (_, 0) => Script::Refused,
                    _ => Script::Fine,
                };
                let mail = match venom {
                    Some((1, script)) => script,
                    _ => mail,
                };
                Some(next("push", true, push, mail))
            };
            let important = (troubled.is_some() && !doomed_yet) || rng.between(0, 4) < 3;
            // A poison push is of any kind: one that does not fall back
            // must not fall back when the sweep dead-letters it either.
            let poisoned = troubled
                .as_ref()
                .is_some_and(|t| matches!(t.push, Script::Poison(_)));
            let important = match poisoned && !doomed_yet {
                true => kind_of_poison.between(0, 2) > 0,
                false => important,
            };
            let important = important
                || !any_kind
                    && down.is_some_and(|d| {
                        d.to - d.from > LONGEST_DOWN && (d.from..d.to).contains(&at)
                    });
            doomed_yet |= troubled.is_some();
            let kinds: &[&'static str] = if important { &IMPORTANT } else { &OTHER_KINDS };
            let kind = *rng.pick(kinds);
            let mut phones: Vec<&'static str> = members
                .iter()
                .filter(|m| m.channel == "push")
                .map(|m| m.name)
                .collect();
            rng.shuffle(&mut phones);
            // A failing phone is told with two working ones if it is dead:
            // its third failure, 35 s after the first, makes three of five
            // sends in a minute, and opens the breaker on a provider that
            // works (see `World::fits`). One that never answers is told with
            // three: three of six, exactly half, keeps the breaker closed.
            // As the last news, it is told with four working ones at least,
            // which keep the breaker closed.
            let phone_fails = troubled.as_ref().is_some_and(|t| t.push.fails());
            let least = match i + 1 == times.len() {
                true if phone_fails => 4,
                _ => 2,
            };
            let phones_told = if starts_down {
                phones.len()
            } else if phone_fails && least == 2 {
                match troubled.as_ref().map(|t| t.push) {
                    Some(Script::Unanswered) => 3,
                    _ => 2,
                }
            } else {
                rng.between(least, phones.len() as u64) as usize
            };
            // A phone or an address with trouble is told first. Should a
            // crash or a failing commit cut its batch short, the working
            // messages it leaves claimed come back together, after it,
            // never the troubled one alone with just two working ones: two
            // sends that work and three that fail in a minute would open
            // the breaker, and the failing message would be its probe.
            let mut told: Vec<&'static str> = Vec::new();
            if let Some(t) = &troubled {
                told.push(t.name);
            }
            // A failing reader is told with every other reader, so that
            // four working addresses, or three if one publish is refused,
            // outweigh its failures.
            let last_chance = i + 1 == times.len();
            let with_failing =
                failing.is_some() && !failing_told && (last_chance || rng.between(0, 1) == 0);
            if with_failing {
                failing_told = true;
                told.push(failing.as_ref().expect("a failing reader").name);
            }
            told.extend(&phones[..phones_told]);
            for m in members.iter().filter(|m| m.channel == "email") {
                let odds = if m.mail == Script::Refused { 3 } else { 2 };
                if with_failing || rng.between(0, 3) < odds {
                    told.push(m.name);
                }
            }
            troubled_members.extend(troubled);
            let told = told
                .into_iter()
                .map(|name| {
                    number += 1;
                    (number, name)
                })
                .collect();
            let event = *rng.pick(&EVENTS);
            news.push(News {
                at,
                kind,
                event,
                told,
                plain: false,
            });
        }
        members.extend(troubled_members);
        members.extend(failing);
        let last = times.last().copied().unwrap_or(0);
        let deploys = match rng.between(0, 3) {
            0 | 1 => Vec::new(),
            n => {
                let latest = ((last + 3 * MINUTE) / SECOND) as u64;
                let mut at: Vec<i64> = (1..n)
                    .map(|_| rng.between(30, latest) as i64 * SECOND)
                    .collect();
                at.sort_unstable();
                at.dedup();
                // One deploy at most while the push provider is down, and
                // none in a long outage with news of every kind.
                let during = |t: &i64| down.is_some_and(|d| (d.from..d.to).contains(t));
                if at.iter().filter(|t| during(t)).count() > 1 {
                    at.pop();
                }
                if any_kind {
                    at.retain(|t| !during(t));
                }
                at
            }
        };
        let tick = if seed % 4 == 3 { ODD_TICK } else { WORLD_TICK };
        // Drawn from a stream of its own, so the rest of the world is drawn
        // as before.
        let mut patience = Rng::new(seed ^ 0x0808_4290_5e7a);
        let slow_down_s = match patience.between(0, 2) {
            0 => patience.between(SLOW_DOWN.0 as u64, SLOW_DOWN.1 as u64) as i64,
            _ => RETRY_AFTER_S,
        };
        World {
            seed,
            tick,
            members,
            news,
            down,
            deploys,
            slow_down_s,
            name: None,
            ends_at: None,
            late: None,
            lost: None,
        }
    }

    fn member(&self, name: &str) -> &Member {
        self.members
            .iter()
            .find(|m| m.name == name)
            .expect("news is told to members")
    }

    /// The notice numbered `number`.
    fn notice(&self, number: u32) -> Told<'_> {
        self.notices()
            .find(|n| n.number == number)
            .expect("a notice of the world")
    }

    fn notices(&self) -> impl Iterator<Item = Told<'_>> {
        self.news.iter().flat_map(move |news| {
            news.told.iter().map(move |&(number, name)| Told {
                number,
                news,
                member: self.member(name),
            })
        })
    }

    /// When the service stops: when the chapter says, for its own worlds;
    /// long after the last thing happens, for a generated one.
    fn end(&self) -> i64 {
        if let Some(at) = self.ends_at {
            return at;
        }
        let last = self.news.iter().map(|n| n.at).max().unwrap_or(0);
        let up = self.down.map_or(0, |d| d.to);
        let poison = self
            .members
            .iter()
            .any(|m| matches!(m.push, Script::Poison(_)) || matches!(m.mail, Script::Poison(_)));
        last.max(up) + SETTLE + if poison { POISON_SETTLE } else { 0 }
    }

    fn script(&self, channel: &str) -> ProviderScript {
        let scripts: Vec<(String, Script)> = self
            .members
            .iter()
            .filter(|m| channel == "email" || m.phone)
            .map(|m| match channel {
                "push" => (m.device(), m.push),
                _ => (m.email(), m.mail),
            })
            .collect();
        let mut provider = provider(&scripts, RETRY_AFTER_S);
        if channel == "push" {
            for (recipient, _, retry_after_s) in &mut provider.rate_limited {
                let limited = self
                    .members
                    .iter()
                    .any(|m| m.device() == *recipient && matches!(m.push, Script::Limited(_)));
                if limited {
                    *retry_after_s = self.slow_down_s;
                }
            }
        }
        if let (Some(d), "push") = (self.down, channel) {
            match d.hang {
                true => provider.hangs.push((d.from, d.to)),
                false => provider.outages.push((d.from, d.to)),
            }
        }
        provider
    }

    /// The steps that cover simulated time `[from, to)`.
    fn steps(&self, from: i64, to: i64) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut now = from;
        for news in self.news.iter().filter(|n| (from..to).contains(&n.at)) {
            if news.at > now {
                steps.push(self.schedule(news.at));
                now = news.at;
            }
            for &(number, name) in &news.told {
                let member = self.member(name);
                let notice = Notice {
                    person: name.to_string(),
                    kind: news.kind.to_string(),
                    text: news.text(number),
                };
                steps.push(Step::with(
                    "publish",
                    notice,
                    &format!("#{number} {}", member.name),
                ));
            }
        }
        steps.push(self.schedule(to));
        steps
    }

    /// The service's schedule until `until_ms`: the dispatcher at every
    /// tick, the sweep every minute.
    fn schedule(&self, until_ms: i64) -> Step {
        Schedule::of(until_ms, &[("dispatch", self.tick), ("sweep", SWEEP)])
    }

    fn fixture(&self) -> Vec<String> {
        let mut sql = String::from("BEGIN;\n");
        for m in &self.members {
            let device = match m.phone {
                true => format!("'{}'", m.device()),
                false => "NULL".to_string(),
            };
            sql.push_str(&format!(
                "INSERT INTO people (id, email, device, channel) VALUES ('{}', '{}', {device}, '{}');\n",
                m.name,
                m.email(),
                m.channel
            ));
        }
        sql.push_str("COMMIT;");
        vec![sql]
    }

    /// The processes: one, and one more after each deploy.
    fn plans(&self, dir: &Path) -> Vec<Plan> {
        let mut cuts = vec![0];
        cuts.extend(self.deploys.iter().copied());
        cuts.push(self.end());
        cuts.windows(2)
            .enumerate()
            .map(|(i, span)| Plan {
                dir: dir.to_path_buf(),
                process: i as u32 + 1,
                fixture: if i == 0 { self.fixture() } else { Vec::new() },
                steps: self.steps(span[0], span[1]),
                fault: None,
                provider: self.script("email"),
                push: self.script("push"),
                seed: self.seed,
                ..Plan::default()
            })
            .collect()
    }

    /// Whether the world keeps the generator's rules: news at least 2 min
    /// apart, no troubled phone told anything in the quiet time around the
    /// push provider's stretch, one deploy at most during the stretch, and
    /// every piece of news [`World::holds`].
    fn fits(&self) -> bool {
        let spaced = self
            .news
            .windows(2)
            .all(|w| w[1].at - w[0].at >= 2 * MINUTE);
        let quiet = |t: i64| {
            self.down
                .is_some_and(|d| (d.from - QUIET_BEFORE..d.to + QUIET_AFTER).contains(&t))
        };
        let calm = self.news.iter().filter(|n| quiet(n.at)).all(|n| {
            n.told.iter().all(|(_, name)| {
                let m = self.member(name);
                m.channel == "email" || m.push == Script::Fine
            })
        });
        let during = |t: &&i64| self.down.is_some_and(|d| (d.from..d.to).contains(*t));
        let restarts = self.deploys.iter().filter(during).count();
        // A failing phone told with fewer than four working ones may open
        // the breaker on a provider that works, and then, once its last
        // retry is due, be the probe that fails again and again: it is
        // requeued, not charged, and would be tried for ever unless another
        // push comes to take the probe's place. So later news is told to a
        // working phone.
        let followed = self.news.iter().enumerate().all(|(i, n)| {
            !self.crowded(n)
                || self.news[i + 1..]
                    .iter()
                    .any(|later| self.tells_a_working_phone(later))
        });
        spaced && calm && followed && restarts <= 1 && self.news.iter().all(|n| self.holds(n))
    }

    /// Whether a piece of news reaches a phone whose push gets through.
    fn tells_a_working_phone(&self, news: &News) -> bool {
        news.told
            .iter()
            .any(|(_, name)| self.member(name).working_phone())
    }

    /// Whether a piece of news tells a failing phone with fewer than four
    /// working ones, enough failures in a minute to open the breaker.
    fn crowded(&self, news: &News) -> bool {
        let told: Vec<&Member> = news.told.iter().map(|(_, n)| self.member(n)).collect();
        let fails = told.iter().any(|m| m.channel == "push" && m.push.fails());
        let working = told.iter().filter(|m| m.working_phone()).count();
        fails && working < 4
    }

    /// Whether a piece of news may be told to fewer people: a troubled
    /// phone among them needs two working ones (four if it is the last
    /// news, see [`World::fits`]), a failing reader four working readers.
    fn holds(&self, news: &News) -> bool {
        let told: Vec<&Member> = news.told.iter().map(|(_, n)| self.member(n)).collect();
        let working = |channel: &str| {
            told.iter()
                .filter(|m| m.channel == channel)
                .filter(|m| match channel {
                    "push" => m.push == Script::Fine,
                    _ => !m.mail.fails(),
                })
                .count()
        };
        let phone_fails = told.iter().any(|m| m.channel == "push" && m.push.fails());
        let mail_fails = told.iter().any(|m| m.channel == "email" && m.mail.fails());
        (!phone_fails || working("push") >= 2) && (!mail_fails || working("email") >= 4)
    }
}

impl Script {
    /// "is always rate limited (429)": what is wrong with a phone of the
    /// chapter's own worlds.
    fn trouble(self) -> String {
        match self {
            Script::Limited(ALWAYS) => "is always rate limited (429)".to_string(),
            Script::Limited(1) => "is rate limited once, then works".to_string(),
            Script::Limited(n) => format!("is rate limited {n} times, then works"),
            Script::Refused => "is no longer registered (410)".to_string(),
            Script::Unanswered => "never answers (a timeout)".to_string(),
            _ => "works".to_string(),
        }
    }
}

/// The chapter's own worlds: news told by push to people the chapter
/// names, each [`World`] like the generated ones, with a name, the
/// chapter's tick and an end of its own, and texts without numbers.
impl World {
    fn named(name: &str, ends_at: i64) -> World {
        World {
            seed: 0,
            name: Some(name.to_string()),
            tick: TICK,
            members: Vec::new(),
            news: Vec::new(),
            down: None,
            deploys: Vec::new(),
            slow_down_s: RETRY_AFTER_S,
            ends_at: Some(ends_at),
            late: None,
            lost: None,
        }
    }

    /// `kind` happens to `event` at `at`: `names` are told, each by push
    /// to a phone the provider treats as their script says, the first
    /// scripted one first. A name told before keeps its phone.
    fn tell(
        &mut self,
        at: i64,
        kind: &'static str,
        event: &'static str,
        names: &[(&'static str, Script)],
    ) {
        let mut number = self.news.iter().map(|n| n.told.len() as u32).sum::<u32>();
        let mut told = Vec::new();
        for &(name, push) in names {
            if !self.members.iter().any(|m| m.name == name) {
                self.members.push(Member {
                    name,
                    channel: "push",
                    phone: true,
                    push,
                    mail: Script::Fine,
                });
            }
            number += 1;
            told.push((number, name));
        }
        self.news.push(News {
            at,
            kind,
            event,
            told,
            plain: true,
        });
    }

    /// The chapter's batch: four things happen two minutes apart, each told
    /// by push to five people, one of whose phones has trouble.
    fn chapter() -> World {
        // Kai's fourth push, the last thing to happen, goes out at 11:00.
        let mut w = World::named("the chapter's batch", 12 * MINUTE);
        let fine = |names: [&'static str; 4]| names.map(|n| (n, Script::Fine));
        let with = |troubled: (&'static str, Script), others: [&'static str; 4]| {
            [vec![troubled], fine(others).to_vec()].concat()
        };
        let picnic = with(
            ("ada", Script::Limited(ALWAYS)),
            ["ben", "cleo", "dev", "gia"],
        );
        w.tell(0, "event_cancelled", "the picnic", &picnic);
        let games = with(
            ("finn", Script::Limited(ALWAYS)),
            ["hugo", "ivy", "jon", "lena"],
        );
        w.tell(EVERY, "comment_added", "board games night", &games);
        let hike = with(("kai", Script::Limited(3)), ["ben", "dev", "hugo", "jon"]);
        w.tell(2 * EVERY, "date_chosen", "the hiking trip", &hike);
        let quiz = with(("emma", Script::Refused), ["cleo", "gia", "ivy", "lena"]);
        w.tell(3 * EVERY, "event_reopened", "the pub quiz", &quiz);
        w
    }

    /// The push provider is down from 0:00 to 14:00. At 0:00 the picnic is
    /// cancelled, told by push to five people, and a comment to two more;
    /// at 2:00 the quiz is back on for two others, and at 6:00 a date is
    /// chosen for two more. The picnic's pushes wait behind the breaker and
    /// must go by email at 10:00, the quiz's at 12:00, each deadline counted
    /// from its own push; the date's may wait until 16:00, and get through
    /// first, at 14:00; the comments wait for the provider.
    fn outage() -> World {
        let name = format!(
            "a long push outage, the push provider down from 0:00 to {}",
            clock(OUTAGE_ENDS)
        );
        let mut w = World::named(&name, OUTAGE_UNTIL);
        let fine = |names: &[&'static str]| -> Vec<(&'static str, Script)> {
            names.iter().map(|&n| (n, Script::Fine)).collect()
        };
        let cancelled = fine(&["ada", "ben", "cleo", "dev", "emma"]);
        w.tell(0, "event_cancelled", "the picnic", &cancelled);
        w.tell(0, "comment_added", "the picnic", &fine(&["finn", "gia"]));
        w.tell(
            REOPENED,
            "event_reopened",
            "the quiz",
            &fine(&["jo", "kofi"]),
        );
        let date = fine(&["hugo", "ivy"]);
        w.tell(OUTAGE_NEWS, "date_chosen", "the hiking trip", &date);
        w.down = Some(Down {
            from: 0,
            to: OUTAGE_ENDS,
            hang: false,
        });
        w
    }

    /// One important push to an always rate-limited phone, whose last attempt
    /// answers late: its dispatcher blocks in the send while another one's
    /// sweep finds the claim orphaned, dead-letters the push and sends the
    /// fallback; the send's failure comes back after that.
    fn late() -> World {
        let name = "a late answer, ada's last push answering after the sweep dead-lettered it";
        let mut w = World::named(name, LATE_UNTIL);
        let ada = [("ada", Script::Limited(ALWAYS))];
        w.tell(0, "event_cancelled", "the picnic", &ada);
        w.late = Some(LATE);
        w.lost = Some(w.members[0].device());
        w
    }

    /// One process of a named world: the fixture is the first one's.
    fn plan(&self, dir: &Path, process: u32, fault: Option<Fault>, steps: Vec<Step>) -> Plan {
        Plan {
            dir: dir.to_path_buf(),
            process,
            fixture: if process == 1 {
                self.fixture()
            } else {
                Vec::new()
            },
            steps,
            fault,
            provider: self.script("email"),
            push: self.script("push"),
            seed: self.seed,
            ..Plan::default()
        }
    }

    /// The pushes to phones with trouble of their own, one per news.
    fn troubled(&self) -> impl Iterator<Item = Told<'_>> {
        self.notices()
            .filter(|n| n.member.channel == "push" && n.member.push != Script::Fine)
    }

    /// "the chapter's batch:"
    fn scene(&self) -> String {
        format!("{}:", self.title())
    }

    /// The world's name, or its seed.
    fn title(&self) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => format!("generated scenario (seed {})", self.seed),
        }
    }
}

/// Chapter 8's world for the explorer: news of every kind over time, told
/// to phones that work and phones that do not (flaky, dead, never
/// answering, refused), to readers of email with or without a phone, some
/// addresses failing or refusing mail too; the push provider down or
/// hanging for a while in half the worlds, so that its breaker opens; and
/// deploys that restart the service. A crash or a failing commit may come
/// in `publish`, `dispatch` and `sweep`: the sweep returns a message whose
/// dispatcher died, and the fallback rides in the dead letter's own
/// transaction, so nothing a crash does loses the email or sends it twice.
/// A crash after a provider accepted a send is left out: the sweep counts
/// that attempt as lost, and if it was a push's last one, the push is
/// dead-lettered although it arrived, and the person is emailed too. That
/// is the price the chapter accepts, not a loss.
struct Generated;

/// Subjects of what reached someone, or was queued, that no notice of the
/// world accounts for: "an email to ada-phone: \"...\"".
fn stray(channel: &str, recipient: &str, body: &str) -> String {
    let a = if channel == "email" { "an" } else { "a" };
    format!("{a} {channel} to {recipient}: {body:?}")
}

/// How many attempts of one message a fate spells out.
const SPELLED: usize = 12;

impl Explorer for Generated {
    type Scenario = World;

    fn generate(&self, seed: u64) -> World {
        World::generated(seed)
    }

    fn dimensions(&self) -> &'static [Dimension<World>] {
        DIMENSIONS
    }

    fn plans(&self, world: &World, dir: &Path) -> Vec<Plan> {
        world.plans(dir)
    }

    /// The dispatcher's faults, less those that lose a delivered push's
    /// answer: a crash right after the send, and a failing commit of the
    /// commit that records it. The row then looks unsent; during a push
    /// outage the breaker holds it, and the deadline emails the person who
    /// already has the push. Told twice, on two channels: the trade the
    /// deadline makes (chapter 8 says why), not a fault of the case.
    fn faults(&self) -> FaultModel {
        FaultModel {
            crash_after_send: &[],
            keep_answers: true,
            ..FaultModel::DISPATCHER
        }
    }

    /// Chapter 5's backoff is not judged by the world's attempts here: an
    /// open breaker's probe that fails is released, not counted, and the
    /// same message is the next probe 30 s later, so during an outage the
    /// world sees one message tried every 30 s while its own attempts keep
    /// their backoff. The agreement compares every attempt's time instead.
    /// A dead letter here says only that attempts ran out or a claim was
    /// lost: a fault's timing may rightly let one of them through.
    fn dead_letters_may_arrive(&self) -> bool {
        true
    }

    /// The sweep charges a lost attempt to every row a dead or failed
    /// wake-up held (chapter 6), a poison message's neighbours in its
    /// claim included: a message may run out of attempts under a fault
    /// that reshuffled the claims, never told, once the play stranded
    /// claims enough to spend what its provider's answers left.
    fn spent_on_lost_claims(&self, world: &World, subject: &str, history: &History) -> bool {
        let spent = |channel: &str, recipient: &str, text: &str| {
            history.spent_on_lost_claims("dispatch", (channel, recipient, text), ATTEMPTS)
        };
        world.notices().any(|n| {
            let m = n.member;
            let folded = format!("{}'s push or its email ({})", n.tag(), n.news.kind);
            if subject == folded {
                let text = n.text();
                spent("push", &m.device(), &text) && spent("email", &m.email(), &text)
            } else if subject == n.subject(m.channel) {
                spent(m.channel, &m.recipient(), &n.text())
            } else {
                subject == n.subject("email") && spent("email", &m.email(), &n.text())
            }
        })
    }

    fn invariants(&self) -> Invariants {
        Invariants {
            recorded: true,
            told_once: true,
            settled: true,
            keyed: true,
            retry_gaps: &RETRY_GAPS,
            breaker: Some(super::check07_breaker::BREAKER),
            // Chapter 7's open breaker: one probe per wait. A push the
            // breaker held past the deadline goes by email, but its push
            // was held all the same.
            one_probe: 2 * WORLD_TICK + SECOND,
            ..Invariants::default()
        }
    }

    fn published(&self, world: &World) -> Vec<lab::explore::Published> {
        world
            .notices()
            .map(|n| lab::explore::Published {
                channel: n.member.channel.to_string(),
                recipient: n.member.recipient(),
                body: n.text(),
                at: n.news.at,
            })
            .collect()
    }

    fn observe(&self, world: &World, run: &Run) -> Result<Observation> {
        let outbox = read_ledger(run.dir, run.history)?;
        // (channel, recipient, body) -> subject, for every message the rules speak of.
        let mut known: Vec<((String, String, String), String)> = Vec::new();
        for n in world.notices() {
            let m = n.member;
            known.push((
                (m.channel.to_string(), m.recipient(), n.text()),
                n.subject(m.channel),
            ));
            if m.channel == "push" {
                known.push((
                    ("email".to_string(), m.email(), n.text()),
                    n.subject("email"),
                ));
            }
        }
        // An email carries its news and may say more: it is the news's
        // email if it contains the news's text.
        let subject_of = |channel: &str, recipient: &str, body: &str| {
            known
                .iter()
                .find(|((c, r, b), _)| {
                    c == channel
                        && r == recipient
                        && match channel {
                            "email" => body.contains(b.as_str()),
                            _ => b == body,
                        }
                })
                .map(|(_, s)| s.clone())
                .unwrap_or_else(|| {
                    // Named after its notice too, if its text is one: a
                    // refused publish owes nothing, strays included.
                    let about = world.notices().find(|n| n.text() == body);
                    let stray = stray(channel, recipient, body);
                    match about {
                        Some(n) => format!("{}: {stray}", n.tag()),
                        None => stray,
                    }
                })
        };
        // What was queued or sent first, under its own text: a message the
        // rules speak of but nobody queued comes last, with nothing to show.
        let mut keys: Vec<(String, String, String)> = Vec::new();
        for q in &outbox {
            keys.push((q.channel.clone(), q.recipient.clone(), q.body.clone()));
        }
        for d in &run.history.deliveries {
            keys.push((d.channel.clone(), d.recipient.clone(), d.body.clone()));
        }
        keys.extend(known.iter().map(|(k, _)| k.clone()));
        let mut fates = BTreeMap::new();
        for (channel, recipient, body) in keys {
            let subject = subject_of(&channel, &recipient, &body);
            if fates.contains_key(&subject) {
                continue;
            }
            let attempts: Vec<&Delivery> = run
                .history
                .attempts(&channel)
                .filter(|d| d.recipient == recipient && d.body == body)
                .collect();
            let told = attempts
                .iter()
                .filter(|d| d.outcome == Outcome::Delivered)
                .count() as u32;
            let statuses: Vec<&str> = outbox
                .iter()
                .filter(|q| q.channel == channel && q.recipient == recipient && q.body == body)
                .map(|q| q.status.as_str())
                .collect();
            let state = match statuses.as_slice() {
                // Deleted once delivered: SENT all the same.
                [] if told > 0 => "SENT".to_string(),
                [] => "not in the outbox".to_string(),
                [one] => one.to_string(),
                many => {
                    let mut counted: BTreeMap<&str, usize> = BTreeMap::new();
                    for s in many {
                        *counted.entry(s).or_default() += 1;
                    }
                    let parts: Vec<String> =
                        counted.iter().map(|(s, n)| format!("{n} {s}")).collect();
                    format!("{} rows: {}", many.len(), parts.join(", "))
                }
            };
            let spelled: Vec<String> = attempts
                .iter()
                .take(SPELLED)
                .map(|d| {
                    let said = answered(d.outcome);
                    format!("{} {said}", clock(d.at_ms))
                })
                .collect();
            let detail = match attempts.len() {
                0 => "no attempt".to_string(),
                1 => format!("1 attempt: {}", spelled.join(", ")),
                n if n > SPELLED => format!("{n} attempts: {}, ...", spelled.join(", ")),
                n => format!("{n} attempts: {}", spelled.join(", ")),
            };
            fates.insert(
                subject,
                Fate {
                    told,
                    state,
                    detail,
                },
            );
        }
        let rows = outbox
            .iter()
            .map(|q| Row {
                subject: subject_of(&q.channel, &q.recipient, &q.body),
                status: q.status.clone(),
                error: q.error.clone(),
                message: Some((q.channel.clone(), q.recipient.clone(), q.body.clone())),
                wrong: None,
            })
            .collect();
        Ok(Observation { fates, rows })
    }

    /// An important push and the email that may replace it, as one
    /// subject: a crash or a failing commit may rightly move the message
    /// from one to the other (a claim the sweep hands back late, after the
    /// deadline or with its last attempt spent), so a run under a fault
    /// must tell the person once on one of them, as the run without it did.
    /// Which channel, and when, the agreement judges without faults.
    fn under_faults(
        &self,
        world: &World,
        mut fates: BTreeMap<String, Fate>,
    ) -> BTreeMap<String, Fate> {
        for n in world.notices() {
            if n.member.channel != "push" || !IMPORTANT.contains(&n.news.kind) {
                continue;
            }
            let push = fates.remove(&n.subject("push"));
            let email = fates.remove(&n.subject("email"));
            let told = [&push, &email]
                .iter()
                .flat_map(|f| f.iter())
                .map(|f| f.told)
                .sum();
            let state_of = |f: &Option<Fate>| {
                f.as_ref()
                    .map_or("not in the outbox".to_string(), |f| f.state.clone())
            };
            let (push_state, email_state) = (state_of(&push), state_of(&email));
            let state = match push_state == "SENT" || email_state == "SENT" {
                true => "SENT on one channel".to_string(),
                false => format!("push {push_state}, email {email_state}"),
            };
            let detail_of =
                |f: &Option<Fate>| f.as_ref().map_or("", |f| f.detail.as_str()).to_string();
            let detail = format!("push: {}; email: {}", detail_of(&push), detail_of(&email));
            fates.insert(
                format!("{}'s push or its email ({})", n.tag(), n.news.kind),
                Fate {
                    told,
                    state,
                    detail,
                },
            );
        }
        fates
    }

    fn shrink(&self, world: &World) -> Vec<World> {
        let with_news = |news: Vec<News>| World {
            news,
            ..world.clone()
        };
        let mut smaller = Vec::new();
        if !world.deploys.is_empty() {
            smaller.push(World {
                deploys: Vec::new(),
                ..world.clone()
            });
        }
        if world.down.is_some() {
            smaller.push(World {
                down: None,
                ..world.clone()
            });
        }
        // Halves of the news first, then one piece at a time.
        let n = world.news.len();
        if n > 2 {
            smaller.push(with_news(world.news[..n / 2].to_vec()));
            smaller.push(with_news(world.news[n / 2..].to_vec()));
        }
        if n > 1 {
            for i in 0..n {
                let mut news = world.news.clone();
                news.remove(i);
                smaller.push(with_news(news));
            }
        }
        // The same news sooner: each as soon as the one before allows.
        let mut sooner = world.news.clone();
        let mut at = 0;
        for news in &mut sooner {
            news.at = at;
            at += 2 * MINUTE;
        }
        let shift = world.news.first().map_or(0, |n| n.at);
        let down = world.down.map(|d| Down {
            from: d.from - shift,
            to: d.to - shift,
            ..d
        });
        smaller.push(World {
            down,
            ..with_news(sooner)
        });
        for (i, news) in world.news.iter().enumerate() {
            for j in (0..news.told.len()).rev() {
                let mut fewer = news.clone();
                fewer.told.remove(j);
                if fewer.told.is_empty() || !world.holds(&fewer) {
                    continue;
                }
                let mut all = world.news.clone();
                all[i] = fewer;
                smaller.push(with_news(all));
            }
        }
        if world.deploys.len() > 1 {
            for i in 0..world.deploys.len() {
                let mut deploys = world.deploys.clone();
                deploys.remove(i);
                smaller.push(World {
                    deploys,
                    ..world.clone()
                });
            }
        }
        // Only worlds the generator could have drawn: a smaller world
        // outside them may fail for the reference as well.
        let same = serde_json::to_string(world).ok();
        smaller.retain(|w| w.fits() && serde_json::to_string(w).ok() != same);
        smaller
    }

    fn describe(&self, world: &World) -> String {
        let mut parts: Vec<String> = world
            .news
            .iter()
            .map(|news| {
                let by = |channel: &str| -> Vec<String> {
                    news.told
                        .iter()
                        .map(|(_, name)| world.member(name))
                        .filter(|m| m.channel == channel)
                        .map(|m| {
                            let trouble: Vec<String> = [("phone", m.push), ("mail", m.mail)]
                                .into_iter()
                                .filter_map(|(what, s)| Some(format!("{what} {}", s.said()?)))
                                .filter(|t| channel == "push" || t.starts_with("mail"))
                                .collect();
                            match trouble.is_empty() {
                                true => m.name.to_string(),
                                false => format!("{} ({})", m.name, trouble.join(", ")),
                            }
                        })
                        .collect()
                };
                let mut to = Vec::new();
                let phones = by("push");
                if !phones.is_empty() {
                    to.push(format!("{} by push", phones.join(", ")));
                }
                let readers = by("email");
                if !readers.is_empty() {
                    to.push(format!("{} by email", readers.join(", ")));
                }
                format!("{} {} to {}", clock(news.at), news.kind, to.join(" and "))
            })
            .collect();
        if let Some(d) = world.down {
            let how = if d.hang { "hangs" } else { "is down" };
            parts.push(format!(
                "the push provider {how} {} to {}",
                clock(d.from),
                clock(d.to)
            ));
        }
        if !world.deploys.is_empty() {
            let at: Vec<String> = world.deploys.iter().map(|&t| clock(t)).collect();
            parts.push(format!("deploys at {}", at.join(", ")));
        }
        let limited = world
            .members
            .iter()
            .any(|m| m.phone && matches!(m.push, Script::Limited(_)));
        if limited && world.slow_down_s != RETRY_AFTER_S {
            parts.push(format!(
                "a 429 to a phone asks it to wait {}",
                span(world.slow_down_s * SECOND)
            ));
        }
        parts.join("; ")
    }
}

/// The edges of chapter 8's world its rules turn on.
const DIMENSIONS: &[Dimension<World>] = &[
    // Only the sweep can end it: its fallback must ride in the sweep's
    // dead letter as it does in the dispatcher's.
    Dimension {
        name: "an important push that kills every dispatcher once past its 429s, dead-lettered by the sweep on its last attempt",
        reached: |w| {
            w.notices().any(|n| {
                n.member.channel == "push"
                    && n.member.push == Script::Poison(3)
                    && IMPORTANT.contains(&n.news.kind)
            })
        },
    },
    Dimension {
        name: "a push of a kind that does not fall back, killing every dispatcher once past its 429s, dead-lettered by the sweep",
        reached: |w| {
            w.notices().any(|n| {
                n.member.channel == "push"
                    && matches!(n.member.push, Script::Poison(_))
                    && !IMPORTANT.contains(&n.news.kind)
            })
        },
    },
    Dimension {
        name: "a message that kills every dispatcher from its first send: its dead letter's only error is the lost dispatcher",
        reached: |w| {
            w.members
                .iter()
                .any(|m| m.push == Script::Poison(0) || m.mail == Script::Poison(0))
        },
    },
    Dimension {
        name: "an email that kills every dispatcher once past its 429s, dead-lettered by the sweep on its last attempt",
        reached: |w| w.members.iter().any(|m| m.mail == Script::Poison(3)),
    },
    Dimension {
        name: "a push of a kind that does not fall back, still waiting 10 min into an outage",
        reached: |w| {
            w.down.is_some_and(|d| {
                w.news.iter().any(|n| {
                    !IMPORTANT.contains(&n.kind)
                        && (d.from..d.to).contains(&n.at)
                        && n.at + WAIT_AT_MOST < d.to
                        && w.tells_a_working_phone(n)
                })
            })
        },
    },
    Dimension {
        name: "a push of a kind that does not fall back, overdue too when an important push's 10 minutes run out in the same outage",
        reached: |w| {
            let waiting = |n: &News, d: &Down| {
                (d.from..d.to).contains(&n.at)
                    && n.at + WAIT_AT_MOST < d.to
                    && w.tells_a_working_phone(n)
            };
            w.down.is_some_and(|d| {
                w.news.iter().any(|other| {
                    !IMPORTANT.contains(&other.kind)
                        && waiting(other, &d)
                        && w.news.iter().any(|n| {
                            IMPORTANT.contains(&n.kind) && waiting(n, &d) && other.at <= n.at
                        })
                })
            })
        },
    },
    Dimension {
        name: "an important push still waiting for the push provider 10 min after it was queued",
        reached: |w| {
            w.down.is_some_and(|d| {
                w.news.iter().any(|n| {
                    (d.from..d.to).contains(&n.at)
                        && n.at + WAIT_AT_MOST < d.to
                        && w.tells_a_working_phone(n)
                })
            })
        },
    },
    // Its 429s keep it waiting, with the breaker closed, past its deadline.
    Dimension {
        name: "an important push rate limited every time, whose Retry-After makes it wait past its 10 minutes",
        reached: |w| {
            w.slow_down_s * SECOND * 2 + RETRY_GAPS[2] > WAIT_AT_MOST
                && w.notices().any(|n| {
                    n.member.push == Script::Limited(ALWAYS) && IMPORTANT.contains(&n.news.kind)
                })
        },
    },
    // Three timeouts and their three successes make six sends in a minute,
    // exactly half of them failed: the one count at which "more than half"
    // and "at least half" disagree.
    Dimension {
        name: "a phone that never answers, told with exactly three working ones",
        reached: half_failed,
    },
    // The successes have left the breaker's one-minute window by the time
    // the provider hangs: a breaker that never forgets them opens late.
    Dimension {
        name: "the push provider hangs after news reached a working phone",
        reached: hang_after_news,
    },
];

/// Whether the world tells a phone that never answers with exactly three
/// working ones, all in one piece of news.
fn half_failed(w: &World) -> bool {
    w.news.iter().any(|n| {
        let told = || n.told.iter().map(|(_, name)| w.member(name));
        told().any(|m| m.channel == "push" && m.push == Script::Unanswered)
            && told().filter(|m| m.working_phone()).count() == 3
    })
}

/// Whether the push provider hangs after news reached a working phone.
fn hang_after_news(w: &World) -> bool {
    w.down.is_some_and(|d| {
        d.hang
            && w.news
                .iter()
                .any(|n| n.at < d.from && w.tells_a_working_phone(n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_worlds_keep_their_rules() {
        for seed in 1..500 {
            let w = World::generated(seed);
            assert!(w.fits(), "seed {seed}: {}", Generated.describe(&w));
            // One phone and one address at most fail with a 5xx or a timeout.
            let phones = w.members.iter().filter(|m| m.push.fails()).count();
            let addresses = w.members.iter().filter(|m| m.mail.fails()).count();
            assert!(phones <= 1 && addresses <= 1, "seed {seed}");
            assert!(
                w.down.is_none_or(|d| {
                    let length = d.to - d.from;
                    length <= LONGEST_DOWN || (LONG_DOWN.0..=LONG_DOWN.1).contains(&length)
                }),
                "seed {seed}"
            );
            // During an outage past the deadline, only news people act on,
            // or no deploy.
            if let Some(d) = w.down.filter(|d| d.to - d.from > LONGEST_DOWN) {
                let only_important = w
                    .news
                    .iter()
                    .filter(|n| (d.from..d.to).contains(&n.at))
                    .all(|n| IMPORTANT.contains(&n.kind));
                let no_deploy = !w.deploys.iter().any(|t| (d.from..d.to).contains(t));
                assert!(only_important || no_deploy, "seed {seed}");
            }
            // An important push that never gets through, or a poison push
            // of a kind that does not fall back.
            assert!(
                w.notices().any(|n| n.member.channel == "push"
                    && (IMPORTANT.contains(&n.news.kind)
                        || matches!(n.member.push, Script::Poison(_)))
                    && matches!(
                        n.member.push,
                        Script::Dead
                            | Script::Unanswered
                            | Script::Refused
                            | Script::Limited(ALWAYS)
                            | Script::Poison(_)
                    )),
                "seed {seed}: {}",
                Generated.describe(&w)
            );
            for candidate in Generated.shrink(&w) {
                assert!(candidate.fits(), "seed {seed}");
            }
        }
    }
}
