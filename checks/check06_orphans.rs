//! Check 06: orphans, the sweep and its fence.
//!
//! Five scenarios, each in a fresh folder, with the dispatcher waking every
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
//!   itself still sending the row.
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
//! dispatcher held, how long the slow send takes and how long the late one
//! hangs.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::{MINUTE, SECOND};
use lab::report::Verdict;
use lab::rng::Rng;
use lab::runner::{scenario_dir, Case, Exit};
use lab::scenario::{Fault, Moment, Plan, ProviderScript, Step, APP_DB, WORLD_DB};
use lab::serve::{Job, Schedule};
use lab::world::{read_pairs, Delivery, Event, History, Outcome, Recorder};

pub const CHAPTER: Chapter = Chapter {
    number: 6,
    title: "orphans: the sweep and its fence",
    case_file: "cases/case06_orphans.rs",
    text_file: "chapters/06-orphans.md",
    bin: "case06",
    shipped_hash: 0xd087_8db6_cda7_5c47,
    run,
    check,
};

const EVENTUALLY: &str =
    "every row a lost dispatcher held is delivered, or FAILED once its attempts run out";
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
/// Dispatchers started on the poison row before the check calls it a loop.
const POISON_PROCESSES: u32 = 8;
/// Process numbers of the racing scenarios.
const FIRST: u32 = 1;
const SECOND_RELAY: u32 = 2;

/// Someone a scenario tells something, on the channel they chose.
#[derive(Clone, Debug)]
struct Person {
    name: String,
    channel: &'static str,
    text: String,
}

impl Person {
    fn email(&self) -> String {
        format!("{}@example.com", self.name)
    }

    fn device(&self) -> String {
        format!("{}-phone", self.name)
    }

    fn recipient(&self) -> String {
        match self.channel {
            "push" => self.device(),
            _ => self.email(),
        }
    }

    fn fixture(&self) -> String {
        format!(
            "INSERT OR IGNORE INTO people (id, email, device, channel) VALUES ('{}', '{}', '{}', '{}')",
            self.name,
            self.email(),
            self.device(),
            self.channel
        )
    }

    fn publish(&self) -> Step {
        let notice = serde_json::json!({
            "person": self.name,
            "kind": "date_chosen",
            "text": self.text,
        });
        Step::with("publish", notice, &self.recipient())
    }
}

const NAMES: [&str; 20] = [
    "ada", "ben", "cleo", "dev", "emma", "finn", "gia", "hugo", "ivy", "jon", "kai", "lena",
    "milo", "nia", "omar", "pia", "rosa", "sam", "tara", "zoe",
];
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
}

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
    /// runs while the first one's send hangs.
    span: i64,
}

/// The chapter's people and numbers, or a batch drawn from a seed.
struct Batch {
    seed: Option<u64>,
    people: Vec<Person>,
    slow: i64,
    late: i64,
}

impl Batch {
    fn chapter() -> Batch {
        let text = EVENTS[0].to_string();
        let people = [
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
            people,
            // Just under the threshold: any sweep that hands back a claim
            // younger than 4 min 40 s meets it.
            slow: 4 * MINUTE + 50 * SECOND,
            late: 8 * MINUTE,
        }
    }

    /// Other names and channels, 2 to 6 rows held by the killed dispatcher,
    /// a slow send of 2 to 4 min 50 s, a hang of 7 to 9 min.
    fn random(seed: u64) -> Batch {
        let mut rng = Rng::new(seed);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let count = rng.between(2, 6) as usize;
        let people = names[..count]
            .iter()
            .map(|name| Person {
                name: name.to_string(),
                channel: if rng.between(0, 2) == 0 {
                    "push"
                } else {
                    "email"
                },
                text: rng.pick(&EVENTS).to_string(),
            })
            .collect();
        Batch {
            seed: Some(seed),
            people,
            slow: rng.between(120, 290) as i64 * SECOND,
            late: rng.between(420, 540) as i64 * SECOND,
        }
    }

    /// The batch's scenarios; the chapter's own batch also plays the poison
    /// row and the answer that comes back during a resend, which no name or
    /// number of a batch changes.
    fn scenarios(&self, all: bool) -> Vec<Scenario> {
        let one = || vec![self.people[0].clone()];
        let scenario = |what, people, span| Scenario {
            what,
            seed: self.seed,
            people,
            refused: None,
            span,
        };
        let mut scenarios = vec![
            scenario(What::Crash, self.people.clone(), AFTER_CRASH),
            scenario(What::Slow, one(), self.slow),
            scenario(What::LateAfter, one(), self.late),
        ];
        if all {
            scenarios.push(scenario(What::LateDuring, one(), RESEND_RUN));
            let mut poison = scenario(What::Poison, one(), POISON_RUN);
            poison.refused = self.people.get(1).cloned();
            scenarios.push(poison);
        }
        scenarios
    }
}

