//! Check 07: the circuit breaker.
//!
//! Plays the dispatcher over simulated time while a provider is down. The
//! chapter's own worlds come first, each a [`World`] with a name: its batch
//! (email down for 10 minutes, push working, a backlog at the start and a
//! notification every 30 s); a long push outage with only three pushes
//! waiting, which shows whether rows survive many probes, while email is
//! quiet and its one email fails once; a hang after a busy morning, which
//! shows whether timeouts count and old successes fade; and bounces and
//! hiccups on a working channel, which show whether refusals, or failures
//! that are no outage, open the breaker. The explorer then generates worlds
//! of the same type from seeds, and plays them under faults. The check
//! judges what the world saw: which rows ended FAILED in the service's
//! database, what each provider was sent and when.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::{MINUTE, SECOND};
use lab::explore::{clock, span};
use lab::explore::{
    cut_down, explore, Breaker, Dimension, Explorer, Fate, FaultModel, Invariants, Observation, Run,
};
use lab::history::{read_ledger, History, Queued};
use lab::report::{self, Finding, Verdict};
use lab::rng::Rng;
use lab::runner::{in_parallel, scenario_dir, Case, Exit};
use lab::scenario::{Plan, ProviderScript, Step};
use lab::serve::Schedule;
use lab::world::{Delivery, Kind, Outcome, Recorder};

use super::dispatch_world::{answered, provider, Addressed, Notice, Script, NAMES, RETRY_GAPS};

pub const CHAPTER: Chapter = Chapter {
    number: 7,
    title: "the circuit breaker",
    case_file: "cases/case07_breaker.rs",
    text_file: "chapters/07-circuit-breaker.md",
    bin: "case07",
    shipped_hash: 0xecc1_e8f1_80e0_5875,
    run,
    check,
    coverage,
    bands: |history, _| lab::picture::bands(&Generated, history),
};

const NOT_DEAD: &str = "no row is dead-lettered by the outage";
const DELIVERED: &str = "every notification is delivered once the provider is back";
const FEW_ATTEMPTS: &str = "about one attempt per 30 s while the provider is down";
const HEALTHY: &str = "the channel that works is unaffected";
const LONE: &str = "a lone failure on a quiet channel is retried on schedule";

/// The dispatcher wakes this often, and the sweep runs this often.
const TICK: i64 = 2 * SECOND;
const SWEEP: i64 = MINUTE;
/// Chapter 6's sweep takes back a claim only once it is this old.
const ORPHANED_AFTER: i64 = 5 * MINUTE;
/// How long the dispatcher runs on after the outage ends: a breaker lets a
/// probe through within 30 s of the provider's return, and the backlog goes
/// out on the wake-ups after it.
const DRAIN: i64 = 2 * MINUTE;
/// One probe per this long while a provider is down.
const PROBE_EVERY: i64 = 30 * SECOND;
/// What one claim takes: the case's batch, up to 50 due rows.
const BATCH: u64 = 50;
/// How many seconds before a trouble of its channel a dead address may
/// be told alone: its three failures, 5 s and 30 s apart, come before the
/// trouble, all within the minute the breaker weighs as it begins.
const DEAD_AHEAD: (u64, u64) = (40, 54);
/// Sends allowed per outage on top of one per 30 s: the sends that find
/// the provider down before the breaker has seen enough to open, and the
/// window's edges.
const EDGE_SLACK: usize = 10;
/// A notification on the working channel must go out this soon.
const HEALTHY_WITHIN: i64 = 10 * SECOND;
/// A lone failure's retry must come this soon: its 5 s wait and a wake-up,
/// well short of a breaker's 30 s; and no sooner than its 5 s wait
/// (chapter 5's backoff).
const RETRY_WITHIN: i64 = 10 * SECOND;
const RETRY_AFTER: i64 = 5 * SECOND;

/// Attempts a row gets in all (chapter 5): the first and three retries.
const ATTEMPTS: usize = 4;

/// Who did what: the notifications' texts are built from these, so every
/// text a person gets in a batch is different.
const ACTORS: [&str; 7] = ["Sam", "Omar", "Pia", "Rosa", "Tara", "Zoe", "Yuki"];
const DOINGS: [(&str, &str); 4] = [
    ("comment_added", "commented on"),
    ("rsvp_received", "is going to"),
    ("photos_shared", "shared photos from"),
    ("question_asked", "asked about"),
];
const EVENTS: [&str; 5] = [
    "the picnic",
    "board games night",
    "the hiking trip",
    "Friday drinks",
    "the book club",
];

/// The text of a generated world's `n`th notification, counting from 0:
/// "Sam commented on the picnic (#0)".
fn numbered(n: usize) -> String {
    let (_, doing) = DOINGS[n % DOINGS.len()];
    format!(
        "{} {doing} {} (#{n})",
        ACTORS[n % ACTORS.len()],
        EVENTS[n % EVENTS.len()]
    )
}

/// What one world left behind.
struct Played {
    world: World,
    exit: Exit,
    history: History,
    rows: Vec<Queued>,
}

impl Played {
    /// What `world`'s play left in `dir`, and how it ended.
    fn read(world: &World, exit: Exit, dir: &std::path::Path) -> Result<Played> {
        let history = History::read(dir)?;
        let rows = read_ledger(dir, &history)?;
        Ok(Played {
            world: world.clone(),
            exit,
            history,
            rows,
        })
    }

    /// An ending no correct case has: a panic, a hang, an error the lab
    /// could not carry on from.
    fn trouble(&self) -> Option<String> {
        (self.exit != Exit::Finished).then(|| format!("the case {}", self.exit.describe()))
    }

    /// Every attempt at delivering `t`, in order.
    fn attempts<'a>(&'a self, t: &'a Told) -> impl Iterator<Item = &'a Delivery> {
        let p = &self.world.people[t.who];
        let recipient = p.recipient();
        self.history
            .attempts(p.channel)
            .filter(move |d| d.recipient == recipient && d.body == t.text)
    }

    /// When `t` first reached its person, if it did.
    fn delivered_at(&self, t: &Told) -> Option<i64> {
        self.attempts(t)
            .find(|d| d.outcome == Outcome::Delivered)
            .map(|d| d.at_ms)
    }

    /// The rows that ended FAILED.
    fn dead_letters(&self) -> Vec<&Queued> {
        self.rows.iter().filter(|r| r.status == "FAILED").collect()
    }

    /// A finding in this world: what the rule saw, and its details.
    fn finding(&self, evidence: String, details: Vec<String>) -> Box<Finding> {
        Box::new(Finding {
            evidence,
            scenario: self.world.scene(),
            details,
            ..Default::default()
        })
    }
}

/// Half an hour of simulated time costs a case process a fraction of a
/// second, but several times that on a busy machine: a process counts as
/// hung only after this long, or after `--timeout` if that is longer.
const PATIENCE: Duration = Duration::from_secs(30);

fn play(case: &Case, world: &World) -> Result<Played> {
    let dir = scenario_dir()?;
    let case = case.patient(PATIENCE);
    let exits = case.start_in_turn(&world.plans(dir.path()))?;
    let exit = exits.into_iter().last().unwrap_or(Exit::Finished);
    Played::read(world, exit, dir.path())
}

/// Plays a generated world without a fault, as the explorer does: the
/// dispatcher starts again after each process a poison message kills.
fn play_generated(case: &Case, world: &World) -> Result<Played> {
    let (dir, exits) = lab::explore::play_plain(&Generated, &case.patient(PATIENCE), world)?;
    let exit = exits
        .into_iter()
        .find(|e| *e != Exit::Finished)
        .unwrap_or(Exit::Finished);
    Played::read(world, exit, dir.path())
}

