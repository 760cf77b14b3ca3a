//! Check 05: retry, back off, dead-letter.
//!
//! A batch of notices goes into the outbox and the dispatcher runs on its
//! schedule (a wake-up every 2 s) for twelve minutes of simulated time. The
//! provider is scripted per recipient: some rows fail once or twice and then
//! go through, one address always fails (a 503), one is refused for good (a
//! 422). The check reads every attempt the provider saw, with its simulated
//! time, and the outbox rows the dispatcher left behind. A second scenario
//! loses the answer to one send (a timeout), which must be retried like any
//! other failure, and has one address whose every send times out: it must
//! be counted, backed off and dead-lettered like a 503. Seeded random batches use other people, channels and
//! scripts, let some notices arrive later, and restart the dispatcher
//! midway, as a deploy would.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::{MINUTE, SECOND};
use lab::explore::{
    cut_down, explore, span, Dimension, Explorer, Fate, FaultModel, Invariants, Observation, Row,
    Run,
};
use lab::history::{answer_kind, read_outbox, History, Queued};
use lab::report::{counted, judge, Finding};
use lab::rng::Rng;
use lab::runner::{first_trouble, in_parallel, scenario_dir, Case, Exit};
use lab::scenario::{Fault, Plan, ProviderScript, Step};
use lab::serve::Schedule;
use lab::world::Outcome;

use super::dispatch_world::{answered, provider, Addressed, Script, NAMES, RETRY_GAPS};

pub const CHAPTER: Chapter = Chapter {
    number: 5,
    title: "retry, back off, dead-letter",
    case_file: "cases/case05_retries.rs",
    text_file: "chapters/05-retry-back-off-dead-letter.md",
    bin: "case05",
    shipped_hash: 0xf4e6_5d1b_67b5_93aa,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&Generated, budget),
    bands: |history, _| lab::picture::bands(&Generated, history),
};

const DELIVERED: &str = "a row that fails once or twice is still delivered";
const DEAD: &str =
    "an address that always fails gets 4 attempts, 5 s, 30 s and 5 min apart, then FAILED with its error";
const REJECTED: &str = "a permanent rejection gets 1 attempt, then FAILED with its error";
const BACKOFF: &str = "no attempt comes sooner than its backoff, or a 429's Retry-After";

/// The gaps the chapter asks for: after the first attempt fails, the next
/// one comes 5 s later, then 30 s, then 5 min. Four attempts in all.
const ATTEMPTS: usize = RETRY_GAPS.len() + 1;
/// How often the dispatcher wakes up.
const WAKE_UP: i64 = 2 * SECOND;
/// How long the service runs in each scenario: the dead address's last
/// attempt comes near 5:36, and a dispatcher that never gives up has time
/// for a fifth.
const END: i64 = 12 * MINUTE;
/// How many attempts, or early retries, of one row a report spells out.
const SHOWN: usize = 8;

/// The seconds a 429 of the lab's provider asks the caller to wait.
const RETRY_AFTER_S: i64 = 60;

/// Someone the batch tells something, on the channel they chose.
#[derive(Clone, Debug, Serialize)]
struct Person {
    name: String,
    channel: &'static str,
    text: String,
    /// Simulated time the notice is published, in ms.
    at: i64,
    /// How the provider treats their messages.
    script: Script,
    /// What a 429 gives way to once its run ends: the address works, or
    /// fails with 503s for good, or is refused for good. Only generated
    /// worlds end a run of 429s otherwise than working.
    then: Then,
}

/// What comes after a run of 429s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
enum Then {
    Works,
    Dead,
    Rejected,
}

impl Addressed for Person {
    fn name(&self) -> &str {
        &self.name
    }

    fn channel(&self) -> &str {
        self.channel
    }
}

/// A batch of notices, how the provider treats each person's row, and when
/// (if ever) the dispatcher restarts.
#[derive(Clone, Debug, Serialize)]
struct Batch {
    /// `None` for the chapter's own batch.
    seed: Option<u64>,
    people: Vec<Person>,
    /// A deploy: the first process stops here and a new one carries on.
    restart_at: Option<i64>,
    /// When the scenario ends.
    end: i64,
    /// The fault, if any.
    fault: Option<Fault>,
    /// The seconds a 429 asks the caller to wait.
    retry_after_s: i64,
    /// The simulated time every send takes, in ms.
    latency_ms: i64,
}

const EVENTS: [&str; 6] = [
    "Book club: Thursday 19:00 it is",
    "Climbing trip: Saturday it is",
    "Board games: Friday 20:00 it is",
    "Team lunch: Wednesday 12:30 it is",
    "Choir rehearsal: Monday 18:00 it is",
    "Hackathon: the 14th it is",
];

