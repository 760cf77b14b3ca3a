//! Check 07: the circuit breaker.
//!
//! Plays the dispatcher over simulated time while one channel's provider is
//! down: the chapter's batch (email down for 10 minutes, push working, a
//! backlog at the start and a notification every 30 s), and seeded random
//! batches with other outage windows (on either channel) and other mixes of
//! rows. A long push outage with only three pushes waiting shows
//! whether rows survive many probes; meanwhile email is quiet, and its one
//! email fails once. A hang after a busy morning shows whether timeouts
//! count and old successes fade; bounces and a few hiccups on a working
//! channel show whether refusals, or failures that are no outage, open the
//! breaker. The check judges what the world saw: which rows ended
//! FAILED in the service's database, what each provider was sent and when.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::Connection;
use serde::Serialize;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::{MINUTE, SECOND};
use lab::report::Verdict;
use lab::rng::Rng;
use lab::runner::{in_parallel, scenario_dir, Case, Exit};
use lab::scenario::{Plan, ProviderScript, Step, APP_DB};
use lab::serve::{Job, Schedule};
use lab::world::{Delivery, History, Outcome};

pub const CHAPTER: Chapter = Chapter {
    number: 7,
    title: "the circuit breaker",
    case_file: "cases/case07_breaker.rs",
    text_file: "chapters/07-circuit-breaker.md",
    bin: "case07",
    shipped_hash: 0x6caa_1b0f_5acf_b082,
    run,
    check,
};

const NOT_DEAD: &str = "no row is dead-lettered by the outage";
const DELIVERED: &str = "every notification is delivered once the provider is back";
const FEW_ATTEMPTS: &str = "about one attempt per 30 s while the provider is down";
const HEALTHY: &str = "the channel that works is unaffected";
const LONE: &str = "a lone failure on a quiet channel is retried on schedule";

/// The dispatcher wakes this often, and the sweep runs this often.
const TICK: i64 = 2 * SECOND;
const SWEEP: i64 = MINUTE;
/// How long the dispatcher runs on after the outage ends: a breaker lets a
/// probe through within 30 s of the provider's return, and the backlog goes
/// out on the wake-ups after it.
const DRAIN: i64 = 2 * MINUTE;
/// One probe per this long while a provider is down.
const PROBE_EVERY: i64 = 30 * SECOND;
/// Sends allowed per outage on top of one per 30 s: the sends that find
/// the provider down before the breaker has seen enough to open, and the
/// window's edges.
const EDGE_SLACK: usize = 10;
/// A notification on the working channel must go out this soon.
const HEALTHY_WITHIN: i64 = 10 * SECOND;
/// A lone failure's retry must come this soon: its 5 s wait and a wake-up,
/// well short of a breaker's 30 s.
const RETRY_WITHIN: i64 = 10 * SECOND;

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
const NAMES: [&str; 20] = [
    "ada", "ben", "cleo", "dev", "emma", "finn", "gia", "hugo", "ivy", "jon", "kai", "lena",
    "milo", "nia", "omar", "pia", "rosa", "sam", "tara", "zoe",
];

/// Someone who gets notifications, on the channel they chose.
#[derive(Clone, Debug)]
struct Person {
    id: String,
    channel: &'static str,
}

impl Person {
    fn new(name: &str, channel: &'static str) -> Person {
        Person {
            id: name.to_string(),
            channel,
        }
    }

    fn email(&self) -> String {
        format!("{}@example.com", self.id)
    }

    fn device(&self) -> String {
        format!("{}-phone", self.id)
    }

    /// Where a message on their channel goes: an address or a device.
    fn recipient(&self) -> String {
        match self.channel {
            "push" => self.device(),
            _ => self.email(),
        }
    }
}

/// The case's `publish` input: one person to tell one thing.
#[derive(Clone, Debug, Serialize)]
struct Notice {
    person: String,
    kind: String,
    text: String,
}

/// One notification the scenario expects to reach one person.
#[derive(Clone, Debug)]
struct Published {
    at_ms: i64,
    notice: Notice,
    channel: &'static str,
    recipient: String,
}