/// `notify run 7`: the chapter's batch, told as a story.
fn run(case: &Case) -> Result<String> {
    let played = play(case, &World::chapter())?;
    let w = &played.world;
    let told = w.told();
    let mut out = format!(
        "{}; push keeps working\n\
         {} notifications for {} people: {} at 0:00, then one every 30 s until 9:30\n\
         the dispatcher wakes every 2 s and retries a failed send after 5 s, 30 s and 5 min\n\n\
         {:<9}{:>6}{:>11}{:>15}{:>18}\n",
        w.outage_story(),
        told.len(),
        w.people.len(),
        told.iter().filter(|t| t.at == 0).count(),
        "",
        "rows",
        "delivered",
        "dead-lettered",
        "sends while down",
    );
    for channel in ["email", "push"] {
        let rows: Vec<&&Told> = told
            .iter()
            .filter(|t| w.people[t.who].channel == channel)
            .collect();
        let delivered = rows
            .iter()
            .filter(|t| played.delivered_at(t).is_some())
            .count();
        let dead = played
            .dead_letters()
            .iter()
            .filter(|r| r.channel == channel)
            .count();
        let sends = match channel == w.down() {
            true => played
                .history
                .attempts(channel)
                .filter(|d| w.is_down(channel, d.at_ms))
                .count()
                .to_string(),
            false => "-".to_string(),
        };
        out.push_str(&format!(
            "  {channel:<7}{:>6}{delivered:>11}{dead:>15}{sends:>18}\n",
            rows.len()
        ));
    }
    let dead = played.dead_letters();
    if !dead.is_empty() {
        out.push_str(&format!(
            "\n{} emails will never be sent; every attempt came while the provider was down:\n",
            dead.len()
        ));
        for row in dead.iter().take(5) {
            out.push_str(&format!("  {}\n", dead_letter(&played, row)));
        }
        if dead.len() > 5 {
            out.push_str(&format!("  ... and {} more\n", dead.len() - 5));
        }
    }
    let late = told
        .iter()
        .filter_map(|t| played.delivered_at(t).map(|at| (at, t)))
        .filter(|(at, t)| *at - t.at > HEALTHY_WITHIN)
        .max_by_key(|(at, _)| *at);
    let back = w.back();
    if let Some((at, t)) = late {
        out.push_str(&format!(
            "\nthe last {} waiting went out at {}, {} after the provider came back\n",
            w.people[t.who].channel,
            clock(at),
            span(at - back)
        ));
    }
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// "ada@example.com  Sam commented on the picnic  tried at 0:00, 0:06, 0:36, 5:36"
fn dead_letter(played: &Played, row: &Queued) -> String {
    let times: Vec<String> = played
        .history
        .attempts(&row.channel)
        .filter(|d| d.recipient == row.recipient && d.body == row.body)
        .map(|d| {
            let down = played.world.is_down(&row.channel, d.at_ms);
            let mark = if down { "" } else { " (up)" };
            format!("{}{mark}", clock(d.at_ms))
        })
        .collect();
    format!(
        "{:<18} {:<40} tried at {}",
        row.recipient,
        row.body,
        times.join(", ")
    )
}

/// The chapter's worlds, played as they are: its batch, the long push
/// outage, the hang, the bounces and the outage in a busy minute.
fn named() -> [World; 5] {
    [
        World::chapter(),
        World::quiet(),
        World::hang(),
        World::bounces(),
        World::busy(),
    ]
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let worlds = named();
    // The working channel's rule holds in every world the explorer plays
    // too, whose seeds are chosen to reach each situation the rules turn on.
    let mut generated: Vec<World> = lab::explore::seeds_of(&Generated, options.budget)
        .into_iter()
        .map(World::generate)
        .collect();
    generated.extend(drain_worlds(options.budget));
    let mut everywhere: Vec<Played> = in_parallel(&worlds, |w| play(case, w))
        .into_iter()
        .collect::<Result<_>>()?;
    for played in in_parallel(&generated, |w| play_generated(case, w)) {
        everywhere.push(played?);
    }
    let played = &everywhere[..worlds.len()];
    let quiet = &played[1..2];
    let mut verdicts = vec![
        judge(NOT_DEAD, played, not_dead),
        judge(DELIVERED, played, delivered),
        judge(FEW_ATTEMPTS, played, few_attempts),
        judge(HEALTHY, &everywhere, healthy),
        judge(LONE, quiet, lone),
    ];
    let reference = options.reference.as_ref().map(|r| r.patient(PATIENCE));
    // Chapter 6's races spend their time asleep: they run beside the
    // exploring.
    let (explored, raced) = std::thread::scope(|scope| {
        let racing = scope.spawn(|| super::check06_orphans::races(case, &options.seeds));
        let explored = explore(
            &Generated,
            "07",
            &case.patient(PATIENCE),
            reference.as_ref(),
            options.budget,
        );
        (explored, racing.join().expect("racing does not panic"))
    });
    let (explored, (raced, racers)) = (explored?, raced?);
    verdicts.extend(explored.verdicts.into_iter().map(followed));
    verdicts.extend(raced);
    Ok(Checked {
        verdicts,
        processes: everywhere.len() + explored.processes + racers,
    })
}

/// An explored failure's timeline, cut down to the story of the first
/// person it names: a generated scenario's whole history is hundreds of
/// commits long. What is kept: that person's notifications and sends, the
/// starts, crashes and failed commits, and the sweep's commits.
fn followed(mut verdict: Verdict) -> Verdict {
    let Some(first) = verdict.details.first() else {
        return verdict;
    };
    let who = first
        .split([':', ' '])
        .next()
        .unwrap_or_default()
        .to_string();
    if who.is_empty() || verdict.timeline.is_empty() {
        return verdict;
    }
    verdict.timeline.retain(|e| match e.kind {
        Kind::Start | Kind::Crash | Kind::Panic | Kind::CommitFailed | Kind::Error => true,
        Kind::Commit => e.op.as_deref() == Some("sweep"),
        _ => e.subject.as_deref().is_some_and(|s| s.starts_with(&who)),
    });
    verdict
}

/// What a rule says of one played world: its evidence, or the finding
/// that breaks it.
type Judged = std::result::Result<String, Box<Finding>>;

/// Judges one property over the worlds in order: the first that breaks
/// it names the failure; if none does, the chapter's batch gives the evidence.
fn judge(property: &str, played: &[Played], rule: fn(&Played) -> Judged) -> Verdict {
    let mut evidence = None;
    let finding = played.iter().find_map(|played| {
        let finding = match played.trouble() {
            Some(trouble) => played.finding(trouble.clone(), vec![format!("{trouble}.")]),
            None => match rule(played) {
                Ok(e) => {
                    evidence.get_or_insert(e);
                    return None;
                }
                Err(f) => f,
            },
        };
        Some(Finding {
            story: played.history.events.clone(),
            ..*finding
        })
    });
    report::judge(property, evidence.unwrap_or_default(), finding)
}

/// The first three of `lines`, and how many more there are.
fn first_three(lines: impl ExactSizeIterator<Item = String>) -> Vec<String> {
    let more = lines.len().saturating_sub(3);
    let mut details: Vec<String> = lines.take(3).collect();
    if more > 0 {
        details.push(format!("... and {more} more"));
    }
    details
}

fn not_dead(played: &Played) -> Judged {
    // A row the provider refused for good is rightly dead-lettered.
    let w = &played.world;
    let refused = |r: &&Queued| {
        w.people
            .iter()
            .any(|p| p.script == Script::Refused && p.recipient() == r.recipient)
    };
    let dead: Vec<&Queued> = played
        .dead_letters()
        .into_iter()
        .filter(|r| !refused(r))
        .collect();
    let tally = format!("{} of {} rows", dead.len(), played.rows.len());
    if dead.is_empty() {
        return Ok(tally);
    }
    let details = first_three(dead.iter().map(|row| dead_letter(played, row)));
    Err(played.finding(tally, details))
}

fn delivered(played: &Played) -> Judged {
    let w = &played.world;
    let lost: Vec<&Told> = w
        .expected()
        .filter(|t| played.delivered_at(t).is_none())
        .collect();
    let total = w.expected().count();
    let tally = format!("{} of {total} delivered", total - lost.len());
    if lost.is_empty() {
        return Ok(tally);
    }
    let back = w.back();
    let mut details = first_three(lost.iter().map(|t| {
        let recipient = w.people[t.who].recipient();
        let status = played
            .rows
            .iter()
            .find(|r| r.recipient == recipient && r.body == t.text)
            .map(|r| r.status.as_str())
            .unwrap_or("no outbox row");
        format!(
            "{recipient}: \"{}\" was never delivered ({status} at {})",
            t.text,
            clock(w.end)
        )
    }));
    details.push(format!(
        "the {} provider was back at {}; the dispatcher ran on for {}.",
        w.down(),
        clock(back),
        span(w.end - back)
    ));
    Err(played.finding(tally, details))
}

/// The most sends an outage from `from` to `to` may see.
fn bound(from: i64, to: i64) -> usize {
    ((to - from + PROBE_EVERY - 1) / PROBE_EVERY) as usize + EDGE_SLACK
}

fn few_attempts(played: &Played) -> Judged {
    let mut evidence = Vec::new();
    for t in played.world.troubles() {
        let (from, to) = (t.from, t.to);
        let sends: Vec<i64> = played
            .history
            .attempts(t.channel)
            .filter(|d| (from..to).contains(&d.at_ms))
            .map(|d| d.at_ms)
            .collect();
        let most = bound(from, to);
        let tally = format!(
            "{} attempts in {}, at most {most}",
            sends.len(),
            span(to - from)
        );
        if sends.len() > most {
            let first_minute = sends.iter().filter(|&&t| t < from + MINUTE).count();
            return Err(played.finding(tally, vec![
                format!(
                    "the dispatcher tried the {} provider {} times while it was down from {} to {}; {} of them in the first minute.",
                    t.channel,
                    sends.len(),
                    clock(from),
                    clock(to),
                    first_minute
                ),
                format!(
                    "one probe every 30 s makes {}; {EDGE_SLACK} more are allowed for the sends that find it down before the breaker opens.",
                    most - EDGE_SLACK
                ),
            ]));
        }
        evidence.push(tally);
    }
    Ok(evidence.join("; "))
}

fn healthy(played: &Played) -> Judged {
    // A row the provider answered 429 waits the minute it asked for.
    let w = &played.world;
    let down = w.down();
    let limited = |t: &Told| matches!(w.people[t.who].script, Script::Limited(_));
    let working: Vec<&Told> = match w.name {
        Some(_) => w
            .expected()
            .filter(|t| w.people[t.who].channel != down && !limited(t))
            .collect(),
        None => w.expected().filter(|t| w.calm(t)).collect(),
    };
    let up = working.first().map_or("push", |t| w.people[t.who].channel);
    let waits: Vec<(&Told, Option<i64>)> = working
        .iter()
        .map(|t| (*t, played.delivered_at(t).map(|at| at - t.at)))
        .collect();
    let late: Vec<&(&Told, Option<i64>)> = waits
        .iter()
        .filter(|(_, wait)| wait.is_none_or(|w| w > HEALTHY_WITHIN))
        .collect();
    let noun = if up == "push" { "pushes" } else { "emails" };
    let tally = format!(
        "{} of {} {noun} within {}",
        working.len() - late.len(),
        working.len(),
        span(HEALTHY_WITHIN)
    );
    if late.is_empty() {
        return Ok(tally);
    }
    let mut details = first_three(late.iter().map(|(t, wait)| {
        let recipient = w.people[t.who].recipient();
        let published = clock(t.at);
        match wait {
            Some(wait) => format!(
                "{recipient}: \"{}\" published at {published}, delivered at {} ({} later)",
                t.text,
                clock(t.at + wait),
                span(*wait)
            ),
            None => format!(
                "{recipient}: \"{}\" published at {published}, never delivered",
                t.text
            ),
        }
    }));
    details.push(match w.name {
        Some(_) => format!("the {up} provider worked throughout: only the {down} provider was down."),
        None => "each went to an address that works, on a channel with no trouble of its own then, and nobody on it failing in the minutes before.".to_string(),
    });
    Err(played.finding(tally, details))
}

fn lone(played: &Played) -> Judged {
    let w = &played.world;
    let mut gaps = Vec::new();
    let told = w.told();
    let flaky = told
        .iter()
        .filter(|t| matches!(w.people[t.who].script, Script::Flaky(_)));
    for t in flaky {
        let p = &w.people[t.who];
        let (recipient, channel) = (p.recipient(), p.channel);
        let times: Vec<i64> = played.attempts(t).map(|d| d.at_ms).collect();
        let gap = match times.as_slice() {
            [first, second, ..] => Some(second - first),
            _ => None,
        };
        if let Some(g) = gap.filter(|g| (RETRY_AFTER..=RETRY_WITHIN).contains(g)) {
            gaps.push(g);
            continue;
        }
        let what = match (gap, times.first()) {
            (Some(g), Some(&first)) => format!(
                "{recipient}: its first {channel} failed at {}, the retry came {} later, at {}.",
                clock(first),
                span(g),
                clock(first + g)
            ),
            (_, Some(&first)) => format!(
                "{recipient}: its first {channel} failed at {} and was never retried.",
                clock(first)
            ),
            _ => format!("{recipient}: its {channel} was never sent."),
        };
        return Err(Box::new(Finding {
            evidence: match gap {
                Some(g) => format!("retried after {}", span(g)),
                None => "never retried".to_string(),
            },
            scenario: format!(
                "{}: one {channel} at {}, failing once, on a quiet channel that works:",
                w.name.unwrap_or("a world"),
                clock(t.at)
            ),
            details: vec![
                what,
                format!(
                    "one failure out of one send is not an outage: the row should be retried after 5 s, within {}.",
                    span(RETRY_WITHIN)
                ),
            ],
            ..Default::default()
        }));
    }
    let longest = gaps.iter().max().copied().unwrap_or(0);
    Ok(format!("retried within {}", span(longest)))
}

/// Chapter 7's world for the explorer: a dozen people or so on either
/// channel, outages (503s) and hangs on each channel, whose windows overlap
/// the arrivals and each other's; a backlog landing as each one begins and
/// a trickle of notifications while it lasts; bursts and single
/// notifications in between; flaky and dead addresses, some caught in an
/// outage; refusals; sometimes a deploy that restarts the dispatcher.
///
/// Faults go where chapter 7's service survives them by design: in
/// `publish`, and inside `dispatch` and `sweep`, since chapter 6's sweep
/// hands back whatever a lost dispatcher held (the keys make its repeats
/// harmless). A breaker lives in the dispatcher's memory, so a restart
/// begins with closed ones, and the rows a new breaker lets through before
/// it opens again spend attempts that the fault-free run did not: under a
/// fault, only who is told and how each row ends must stay the same. The
/// generator keeps that true of a correct dispatcher: every row that should
/// go out keeps attempts to spare (troubles are short of 5 minutes and
/// begin with a backlog that opens a new breaker at once, a flaky address
/// fails at most twice), no address failing on its own can outweigh the
/// successes of a minute (one per channel, told one thing, in a crowd), a
/// provider that is down refuses nobody, and the scenario runs long enough
/// after its last send for the sweep to hand back what a crash left.
///
/// Chapter 5's backoff is judged on every row, with the shared
/// `retry_gaps` invariant told of the breaker: a failed send that may have
/// been a probe costs its row nothing, so the next probe or the drain may
/// rightly come sooner than the row's backoff; every other failure is
/// followed by its gap, whatever the breaker is doing.
struct Generated;

/// The `Retry-After` of a generated world's 429s, in seconds.
const RETRY_AFTER_S: i64 = 60;

impl Script {
    /// Whether the address's sends fail for reasons of its own, which a
    /// breaker must not mistake for an outage: such a person is told one
    /// thing only, in a crowd.
    fn special(self) -> bool {
        matches!(self, Script::Flaky(_) | Script::Dead)
    }

    /// Whether the provider answers the address with a 4xx of its own (a
    /// refusal, a 429), which says the provider is up.
    fn answers_4xx(self) -> bool {
        matches!(self, Script::Refused | Script::Limited(_))
    }
}

/// Someone the generated world tells things, on the channel they chose.
#[derive(Clone, Debug, Serialize)]
struct Someone {
    name: String,
    channel: &'static str,
    script: Script,
}

impl Addressed for Someone {
    fn name(&self) -> &str {
        &self.name
    }

    fn channel(&self) -> &str {
        self.channel
    }
}

/// One notification: when, to whom (an index into the people), and what.
#[derive(Clone, Debug, Serialize)]
struct Told {
    at: i64,
    who: usize,
    text: String,
}

/// A provider's bad stretch: from `from` to `to`, every send on `channel`
/// fails with a 503, or, for a hang, times out.
#[derive(Clone, Debug, Serialize)]
struct Trouble {
    channel: &'static str,
    from: i64,
    to: i64,
    hang: bool,
}

/// A part of the scenario that can be taken out whole when shrinking: a
/// provider's trouble with the notifications that land during it, or a
/// burst or a single notification in quiet times.
#[derive(Clone, Debug, Serialize)]
struct Stretch {
    trouble: Option<Trouble>,
    told: Vec<Told>,
}

impl Stretch {
    /// One notification told alone, in no trouble.
    fn alone(at: i64, who: usize, text: String) -> Stretch {
        Stretch {
            trouble: None,
            told: vec![Told { at, who, text }],
        }
    }
}

/// A generated scenario.
#[derive(Clone, Debug, Serialize)]
struct World {
    seed: u64,
    /// The chapter's name for one of its own worlds; none for a
    /// generated one.
    name: Option<&'static str>,
    people: Vec<Someone>,
    stretches: Vec<Stretch>,
    /// A deploy: the dispatcher stops here and a new process carries on.
    deploy_at: Option<i64>,
    /// When the scenario ends (see [`World::settled_by`]).
    end: i64,
}

/// No notification lands on a channel this long before its provider's
/// trouble begins, so that a breaker opens on the backlog at once instead
/// of weighing it against a crowd of recent successes.
const QUIET_BEFORE: i64 = 75 * SECOND;
/// The longest trouble: shorter than 5 minutes, so that the sweep hands
/// back a claim lost as a trouble begins only once it is over, and no row
/// can spend its four attempts on one, however often the dispatcher
/// restarts during it. (A restart begins with closed breakers, whose new
/// openings cost rows attempts; with one restart more, in a long outage, a
/// correct dispatcher could rightly dead-letter a row that the fault-free
/// run delivered. The chapter's own worlds have the long outages, and so
/// does a generated lull, which comes after any deploy.)
const LONGEST_TROUBLE: i64 = 4 * MINUTE + 30 * SECOND;
/// Troubles of one channel are at least this far apart, so that the drain
/// after one has left every breaker's window before the next begins.
const TROUBLE_GAP: i64 = 4 * MINUTE;
/// Attempts on a channel from the start of its trouble until this long
/// after its end are the breaker's business: which row probes, which rows
/// the sends that open it fall on, when the backlog drains. The rules fix
/// none of it, so the agreement leaves those attempts out.
const SETTLING: i64 = 2 * MINUTE;
/// The sweep hands back a claim lost in a crash between 5 and 6 minutes
/// later: the scenario runs on this long after its last send.
const SWEPT_WITHIN: i64 = 6 * MINUTE + 30 * SECOND;
/// How long a row's four attempts take: 5 s, 30 s and 5 min apart, and a
/// wake-up.
const RETRIED_FOR: i64 = 5 * MINUTE + 37 * SECOND;
/// A crowd whose flaky address tips the breaker open hears nothing else on
/// its channel for this long before, nor (see [`World::generate`]) after:
/// no earlier send in its breaker's window, and none that an open breaker
/// would hold back.
const TIPPED_QUIET: i64 = 2 * MINUTE;
/// When, after a crowd whose flaky address tips its breaker open, its
/// provider may go down, in seconds: once the breaker's wait is over (its
/// third failure comes 35 s after the crowd), and early enough that the
/// trouble, at most 100 s long, is over before the flaky row's last retry
/// and leaves every later trouble of its channel its gap.
const LATE_PROBE: (u64, u64) = (75, 180);
/// How long a flaky or dead address's row may take: if a crash loses its
/// first attempt, the sweep hands it back 5 to 6 minutes later, and its
/// next two retries come 30 s and 5 min after that.
const SPECIAL_LIFE: i64 = 12 * MINUTE;
/// How long a poison message's row may take from its publish: each of its
/// four attempts may end in the sweep, 5 to 6 minutes later, with a
/// wake-up either side: a send that kills its dispatcher does, and so does
/// a 429 whose answer a failing commit lost.
const POISON_LIFE: i64 = 4 * (ORPHANED_AFTER + SWEEP + 2 * TICK) + MINUTE;

impl World {
    fn generate(seed: u64) -> World {
        // Seeded from the seed's own random bits: nearby seeds draw
        // unrelated worlds.
        let mut rng = Rng::new(Rng::new(seed ^ 0x0707_0707).next_u64());
        // What widens the world past its first shape is drawn from a stream
        // of its own, so that the rest is drawn as before.
        let mut more = Rng::new(seed ^ 0x0707_5eed_b0a7);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let count = rng.between(8, 14) as usize;
        let mut people: Vec<Someone> = names[..count]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                // Three people on each channel whose addresses work.
                let channel = match i {
                    0..=2 => "email",
                    3..=5 => "push",
                    _ if rng.between(0, 4) < 3 => "email",
                    _ => "push",
                };
                let script = match (i, rng.between(0, 19)) {
                    (0..=5, _) => Script::Fine,
                    (_, 0..=6) => Script::Fine,
                    (_, 7..=11) => Script::Flaky(rng.between(1, 3) as u32),
                    (_, 12..=15) => Script::Dead,
                    (_, 16 | 17) => Script::Refused,
                    // No draw of its own, so the rest of the world is
                    // drawn as it was before 429s were generated.
                    (_, n) => Script::Limited(n as u32 - 17),
                };
                Someone {
                    name: name.to_string(),
                    channel,
                    script,
                }
            })
            .collect();
        // Every other seed has a dead address among the extra people, told
        // away from any trouble (below), so that the learner's quick check
        // always sees all four attempts of one row and chapter 5's gaps
        // between them. Set after the draws, so the rest of the world is
        // drawn as before.
        let dead_in_the_clear = seed % 2 == 1;
        if dead_in_the_clear {
            people[6].script = Script::Dead;
        }
        // On each channel, one dead address and nobody else who fails on
        // their own, or flaky addresses, any number. A dead address fails
        // three times in 35 s: a crash can take its crowd away and hand it
        // back with a flaky one's failures, the breaker then rightly opens
        // on a provider that works, and once the flaky row got through, its
        // probes find only the dead row, for ever, since a failed probe
        // costs its row nothing: the rules cannot tell that from an outage.
        // Flaky addresses alone get through on a later probe and close the
        // breaker, so several of them may share a minute: five failures or
        // more among more successes, which a breaker that counts failures
        // alone mistakes for an outage.
        for channel in ["email", "push"] {
            let on = |p: &Someone| p.channel == channel && p.script.special();
            let dead = people
                .iter()
                .position(|p| on(p) && p.script == Script::Dead);
            let first = people.iter().position(on);
            let keep = dead.or(first);
            for (k, p) in people.iter_mut().enumerate() {
                if on(p) && Some(k) != keep && (dead.is_some() || p.script == Script::Dead) {
                    p.script = Script::Fine;
                }
            }
        }
        let mut world = World {
            seed,
            name: None,
            people,
            stretches: Vec::new(),
            deploy_at: None,
            end: 0,
        };
        let mut texts = 0usize;
        let mut text = move || {
            texts += 1;
            numbered(texts - 1)
        };

        // The providers' troubles: up to three, on either channel, apart
        // on one channel, overlapping across the two.
        let troubles = *rng.pick(&[0, 1, 2, 2, 2, 3, 3]);
        let mut placed: Vec<Trouble> = Vec::new();
        for _ in 0..troubles {
            for _ in 0..5 {
                let channel = if rng.between(0, 1) == 0 {
                    "email"
                } else {
                    "push"
                };
                let from = rng.between(10, 300) as i64 * SECOND;
                let to = from + rng.between(20, (LONGEST_TROUBLE / SECOND) as u64) as i64 * SECOND;
                let clear = placed
                    .iter()
                    .filter(|t| t.channel == channel)
                    .all(|t| from >= t.to + TROUBLE_GAP || to + TROUBLE_GAP <= t.from);
                if clear {
                    placed.push(Trouble {
                        channel,
                        from,
                        to,
                        hang: rng.between(0, 2) == 0,
                    });
                    break;
                }
            }
        }
        placed.sort_by_key(|t| t.from);
        // One trouble in four is over before the breaker's first probe:
        // that probe finds the provider back, and what waited goes out at
        // once.
        for t in placed.iter_mut() {
            if more.between(0, 3) == 0 {
                t.to = t.from + more.between(12, 28) as i64 * SECOND;
            }
        }
        for trouble in &placed {
            let pool = world.crowd(trouble.channel, !trouble.hang);
            let mut told = Vec::new();
            // The backlog lands as the trouble begins; one time in five
            // it is more than one claim takes.
            let mut backlog = rng.between(6, 10);
            if more.between(0, 4) == 0 {
                backlog = more.between(BATCH + 2, BATCH + 14);
            }
            for _ in 0..backlog {
                told.push(Told {
                    at: trouble.from,
                    who: *rng.pick(&pool),
                    text: text(),
                });
            }
            // Then one or two notifications every 12 to 35 s while it lasts.
            let mut at = trouble.from + rng.between(12, 35) as i64 * SECOND;
            while at < trouble.to {
                for _ in 0..rng.between(1, 2) {
                    told.push(Told {
                        at,
                        who: *rng.pick(&pool),
                        text: text(),
                    });
                }
                at += rng.between(12, 35) as i64 * SECOND;
            }
            world.stretches.push(Stretch {
                trouble: Some(trouble.clone()),
                told,
            });
        }
        let horizon = placed
            .iter()
            .map(|t| t.to + 2 * MINUTE)
            .max()
            .unwrap_or(0)
            .max(4 * MINUTE);
        // A time up to `latest` for a notification on `channel` that does
        // not land just before its provider's trouble, nor, when `down` is
        // false, during an outage (a provider that is down refuses nothing:
        // it answers 503 to everyone, so a refusal would tell a breaker it
        // is well).
        let quiet = |rng: &mut Rng, channel: &str, down: bool, latest: i64| -> Option<i64> {
            (0..10).find_map(|_| {
                let at = rng.between(0, (latest / SECOND) as u64) as i64 * SECOND;
                let near = placed.iter().any(|t| {
                    let end = match down || t.hang {
                        true => t.from,
                        false => t.to + SETTLING,
                    };
                    t.channel == channel && (t.from - QUIET_BEFORE..end).contains(&at)
                });
                (!near).then_some(at)
            })
        };
        // Bursts in quiet stretches, each of 6 to 9 people.
        for _ in 0..rng.between(0, 2) {
            let channel = if rng.between(0, 1) == 0 {
                "email"
            } else {
                "push"
            };
            let Some(at) = quiet(&mut rng, channel, true, horizon) else {
                continue;
            };
            let pool = world.crowd(channel, world.unsettled(channel, at));
            let told = (0..rng.between(6, 9))
                .map(|_| Told {
                    at,
                    who: *rng.pick(&pool),
                    text: text(),
                })
                .collect();
            world.stretches.push(Stretch {
                trouble: None,
                told,
            });
        }
        // Single notifications.
        for _ in 0..rng.between(2, 8) {
            let channel = if rng.between(0, 1) == 0 {
                "email"
            } else {
                "push"
            };
            let pool = world.crowd(channel, false);
            let who = *rng.pick(&pool);
            let refused = world.people[who].script.answers_4xx();
            let Some(at) = quiet(&mut rng, channel, !refused, horizon) else {
                continue;
            };
            world.stretches.push(Stretch::alone(at, who, text()));
        }
        // Flaky and dead addresses are told one thing each: last of all
        // while their provider is in trouble, or in a crowd: in a backlog
        // as their provider goes down, or in a burst of their own
        // among at least six people whose sends work, in a quiet stretch or
        // once their provider's troubles have settled, where all four of a
        // dead address's attempts show chapter 5's backoff.
        // The crowds made for one troubled address, by channel: a second
        // may join one, with three more people whose sends work.
        let mut crowds: Vec<(&'static str, usize)> = Vec::new();
        for who in 0..world.people.len() {
            let p = world.people[who].clone();
            if !p.script.special() {
                continue;
            }
            let joined = crowds.iter().position(|&(c, _)| c == p.channel);
            if let Some(k) = joined.filter(|_| more.between(0, 2) > 0) {
                let (_, i) = crowds[k];
                let at = world.stretches[i].told[0].at;
                let pool = world.crowd(p.channel, world.unsettled(p.channel, at));
                let told = &mut world.stretches[i].told;
                // Three people whose sends work, then the address itself;
                // and before it, one told a little later, while a breaker
                // that counts the crowd's failures alone would hold the
                // channel shut.
                for k in 0..4 {
                    if k == 3 {
                        let late = at + more.between(8, 25) as i64 * SECOND;
                        let later = *more.pick(&pool);
                        told.push(Told {
                            at: late,
                            who: later,
                            text: text(),
                        });
                    }
                    let place = more.between(0, told.len() as u64) as usize;
                    let who = if k < 3 { *more.pick(&pool) } else { who };
                    told.insert(
                        place,
                        Told {
                            at,
                            who,
                            text: text(),
                        },
                    );
                }
                continue;
            }
            let backlogs: Vec<usize> = (0..world.stretches.len())
                .filter(|&i| {
                    let s = &world.stretches[i];
                    s.trouble.as_ref().is_some_and(|t| t.channel == p.channel)
                })
                .collect();
            // Or a dead address alone, 40 to 54 s before a trouble of its
            // channel: its three failures come before the trouble, and
            // its 5-minute backoff runs on through the breaker's first
            // probes, which must not take it before its time.
            let ahead: Vec<i64> = placed
                .iter()
                .filter(|t| t.channel == p.channel && t.from >= MINUTE)
                .map(|t| t.from)
                .collect();
            let lone = p.script == Script::Dead && !(dead_in_the_clear && who == 6);
            if lone && !ahead.is_empty() && more.between(0, 2) == 0 {
                let (early, late) = DEAD_AHEAD;
                let at = *more.pick(&ahead) - more.between(early, late) as i64 * SECOND;
                world.stretches.push(Stretch::alone(at, who, text()));
                continue;
            }
            let choice = match rng.between(0, 3) {
                0 | 3 if dead_in_the_clear && who == 6 => 1,
                choice => choice,
            };
            if !backlogs.is_empty() && choice == 3 {
                // The last to land while its provider is in trouble: the
                // newest row when the trouble ends, and the one a breaker
                // that always probes the newest row would try for ever.
                let i = *rng.pick(&backlogs);
                let last = world.stretches[i].told.iter().map(|t| t.at).max();
                let at = last.unwrap_or_default();
                world.stretches[i].told.push(Told {
                    at,
                    who,
                    text: text(),
                });
                continue;
            }
            if !backlogs.is_empty() && choice == 0 {
                let i = *rng.pick(&backlogs);
                let at = world.stretches[i].trouble.as_ref().map_or(0, |t| t.from);
                let told = Told {
                    at,
                    who,
                    text: text(),
                };
                // Sixth in the backlog, which lands in this order: the first
                // row a breaker that opens on five failures holds back, and
                // so the first it probes. Or first of all: the oldest row,
                // which a breaker that probes the oldest row first would
                // try for ever.
                let place = match more.between(0, 1) {
                    0 => 0,
                    _ => world.stretches[i].told.len().min(5),
                };
                world.stretches[i].told.insert(place, told);
                continue;
            }
            // Once the last trouble of its channel has settled; or early
            // enough that its retries, even after a crash, do not make the
            // scenario longer.
            let settled = placed
                .iter()
                .filter(|t| t.channel == p.channel)
                .map(|t| t.to + SETTLING)
                .max();
            let clear = |at: i64| {
                placed
                    .iter()
                    .filter(|t| t.channel == p.channel)
                    .all(|t| at >= t.to + SETTLING || at + RETRIED_FOR + QUIET_BEFORE < t.from)
            };
            let latest = (horizon - 4 * MINUTE).max(MINUTE);
            let early = (0..10)
                .map(|_| rng.between(0, (latest / SECOND) as u64) as i64 * SECOND)
                .find(|&at| clear(at));
            let at = match (settled, early) {
                (Some(after), _) if choice == 1 => after + rng.between(0, 60) as i64 * SECOND,
                (_, Some(at)) => at,
                (Some(after), None) => after + rng.between(0, 60) as i64 * SECOND,
                (None, None) => continue,
            };
            let pool = world.crowd(p.channel, world.unsettled(p.channel, at));
            let mut told: Vec<Told> = (0..rng.between(6, 8))
                .map(|_| Told {
                    at,
                    who: *rng.pick(&pool),
                    text: text(),
                })
                .collect();
            let place = rng.between(0, told.len() as u64) as usize;
            told.insert(
                place,
                Told {
                    at,
                    who,
                    text: text(),
                },
            );
            crowds.push((p.channel, world.stretches.len()));
            world.stretches.push(Stretch {
                trouble: None,
                told,
            });
        }
        if rng.between(0, 1) == 0 {
            let last = world.last_activity();
            world.deploy_at = Some(rng.between(5, (last / SECOND + 60) as u64) as i64 * SECOND);
        }
        // An address the provider refuses or slows down waits out an
        // outage in its backlog: a provider that is down answers it 503
        // like everyone, and once it is back, its 4xx says it is up.
        for i in 0..world.stretches.len() {
            let Some(trouble) = world.stretches[i].trouble.clone() else {
                continue;
            };
            let answering: Vec<usize> = (0..world.people.len())
                .filter(|&w| {
                    let p = &world.people[w];
                    p.channel == trouble.channel && p.script.answers_4xx()
                })
                .collect();
            if trouble.hang || answering.is_empty() || more.between(0, 1) == 0 {
                continue;
            }
            // Half the time, an address it refuses or slows down goes
            // sixth: the first row a breaker that opens on five failures
            // holds back, and so the first it probes. When the trouble is
            // over by then, the refusal or the 429 is how a provider that
            // is back answers that probe: an answer, not a failure.
            let told = &mut world.stretches[i].told;
            let (place, who) = match more.between(0, 1) {
                0 => (told.len().min(5), *more.pick(&answering)),
                _ => (
                    more.between(0, told.len() as u64) as usize,
                    *more.pick(&answering),
                ),
            };
            told.insert(
                place,
                Told {
                    at: trouble.from,
                    who,
                    text: text(),
                },
            );
        }
        // Half the worlds end with someone new whose first send fails,
        // told alone once every other send has left the breaker's window:
        // one failure of one send in a minute, which no minimum lets open
        // a breaker, however busy the channel was before.
        if more.between(0, 1) == 0 {
            let channel = *more.pick(&["email", "push"]);
            let wait = more.between(150, 210) as i64 * SECOND;
            world.tell_newcomer(&names, channel, Script::Flaky(1), text(), |w| {
                w.last_activity() + wait
            });
        }
        // One world in four has a flaky address that fails three times in
        // a crowd of only two whose sends work, on a channel that hears
        // nothing else for minutes either side: its third failure makes
        // three of five sends in the window, so a breaker with the
        // chapter's numbers opens on a provider that works, and when its
        // probe is due nothing is: the row sits out its 5-minute backoff,
        // which no probe may cut short. (Larger numbers never open there.)
        // Drawn from a stream of its own, after everything but the poison.
        let mut tip = Rng::new(seed ^ 0x0707_7199_c0de);
        let channel = *tip.pick(&["email", "push"]);
        // Not on a channel with an address that always fails: a crash may
        // hand its retries back late, into the open breaker, whose probes
        // would then find it for ever.
        let dead = world.has_dead(channel);
        if tip.between(0, 3) == 0 && !dead {
            let jitter = tip.between(0, 30) as i64 * SECOND;
            let at = world.quiet_slot(channel, TIPPED_QUIET, RETRIED_FOR + TIPPED_QUIET, jitter);
            let fine = world.fine_on(channel);
            let two = [*tip.pick(&fine), *tip.pick(&fine)];
            let flaky = text();
            let stretch = world.stretches.len();
            world.tell_newcomer(&names, channel, Script::Flaky(3), flaky, |_| at);
            let added = world.stretches.len() > stretch;
            for who in two.into_iter().filter(|_| added) {
                let told = Told {
                    at,
                    who,
                    text: text(),
                };
                let place = tip.between(0, world.stretches[stretch].told.len() as u64) as usize;
                world.stretches[stretch].told.insert(place, told);
            }
            // Half of those see their provider go down while the breaker
            // is open with nothing due, before the flaky row's last retry:
            // the first of the trouble's backlog is a probe that goes out
            // late, long after the wait ended, and fails, so the breaker
            // must wait its whole 30 s again from that failure.
            if added && tip.between(0, 1) == 0 {
                let from = at + tip.between(LATE_PROBE.0, LATE_PROBE.1) as i64 * SECOND;
                let trouble = Trouble {
                    channel,
                    from,
                    to: from + tip.between(35, 100) as i64 * SECOND,
                    hang: tip.between(0, 2) == 0,
                };
                let count = tip.between(3, 8);
                world.backlog(trouble, count, &mut tip, &mut text);
            }
        }
        // One world in four has a crowd on a working provider whose
        // failures outnumber its deliveries but not its deliveries and
        // refusals together: addresses that fail once each, one or two
        // more than the addresses it delivers to, among addresses it
        // refuses or slows down. A refusal or a 429 is a send that did not
        // fail, so the breaker stays closed and the failures are retried
        // 5 s later; a breaker that leaves answers out of its window sees
        // mostly failures. Drawn from a stream of its own, in a quiet
        // stretch of its channel.
        // Not on a channel with an address that always fails, for the
        // reason above.
        let mut mixed = Rng::new(seed ^ 0x0707_4e75_5e15);
        let channel = *mixed.pick(&["email", "push"]);
        let dead = world.has_dead(channel);
        if mixed.between(0, 3) == 0 && !dead {
            let delivered = mixed.between(1, 2);
            let failing = delivered + mixed.between(1, 2);
            let answered = failing - delivered + 1 + mixed.between(0, 1);
            let jitter = mixed.between(0, 30) as i64 * SECOND;
            let at = world.quiet_slot(channel, TIPPED_QUIET, 2 * MINUTE, jitter);
            let fine = world.fine_on(channel);
            let mut answering: Vec<usize> = (0..delivered).map(|_| *mixed.pick(&fine)).collect();
            for _ in 0..answered {
                let script = *mixed.pick(&[Script::Refused, Script::Limited(1)]);
                answering.extend(world.newcomer(&names, channel, script));
            }
            mixed.shuffle(&mut answering);
            let failures: Vec<usize> = (0..failing)
                .filter_map(|_| world.newcomer(&names, channel, Script::Flaky(1)))
                .collect();
            // Only when there were names enough for the whole crowd. It
            // lands in this order, which is the order of its sends, either
            // way round: a failure after each answer, and an answer last,
            // so that failures are never more than half of the sends so
            // far, at any send.
            if (answering.len() + failures.len()) as u64 == delivered + failing + answered {
                let mut answers = answering.into_iter();
                let mut who: Vec<usize> = Vec::new();
                for failure in failures {
                    who.extend(answers.next());
                    who.push(failure);
                }
                who.extend(answers);
                let told = who
                    .into_iter()
                    .map(|who| Told {
                        at,
                        who,
                        text: text(),
                    })
                    .collect();
                world.stretches.push(Stretch {
                    trouble: None,
                    told,
                });
            }
        }
        // One world in four ends with a lull: a trouble of 8 to 12 minutes
        // on one channel, a 503 or a hang, over a backlog of 4 to 7 rows and
        // nothing more on that channel until it is back. The breaker's
        // probes come back to the same few rows again and again, so a failed
        // probe must cost its row nothing, or the lull dead-letters them.
        // It comes once everything else has settled, after any deploy: a
        // restart inside it begins with a closed breaker whose sends cost
        // rows attempts, and one restart more than a fault could rightly
        // spend a row's last. Drawn from a stream of its own.
        let mut lull = Rng::new(seed ^ 0x0707_1011_5eed);
        if lull.between(0, 3) == 0 {
            let channel = *lull.pick(&["email", "push"]);
            let from = world.settled_by() + lull.between(0, 60) as i64 * SECOND;
            let trouble = Trouble {
                channel,
                from,
                to: from + lull.between(16, 24) as i64 * PROBE_EVERY,
                hang: lull.between(0, 1) == 0,
            };
            let count = lull.between(4, 7);
            world.backlog(trouble, count, &mut lull, &mut text);
        }
        // One world in six ends with a poison message (chapter 6):
        // every send of it past its first 429s, if it meets any, kills the
        // dispatcher sending it, and only the sweep moves it on, counting each lost attempt,
        // until it dead-letters it on its last. It is told alone once
        // everything else has settled, so no other row is claimed beside
        // it. Drawn from a stream of its own.
        let mut venom = Rng::new(seed ^ 0x0707_9015_0e5a);
        if venom.between(0, 5) == 0 {
            let channel = *venom.pick(&["email", "push"]);
            let script = Script::Poison(venom.between(0, 3) as u32);
            let wait = venom.between(0, 60) as i64 * SECOND;
            world.tell_newcomer(&names, channel, script, text(), |w| w.settled_by() + wait);
        }
        // One outage in two of those over before the breaker's first
        // probe gets a newcomer sixth in its backlog, whom the provider
        // refuses or slows down: the first row a breaker that opens on five
        // failures holds back, and so its first probe, which the provider,
        // back by then, answers with a 4xx. That answer says it is up.
        // Drawn from a stream of its own, last of all.
        let mut answer = Rng::new(seed ^ 0x0707_4290_a115);
        for i in 0..world.stretches.len() {
            let Some(trouble) = world.stretches[i].trouble.clone() else {
                continue;
            };
            let short = trouble.to - trouble.from < PROBE_EVERY;
            if trouble.hang || !short || answer.between(0, 1) == 0 {
                continue;
            }
            let script = *answer.pick(&[Script::Refused, Script::Limited(1)]);
            let Some(who) = world.newcomer(&names, trouble.channel, script) else {
                break;
            };
            let told = Told {
                at: trouble.from,
                who,
                text: text(),
            };
            let backlog = &mut world.stretches[i].told;
            backlog.insert(backlog.len().min(5), told);
        }
        world.ended()
    }

    /// The world of `seed` with each backlog larger than a claim grown to
    /// eight to ten claims, so that its drain outlasts the 10 s in which
    /// the other channel must still be told; and the other channel told
    /// something every 2 to 5 s while it drains, from the trouble's end
    /// until after the breaker's first probe. Drawn from a stream of its
    /// own. Only the working channel's rule reads such a world, played
    /// without faults ([`DRAINS`]): every play of one costs about a second.
    fn draining(seed: u64) -> World {
        let mut world = World::generate(seed);
        let mut big = Rng::new(seed ^ 0x0707_b16b_ac10);
        let mut texts = world.told().len();
        let mut text = move || {
            texts += 1;
            numbered(texts - 1)
        };
        for i in 0..world.stretches.len() {
            let Some(trouble) = world.stretches[i].trouble.clone() else {
                continue;
            };
            let landed = world.stretches[i].told.iter();
            let backlog = landed.filter(|t| t.at == trouble.from).count() as u64;
            if backlog <= BATCH {
                continue;
            }
            let pool = world.crowd(trouble.channel, !trouble.hang);
            for _ in 0..big.between(7 * BATCH, 9 * BATCH) {
                let who = *big.pick(&pool);
                world.stretches[i].told.push(Told {
                    at: trouble.from,
                    who,
                    text: text(),
                });
            }
            let other = if trouble.channel == "email" {
                "push"
            } else {
                "email"
            };
            let fine: Vec<usize> = world
                .crowd(other, false)
                .into_iter()
                .filter(|&k| world.people[k].script == Script::Fine)
                .collect();
            let mut told = Vec::new();
            let mut at = trouble.to + big.between(0, 5) as i64 * SECOND;
            while at < trouble.to + PROBE_EVERY + 15 * SECOND {
                let near = world.troubles().any(|t| {
                    t.channel == other && (t.from - QUIET_BEFORE..t.to + SETTLING).contains(&at)
                });
                if !near {
                    told.push(Told {
                        at,
                        who: *big.pick(&fine),
                        text: text(),
                    });
                }
                at += big.between(2, 5) as i64 * SECOND;
            }
            world.stretches.push(Stretch {
                trouble: None,
                told,
            });
        }
        world.ended()
    }

    /// Whether `t`, in a generated world, must reach its person within
    /// [`HEALTHY_WITHIN`], as on a channel that works: its address works,
    /// its channel has no trouble going on or settling, nobody on its
    /// channel fails on their own in the minutes before (such failures
    /// may rightly open a breaker on a provider that works), and no deploy
    /// or poison message is near.
    fn calm(&self, t: &Told) -> bool {
        let p = &self.people[t.who];
        let soon = t.at + HEALTHY_WITHIN;
        let troubled = self.stretches.iter().flat_map(|s| &s.told).any(|o| {
            let q = &self.people[o.who];
            let poison = matches!(q.script, Script::Poison(_)) && o.at <= soon;
            let near = (t.at - SPECIAL_LIFE..=soon).contains(&o.at);
            poison || (q.channel == p.channel && q.script != Script::Fine && near)
        });
        let deployed = self
            .deploy_at
            .is_some_and(|d| (d - HEALTHY_WITHIN..=d + HEALTHY_WITHIN).contains(&t.at));
        p.script == Script::Fine
            && !self.unsettled(p.channel, t.at)
            && !self.unsettled(p.channel, soon)
            && !troubled
            && !deployed
    }

    /// Whom a crowd on `channel` may include: people told any number of
    /// things; while its provider is `down`, not those it refuses or
    /// rate-limits (the lab answers their 4xx before the outage's 503, and
    /// a provider that is down answers 503 to everyone: a 4xx would tell a
    /// breaker it is well).
    fn crowd(&self, channel: &str, down: bool) -> Vec<usize> {
        (0..self.people.len())
            .filter(|&i| {
                let p = &self.people[i];
                p.channel == channel && !p.script.special() && !(down && p.script.answers_4xx())
            })
            .collect()
    }

    /// `trouble`, with `count` notifications landing as it begins, each to
    /// someone `rng` picks from the crowd its channel may tell then.
    fn backlog(
        &mut self,
        trouble: Trouble,
        count: u64,
        rng: &mut Rng,
        text: &mut impl FnMut() -> String,
    ) {
        let pool = self.crowd(trouble.channel, !trouble.hang);
        let told = (0..count)
            .map(|_| Told {
                at: trouble.from,
                who: *rng.pick(&pool),
                text: text(),
            })
            .collect();
        self.stretches.push(Stretch {
            trouble: Some(trouble),
            told,
        });
    }

    /// Someone new to the world, with the first name of `names` nobody
    /// has, told `text` alone at the time `at` gives once they are in it
    /// (nobody, when every name is taken).
    fn tell_newcomer(
        &mut self,
        names: &[&str],
        channel: &'static str,
        script: Script,
        text: String,
        at: impl FnOnce(&World) -> i64,
    ) {
        let Some(who) = self.newcomer(names, channel, script) else {
            return;
        };
        let at = at(self);
        self.stretches.push(Stretch::alone(at, who, text));
    }

    /// Someone new to the world, with the first name of `names` nobody
    /// has: their index among the people (none, when every name is taken).
    fn newcomer(&mut self, names: &[&str], channel: &'static str, script: Script) -> Option<usize> {
        let used: Vec<&str> = self.people.iter().map(|p| p.name.as_str()).collect();
        let name = names.iter().find(|n| !used.contains(n))?;
        self.people.push(Someone {
            name: name.to_string(),
            channel,
            script,
        });
        Some(self.people.len() - 1)
    }

    /// The people on `channel` whose sends all work.
    fn fine_on(&self, channel: &str) -> Vec<usize> {
        (0..self.people.len())
            .filter(|&i| {
                let p = &self.people[i];
                p.channel == channel && p.script == Script::Fine
            })
            .collect()
    }

    /// Whether someone on `channel` has an address that always fails.
    fn has_dead(&self, channel: &str) -> bool {
        self.people
            .iter()
            .any(|p| p.channel == channel && p.script == Script::Dead)
    }

    /// The earliest time on `channel`, at the start or after something
    /// busy there, then `jitter` later, with nothing busy from `before` it
    /// to `after` it. Busy are each notification, with the retries of an
    /// address that fails on its own, and each trouble, from the quiet
    /// before it to its settling.
    fn quiet_slot(&self, channel: &str, before: i64, after: i64, jitter: i64) -> i64 {
        let busy: Vec<(i64, i64)> = self
            .told()
            .iter()
            .filter(|t| self.people[t.who].channel == channel)
            .map(|t| match self.people[t.who].script.special() {
                true => (t.at, t.at + RETRIED_FOR),
                false => (t.at, t.at),
            })
            .chain(
                self.troubles()
                    .filter(|t| t.channel == channel)
                    .map(|t| (t.from - QUIET_BEFORE, t.to + SETTLING)),
            )
            .collect();
        let fits = |at: i64| busy.iter().all(|&(a, b)| b < at - before || a > at + after);
        std::iter::once(0)
            .chain(busy.iter().map(|&(_, b)| b))
            .map(|end| end + before + jitter)
            .filter(|&at| fits(at))
            .min()
            .unwrap_or_default()
    }

    fn troubles(&self) -> impl Iterator<Item = &Trouble> {
        self.stretches.iter().filter_map(|s| s.trouble.as_ref())
    }

    /// Every notification, in the order they land.
    fn told(&self) -> Vec<&Told> {
        let mut told: Vec<&Told> = self.stretches.iter().flat_map(|s| &s.told).collect();
        told.sort_by_key(|t| t.at);
        told
    }

    /// When the last trouble ends or the last notification lands.
    fn last_activity(&self) -> i64 {
        let told = self.told().last().map_or(0, |t| t.at);
        let trouble = self.troubles().map(|t| t.to).max().unwrap_or(0);
        told.max(trouble)
    }

    /// The trouble of `channel` going on at `at`, or settling after it.
    fn unsettled(&self, channel: &str, at: i64) -> bool {
        self.troubles()
            .any(|t| t.channel == channel && (t.from..t.to + SETTLING).contains(&at))
    }

    /// When the scenario ends: once every row has had its last attempt,
    /// even if a crash lost that attempt and the sweep handed it back, with
    /// a breaker or without one.
    fn settled_by(&self) -> i64 {
        let mut last = self.last_activity() + SETTLING + SWEPT_WITHIN;
        for told in self.told() {
            let p = &self.people[told.who];
            let special = p.script.special();
            // Sent at once, or, for an address that fails on its own, with
            // its retries.
            let life = match special {
                true => SPECIAL_LIFE,
                false => MINUTE + SWEPT_WITHIN,
            };
            last = last.max(told.at + life);
            if let Script::Poison(_) = p.script {
                last = last.max(told.at + POISON_LIFE);
            }
            // A row that lands in a trouble: a breaker holds it until the
            // trouble is over; a dispatcher without one spends its retries
            // on it.
            let trouble_end = self
                .troubles()
                .filter(|t| t.channel == p.channel && (t.from..t.to).contains(&told.at))
                .map(|t| t.to)
                .max();
            if let Some(to) = trouble_end {
                last = last.max(to + MINUTE + life);
                last = last.max(told.at + RETRIED_FOR + SWEPT_WITHIN);
            }
        }
        if let Some(at) = self.deploy_at {
            last = last.max(at + MINUTE);
        }
        last
    }

    /// The same world, ending when it has settled.
    fn ended(self) -> World {
        World {
            end: self.settled_by(),
            ..self
        }
    }

    /// "ada@example.com: Sam commented on the picnic (#3)"
    fn subject(&self, told: &Told) -> String {
        format!("{}: {}", self.people[told.who].recipient(), told.text)
    }

    fn provider(&self, channel: &str) -> ProviderScript {
        let scripts: Vec<(String, Script)> = self
            .people
            .iter()
            .filter(|p| p.channel == channel)
            .map(|p| (p.recipient(), p.script))
            .collect();
        let windows = |hang: bool| {
            self.troubles()
                .filter(|t| t.channel == channel && t.hang == hang)
                .map(|t| (t.from, t.to))
                .collect()
        };
        ProviderScript {
            outages: windows(false),
            hangs: windows(true),
            ..provider(&scripts, RETRY_AFTER_S)
        }
    }

    /// The steps covering simulated time `[from, to)`.
    fn steps(&self, from: i64, to: i64) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut at = None;
        for told in self.told() {
            if !(from..to).contains(&told.at) {
                continue;
            }
            if at != Some(told.at) {
                if told.at > from {
                    steps.push(schedule(told.at));
                }
                at = Some(told.at);
            }
            let p = &self.people[told.who];
            let notice = Notice {
                person: p.name.clone(),
                kind: "comment_added".to_string(),
                text: told.text.clone(),
            };
            steps.push(Step::with("publish", &notice, &self.subject(told)));
        }
        steps.push(schedule(to));
        steps
    }

    fn plans(&self, dir: &Path) -> Vec<Plan> {
        let end = self.end;
        let cut = self.deploy_at.unwrap_or(end).min(end);
        let plan = |process: u32, steps: Vec<Step>| Plan {
            dir: dir.to_path_buf(),
            process,
            fixture: Vec::new(),
            steps,
            fault: None,
            provider: self.provider("email"),
            push: self.provider("push"),
            seed: self.seed,
            ..Plan::default()
        };
        let mut first = plan(1, self.steps(0, cut));
        first.fixture = self.people.iter().map(Addressed::fixture).collect();
        let mut plans = vec![first];
        if cut < end {
            plans.push(plan(2, self.steps(cut, end)));
        }
        plans
    }
}