fn person(name: &str, channel: &'static str, script: Script) -> Person {
    Person {
        name: name.to_string(),
        channel,
        text: EVENTS[0].to_string(),
        at: 0,
        script,
        then: Then::Works,
    }
}

impl Batch {
    /// The chapter's batch: the book club picked a date and seven members
    /// are told. dana's email and hal's push fail once, eli's email twice;
    /// fay's mail server is down for good; gus's address does not exist;
    /// jon's email is rate limited twice, each time with `Retry-After: 60`.
    fn chapter() -> Batch {
        Batch {
            seed: None,
            people: vec![
                person("dana", "email", Script::Flaky(1)),
                person("eli", "email", Script::Flaky(2)),
                person("fay", "email", Script::Dead),
                person("gus", "email", Script::Refused),
                person("hal", "push", Script::Flaky(1)),
                person("ivy", "push", Script::Fine),
                person("jon", "email", Script::Limited(2)),
            ],
            restart_at: None,
            end: END,
            fault: None,
            retry_after_s: RETRY_AFTER_S,
            latency_ms: 0,
        }
    }

    /// A batch drawn from `seed`: 4 to 7 people on either channel, some
    /// notices published later; one dead row, one refused row and one to
    /// three flaky ones; a restart somewhere in the first four minutes.
    fn random(seed: u64) -> Batch {
        let mut rng = Rng::new(seed);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let count = rng.between(4, 7) as usize;
        let flaky = rng.between(1, 3) as usize;
        let people = names[..count]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let script = match i {
                    0 => Script::Dead,
                    1 => Script::Refused,
                    2 if rng.between(0, 1) == 0 => Script::Limited(rng.between(1, 2) as u32),
                    i if i < 2 + flaky => Script::Flaky(rng.between(1, 2) as u32),
                    _ => Script::Fine,
                };
                let channel = if rng.between(0, 2) == 0 {
                    "push"
                } else {
                    "email"
                };
                let at = if rng.between(0, 2) == 0 {
                    rng.between(1, 90) as i64 * SECOND
                } else {
                    0
                };
                Person {
                    text: rng.pick(&EVENTS).to_string(),
                    at,
                    ..person(name, channel, script)
                }
            })
            .collect();
        Batch {
            seed: Some(seed),
            people,
            restart_at: Some(rng.between(20, 240) as i64 * SECOND),
            end: END,
            fault: None,
            retry_after_s: RETRY_AFTER_S,
            latency_ms: 0,
        }
    }

    /// Two people the batch does not tell. The first send to the first one
    /// never reaches the provider, and the dispatcher sees a timeout; every
    /// send to the second one reaches the provider, fails there, and gets no
    /// answer, so every attempt ends in a timeout.
    fn lost_answers(&self) -> Batch {
        let used: Vec<&str> = self.people.iter().map(|p| p.name.as_str()).collect();
        let mut names = NAMES.iter().rev().filter(|n| !used.contains(n));
        let mut next = |script| Person {
            text: self.people[0].text.clone(),
            ..person(names.next().expect("20 names are enough"), "email", script)
        };
        Batch {
            seed: self.seed,
            people: vec![next(Script::Fine), next(Script::Unanswered)],
            restart_at: None,
            end: END,
            fault: Some(Fault::TimeoutBeforeSend {
                op: "dispatch".to_string(),
                nth: 1,
            }),
            retry_after_s: RETRY_AFTER_S,
            latency_ms: 0,
        }
    }

    fn name(&self) -> String {
        let batch = match self.seed {
            None => "the chapter's batch".to_string(),
            Some(seed) => format!("random batch (seed {seed})"),
        };
        let unanswered: Vec<String> = self
            .people
            .iter()
            .filter(|p| p.script == Script::Unanswered)
            .map(|p| format!("; every send to {} times out", p.recipient()))
            .collect();
        match (&self.fault, self.restart_at) {
            (Some(fault), _) => format!("{batch}, {}{}", fault.describe(), unanswered.concat()),
            (None, Some(at)) => format!("{batch}, the dispatcher restarted at {}", clock(at)),
            (None, None) => batch,
        }
    }

    /// People whose row the provider takes in the end.
    fn deliverable(&self) -> impl Iterator<Item = &Person> {
        self.people.iter().filter(|p| {
            matches!(
                p.script,
                Script::Fine | Script::Flaky(_) | Script::Limited(_)
            )
        })
    }

    fn provider(&self, channel: &str) -> ProviderScript {
        let people: Vec<&Person> = self
            .people
            .iter()
            .filter(|p| p.channel == channel)
            .collect();
        let scripts: Vec<(String, Script)> =
            people.iter().map(|p| (p.recipient(), p.script)).collect();
        let mut provider = provider(&scripts, self.retry_after_s);
        // What a run of 429s gives way to, when it does not work.
        for p in people {
            match p.then {
                Then::Works => {}
                Then::Dead => provider.unreachable.push(p.recipient()),
                Then::Rejected => provider.rejected.push(p.recipient()),
            }
        }
        provider.sim_latency_ms = self.latency_ms;
        provider
    }

    /// The steps that cover simulated time `[from, to)`: the notices due in
    /// it, with the dispatcher running on its schedule in between.
    fn steps(&self, from: i64, to: i64) -> Vec<Step> {
        let mut arrivals: Vec<&Person> = self
            .people
            .iter()
            .filter(|p| (from..to).contains(&p.at))
            .collect();
        arrivals.sort_by_key(|p| p.at);
        let mut steps = Vec::new();
        let mut now = from;
        for p in arrivals {
            if p.at > now {
                steps.push(schedule(p.at));
                now = p.at;
            }
            let notice = serde_json::json!({
                "person": p.name,
                "kind": "date_chosen",
                "text": p.text,
            });
            steps.push(Step::with("publish", notice, &p.recipient()));
        }
        steps.push(schedule(to));
        steps
    }

    /// The plans of the scenario's processes, in order.
    fn plans(&self, dir: &Path) -> Vec<Plan> {
        let cut = self.restart_at.unwrap_or(self.end);
        let plan = |process: u32, steps: Vec<Step>| Plan {
            dir: dir.to_path_buf(),
            process,
            steps,
            provider: self.provider("email"),
            push: self.provider("push"),
            seed: self.seed.unwrap_or(0),
            ..Plan::default()
        };
        let mut first = plan(1, self.steps(0, cut));
        first.fixture = self
            .people
            .iter()
            .map(|p| {
                format!(
                    "INSERT INTO people (id, email, device, channel) VALUES ('{}', '{}', '{}', '{}')",
                    p.name,
                    p.email(),
                    p.device(),
                    p.channel
                )
            })
            .collect();
        first.fault = self.fault.clone();
        let mut plans = vec![first];
        if self.restart_at.is_some() {
            plans.push(plan(2, self.steps(cut, self.end)));
        }
        plans
    }
}