/// A run of the dispatcher: who is there, what happens when, and when which
/// provider is down.
struct Scenario {
    /// `None` for the chapter's batch and the quiet channel.
    seed: Option<u64>,
    name: String,
    people: Vec<Person>,
    /// Every notification, in the order they are published.
    published: Vec<Published>,
    /// The channel whose provider has outages.
    down: &'static str,
    outages: Vec<(i64, i64)>,
    /// Whether the outages are hangs: every send times out instead of
    /// being answered 503.
    hangs: bool,
    /// Recipients whose first n attempts fail.
    flaky: Vec<(String, u32)>,
    /// Recipients the working provider refuses for good (a 4xx): their rows
    /// are rightly dead-lettered at once, and nothing of theirs is expected.
    rejected: Vec<String>,
    until_ms: i64,
    /// How many things have happened so far: numbers the texts.
    happened: usize,
}

impl Scenario {
    fn new(seed: Option<u64>, name: String, people: Vec<Person>, down: &'static str) -> Scenario {
        Scenario {
            seed,
            name,
            people,
            published: Vec::new(),
            down,
            outages: Vec::new(),
            hangs: false,
            flaky: Vec::new(),
            rejected: Vec::new(),
            until_ms: 0,
            happened: 0,
        }
    }

    /// Something happens at `at_ms` and `people` are told, one notice
    /// each; everything that happens gets its own text, so no one is told
    /// the same thing twice.
    fn publish(&mut self, at_ms: i64, people: &[&Person]) {
        let n = self.happened;
        self.happened += 1;
        let (kind, doing) = DOINGS[n % DOINGS.len()];
        let text = format!(
            "{} {doing} {}",
            ACTORS[n % ACTORS.len()],
            EVENTS[n % EVENTS.len()]
        );
        for person in people {
            self.published.push(Published {
                at_ms,
                notice: Notice {
                    person: person.id.clone(),
                    kind: kind.to_string(),
                    text: text.clone(),
                },
                channel: person.channel,
                recipient: person.recipient(),
            });
        }
    }

    /// The chapter's batch: the email provider is down from 0:00 to 10:00.
    /// At 0:00 two things happen that fourteen people hear about, ten by
    /// email and four by push; then one person is told something every
    /// 30 s, every third time by push.
    fn chapter() -> Scenario {
        let emails: Vec<Person> = NAMES[..10]
            .iter()
            .map(|n| Person::new(n, "email"))
            .collect();
        let pushes: Vec<Person> = NAMES[10..14]
            .iter()
            .map(|n| Person::new(n, "push"))
            .collect();
        let people: Vec<Person> = emails.iter().chain(&pushes).cloned().collect();
        let mut s = Scenario::new(None, "the chapter's batch".into(), people.clone(), "email");
        s.publish(0, &people.iter().collect::<Vec<_>>());
        s.publish(0, &emails.iter().collect::<Vec<_>>());
        for i in 1..20usize {
            let person = match i % 3 {
                0 => &pushes[(i / 3) % pushes.len()],
                _ => &emails[i % emails.len()],
            };
            s.publish(i as i64 * 30 * SECOND, &[person]);
        }
        s.outages = vec![(0, 10 * MINUTE)];
        s.until_ms = 10 * MINUTE + DRAIN;
        s
    }

    /// The push provider is down for 8 minutes with only three pushes
    /// waiting, while email is quiet: one email, at 1:00, whose first send
    /// fails.
    fn quiet() -> Scenario {
        let ada = Person::new("ada", "email");
        let pushes: Vec<Person> = NAMES[10..13]
            .iter()
            .map(|n| Person::new(n, "push"))
            .collect();
        let people = std::iter::once(ada.clone()).chain(pushes.clone()).collect();
        let mut s = Scenario::new(None, "the long push outage".into(), people, "push");
        s.publish(0, &pushes.iter().collect::<Vec<_>>());
        s.publish(MINUTE, &[&ada]);
        s.flaky = vec![(ada.recipient(), 1)];
        s.outages = vec![(0, 8 * MINUTE)];
        s.until_ms = 8 * MINUTE + DRAIN;
        s
    }