/// What the `n`-th thing that happens in a story is: "Sam commented on
/// the picnic". Everything that happens gets a text of its own, so no one
/// is told the same thing twice.
fn happening(n: usize) -> String {
    let (_, doing) = DOINGS[n % DOINGS.len()];
    format!(
        "{} {doing} {}",
        ACTORS[n % ACTORS.len()],
        EVENTS[n % EVENTS.len()]
    )
}

/// `names` on `channel`, their addresses treated as `script` says.
fn people(names: &[&str], channel: &'static str, script: Script) -> Vec<Someone> {
    names
        .iter()
        .map(|name| Someone {
            name: name.to_string(),
            channel,
            script,
        })
        .collect()
}

/// The chapter's own worlds: one trouble of one provider, the people they
/// name, told what happens in the order the chapter tells it. Each is a
/// [`World`] like the generated ones, with a name and an end of its own.
impl World {
    /// A named world with `people` and one `trouble`, which runs until
    /// [`DRAIN`] after the trouble ends.
    fn named(name: &'static str, people: Vec<Someone>, trouble: Trouble) -> World {
        World {
            seed: 0,
            name: Some(name),
            people,
            end: trouble.to + DRAIN,
            stretches: vec![Stretch {
                trouble: Some(trouble),
                told: Vec::new(),
            }],
            deploy_at: None,
        }
    }