/// The dispatcher's schedule until `until`.
fn schedule(until: i64) -> Step {
    Schedule::of(until, &[("dispatch", WAKE_UP)])
}

/// Simulated time as a clock reads it: `5:36`, `1:02:03`.
fn clock(ms: i64) -> String {
    let s = ms / SECOND;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// What one scenario left behind.
struct Played {
    batch: Batch,
    exits: Vec<Exit>,
    history: History,
    /// Keyed by "channel recipient".
    rows: Vec<Row>,
    /// Why the outbox could not be read, if it could not.
    unreadable: Option<String>,
}

impl Played {
    /// An ending no correct case has: a panic, a hang, an abort.
    fn trouble(&self) -> Option<String> {
        first_trouble(&self.exits, "dispatcher", false).or_else(|| self.unreadable.clone())
    }

    /// Every attempt the provider saw for a person's row: (simulated time, outcome).
    fn attempts(&self, p: &Person) -> Vec<(i64, Outcome)> {
        let recipient = p.recipient();
        self.history
            .attempts(p.channel)
            .filter(|d| d.recipient == recipient)
            .map(|d| (d.at_ms, d.outcome))
            .collect()
    }

    fn sent(&self, p: &Person) -> usize {
        self.attempts(p)
            .iter()
            .filter(|a| a.1 == Outcome::Delivered)
            .count()
    }

    fn left(&self, p: &Person) -> Option<&Row> {
        let key = format!("{} {}", p.channel, p.recipient());
        self.rows.iter().find(|r| r.subject == key)
    }

    /// How the contract places `p`'s message: a row deleted once its
    /// message was delivered is SENT all the same.
    fn status(&self, p: &Person) -> String {
        match self.left(p) {
            Some(l) => l.status.clone(),
            None if self.sent(p) > 0 => "SENT".to_string(),
            None => "missing from the outbox".to_string(),
        }
    }

    fn last_error(&self, p: &Person) -> Option<String> {
        self.left(p).and_then(|l| l.error.clone())
    }

    /// "0:00 503, 0:06 503, 0:36 sent"; a failed attempt whose answer never
    /// came reads "timeout". A row tried more than [`SHOWN`] times shows its
    /// first ones and how many there were in all.
    fn story(&self, p: &Person) -> String {
        let attempts = self.attempts(p);
        if attempts.is_empty() {
            return "no attempt reached the provider".to_string();
        }
        let told = attempts
            .iter()
            .take(SHOWN)
            .map(|(at, outcome)| {
                let said = match outcome {
                    Outcome::Delivered => "sent",
                    Outcome::Deduplicated => "repeat",
                    Outcome::Failed if p.script == Script::Unanswered => "timeout",
                    Outcome::Failed if matches!(p.script, Script::Limited(_)) => "429",
                    Outcome::Failed => "503",
                    Outcome::Rejected => "422",
                };
                format!("{} {said}", clock(*at))
            })
            .collect::<Vec<_>>()
            .join(", ");
        match attempts.len() {
            n if n > SHOWN => format!("{told}, ... ({n} attempts in all)"),
            _ => told,
        }
    }
}

fn play(case: &Case, batch: &Batch) -> Result<Played> {
    let dir = scenario_dir()?;
    let exits = case.start_in_turn(&batch.plans(dir.path()))?;
    let history = History::read(dir.path())?;
    let (rows, unreadable) = match read_outbox(dir.path(), &history, Queued::key) {
        Ok(rows) => (rows, None),
        Err(err) => (Vec::new(), Some(format!("{err:#}"))),
    };
    Ok(Played {
        batch: batch.clone(),
        exits,
        history,
        rows,
        unreadable,
    })
}

/// `notify run 5`: the chapter's batch, once, told as a story.
fn run(case: &Case) -> Result<String> {
    let batch = Batch::chapter();
    let played = play(case, &batch)?;
    let mut out = format!(
        "{} people are told \"{}\"\n\
         the provider fails dana's email and hal's push once and eli's email twice,\n\
         fay's mail server is down for good, gus's address does not exist,\n\
         and jon's email is rate limited twice (a 429, Retry-After: 60)\n\
         the dispatcher wakes every 2 s, for {} minutes of simulated time\n\n",
        batch.people.len(),
        batch.people[0].text,
        END / MINUTE
    );
    let stories: Vec<String> = batch.people.iter().map(|p| played.story(p)).collect();
    let width = stories.iter().map(String::len).max().unwrap_or(0).max(8);
    out.push_str(&format!(
        "  {:<9}{:<18}{:<width$}  row\n",
        "channel", "recipient", "attempts"
    ));
    for (p, story) in batch.people.iter().zip(&stories) {
        out.push_str(&format!(
            "  {:<9}{:<18}{story:<width$}  {}\n",
            p.channel,
            p.recipient(),
            played.status(p)
        ));
    }
    let delivered = batch.people.iter().filter(|p| played.sent(p) > 0).count();
    out.push_str(&format!(
        "\ndelivered: {delivered} of {}\n",
        batch.people.len()
    ));
    let dead: Vec<&Person> = batch
        .people
        .iter()
        .filter(|p| played.status(p) == "FAILED")
        .collect();
    out.push_str(&format!("dead letters: {}\n", dead.len()));
    for p in &dead {
        let attempts = played.attempts(p).len();
        out.push_str(&format!(
            "  {:<18}{:<12}{}\n",
            p.recipient(),
            counted(attempts, "attempt"),
            played
                .last_error(p)
                .unwrap_or_else(|| "no error kept".to_string())
        ));
    }
    let dropped: Vec<String> = batch
        .people
        .iter()
        .filter_map(|p| match p.script {
            Script::Flaky(n) if played.sent(p) == 0 => Some(format!(
                "{} failed {}",
                p.recipient(),
                if n == 1 { "once" } else { "twice" }
            )),
            Script::Limited(n) if played.sent(p) == 0 => Some(format!(
                "{} was rate limited {}",
                p.recipient(),
                if n == 1 { "once" } else { "twice" }
            )),
            _ => None,
        })
        .collect();
    if !dropped.is_empty() {
        out.push_str(&format!(
            "dead-lettered, though a later attempt would have gone through: {}\n  {}\n",
            dropped.len(),
            dropped.join(", ")
        ));
    }
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// "5 s, 30 s and 5 min"
fn and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let mut batches = vec![Batch::chapter()];
    batches.extend(options.seeds.iter().map(|&s| Batch::random(s)));
    let lost: Vec<Batch> = batches.iter().map(Batch::lost_answers).collect();
    batches.extend(lost);
    let played: Vec<Played> = in_parallel(&batches, |b| play(case, b))
        .into_iter()
        .collect::<Result<_>>()?;
    let processes: usize = played.iter().map(|p| p.exits.len()).sum();

    let deliverable = played[0].batch.deliverable().count();
    let retries: usize = played
        .iter()
        .flat_map(|p| p.batch.people.iter().map(|r| p.attempts(r).len()))
        .map(|n| n.saturating_sub(1))
        .sum();
    let mut verdicts = vec![
        judge(
            DELIVERED,
            format!("{deliverable} of {deliverable} delivered"),
            played.iter().find_map(delivered),
        ),
        judge(
            DEAD,
            format!("{ATTEMPTS} attempts, then FAILED"),
            played.iter().find_map(dead),
        ),
        judge(
            REJECTED,
            "1 attempt, then FAILED".to_string(),
            played.iter().find_map(rejected),
        ),
        judge(
            BACKOFF,
            format!(
                "{}, none early, in the chapter's batch and {}",
                counted(retries, "retry"),
                counted(options.seeds.len(), "random batch")
            ),
            early(&played),
        ),
    ];
    let explored = explore(
        &Generated,
        "05",
        case,
        options.reference.as_ref(),
        options.budget,
    )?;
    verdicts.extend(explored.verdicts);
    Ok(Checked {
        verdicts,
        processes: processes + explored.processes,
    })
}

fn trouble_finding(played: &Played) -> Option<Finding> {
    played.trouble().map(|trouble| {
        Finding::unfinished(
            format!("{}: {trouble}", played.batch.name()),
            played.batch.seed,
        )
    })
}

/// Rows the provider takes in the end that were not delivered exactly once
/// and marked SENT.
fn delivered(played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(played) {
        return Some(f);
    }
    let people: Vec<&Person> = played.batch.deliverable().collect();
    let mut details = Vec::new();
    let mut ok = 0;
    for p in &people {
        let status = played.status(p);
        if played.sent(p) == 1 && status == "SENT" {
            ok += 1;
            continue;
        }
        let what = match p.script {
            Script::Flaky(1) => "fails once, then works",
            Script::Flaky(_) => "fails twice, then works",
            Script::Limited(1) => "is rate limited once (429, Retry-After: 60), then works",
            Script::Limited(_) => "is rate limited twice (429, Retry-After: 60), then works",
            _ if played.batch.fault.is_some() => "its first send got no answer",
            _ => "the provider takes it",
        };
        let ending = match (status.as_str(), played.last_error(p)) {
            ("FAILED", Some(error)) => format!("FAILED ({error})"),
            (other, _) => other.to_string(),
        };
        details.push(format!(
            "{} {what}: {}; left {ending}.",
            p.label(),
            played.story(p)
        ));
    }
    if details.is_empty() {
        return None;
    }
    let fault = played.batch.fault.is_some();
    Some(Finding {
        evidence: format!("{ok} of {} delivered", people.len()),
        scenario: format!("{}:", played.batch.name()),
        details,
        seed: played.batch.seed,
        // The scenario is two rows: its whole story fits.
        timeline: if fault {
            played.history.events.clone()
        } else {
            Vec::new()
        },
        story: played.history.events.clone(),
        ..Default::default()
    })
}

/// The earliest and latest a retry may come after the attempt before it:
/// its gap, plus up to a tenth for jitter and one wake-up of the dispatcher.
fn window(gap: i64) -> (i64, i64) {
    (gap, gap + gap / 10 + WAKE_UP)
}

/// The first row of the scenario that always fails (a 503, or no answer)
/// and was not given its 4 attempts at the right gaps, then dead-lettered
/// with its error.
fn dead(played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(played) {
        return Some(f);
    }
    played
        .batch
        .people
        .iter()
        .filter(|p| matches!(p.script, Script::Dead | Script::Unanswered))
        .find_map(|p| dead_row(played, p))
}

fn dead_row(played: &Played, p: &Person) -> Option<Finding> {
    // What the error kept must show, and how the expectation names it.
    let (said, named, fails) = match p.script {
        Script::Unanswered => ("did not answer", "the timeout", "never answers"),
        _ => ("503", "the 503", "always fails"),
    };
    let attempts = played.attempts(p);
    let status = played.status(p);
    let error = played.last_error(p);
    let mut problems = Vec::new();
    for (k, pair) in attempts.windows(2).enumerate().take(RETRY_GAPS.len()) {
        let (low, high) = window(RETRY_GAPS[k]);
        let took = pair[1].0 - pair[0].0;
        if took < low || took > high {
            problems.push(format!(
                "attempt {} came {} after the one before, not {}.",
                k + 2,
                span(took),
                span(RETRY_GAPS[k])
            ));
        }
    }
    let kept = error.as_deref().is_some_and(|e| e.contains(said));
    if status == "FAILED" && !kept {
        problems.push(match &error {
            None => "no error kept.".to_string(),
            Some(e) => format!("the error kept is not the provider's: {e:?}"),
        });
    }
    if attempts.len() == ATTEMPTS && status == "FAILED" && problems.is_empty() {
        return None;
    }
    let n = attempts.len();
    let evidence = if n == ATTEMPTS && status == "FAILED" && !kept {
        format!("{n} attempts, then FAILED without the provider's error")
    } else if n == ATTEMPTS && status == "FAILED" {
        format!("{n} attempts at the wrong gaps")
    } else {
        format!("{}, then {status}", counted(n, "attempt"))
    };
    let mut details = vec![format!(
        "{} {fails}: {}; left {status}.",
        p.label(),
        played.story(p)
    )];
    details.extend(problems);
    details.push(format!(
        "expected {ATTEMPTS} attempts, {} apart (give or take a wake-up), then FAILED with {named}.",
        and(&RETRY_GAPS.map(span))
    ));
    Some(Finding {
        evidence,
        scenario: format!("{}:", played.batch.name()),
        details,
        seed: played.batch.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}

fn rejected(played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(played) {
        return Some(f);
    }
    let p = played
        .batch
        .people
        .iter()
        .find(|p| p.script == Script::Refused)?;
    let attempts = played.attempts(p).len();
    let status = played.status(p);
    let error = played.last_error(p);
    let kept = error.as_deref().is_some_and(|e| e.contains("422"));
    if attempts == 1 && status == "FAILED" && kept {
        return None;
    }
    let evidence = if attempts == 1 && status == "FAILED" {
        "1 attempt, then FAILED without the provider's error".to_string()
    } else {
        format!("{}, then {status}", counted(attempts, "attempt"))
    };
    let mut details = vec![format!(
        "{} is refused for good (a 422): {}; left {status}.",
        p.label(),
        played.story(p)
    )];
    if status == "FAILED" && !kept {
        details.push(match error {
            None => "no error kept.".to_string(),
            Some(e) => format!("the error kept is not the provider's: {e:?}"),
        });
    }
    Some(Finding {
        evidence,
        scenario: format!("{}:", played.batch.name()),
        details,
        seed: played.batch.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}

/// Retries that came sooner after the attempt before them than the backoff
/// allows, over every scenario; the first scenario with one is shown.
fn early(played: &[Played]) -> Option<Finding> {
    let mut total = 0;
    let mut early = 0;
    let mut first: Option<(&Played, Vec<String>)> = None;
    for played in played {
        if played.trouble().is_some() {
            continue;
        }
        let mut lines = Vec::new();
        for p in &played.batch.people {
            let attempts = played.attempts(p);
            let mut soon = Vec::new();
            for (k, pair) in attempts.windows(2).enumerate() {
                total += 1;
                let backoff = RETRY_GAPS[k.min(RETRY_GAPS.len() - 1)];
                // A 429 says when to come back; the backoff still applies
                // when it is the longer wait.
                let asked = match p.script {
                    Script::Limited(n) if (k as u32) < n => RETRY_AFTER_S * SECOND,
                    _ => 0,
                };
                let wanted = backoff.max(asked);
                let took = pair[1].0 - pair[0].0;
                if took < wanted {
                    early += 1;
                    let why = if asked > backoff {
                        format!("{}, as the 429's Retry-After asked", span(wanted))
                    } else {
                        span(wanted)
                    };
                    soon.push(format!(
                        "attempt {} came {} after the one before, not {why}.",
                        k + 2,
                        span(took),
                    ));
                }
            }
            if !soon.is_empty() {
                lines.push(format!("{}: {}.", p.label(), played.story(p)));
                let more = soon.len().saturating_sub(SHOWN);
                lines.extend(soon.into_iter().take(SHOWN));
                if more > 0 {
                    let retries = if more == 1 { "retry" } else { "retries" };
                    lines.push(format!("and {more} more early {retries}."));
                }
            }
        }
        if first.is_none() && !lines.is_empty() {
            first = Some((played, lines));
        }
    }
    let (played, details) = first?;
    Some(Finding {
        evidence: format!(
            "{early} of {} early, in the chapter's batch and random batches",
            counted(total, "retry")
        ),
        scenario: format!("{}:", played.batch.name()),
        details,
        seed: played.batch.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}

/// Chapter 5's world for the explorer: up to a dozen people on either
/// channel, each row's provider script drawn from everything the chapter
/// speaks about (fine, failing a few times, down for good, refusing for
/// good, never answering), notices arriving over two minutes, and sometimes
/// a deploy that restarts the dispatcher. Faults go where chapter 5's
/// service can survive them: in `publish`. A crash inside `dispatch` leaves
/// a claimed row behind, which only chapter 6's sweep returns.
struct Generated;

impl Batch {
    /// A batch drawn from `seed` over the chapter's whole world.
    fn generated(seed: u64) -> Batch {
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 5);
        // How often a 429 comes, drawn from a stream of its own so that the
        // rest of the world is drawn as before: up to five times, past the
        // four attempts a row has.
        let mut limits = Rng::new(seed ^ 0x0505_4290_0429);
        // How long a 429 asks to wait, how long a send takes, and what a run
        // of 429s gives way to, from streams of their own too: a Retry-After
        // past the longest backoff, sends slow enough that a wake-up's
        // clock is stale by the time an answer comes, and a dead letter
        // whose last error is not its first.
        let mut wide = Rng::new(seed ^ 0x0505_1a7e_0503);
        let retry_after_s = *wide.pick(&[60, 60, 1, 120, 420]);
        let latency_ms = *wide.pick(&[0, 0, 0, 1_500, 4_000, 20_000]);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let count = rng.between(1, 12) as usize;
        let people: Vec<Person> = names[..count]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let script = match rng.between(0, 10) {
                    0..=3 => Script::Fine,
                    4 | 5 => Script::Flaky(rng.between(1, 3) as u32),
                    6 => Script::Dead,
                    7 => Script::Refused,
                    8 => {
                        rng.between(1, 2);
                        Script::Limited(limits.between(1, 5) as u32)
                    }
                    _ => Script::Unanswered,
                };
                let channel = if rng.between(0, 2) == 0 {
                    "push"
                } else {
                    "email"
                };
                let at = if rng.between(0, 1) == 0 {
                    rng.between(0, 120) as i64 * SECOND
                } else {
                    0
                };
                let then = match script {
                    Script::Limited(_) => *wide.pick(&[Then::Works, Then::Dead, Then::Rejected]),
                    _ => Then::Works,
                };
                Person {
                    text: format!("{} (#{i})", rng.pick(&EVENTS)),
                    at,
                    then,
                    ..person(name, channel, script)
                }
            })
            .collect();
        let last = people.iter().map(|p| p.at).max().unwrap_or(0);
        let limited = people
            .iter()
            .filter_map(|p| match p.script {
                Script::Limited(n) => Some(n as i64),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        // Every row's attempts, each as slow as a send is, and the longest
        // run of 429s, each as long as it asks.
        let slow = (people.len() * (ATTEMPTS + 1)) as i64 * latency_ms;
        let restart_at = (rng.between(0, 1) == 0).then(|| rng.between(1, 300) as i64 * SECOND);
        Batch {
            seed: Some(seed),
            people,
            restart_at,
            // Room for a dead address's four attempts after the last arrival.
            end: last + 8 * MINUTE + limited * retry_after_s * SECOND + slow,
            fault: None,
            retry_after_s,
            latency_ms,
        }
    }
}

/// Whether someone in `batch` is treated by the provider as `that` says.
fn anyone(batch: &Batch, that: fn(Script) -> bool) -> bool {
    batch.people.iter().any(|p| that(p.script))
}

/// The situations chapter 5's rules turn on.
const DIMENSIONS: &[Dimension<Batch>] = &[
    Dimension {
        name: "a row that fails, then goes through",
        reached: |b| anyone(b, |s| matches!(s, Script::Flaky(_))),
    },
    Dimension {
        name: "a row that fails three times, then goes through on its last attempt",
        reached: |b| anyone(b, |s| s == Script::Flaky(3)),
    },
    Dimension {
        name: "an address that always fails: four attempts, then the dead letter",
        reached: |b| anyone(b, |s| s == Script::Dead),
    },
    Dimension {
        name: "a permanent rejection",
        reached: |b| anyone(b, |s| s == Script::Refused),
    },
    Dimension {
        name: "a 429 whose Retry-After is longer than the backoff",
        reached: |b| anyone(b, |s| matches!(s, Script::Limited(_))),
    },
    Dimension {
        name: "a 429 answered more often than a row has attempts",
        reached: |b| {
            anyone(
                b,
                |s| matches!(s, Script::Limited(n) if n as usize >= ATTEMPTS),
            )
        },
    },
    Dimension {
        name: "a 429 whose Retry-After is longer than the longest backoff",
        reached: |b| {
            b.retry_after_s * SECOND > RETRY_GAPS[RETRY_GAPS.len() - 1]
                && anyone(b, |s| matches!(s, Script::Limited(_)))
        },
    },
    Dimension {
        name: "a dead letter whose last error is not its first (429s, then 503s or a refusal)",
        reached: |b| b.people.iter().any(|p| p.then != Then::Works),
    },
    Dimension {
        name: "sends that take simulated time, so a wake-up's clock is stale by the answer",
        reached: |b| b.latency_ms > 0 && anyone(b, |s| s != Script::Fine),
    },
    Dimension {
        name: "a send whose answer never comes",
        reached: |b| anyone(b, |s| s == Script::Unanswered),
    },
    Dimension {
        name: "a deploy while a retry waits its backoff",
        reached: |b| {
            b.restart_at.is_some_and(|r| {
                b.people
                    .iter()
                    .any(|p| p.script != Script::Fine && (p.at..p.at + 6 * MINUTE).contains(&r))
            })
        },
    },
    Dimension {
        name: "a notice published after others were tried",
        reached: |b| b.people.iter().any(|p| p.at > 0) && b.people.iter().any(|p| p.at == 0),
    },
];

impl Explorer for Generated {
    type Scenario = Batch;

    fn generate(&self, seed: u64) -> Batch {
        Batch::generated(seed)
    }

    fn plans(&self, batch: &Batch, dir: &Path) -> Vec<Plan> {
        batch.plans(dir)
    }

    fn dimensions(&self) -> &'static [Dimension<Batch>] {
        DIMENSIONS
    }

    fn faults(&self) -> FaultModel {
        FaultModel::PUBLISH
    }

    /// A dead letter here says only that attempts ran out or a claim was
    /// lost: a fault's timing may rightly let one of them through.
    fn dead_letters_may_arrive(&self) -> bool {
        true
    }

    fn invariants(&self) -> Invariants {
        Invariants {
            recorded: true,
            told_once: true,
            settled: true,
            keyed: true,
            // No sweep hands a live claim to another process here.
            sent_once: true,
            retry_gaps: &RETRY_GAPS,
            ..Invariants::default()
        }
    }

    fn observe(&self, batch: &Batch, run: &Run) -> Result<Observation> {
        let rows = read_outbox(run.dir, run.history, Queued::label)?;
        let fates = batch
            .people
            .iter()
            .map(|p| {
                let recipient = p.recipient();
                // Each attempt: when it began, when its answer came, and the answer.
                let timed: Vec<(i64, i64, Outcome)> = run
                    .history
                    .attempts(p.channel)
                    .filter(|d| d.recipient == recipient)
                    .map(|d| (d.began_ms, d.at_ms, d.outcome))
                    .collect();
                let attempts: Vec<Outcome> = timed.iter().map(|a| a.2).collect();
                let told = attempts
                    .iter()
                    .filter(|o| **o == Outcome::Delivered)
                    .count() as u32;
                let state = match rows.iter().find(|r| r.subject == p.label()) {
                    // A dead letter keeps the provider's last word: which
                    // kind of answer it was is part of its state.
                    Some(r) if r.status == "FAILED" => {
                        format!("FAILED ({})", answer_kind(r.error.as_deref()))
                    }
                    Some(r) => r.status.clone(),
                    None if told > 0 => "SENT".to_string(),
                    None => "not in the outbox".to_string(),
                };
                let answers: Vec<&str> = attempts.iter().map(|o| answered(*o)).collect();
                let mut detail = format!(
                    "{}: {}",
                    counted(answers.len(), "attempt"),
                    answers.join(", ")
                );
                if let Script::Limited(n) = p.script {
                    // A retry sooner than the 429's Retry-After is a
                    // difference from the reference, whatever else agrees.
                    let soon = timed
                        .windows(2)
                        .take(n as usize)
                        .filter(|pair| pair[1].0 - pair[0].1 < batch.retry_after_s * SECOND)
                        .count();
                    if soon > 0 {
                        detail.push_str(&format!(
                            "; {} sooner than the 429's Retry-After: {}",
                            counted(soon, "retry"),
                            batch.retry_after_s
                        ));
                    }
                }
                (
                    p.label(),
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

    fn shrink(&self, batch: &Batch) -> Vec<Batch> {
        let mut smaller = Vec::new();
        if batch.restart_at.is_some() {
            smaller.push(Batch {
                restart_at: None,
                ..batch.clone()
            });
        }
        smaller.extend(
            cut_down(&batch.people, usize::MAX)
                .into_iter()
                .map(|people| Batch {
                    people,
                    ..batch.clone()
                }),
        );
        smaller
    }

    fn describe(&self, batch: &Batch) -> String {
        let people: Vec<String> = batch
            .people
            .iter()
            .map(|p| {
                let then = match p.then {
                    Then::Works => "",
                    Then::Dead => ", then always 503",
                    Then::Rejected => ", then refused",
                };
                let script = p.script.said().unwrap_or_else(|| "fine".into()) + then;
                format!("{} {script} at {}", p.label(), clock(p.at))
            })
            .collect();
        let mut provider = Vec::new();
        if batch.retry_after_s != RETRY_AFTER_S
            && anyone(batch, |s| matches!(s, Script::Limited(_)))
        {
            provider.push(format!("; a 429 asks for {} s", batch.retry_after_s));
        }
        if batch.latency_ms > 0 {
            provider.push(format!("; a send takes {}", span(batch.latency_ms)));
        }
        let restart = batch
            .restart_at
            .map(|at| format!("; the dispatcher restarts at {}", clock(at)))
            .unwrap_or_default();
        format!("{}{}{restart}", people.join(", "), provider.concat())
    }
}