    /// A busy morning, then a hang: four people get an email every 10 s
    /// until 2:50, 72 sends that all go through. From 4:00 to 11:00 the
    /// email provider stops answering: every send times out. At 4:00 eight
    /// people by email and three by push are told something, then one
    /// person every 30 s until 10:30, every third time by push.
    fn hang() -> Scenario {
        let busy: Vec<Person> = NAMES[..4].iter().map(|n| Person::new(n, "email")).collect();
        let emails: Vec<Person> = NAMES[4..12]
            .iter()
            .map(|n| Person::new(n, "email"))
            .collect();
        let pushes: Vec<Person> = NAMES[12..15]
            .iter()
            .map(|n| Person::new(n, "push"))
            .collect();
        let people = busy.iter().chain(&emails).chain(&pushes).cloned().collect();
        let mut s = Scenario::new(
            None,
            "the hang after a busy morning".into(),
            people,
            "email",
        );
        for i in 1..=17 {
            s.publish(i * 10 * SECOND, &busy.iter().collect::<Vec<_>>());
        }
        let start = 4 * MINUTE;
        let told: Vec<&Person> = emails.iter().chain(&pushes).collect();
        s.publish(start, &told);
        for i in 1..=13usize {
            let person = match i % 3 {
                0 => &pushes[(i / 3) % pushes.len()],
                _ => &emails[i % emails.len()],
            };
            s.publish(start + i as i64 * 30 * SECOND, &[person]);
        }
        s.outages = vec![(start, 11 * MINUTE)];
        s.hangs = true;
        s.until_ms = 11 * MINUTE + DRAIN;
        s
    }

    /// Bounces and hiccups on a channel that works: the push provider is
    /// down from 0:00 to 4:00 with three pushes waiting. At 0:30 twelve
    /// people are emailed, the first six at addresses that do not exist,
    /// which the email provider refuses for good. At 2:00 six of them and
    /// three more are emailed; the three newcomers' first sends fail once,
    /// one after another.
    fn bounces() -> Scenario {
        let emails: Vec<Person> = NAMES[..15]
            .iter()
            .map(|n| Person::new(n, "email"))
            .collect();
        let pushes: Vec<Person> = NAMES[15..18]
            .iter()
            .map(|n| Person::new(n, "push"))
            .collect();
        let people = emails.iter().chain(&pushes).cloned().collect();
        let mut s = Scenario::new(None, "bounces and hiccups".into(), people, "push");
        s.publish(0, &pushes.iter().collect::<Vec<_>>());
        s.publish(30 * SECOND, &emails[..12].iter().collect::<Vec<_>>());
        s.publish(2 * MINUTE, &emails[6..].iter().collect::<Vec<_>>());
        s.rejected = emails[..6].iter().map(Person::recipient).collect();
        s.flaky = emails[12..].iter().map(|p| (p.recipient(), 1)).collect();
        s.outages = vec![(0, 4 * MINUTE)];
        s.until_ms = 4 * MINUTE + DRAIN;
        s
    }