    /// The next thing happens at `at` and the people at `who` are told it.
    fn publish(&mut self, at: i64, who: impl IntoIterator<Item = usize>) {
        let happened = self.stretches[0].told.iter().map(|t| &t.text);
        let n = happened.collect::<std::collections::BTreeSet<_>>().len();
        let text = happening(n);
        let told = who.into_iter().map(|who| Told {
            at,
            who,
            text: text.clone(),
        });
        let told: Vec<Told> = told.collect();
        self.stretches[0].told.extend(told);
    }

    /// The chapter's batch: the email provider is down from 0:00 to 10:00.
    /// At 0:00 two things happen that fourteen people hear about, ten by
    /// email and four by push; then one person is told something every
    /// 30 s, every third time by push.
    fn chapter() -> World {
        let mut everyone = people(&NAMES[..10], "email", Script::Fine);
        everyone.extend(people(&NAMES[10..14], "push", Script::Fine));
        let mut w = World::named(
            "the chapter's batch",
            everyone,
            Trouble::down("email", 0, 10 * MINUTE),
        );
        w.publish(0, 0..14);
        w.publish(0, 0..10);
        for i in 1..20usize {
            let who = match i % 3 {
                0 => 10 + (i / 3) % 4,
                _ => i % 10,
            };
            w.publish(i as i64 * 30 * SECOND, [who]);
        }
        w
    }