impl Scenario {
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
            What::Poison => match &self.refused {
                Some(r) => format!(
                    "every send to {who} kills its dispatcher, and {} is refused for good",
                    r.recipient()
                ),
                None => format!("every send to {who} kills its dispatcher"),
            },
            What::Slow => format!(
                "dispatcher 1's send to {who} takes {} while dispatcher 2 runs",
                span(self.span)
            ),
            What::LateAfter => format!(
                "dispatcher 1's send to {who} hangs for {}, then fails",
                span(self.span)
            ),
            What::LateDuring => format!(
                "dispatcher 1's send to {who} hangs, then fails while dispatcher 2 resends it"
            ),
        };
        format!("{}, {what}:", self.batch())
    }

    fn recipient(&self) -> String {
        self.people[0].recipient()
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
        self.refused.iter().chain(&self.people)
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
    Schedule {
        until_ms: until,
        jobs: vec![
            Job {
                op: "dispatch".to_string(),
                every_ms: WAKE_UP,
            },
            Job {
                op: "sweep".to_string(),
                every_ms: SWEEP,
            },
        ],
    }
    .step()
}

/// The dispatcher alone until `until`: the second process of the slow
/// scenario wakes as usual, and starts its sweep's minute then.
fn dispatch_only(until: i64) -> Step {
    Schedule {
        until_ms: until,
        jobs: vec![Job {
            op: "dispatch".to_string(),
            every_ms: WAKE_UP,
        }],
    }
    .step()
}

/// The sweep alone until `until`. While the only row is claimed by a
/// dispatcher whose send runs for minutes, the dispatcher's wake-ups have
/// nothing to claim, and no correct sweep hands a claim back within 5 min:
/// skipping them keeps the racing process's first minutes cheap.
fn sweeps_only(until: i64) -> Step {
    Schedule {
        until_ms: until,
        jobs: vec![Job {
            op: "sweep".to_string(),
            every_ms: SWEEP,
        }],
    }
    .step()
}

/// `3 min`, `4 min 10 s`.
fn span(ms: i64) -> String {
    let s = ms / SECOND;
    match (s / 60, s % 60) {
        (0, s) => format!("{s} s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s} s"),
    }
}

/// Simulated time as a clock reads it: `6:02`.
fn clock(ms: i64) -> String {
    let s = ms / SECOND;
    format!("{}:{:02}", s / 60, s % 60)
}

/// One outbox row as the dispatchers left it.
#[derive(Clone, Debug, Default)]
struct Left {
    status: String,
    last_error: Option<String>,
}

/// What one scenario left behind.
struct Played {
    scenario: Scenario,
    /// (process, how it ended), in the order they ran.
    exits: Vec<(u32, Exit)>,
    history: History,
    rows: Vec<(String, Left)>,
    unreadable: Option<String>,
    /// For the racing scenarios: whether the interleaving they need happened.
    arranged: bool,
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