    /// A batch drawn from `seed`: either channel down, for 3 to 8 min from
    /// somewhere in the first 3 min, a backlog of 12 to 24 rows on the
    /// failing channel as it goes down, and before and during the outage,
    /// one or two people told something every 15 to 45 s.
    fn random(seed: u64) -> Scenario {
        let mut rng = Rng::new(seed);
        let (down, up) = match rng.between(0, 1) {
            0 => ("email", "push"),
            _ => ("push", "email"),
        };
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let failing = rng.between(6, 10) as usize;
        let working = rng.between(3, 5) as usize;
        let on_down: Vec<Person> = names[..failing]
            .iter()
            .map(|n| Person::new(n, down))
            .collect();
        let on_up: Vec<Person> = names[failing..failing + working]
            .iter()
            .map(|n| Person::new(n, up))
            .collect();
        let people = on_down.iter().chain(&on_up).cloned().collect();
        let name = format!("random batch (seed {seed})");
        let mut s = Scenario::new(Some(seed), name, people, down);
        let start = rng.between(0, 6) as i64 * 30 * SECOND;
        let end = start + rng.between(6, 16) as i64 * 30 * SECOND;
        s.outages.push((start, end));
        let gap = |rng: &mut Rng| rng.between(15, 45) as i64 * SECOND;
        let mut at = gap(&mut rng);
        while at < start {
            s.trickle(&mut rng, at, &on_down, &on_up);
            at += gap(&mut rng);
        }
        // The backlog lands as the outage begins.
        let backlog = rng.between(12, 24) as usize;
        let mut queued = 0;
        while queued < backlog {
            let mut told: Vec<&Person> = on_down.iter().collect();
            rng.shuffle(&mut told);
            told.truncate(rng.between(3, failing as u64) as usize);
            queued += told.len();
            let mut others: Vec<&Person> = on_up.iter().collect();
            rng.shuffle(&mut others);
            told.extend(&others[..rng.between(0, 2) as usize]);
            s.publish(start, &told);
        }
        let mut at = start + gap(&mut rng);
        while at < end {
            s.trickle(&mut rng, at, &on_down, &on_up);
            at += gap(&mut rng);
        }
        s.until_ms = end + DRAIN;
        s
    }

    /// One or two people hear about something, on the failing channel two
    /// times in three.
    fn trickle(&mut self, rng: &mut Rng, at: i64, on_down: &[Person], on_up: &[Person]) {
        let mut told = Vec::new();
        for _ in 0..rng.between(1, 2) {
            let person = match rng.between(0, 2) {
                0 => rng.pick(on_up),
                _ => rng.pick(on_down),
            };
            if !told.iter().any(|p: &&Person| p.id == person.id) {
                told.push(person);
            }
        }
        self.publish(at, &told);
    }

    fn fixture(&self) -> Vec<String> {
        let mut sql = String::from("BEGIN;\n");
        for p in &self.people {
            let device = match p.channel {
                "push" => format!("'{}'", p.device()),
                _ => "NULL".to_string(),
            };
            sql.push_str(&format!(
                "INSERT INTO people (id, email, device, channel) VALUES ('{}', '{}', {device}, '{}');\n",
                p.id,
                p.email(),
                p.channel
            ));
        }
        sql.push_str("COMMIT;");
        vec![sql]
    }

    /// The dispatcher every 2 s and the sweep every minute, from the clock's
    /// time until `until_ms`.
    fn schedule(until_ms: i64) -> Step {
        Schedule {
            until_ms,
            jobs: vec![
                Job {
                    op: "dispatch".into(),
                    every_ms: TICK,
                },
                Job {
                    op: "sweep".into(),
                    every_ms: SWEEP,
                },
            ],
        }
        .step()
    }

    fn plan(&self, dir: &Path) -> Plan {
        let mut steps = Vec::new();
        let mut at = None;
        for p in &self.published {
            if at != Some(p.at_ms) {
                steps.push(Scenario::schedule(p.at_ms));
                at = Some(p.at_ms);
            }
            steps.push(Step::with("publish", &p.notice, &p.recipient));
        }
        steps.push(Scenario::schedule(self.until_ms));
        let script = |channel: &str| {
            let windows = match channel == self.down {
                true => self.outages.clone(),
                false => Vec::new(),
            };
            let (outages, hangs) = match self.hangs {
                true => (Vec::new(), windows),
                false => (windows, Vec::new()),
            };
            ProviderScript {
                outages,
                hangs,
                flaky: self.flaky.clone(),
                rejected: self.rejected.clone(),
                ..ProviderScript::default()
            }
        };
        Plan {
            dir: dir.to_path_buf(),
            process: 1,
            fixture: self.fixture(),
            steps,
            fault: None,
            provider: script("email"),
            push: script("push"),
            seed: self.seed.unwrap_or(0),
            ..Plan::default()
        }
    }