    /// The push provider is down for 8 minutes with only three pushes
    /// waiting, while email is quiet: one email, at 1:00, whose first send
    /// fails.
    fn quiet() -> World {
        let mut everyone = people(&["ada"], "email", Script::Flaky(1));
        everyone.extend(people(&NAMES[10..13], "push", Script::Fine));
        let mut w = World::named(
            "the long push outage",
            everyone,
            Trouble::down("push", 0, 8 * MINUTE),
        );
        w.publish(0, 1..4);
        w.publish(MINUTE, [0]);
        w
    }

    /// A busy morning, then a hang: four people get an email every 10 s
    /// until 2:50, 72 sends that all go through. From 4:00 to 11:00 the
    /// email provider stops answering: every send times out. At 4:00 eight
    /// people by email and three by push are told something, then one
    /// person every 30 s until 10:30, every third time by push.
    fn hang() -> World {
        let mut everyone = people(&NAMES[..12], "email", Script::Fine);
        everyone.extend(people(&NAMES[12..15], "push", Script::Fine));
        let start = 4 * MINUTE;
        let trouble = Trouble {
            hang: true,
            ..Trouble::down("email", start, 11 * MINUTE)
        };
        let mut w = World::named("the hang after a busy morning", everyone, trouble);
        for i in 1..=17 {
            w.publish(i * 10 * SECOND, 0..4);
        }
        w.publish(start, 4..15);
        for i in 1..=13usize {
            let who = match i % 3 {
                0 => 12 + (i / 3) % 3,
                _ => 4 + i % 8,
            };
            w.publish(start + i as i64 * 30 * SECOND, [who]);
        }
        w
    }