    fn left(&self, p: &Person) -> Left {
        let key = format!("{} {}", p.channel, p.recipient());
        self.rows
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, l)| l.clone())
            .unwrap_or(Left {
                status: "missing from the outbox".to_string(),
                last_error: None,
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
    let path = dir.join(WORLD_DB);
    let conn = rusqlite::Connection::open(&path)
        .with_context(|| format!("could not open the world at {}", path.display()))?;
    conn.query_row("SELECT now FROM clock", [], |row| row.get(0))
        .context("could not read the world's clock")
}

fn read_outbox(dir: &Path) -> Result<Vec<(String, Left)>> {
    if !dir.join(APP_DB).exists() {
        return Ok(Vec::new());
    }
    let statuses = read_pairs(
        dir,
        "SELECT channel || ' ' || recipient, status FROM outbox ORDER BY id",
    )?;
    let errors = read_pairs(
        dir,
        "SELECT channel || ' ' || recipient, coalesce(last_error, '') FROM outbox ORDER BY id",
    )?;
    Ok(statuses
        .into_iter()
        .zip(errors)
        .map(|((key, status), (_, error))| {
            let last_error = (!error.is_empty()).then_some(error);
            (key, Left { status, last_error })
        })
        .collect())
}

fn play(case: &Case, scenario: &Scenario) -> Result<Played> {
    match scenario.what {
        What::Crash | What::Poison => play_restarts(case, scenario),
        What::Slow | What::LateAfter | What::LateDuring => play_race(case, scenario),
    }
}

fn finish(
    scenario: &Scenario,
    dir: &Path,
    exits: Vec<(u32, Exit)>,
    arranged: impl Fn(&History) -> bool,
) -> Result<Played> {
    let history = History::read(dir)?;
    let (rows, unreadable) = match read_outbox(dir) {
        Ok(rows) => (rows, None),
        Err(err) => (Vec::new(), Some(format!("{err:#}"))),
    };
    Ok(Played {
        scenario: scenario.clone(),
        arranged: arranged(&history),
        exits,
        history,
        rows,
        unreadable,
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
        let mut plan = scenario.plan(dir, process, vec![schedule(now + scenario.span)]);
        plan.provider = script.clone();
        plan.push = script.clone();
        exits.push((process, case.start(&plan)?));
    }
    finish(scenario, dir, exits, |_| true)
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
    let mut first = scenario.setup(dir, vec![Step::new("dispatch")]);
    let slow = ProviderScript {
        unreachable: if scenario.what == What::Slow {
            Vec::new()
        } else {
            vec![recipient.clone()]
        },
        announce: true,
        hold_until_any: vec![
            if scenario.what == What::LateDuring {
                Moment::Sending(SECOND_RELAY)
            } else {
                Moment::Clock(scenario.span)
            },
            Moment::Ended(SECOND_RELAY),
        ],
        hold_limit_ms,
        ..ProviderScript::default()
    };
    first.provider = slow.clone();
    first.push = slow;
    let mut second = scenario.plan(
        dir,
        SECOND_RELAY,
        match scenario.what {
            // A short threshold must meet a running dispatcher here: the
            // sweep's minute starts so that it runs 10 s before the send
            // ends, and any threshold under the send's age then is caught.
            What::Slow => {
                let phase = (scenario.span - SWEEP_LEAD).rem_euclid(SWEEP);
                let mut steps = Vec::new();
                if phase > 0 {
                    steps.push(dispatch_only(phase));
                }
                steps.push(schedule(scenario.span));
                steps
            }
            _ => vec![sweeps_only(ORPHANED_AFTER), schedule(scenario.span)],
        },
    );
    if scenario.what == What::LateDuring {
        let resend = ProviderScript {
            announce: true,
            hold_until_any: vec![Moment::Ended(FIRST)],
            hold_limit_ms,
            ..ProviderScript::default()
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
    let exits = std::thread::scope(|scope| -> Result<Vec<(u32, Exit)>> {
        let running = scope.spawn(|| ended(dir, FIRST, held.start(&first)));
        while !running.is_finished() && !world.reached(Moment::Sending(FIRST))? {
            std::thread::sleep(Duration::from_millis(1));
        }
        let second = ended(dir, SECOND_RELAY, case.start(&second));
        let first = running
            .join()
            .expect("the thread running dispatcher 1 does not panic");
        Ok(vec![(FIRST, first?), (SECOND_RELAY, second?)])
    })?;
    let what = scenario.what;
    let span = scenario.span;
    finish(scenario, dir, exits, move |history| {
        arranged(what, span, &recipient, history)
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
        _ => attempts[first].at_ms >= span,
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
            played.left(p).status
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
        .filter(|p| played.left(p).status == "PROCESSING")
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

/// The first failure of a property, in the order the scenarios were played.
struct Finding {
    evidence: String,
    scenario: String,
    details: Vec<String>,
    seed: Option<u64>,
    /// The scenario's events, for a failure that comes from a fault.
    timeline: Vec<Event>,
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let case = &case.patient(PATIENCE);
    let mut scenarios = Batch::chapter().scenarios(true);
    for &seed in &options.seeds {
        scenarios.extend(Batch::random(seed).scenarios(false));
    }
    // Every scenario at once: the racing ones spend their time asleep.
    let played: Vec<Played> = std::thread::scope(|scope| {
        let running: Vec<_> = scenarios
            .iter()
            .map(|s| scope.spawn(move || play(case, s)))
            .collect();
        running
            .into_iter()
            .map(|h| h.join().expect("a scenario thread does not panic"))
            .collect::<Result<Vec<_>>>()
    })?;
    let processes = played.iter().map(|p| p.exits.len()).sum();
    let of = |what: What| played.iter().filter(move |p| p.scenario.what == what);

    let held = played[0].scenario.people.len();
    let verdicts = vec![
        judge(
            EVENTUALLY,
            format!("{held} orphans delivered, the poison row FAILED after {ATTEMPTS} attempts"),
            of(What::Crash).chain(of(What::Poison)).find_map(eventually),
        ),
        judge(
            LIVE,
            format!("{} slow sends left alone", of(What::Slow).count()),
            of(What::Slow).find_map(live),
        ),
        judge(
            LATE,
            format!(
                "{} of {} rows handed on, none changed by the late answer",
                of(What::LateAfter)
                    .chain(of(What::LateDuring))
                    .filter(|p| p.handed_on())
                    .count(),
                of(What::LateAfter).chain(of(What::LateDuring)).count()
            ),
            of(What::LateAfter)
                .chain(of(What::LateDuring))
                .find_map(late),
        ),
    ];
    Ok(Checked {
        verdicts,
        processes,
    })
}

fn judge(property: &str, pass_evidence: String, finding: Option<Finding>) -> Verdict {
    let Some(f) = finding else {
        return Verdict::pass(property, pass_evidence);
    };
    let mut verdict = Verdict::fail(property, f.evidence, f.scenario, f.details);
    verdict.seed = f.seed;
    verdict.timeline = f.timeline;
    verdict
}

fn trouble_finding(played: &Played) -> Option<Finding> {
    played.trouble().map(|trouble| Finding {
        evidence: "the case did not finish".to_string(),
        scenario: format!("{} {trouble}", played.scenario.name()),
        details: Vec::new(),
        seed: played.scenario.seed,
        timeline: Vec::new(),
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
                return None;
            }
            let ok = s.people.len() - details.len();
            (format!("{ok} of {} delivered", s.people.len()), details)
        }
        _ => {
            let p = &s.people[0];
            let left = played.left(p);
            let lost = played.crashes();
            if left.status == "FAILED" && lost == ATTEMPTS {
                return s.refused.as_ref().and_then(|r| refused_again(played, r));
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
                .last_error
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
                details.push(format!(
                    "it was dead-lettered after {lost} attempts; each lost send is an attempt, and a row gets {ATTEMPTS}."
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
        timeline: Vec::new(),
    })
}

/// A slow send must not be handed on: dispatcher 2 never attempts the row.
fn live(played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(played) {
        return Some(f);
    }
    let p = &played.scenario.people[0];
    let attempts = played.attempts(p);
    let second: Vec<&&Delivery> = attempts
        .iter()
        .filter(|d| d.process == SECOND_RELAY)
        .collect();
    let first = attempts.iter().find(|d| d.process == FIRST)?;
    let resent = second.first()?;
    Some(Finding {
        evidence: "1 live send swept".to_string(),
        scenario: played.scenario.name(),
        details: vec![
            "dispatcher 1 claimed the row at 0:00 and started sending it.".to_string(),
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
        timeline: Vec::new(),
    })
}

/// Once dispatcher 2 has delivered the row, dispatcher 1's late answer must
/// change nothing: the row ends SENT and is never sent again.
fn late(played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(played) {
        return Some(f);
    }
    let p = &played.scenario.people[0];
    let attempts = played.attempts(p);
    let delivered = attempts
        .iter()
        .position(|d| d.outcome == Outcome::Delivered && d.process == SECOND_RELAY)?;
    let late = attempts.iter().find(|d| d.process == FIRST)?;
    let again: Vec<&&Delivery> = attempts[delivered + 1..]
        .iter()
        .filter(|d| d.process != FIRST)
        .collect();
    let left = played.left(p);
    if left.status == "SENT" && again.is_empty() {
        return None;
    }
    let mut details = vec![
        "dispatcher 1 claimed the row at 0:00; its send hung.".to_string(),
        format!(
            "dispatcher 2's sweep handed it on, and dispatcher 2 delivered it at {}.",
            clock(attempts[delivered].at_ms)
        ),
        format!(
            "dispatcher 1's send came back at {} with a 503, and its answer was recorded.",
            clock(late.at_ms)
        ),
    ];
    for d in &again {
        details.push(format!(
            "the row was sent again at {} ({}).",
            clock(d.at_ms),
            said(d.outcome)
        ));
    }
    details.push(format!("the row is left {}.", left.status));
    let evidence = match again.len() {
        0 => format!("delivered, then left {}", left.status),
        1 => "delivered, then attempted again".to_string(),
        n => format!("delivered, then attempted {n} more times"),
    };
    Some(Finding {
        evidence,
        scenario: played.scenario.name(),
        details,
        seed: played.scenario.seed,
        timeline: Vec::new(),
    })
}