    /// The notifications that should reach their person: all but those
    /// to a recipient the provider refuses.
    fn expected(&self) -> impl Iterator<Item = &Published> {
        self.published
            .iter()
            .filter(|p| !self.rejected.contains(&p.recipient))
    }

    fn is_down(&self, at_ms: i64) -> bool {
        self.outages
            .iter()
            .any(|&(from, to)| (from..to).contains(&at_ms))
    }

    /// "the email provider is down from 0:00 to 10:00"
    fn outage_story(&self) -> String {
        let windows: Vec<String> = self
            .outages
            .iter()
            .map(|&(from, to)| format!("from {} to {}", clock(from), clock(to)))
            .collect();
        match self.hangs {
            true => format!(
                "the {} provider hangs {}, every send timing out",
                self.down,
                windows.join(" and ")
            ),
            false => format!(
                "the {} provider is down {}",
                self.down,
                windows.join(" and ")
            ),
        }
    }
}

/// A simulated time as minutes and seconds: `5:35`.
fn clock(ms: i64) -> String {
    let s = ms / SECOND;
    format!("{}:{:02}", s / 60, s % 60)
}

/// A stretch of simulated time: `35 s`, `8 min 1 s`.
fn span(ms: i64) -> String {
    let s = ms / SECOND;
    match (s / 60, s % 60) {
        (0, s) => format!("{s} s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s} s"),
    }
}

/// One outbox row as the service's database holds it at the end.
#[derive(Clone, Debug)]
struct Row {
    channel: String,
    recipient: String,
    body: String,
    status: String,
    /// The attempts the dispatcher counted against the row.
    attempts: i64,
}

/// What one scenario left behind.
struct Played {
    exit: Exit,
    history: History,
    rows: Vec<Row>,
}

impl Played {
    /// An ending no correct case has: a panic, a hang, an error the lab
    /// could not carry on from.
    fn trouble(&self) -> Option<String> {
        (self.exit != Exit::Finished).then(|| format!("the case {}", self.exit.describe()))
    }

    /// Every attempt at delivering `p`, in order.
    fn attempts<'a>(&'a self, p: &'a Published) -> impl Iterator<Item = &'a Delivery> {
        self.history
            .attempts(p.channel)
            .filter(move |d| d.recipient == p.recipient && d.body == p.notice.text)
    }

    /// When `p` first reached its person, if it did.
    fn delivered_at(&self, p: &Published) -> Option<i64> {
        self.attempts(p)
            .find(|d| d.outcome == Outcome::Delivered)
            .map(|d| d.at_ms)
    }

    /// The rows that ended FAILED.
    fn dead_letters(&self) -> Vec<&Row> {
        self.rows.iter().filter(|r| r.status == "FAILED").collect()
    }
}