    /// Bounces and hiccups on a channel that works: the push provider is
    /// down from 0:00 to 4:00 with three pushes waiting. At 0:30 twelve
    /// people are emailed, the first six at addresses that do not exist,
    /// which the email provider refuses for good. At 1:50 three of the
    /// other six are emailed again, and at 2:00 three more, whose first
    /// sends fail once: three failures among six sends in a minute, exactly
    /// half, which is not "more than half", in whatever order a dispatcher
    /// sends a batch (the rules leave that free).
    fn bounces() -> World {
        let mut everyone = people(&NAMES[..6], "email", Script::Refused);
        everyone.extend(people(&NAMES[6..12], "email", Script::Fine));
        everyone.extend(people(&NAMES[12..15], "email", Script::Flaky(1)));
        everyone.extend(people(&NAMES[15..18], "push", Script::Fine));
        let mut w = World::named(
            "bounces and hiccups",
            everyone,
            Trouble::down("push", 0, 4 * MINUTE),
        );
        w.publish(0, 15..18);
        w.publish(30 * SECOND, 0..12);
        w.publish(110 * SECOND, 6..9);
        w.publish(2 * MINUTE, 12..15);
        w
    }

    /// When a named world's provider is back.
    fn back(&self) -> i64 {
        self.troubles().map(|t| t.to).max().unwrap_or(0)
    }