fn read_rows(dir: &Path) -> Result<Vec<Row>> {
    let path = dir.join(APP_DB);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let conn = Connection::open(&path)
        .with_context(|| format!("could not open the service's database {}", path.display()))?;
    let sql = "SELECT channel, recipient, body, status, attempts FROM outbox ORDER BY id";
    let mut stmt = conn
        .prepare(sql)
        .with_context(|| format!("the service's database does not answer `{sql}`"))?;
    let rows = stmt
        .query_map([], |row| {
            Ok(Row {
                channel: row.get(0)?,
                recipient: row.get(1)?,
                body: row.get(2)?,
                status: row.get(3)?,
                attempts: row.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
        .with_context(|| format!("could not read `{sql}` from the service's database"))?;
    Ok(rows)
}

/// Half an hour of simulated time costs a case process a fraction of a
/// second, but several times that on a busy machine: a process counts as
/// hung only after this long, or after `--timeout` if that is longer.
const PATIENCE: Duration = Duration::from_secs(30);

fn play(case: &Case, scenario: &Scenario) -> Result<Played> {
    let dir = scenario_dir()?;
    let case = case.patient(PATIENCE);
    let exit = case.start(&scenario.plan(dir.path()))?;
    let history = History::read(dir.path())?;
    let rows = read_rows(dir.path())?;
    Ok(Played {
        exit,
        history,
        rows,
    })
}

/// `notify run 7`: the chapter's batch, told as a story.
fn run(case: &Case) -> Result<String> {
    let s = Scenario::chapter();
    let played = play(case, &s)?;
    let mut out = format!(
        "{}; push keeps working\n\
         {} notifications for {} people: {} at 0:00, then one every 30 s until 9:30\n\
         the dispatcher wakes every 2 s and retries a failed send after 5 s, 30 s and 5 min\n\n\
         {:<9}{:>6}{:>11}{:>15}{:>18}\n",
        s.outage_story(),
        s.published.len(),
        s.people.len(),
        s.published.iter().filter(|p| p.at_ms == 0).count(),
        "",
        "rows",
        "delivered",
        "dead-lettered",
        "sends while down",
    );
    for channel in ["email", "push"] {
        let rows: Vec<&Published> = s
            .published
            .iter()
            .filter(|p| p.channel == channel)
            .collect();
        let delivered = rows
            .iter()
            .filter(|p| played.delivered_at(p).is_some())
            .count();
        let dead = played
            .dead_letters()
            .iter()
            .filter(|r| r.channel == channel)
            .count();
        let sends = match channel == s.down {
            true => played
                .history
                .attempts(channel)
                .filter(|d| s.is_down(d.at_ms))
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
            out.push_str(&format!("  {}\n", dead_letter(&s, &played, row)));
        }
        if dead.len() > 5 {
            out.push_str(&format!("  ... and {} more\n", dead.len() - 5));
        }
    }
    let late = s
        .published
        .iter()
        .filter_map(|p| played.delivered_at(p).map(|at| (at, p)))
        .filter(|(at, p)| *at - p.at_ms > HEALTHY_WITHIN)
        .max_by_key(|(at, _)| *at);
    if let Some((at, p)) = late {
        out.push_str(&format!(
            "\nthe last {} waiting went out at {}, {} after the provider came back\n",
            p.channel,
            clock(at),
            span(at - s.outages[0].1)
        ));
    }
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// "ada@example.com  Sam commented on the picnic  tried at 0:00, 0:06, 0:36, 5:36"
fn dead_letter(s: &Scenario, played: &Played, row: &Row) -> String {
    let times: Vec<String> = played
        .history
        .attempts(&row.channel)
        .filter(|d| d.recipient == row.recipient && d.body == row.body)
        .map(|d| {
            let mark = if s.is_down(d.at_ms) { "" } else { " (up)" };
            format!("{}{mark}", clock(d.at_ms))
        })
        .collect();
    // An attempt counted without a send is one the row lost for nothing.
    let counted = match row.attempts > times.len() as i64 {
        true => format!("; {} attempts counted", row.attempts),
        false => String::new(),
    };
    format!(
        "{:<18} {:<40} tried at {}{counted}",
        row.recipient,
        row.body,
        times.join(", ")
    )
}

/// A property that failed: what to print.
struct Finding {
    evidence: String,
    scenario: String,
    details: Vec<String>,
    seed: Option<u64>,
}

impl Finding {
    fn verdict(self, property: &str) -> Verdict {
        let mut v = Verdict::fail(property, self.evidence, self.scenario, self.details);
        v.seed = self.seed;
        v
    }
}

fn trouble_finding(s: &Scenario, played: &Played) -> Option<Finding> {
    played.trouble().map(|trouble| Finding {
        evidence: trouble.clone(),
        scenario: format!("{}: {}:", s.name, s.outage_story()),
        details: vec![format!("{trouble}.")],
        seed: s.seed,
    })
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let mut scenarios = vec![
        Scenario::chapter(),
        Scenario::quiet(),
        Scenario::hang(),
        Scenario::bounces(),
    ];
    scenarios.extend(options.seeds.iter().map(|&seed| Scenario::random(seed)));
    let played: Vec<Played> = in_parallel(&scenarios, |s| play(case, s))
        .into_iter()
        .collect::<Result<_>>()?;
    let quiet = (&scenarios[1], &played[1]);
    let outages: Vec<(&Scenario, &Played)> = scenarios.iter().zip(&played).collect();
    let verdicts = vec![
        judge(NOT_DEAD, &outages, not_dead),
        judge(DELIVERED, &outages, delivered),
        judge(FEW_ATTEMPTS, &outages, few_attempts),
        judge(HEALTHY, &outages, healthy),
        judge(LONE, &[quiet], lone),
    ];
    Ok(Checked {
        verdicts,
        processes: played.len(),
    })
}

/// Judges one property over the scenarios in order: the first that breaks
/// it names the failure; if none does, the chapter's batch gives the evidence.
fn judge(
    property: &str,
    scenarios: &[(&Scenario, &Played)],
    rule: fn(&Scenario, &Played) -> std::result::Result<String, Finding>,
) -> Verdict {
    let mut evidence = None;
    for &(s, played) in scenarios {
        if let Some(f) = trouble_finding(s, played) {
            return f.verdict(property);
        }
        match rule(s, played) {
            Ok(e) => {
                evidence.get_or_insert(e);
            }
            Err(f) => return f.verdict(property),
        }
    }
    Verdict::pass(property, evidence.unwrap_or_default())
}

fn not_dead(s: &Scenario, played: &Played) -> std::result::Result<String, Finding> {
    // A row the provider refused for good is rightly dead-lettered.
    let dead: Vec<&Row> = played
        .dead_letters()
        .into_iter()
        .filter(|r| !s.rejected.contains(&r.recipient))
        .collect();
    if dead.is_empty() {
        return Ok(format!("0 of {} rows", played.rows.len()));
    }
    let mut details: Vec<String> = dead
        .iter()
        .take(3)
        .map(|row| dead_letter(s, played, row))
        .collect();
    if dead.len() > 3 {
        details.push(format!("... and {} more", dead.len() - 3));
    }
    Err(Finding {
        evidence: format!("{} of {} rows", dead.len(), played.rows.len()),
        scenario: format!("{}: {}:", s.name, s.outage_story()),
        details,
        seed: s.seed,
    })
}

fn delivered(s: &Scenario, played: &Played) -> std::result::Result<String, Finding> {
    let lost: Vec<&Published> = s
        .expected()
        .filter(|p| played.delivered_at(p).is_none())
        .collect();
    let total = s.expected().count();
    let tally = format!("{} of {total} delivered", total - lost.len());
    if lost.is_empty() {
        return Ok(tally);
    }
    let end = s.outages.last().map(|o| o.1).unwrap_or(0);
    let mut details: Vec<String> = lost
        .iter()
        .take(3)
        .map(|p| {
            let status = played
                .rows
                .iter()
                .find(|r| r.recipient == p.recipient && r.body == p.notice.text)
                .map(|r| r.status.as_str())
                .unwrap_or("no outbox row");
            format!(
                "{}: \"{}\" was never delivered ({status} at {})",
                p.recipient,
                p.notice.text,
                clock(s.until_ms)
            )
        })
        .collect();
    if lost.len() > 3 {
        details.push(format!("... and {} more", lost.len() - 3));
    }
    details.push(format!(
        "the {} provider was back at {}; the dispatcher ran on for {}.",
        s.down,
        clock(end),
        span(s.until_ms - end)
    ));
    Err(Finding {
        evidence: tally,
        scenario: format!("{}: {}:", s.name, s.outage_story()),
        details,
        seed: s.seed,
    })
}

/// The most sends an outage from `from` to `to` may see.
fn bound(from: i64, to: i64) -> usize {
    ((to - from + PROBE_EVERY - 1) / PROBE_EVERY) as usize + EDGE_SLACK
}

fn few_attempts(s: &Scenario, played: &Played) -> std::result::Result<String, Finding> {
    let mut evidence = Vec::new();
    for &(from, to) in &s.outages {
        let sends: Vec<i64> = played
            .history
            .attempts(s.down)
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
            return Err(Finding {
                evidence: tally,
                scenario: format!("{}: {}:", s.name, s.outage_story()),
                details: vec![
                    format!(
                        "the dispatcher tried the {} provider {} times while it was down from {} to {}; {} of them in the first minute.",
                        s.down,
                        sends.len(),
                        clock(from),
                        clock(to),
                        first_minute
                    ),
                    format!(
                        "one probe every 30 s makes {}; {EDGE_SLACK} more are allowed for the sends that find it down before the breaker opens.",
                        most - EDGE_SLACK
                    ),
                ],
                seed: s.seed,
            });
        }
        evidence.push(tally);
    }
    Ok(evidence.join("; "))
}

fn healthy(s: &Scenario, played: &Played) -> std::result::Result<String, Finding> {
    let working: Vec<&Published> = s.expected().filter(|p| p.channel != s.down).collect();
    let up = working.first().map(|p| p.channel).unwrap_or("push");
    let waits: Vec<(&Published, Option<i64>)> = working
        .iter()
        .map(|p| (*p, played.delivered_at(p).map(|at| at - p.at_ms)))
        .collect();
    let late: Vec<&(&Published, Option<i64>)> = waits
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
    let mut details: Vec<String> = late
        .iter()
        .take(3)
        .map(|(p, wait)| match wait {
            Some(w) => format!(
                "{}: \"{}\" published at {}, delivered at {} ({} later)",
                p.recipient,
                p.notice.text,
                clock(p.at_ms),
                clock(p.at_ms + w),
                span(*w)
            ),
            None => format!(
                "{}: \"{}\" published at {}, never delivered",
                p.recipient,
                p.notice.text,
                clock(p.at_ms)
            ),
        })
        .collect();
    if late.len() > 3 {
        details.push(format!("... and {} more", late.len() - 3));
    }
    details.push(format!(
        "the {up} provider worked throughout: only the {} provider was down.",
        s.down
    ));
    Err(Finding {
        evidence: tally,
        scenario: format!("{}: {}:", s.name, s.outage_story()),
        details,
        seed: s.seed,
    })
}

fn lone(s: &Scenario, played: &Played) -> std::result::Result<String, Finding> {
    let mut gaps = Vec::new();
    let flaky = s
        .published
        .iter()
        .filter(|p| s.flaky.iter().any(|(r, _)| *r == p.recipient));
    for p in flaky {
        let times: Vec<i64> = played.attempts(p).map(|d| d.at_ms).collect();
        let gap = match times.as_slice() {
            [first, second, ..] => Some(second - first),
            _ => None,
        };
        match gap {
            Some(g) if g <= RETRY_WITHIN => gaps.push(g),
            _ => {
                let what = match (gap, times.first()) {
                    (Some(g), Some(&first)) => format!(
                        "{}: its first {} failed at {}, the retry came {} later, at {}.",
                        p.recipient,
                        p.channel,
                        clock(first),
                        span(g),
                        clock(first + g)
                    ),
                    (_, Some(&first)) => format!(
                        "{}: its first {} failed at {} and was never retried.",
                        p.recipient,
                        p.channel,
                        clock(first)
                    ),
                    _ => format!("{}: its {} was never sent.", p.recipient, p.channel),
                };
                return Err(Finding {
                    evidence: match gap {
                        Some(g) => format!("retried after {}", span(g)),
                        None => "never retried".to_string(),
                    },
                    scenario: format!(
                        "{}: one {} at {}, failing once, on a quiet channel that works:",
                        s.name,
                        p.channel,
                        clock(p.at_ms)
                    ),
                    details: vec![
                        what,
                        format!(
                            "one failure out of one send is not an outage: the row should be retried after 5 s, within {}.",
                            span(RETRY_WITHIN)
                        ),
                    ],
                    seed: s.seed,
                });
            }
        }
    }
    let longest = gaps.iter().max().copied().unwrap_or(0);
    Ok(format!("retried within {}", span(longest)))
}