    /// An outage in a busy minute: from 0:15 one email goes out every 15 s,
    /// and each gets through, until the email provider goes down at 2:00
    /// with ten emails waiting, for 4 minutes, while one more email is
    /// told every 30 s. The breaker's minute still holds the last three
    /// successes as the failures begin: more than half of the window has
    /// failed once four of the backlog have, and not before.
    fn busy() -> World {
        let everyone = people(&NAMES[..14], "email", Script::Fine);
        let trouble = Trouble::down("email", 2 * MINUTE, 6 * MINUTE);
        let mut w = World::named("an outage in a busy minute", everyone, trouble);
        for i in 1..8usize {
            w.publish(i as i64 * 15 * SECOND, [i % 4]);
        }
        w.publish(2 * MINUTE, 4..14);
        for i in 1..8usize {
            w.publish(2 * MINUTE + i as i64 * 30 * SECOND, [i % 4]);
        }
        w
    }

    /// The channel whose provider a named world puts in trouble.
    fn down(&self) -> &'static str {
        self.troubles().next().map_or("email", |t| t.channel)
    }

    /// The notifications that should reach their person: all but those
    /// to an address the provider refuses.
    fn expected(&self) -> impl Iterator<Item = &Told> {
        self.told()
            .into_iter()
            .filter(|t| self.people[t.who].script != Script::Refused)
    }

    /// Whether `channel`'s provider is in trouble at `at`.
    fn is_down(&self, channel: &str, at: i64) -> bool {
        self.troubles()
            .any(|t| t.channel == channel && (t.from..t.to).contains(&at))
    }

    /// "the email provider is down from 0:00 to 10:00"
    fn outage_story(&self) -> String {
        let windows: Vec<String> = self
            .troubles()
            .map(|t| format!("from {} to {}", clock(t.from), clock(t.to)))
            .collect();
        let windows = windows.join(" and ");
        match self.troubles().any(|t| t.hang) {
            true => format!(
                "the {} provider hangs {windows}, every send timing out",
                self.down()
            ),
            false => format!("the {} provider is down {windows}", self.down()),
        }
    }

    /// "the chapter's batch: the email provider is down from 0:00 to 10:00:"
    fn scene(&self) -> String {
        format!(
            "{}: {}:",
            self.name.unwrap_or("a world"),
            self.outage_story()
        )
    }
}

impl Trouble {
    /// `channel`'s provider answers 503 from `from` to `to`.
    fn down(channel: &'static str, from: i64, to: i64) -> Trouble {
        Trouble {
            channel,
            from,
            to,
            hang: false,
        }
    }
}

/// The dispatcher every 2 s and the sweep every minute, from the clock's
/// time until `until`.
fn schedule(until: i64) -> Step {
    Schedule::of(until, &[("dispatch", TICK), ("sweep", SWEEP)])
}

/// The breaker as the chapter states it: over half of at least 5 sends
/// in the last minute failed; a probe after 30 s.
pub const BREAKER: Breaker = Breaker {
    window: MINUTE,
    opens_after: 5,
    probe_after: PROBE_EVERY,
    slack: TICK,
};

/// How soon a waiting row goes out once its breaker closes: the next
/// wake-up, or the one after.
const AT_AN_ANSWER: i64 = 2 * TICK + SECOND;

/// How soon a row told on a channel whose breaker is closed goes out: the
/// next wake-up, or a few when a crowd is claimed in turns.
const AT_ONCE: i64 = 10 * SECOND;

/// A retry's gap as the backoff names it, when it is one: 5 s, 30 s or
/// 5 min, or the minute a generated 429 asks for, give or take a tenth for
/// jitter and a wake-up; any other gap as it is.
fn gap_class(ms: i64) -> String {
    for gap in [5 * SECOND, 30 * SECOND, RETRY_AFTER_S * SECOND, 5 * MINUTE] {
        if (gap..=gap + gap / 10 + TICK).contains(&ms) {
            return span(gap);
        }
    }
    lab::explore::span(ms)
}

/// The rows that land in a trouble of their channel, in the order they
/// land, with the trouble.
fn backlogs(w: &World) -> impl Iterator<Item = (&Trouble, Vec<&Someone>)> {
    w.stretches.iter().filter_map(|s| {
        let t = s.trouble.as_ref()?;
        Some((t, s.told.iter().map(|told| &w.people[told.who]).collect()))
    })
}

/// Whether a backlog on `channel` too large to drain within 10 s of
/// wake-ups comes back while the other channel is told something calm.
fn drains_beside(w: &World, channel: &str) -> bool {
    backlogs(w).any(|(t, rows)| {
        t.channel == channel
            && rows.len() as u64 > 6 * BATCH
            && w.told().iter().any(|o| {
                w.people[o.who].channel != t.channel
                    && (t.to..t.to + PROBE_EVERY + 15 * SECOND).contains(&o.at)
                    && w.calm(o)
            })
    })
}

/// The situations only the working channel's rule turns on: a drain
/// longer than the 10 s in which the other channel must be told. A world
/// that reaches one is played once, without faults, beside the explorer's
/// (a backlog of eight claims and more costs each play about a second).
const DRAINS: &[Dimension<World>] = &[
    Dimension {
        name: "an email backlog of more claims than fit in 10 s of wake-ups draining as the provider comes back, while a push goes out",
        reached: |w| drains_beside(w, "email"),
    },
    Dimension {
        name: "a push backlog of more claims than fit in 10 s of wake-ups draining as the provider comes back, while an email goes out",
        reached: |w| drains_beside(w, "push"),
    },
];

/// For each of [`DRAINS`], the first world of the budget's seeds and
/// after that reaches it.
fn drain_worlds(budget: lab::explore::Budget) -> Vec<World> {
    let first = budget.first_seed;
    let mut worlds = Vec::new();
    for dimension in DRAINS {
        let found = (first..first + lab::explore::SEARCHED_SEEDS)
            .map(World::draining)
            .find(|w| (dimension.reached)(w));
        worlds.extend(found);
    }
    worlds
}

/// How many worlds of `budget` reach each situation the rules turn on: the
/// explorer's, then the drains the working channel's rule reads.
fn coverage(budget: lab::explore::Budget) -> Vec<lab::explore::Reached> {
    let mut reached = lab::explore::coverage(&Generated, budget);
    reached.extend(lab::explore::reached(DRAINS, &drain_worlds(budget)));
    reached
}

/// The situations chapter 7's rules turn on.
const DIMENSIONS: &[Dimension<World>] = &[
    Dimension {
        name: "a message that kills every dispatcher sending it, dead-lettered by the sweep",
        reached: |w| {
            w.people
                .iter()
                .any(|p| matches!(p.script, Script::Poison(_)))
        },
    },
    Dimension {
        name: "a message that kills every dispatcher from its first send: its dead letter's only error is the lost dispatcher",
        reached: |w| w.people.iter().any(|p| p.script == Script::Poison(0)),
    },
    Dimension {
        name: "a message answered 429 until its last attempt, which kills its dispatcher: its dead letter names the lost dispatcher, not the 429 before",
        reached: |w| {
            w.people
                .iter()
                .any(|p| p.script == Script::Poison(ATTEMPTS as u32 - 1))
        },
    },
    Dimension {
        name: "a provider down for longer than the breaker's 30 s wait",
        reached: |w| w.troubles().any(|t| !t.hang && t.to - t.from > PROBE_EVERY),
    },
    Dimension {
        name: "a provider back before the breaker's first probe",
        reached: |w| w.troubles().any(|t| t.to - t.from < PROBE_EVERY),
    },
    Dimension {
        name: "a provider back before the breaker's first probe, which goes to an address it refuses or slows down",
        reached: |w| {
            backlogs(w).any(|(t, rows)| {
                !t.hang
                    && t.to - t.from < PROBE_EVERY
                    && rows.get(5).is_some_and(|p| p.script.answers_4xx())
            })
        },
    },
    Dimension {
        name: "more rows waiting on a channel in trouble than one claim takes, while the other is told something",
        reached: |w| {
            backlogs(w).any(|(t, rows)| {
                rows.len() as u64 > BATCH
                    && w.told().iter().any(|o| {
                        let channel = w.people[o.who].channel;
                        channel != t.channel
                            && (t.from..t.to).contains(&o.at)
                            && !w.unsettled(channel, o.at)
                    })
            })
        },
    },
    Dimension {
        name: "a trouble of 8 minutes or more over a backlog of at most 7 rows: the probes come back to the same rows",
        reached: |w| {
            backlogs(w).any(|(t, rows)| t.to - t.from >= 16 * PROBE_EVERY && rows.len() <= 7)
        },
    },
    Dimension {
        name: "a provider that hangs: every send times out",
        reached: |w| w.troubles().any(|t| t.hang),
    },
    Dimension {
        name: "both providers in trouble at once",
        reached: |w| {
            w.troubles().any(|a| {
                w.troubles()
                    .any(|b| a.channel != b.channel && a.from < b.to && b.from < a.to)
            })
        },
    },
    Dimension {
        name: "an address that always fails, oldest in an outage's backlog",
        reached: |w| {
            backlogs(w).any(|(_, rows)| rows.first().is_some_and(|p| p.script == Script::Dead))
        },
    },
    Dimension {
        name: "an address that always fails, held back by the breaker in an outage",
        reached: |w| {
            backlogs(w).any(|(_, rows)| rows.iter().skip(5).any(|p| p.script == Script::Dead))
        },
    },
    Dimension {
        name: "an address that always fails, in its 5-minute backoff as its provider's trouble begins",
        reached: |w| {
            w.told().iter().any(|t| {
                let p = &w.people[t.who];
                p.script == Script::Dead
                    && w.troubles().any(|tr| {
                        let (early, late) = DEAD_AHEAD;
                        let ahead = (tr.from - t.at) / SECOND;
                        tr.channel == p.channel && (early as i64..=late as i64).contains(&ahead)
                    })
            })
        },
    },
    Dimension {
        name: "an address the provider refuses or slows down, waiting out an outage",
        reached: |w| {
            backlogs(w).any(|(t, rows)| !t.hang && rows.iter().any(|p| p.script.answers_4xx()))
        },
    },
    Dimension {
        name: "a lone failure on a channel whose earlier sends have left the breaker's window",
        reached: |w| {
            let told = w.told();
            told.iter().any(|t| {
                let p = &w.people[t.who];
                matches!(p.script, Script::Flaky(_))
                    && told
                        .iter()
                        .filter(|o| w.people[o.who].channel == p.channel)
                        .count()
                        >= 5
                    && told
                        .iter()
                        .filter(|o| o.at != t.at || o.who != t.who)
                        .all(|o| o.at + 2 * MINUTE < t.at)
                    && w.troubles().all(|tr| tr.to + 2 * MINUTE < t.at)
            })
        },
    },
    Dimension {
        name: "five failures or more of addresses that fail on their own, in a minute with more successes",
        reached: |w| {
            w.stretches.iter().any(|s| {
                let fails = |p: &Someone| match p.script {
                    Script::Dead => 3,
                    Script::Flaky(n) => n.min(3) as usize,
                    _ => 0,
                };
                let people = s.told.iter().map(|t| &w.people[t.who]);
                let failures: usize = people.clone().map(fails).sum();
                let n = people.count();
                s.trouble.is_none() && failures >= 5 && 2 * failures < n + failures
            })
        },
    },
    Dimension {
        name: "three failures of one address among five sends: a breaker opens on a provider that works, and nothing is due when it may probe",
        reached: |w| {
            w.stretches.iter().any(|s| {
                let channel = |t: &Told| w.people[t.who].channel;
                let Some(first) = s.told.first() else {
                    return false;
                };
                s.trouble.is_none()
                    && s.told.len() == 3
                    && s.told
                        .iter()
                        .any(|t| w.people[t.who].script == Script::Flaky(3))
                    && w.told().iter().all(|o| {
                        channel(o) != channel(first)
                            || s.told.iter().any(|t| std::ptr::eq(t, *o))
                            || !(first.at - TIPPED_QUIET..first.at + RETRIED_FOR).contains(&o.at)
                    })
            })
        },
    },
    Dimension {
        name: "a provider that goes down while its breaker is open with nothing due: the probe goes out late, into the trouble",
        reached: |w| {
            backlogs(w).any(|(t, _)| {
                w.stretches.iter().any(|s| {
                    s.trouble.is_none()
                        && s.told.len() == 3
                        && s.told.iter().any(|o| {
                            let p = &w.people[o.who];
                            let (early, late) = LATE_PROBE;
                            p.channel == t.channel
                                && p.script == Script::Flaky(3)
                                && (o.at + early as i64 * SECOND..=o.at + late as i64 * SECOND)
                                    .contains(&t.from)
                        })
                })
            })
        },
    },
    Dimension {
        name: "a crowd on a working provider whose failures outnumber its deliveries, but not its deliveries and refusals together",
        reached: |w| {
            w.stretches.iter().any(|s| {
                let count = |f: fn(Script) -> bool| {
                    s.told.iter().filter(|t| f(w.people[t.who].script)).count()
                };
                let failed = count(|s| s == Script::Flaky(1));
                let delivered = count(|s| s == Script::Fine);
                let answered = count(Script::answers_4xx);
                s.trouble.is_none()
                    && failed + delivered >= BREAKER.opens_after
                    && failed > delivered
                    && failed < delivered + answered
            })
        },
    },
    Dimension {
        name: "a deploy while a provider is in trouble",
        reached: |w| {
            w.deploy_at
                .is_some_and(|d| w.troubles().any(|t| (t.from..t.to).contains(&d)))
        },
    },
];

impl Explorer for Generated {
    type Scenario = World;

    fn generate(&self, seed: u64) -> World {
        World::generate(seed)
    }

    fn plans(&self, world: &World, dir: &Path) -> Vec<Plan> {
        world.plans(dir)
    }

    fn dimensions(&self) -> &'static [Dimension<World>] {
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

    /// A flaky address may need all four of its attempts: claims a crash
    /// or a failing commit stranded, each charged by chapter 6's sweep,
    /// may spend the one that would have got through.
    fn spent_on_lost_claims(&self, world: &World, subject: &str, history: &History) -> bool {
        world.people.iter().any(|p| {
            let recipient = p.recipient();
            subject
                .strip_prefix(&format!("{recipient}: "))
                .is_some_and(|text| {
                    history.spent_on_lost_claims(
                        "dispatch",
                        (p.channel, &recipient, text),
                        ATTEMPTS,
                    )
                })
        })
    }

    fn invariants(&self) -> Invariants {
        Invariants {
            recorded: true,
            told_once: true,
            settled: true,
            withdraws: false,
            keyed: true,
            retry_gaps: &RETRY_GAPS,
            breaker: Some(BREAKER),
            // Sends take no simulated time here, so a row is claimed at
            // its send, and chapter 6's threshold counts from the send.
            orphaned_after: ORPHANED_AFTER,
            // An answer closes the breaker; the next wake-up, or the one
            // after, sends what waited.
            closes_on_answer: AT_AN_ANSWER,
            one_probe: AT_AN_ANSWER,
            sent_once: false,
        }
    }

    fn published(&self, world: &World) -> Vec<lab::explore::Published> {
        world
            .told()
            .into_iter()
            .map(|t| {
                let p = &world.people[t.who];
                lab::explore::Published {
                    channel: p.channel.to_string(),
                    recipient: p.recipient(),
                    body: t.text.clone(),
                    at: t.at,
                }
            })
            .collect()
    }

    /// Per notification: how often it reached its person and how its row
    /// ended; and, fault-free, its attempts while its channel's provider
    /// was well and no breaker had reason to hold anything back (from the
    /// start of a trouble until 2 minutes after its end, which row probes
    /// and when the backlog drains are the breaker's choice): each answer
    /// and the backoff gap before it, as chapter 5 fixes them. A row that
    /// lands in a trouble shows no such attempts, and one tried during a
    /// trouble only those before it.
    fn observe(&self, world: &World, run: &Run) -> Result<Observation> {
        let rows = read_ledger(run.dir, run.history)?;
        let world_record = Recorder::open(run.dir, 0)?;
        let mut fates: BTreeMap<String, Fate> = world
            .told()
            .into_iter()
            .map(|told| -> Result<(String, Fate)> {
                let p = &world.people[told.who];
                let recipient = p.recipient();
                let attempts: Vec<&Delivery> = run
                    .history
                    .attempts(p.channel)
                    .filter(|d| d.recipient == recipient && d.body == told.text)
                    .collect();
                let told_n = attempts
                    .iter()
                    .filter(|d| d.outcome == Outcome::Delivered)
                    .count() as u32;
                let state = rows
                    .iter()
                    .find(|r| {
                        r.channel == p.channel && r.recipient == recipient && r.body == told.text
                    })
                    .map(|r| r.status.clone())
                    .unwrap_or_else(|| match told_n {
                        // Deleted once delivered: SENT all the same.
                        0 => "not in the outbox".to_string(),
                        _ => "SENT".to_string(),
                    });
                // The attempts before the breaker has any say: none for a
                // row that lands in a trouble, and those before the first
                // that comes in one for the others.
                let untroubled = attempts
                    .iter()
                    .take_while(|d| !world.unsettled(p.channel, d.at_ms));
                let detail = if world.unsettled(p.channel, told.at) {
                    String::new()
                } else {
                    let mut said = Vec::new();
                    let mut before: Option<i64> = None;
                    for d in untroubled {
                        let answer = answered(d.outcome);
                        // A row told while its channel's breaker has no
                        // reason to be open goes out at the next wake-up.
                        said.push(match before {
                            Some(b) => format!("{answer} {} later", gap_class(d.at_ms - b)),
                            None if d.at_ms - told.at > AT_ONCE => {
                                format!(
                                    "{answer} {} after it was told",
                                    gap_class(d.at_ms - told.at)
                                )
                            }
                            None => answer.to_string(),
                        });
                        before = Some(d.at_ms);
                    }
                    let mut detail = format!("attempts {}", said.join(", "));
                    // A send that kills its dispatcher never reaches the
                    // provider, yet it is an attempt (chapter 6).
                    if matches!(p.script, Script::Poison(_)) {
                        let killed = world_record.kills_of(&recipient)?;
                        detail.push_str(&format!(
                            ", then {killed} sends that killed their dispatcher"
                        ));
                    }
                    detail
                };
                Ok((
                    world.subject(told),
                    Fate {
                        told: told_n,
                        state,
                        detail,
                    },
                ))
            })
            .collect::<Result<_>>()?;
        // A 429 falls on whichever of an address's messages is sent first,
        // and the rules leave the order within a batch free: such an
        // address's attempts are compared as one list, whatever message
        // each fell on.
        for p in world
            .people
            .iter()
            .filter(|p| matches!(p.script, Script::Limited(_)))
        {
            let mut details = Vec::new();
            for told in world
                .told()
                .into_iter()
                .filter(|t| world.people[t.who].name == p.name)
            {
                if let Some(fate) = fates.get_mut(&world.subject(told)) {
                    details.push(std::mem::take(&mut fate.detail));
                }
            }
            if details.is_empty() {
                continue;
            }
            details.sort();
            fates.insert(
                format!("{}: its messages, in any order", p.recipient()),
                Fate {
                    told: 0,
                    state: "rate limited".to_string(),
                    detail: details.join("; "),
                },
            );
        }
        let rows = rows
            .into_iter()
            .map(|q| lab::explore::Row {
                subject: format!("{}: {}", q.recipient, q.body),
                message: Some((q.channel, q.recipient, q.body)),
                status: q.status,
                error: q.error,
                wrong: None,
            })
            .collect();
        Ok(Observation { fates, rows })
    }

    fn shrink(&self, world: &World) -> Vec<World> {
        let mut smaller = Vec::new();
        if world.deploy_at.is_some() {
            smaller.push(World {
                deploy_at: None,
                ..world.clone()
            });
        }
        smaller.extend(
            cut_down(&world.stretches, 6)
                .into_iter()
                .map(|stretches| World {
                    stretches,
                    ..world.clone()
                }),
        );
        smaller.into_iter().map(World::ended).collect()
    }

    fn describe(&self, world: &World) -> String {
        let mut parts = Vec::new();
        let troubles: Vec<String> = world
            .troubles()
            .map(|t| {
                let what = if t.hang { "hangs" } else { "down" };
                format!("{} {what} {} to {}", t.channel, clock(t.from), clock(t.to))
            })
            .collect();
        if !troubles.is_empty() {
            parts.push(troubles.join(", "));
        }
        let told = world.told();
        let mut people: Vec<usize> = told.iter().map(|t| t.who).collect();
        people.sort();
        people.dedup();
        let (first, last) = (
            clock(told.first().map_or(0, |t| t.at)),
            clock(told.last().map_or(0, |t| t.at)),
        );
        let whom = match people.len() {
            1 => "1 person".to_string(),
            n => format!("{n} people"),
        };
        let told_n = lab::report::counted(told.len(), "notification");
        parts.push(match first == last {
            true => format!("{told_n} for {whom} at {first}"),
            false => format!("{told_n} for {whom} from {first} to {last}"),
        });
        let odd: Vec<String> = people
            .iter()
            .map(|&i| &world.people[i])
            .filter_map(|p| Some(format!("{} {}", p.recipient(), p.script.said()?)))
            .collect();
        if !odd.is_empty() {
            parts.push(odd.join(", "));
        }
        if let Some(at) = world.deploy_at {
            parts.push(format!("the dispatcher restarts at {}", clock(at)));
        }
        parts.join("; ")
    }
}
