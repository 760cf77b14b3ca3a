//! Check 03: two relays, one row, claiming.
//!
//! A setup process fills the outbox (120 invitations already queued, plus a
//! few invites made through the case's own `invite`). Then two to four
//! relay processes start on the same database file, open it, and begin
//! their first poll at the same instant, each calling `relay()` a few times.
//! At that instant another writer holds the database for a few
//! milliseconds, as an invite would: every relay's first write waits its
//! turn while reads go on, so reading in one statement and claiming in
//! another is sure to collide, whatever the machine's speed. The provider's
//! seeded jitter (a few real milliseconds per send) varies how the relays
//! interleave after that. Besides the chapter's race of two relays, seeded
//! random races with other people, more relays and fewer rows each are
//! played. One more race gives two relays one row and a slow provider, so
//! that a relay waiting out another one's send stands out from one that only
//! waits for a commit.
//!
//! Judged from what the world saw: how many emails each row's recipient got,
//! how many times each row reached the provider, and how long each relay
//! spent in `relay()` beyond its own sends.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use rusqlite::Connection;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::history::{read_pairs, History};
use lab::report::{judge, Finding};
use lab::rng::Rng;
use lab::runner::{scenario_dir, Case, Exit};
use lab::scenario::{Moment, Plan, ProviderScript, Step, APP_DB};
use lab::serve::AT;
use lab::world::{Delivery, Kind, Outcome, Recorder};
use lab::{Invite, Worker};

pub const CHAPTER: Chapter = Chapter {
    number: 3,
    title: "two relays, one row: claiming",
    case_file: "cases/case03_claim.rs",
    text_file: "chapters/03-two-relays.md",
    bin: "case03",
    shipped_hash: 0xb398_f15c_087c_d5e8,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&super::invite_world::Generated, budget),
    bands: |history, _| lab::picture::bands(&super::invite_world::Generated, history),
};

const DELIVERED_ONCE: &str = "nobody gets the same email twice";
const EVERY_ROW: &str = "every row is sent";
const ONE_SEND: &str = "each row goes to the provider once, key or no key";
const NO_WAIT: &str = "no relay waits on another for long";

/// Real time one send takes in the slow-provider scenario.
const SLOW_SEND_MS: u64 = 500;
/// In the slow-provider scenario, the most the relay that finds nothing to
/// send may spend in `relay()` beyond what the relay that sends the row
/// spends beyond its send: half a send. Waiting for the other relay's
/// commits costs both of them the same (the committing relay's own time
/// includes its commit, however slow the disk); waiting for its send costs
/// only the waiting one, a whole send.
const WAIT_BOUND_MS: u64 = SLOW_SEND_MS / 2;
/// How many times each relay process runs `relay()`, back to back.
const POLLS: usize = 4;
/// How many more times a relay polls in a race with invites streaming in,
/// after the last invite's slot: room for it to be claimed.
const STREAM_POLLS_AFTER: usize = 3;
/// How many slots of a race with invites streaming in, two invites each.
const SLOTS: (u64, u64) = (6, 9);
/// A slot of a race with invites streaming in, in real ms; its invite
/// commits this long into it; the late relays read this long after that;
/// the writer lets go of the database this long into the slot. SQLite's
/// waits between tries for a lock grow (1, 2, 5, 10, 15, 20 ms...): the
/// first relay, waiting since the slot began, tries again 53 ms into it,
/// after the writer let go, and a late one, waiting since 25 ms, at 43
/// (too soon) and 58 ms.
const SLOT_MS: u64 = 100;
const INVITE_AT_MS: u64 = 20;
const LATE_READ_MS: u64 = 5;
const HELD_UNTIL_MS: u64 = 48;
/// The rows the chapter's claim takes at a time.
const CLAIM_ROWS: u64 = 50;
/// The most rows a race queues: room left among the people for invites.
const MOST_ROWS: u64 = 420;
/// How long the web app holds the write lock after each of a relay's
/// commits in a race on a busy database, in ms.
const BUSY_HOLD_MS: (u64, u64) = (2, 6);
/// The most rows queued before a race with invites streaming in: half the
/// chapter's claim of 50, so fewer than any batch a relay would take.
const FEW_ROWS: u64 = 25;
/// Time the relay processes get to start before their common first poll.
const START_MARGIN_MS: u64 = 150;
/// How long before the relays' first poll the busy writer takes the
/// database's write lock, and how long after it lets go.
const BUSY_WRITER_LEAD_MS: u64 = 10;
const BUSY_WRITER_MS: u64 = 30;

/// One scenario: an outbox full of invitations and the relays that drain it.
struct Race {
    /// `None` for the chapter's race and the slow provider.
    seed: Option<u64>,
    /// What the scenario is called in a verdict.
    name: String,
    relays: u32,
    /// Rows already queued when the relays start: (recipient, workspace).
    queued: Vec<(String, String)>,
    /// Invites the setup process makes through the case, queueing rows too.
    invites: Vec<Invite>,
    provider: ProviderScript,
    /// Seeds the provider's jitter in every process.
    jitter_seed: u64,
    /// How many times each relay process calls `relay()`.
    polls: usize,
    /// When set, each relay's later calls wait for the common start plus
    /// this many ms each, spread over a send, rather than following one
    /// another at once, as a relay's loop polls on its own time.
    poll_every_ms: Option<u64>,
    /// Invites that arrive while the relays run, two per slot of
    /// [`SLOT_MS`] from the common start (see [`stream_writer`]): a web
    /// app takes invites whenever people send them.
    streamed: Vec<Invite>,
    /// An invite another process makes while the relays' first sends are
    /// in flight: each relay's first send answers only once it is done, so
    /// its row is queued after a claim and before the claim that follows.
    mid_batch: Option<Invite>,
    /// When not 0, the web app takes the database's write lock right after
    /// each commit a relay makes and holds it this many ms: every write a
    /// relay makes next meets a busy database and must wait its turn.
    busy_after_commit_ms: u64,
}

const FIRST: [&str; 30] = [
    "ada", "ben", "cleo", "dev", "emma", "finn", "gia", "hugo", "ivy", "jon", "kai", "lena",
    "milo", "nia", "omar", "pia", "quinn", "rosa", "sam", "tara", "uma", "vic", "wes", "xena",
    "yara", "zoe", "abe", "bea", "cole", "dina",
];
const LAST: [&str; 16] = [
    "moss", "ito", "park", "silva", "novak", "reyes", "kerr", "lund", "okafor", "haas", "brandt",
    "diaz", "frost", "grau", "iqbal", "jansen",
];
const WORKSPACES: [&str; 5] = ["ws_acme", "ws_orbit", "ws_nova", "ws_delta", "ws_pine"];

/// Every address the races draw from, in a fixed order.
fn people() -> Vec<String> {
    LAST.iter()
        .flat_map(|last| {
            FIRST
                .iter()
                .map(move |first| format!("{first}.{last}@example.com"))
        })
        .collect()
}

/// The scenario's time a send takes in the chapter's race, in ms: the
/// relays' sends move the clock the case reads, as a provider's answers
/// take time on a real one.
const CHAPTER_SEND_MS: i64 = 150;
/// The same in a race drawn from a seed, drawn in this range.
const SEND_MS: (u64, u64) = (0, 400);
/// The same with a slow provider: a batch of 50 takes 75 to 150 s.
const SLOW_SIM_MS: (u64, u64) = (1_500, 3_000);

impl Race {
    /// The chapter's race: two relays, 120 invitations queued, 3 more invites.
    fn chapter() -> Race {
        let mut people = people();
        Rng::new(3).shuffle(&mut people);
        let mut race = Race::build(None, "the chapter's race".into(), 2, 120, 3, 3, &people, 7);
        race.provider.sim_latency_ms = CHAPTER_SEND_MS;
        race
    }

    /// A race drawn from `seed`: other people, 2 to 4 relays, about 240
    /// rows over the number of relays, 1 to 4 ms of jitter per send. One
    /// seed in three has each relay call `relay()` only once: a call keeps
    /// claiming until a claim comes back empty, whatever a claim takes.
    fn random(seed: u64) -> Race {
        let mut rng = Rng::new(seed);
        let mut people = people();
        rng.shuffle(&mut people);
        let relays = rng.between(2, 4) as u32;
        let share = 240 / u64::from(relays);
        let rows = rng.between(share * 4 / 5, share * 6 / 5) as usize;
        let invites = rng.between(1, 4) as usize;
        let jitter = rng.between(1, 4);
        let name = format!("random race (seed {seed})");
        let mut race = Race::build(
            Some(seed),
            name,
            relays,
            rows,
            invites,
            jitter,
            &people,
            seed,
        );
        if seed % 3 == 1 {
            race.polls = 1;
        }
        race.provider.sim_latency_ms = rng.between(SEND_MS.0, SEND_MS.1) as i64;
        // One seed in three has a slow provider, seconds a send: a batch
        // takes minutes of the scenario's time while the other relays
        // claim, so a claim's age says nothing of whether its relay lives.
        if seed.is_multiple_of(3) {
            let mut slow = Rng::new(seed ^ 0x510e_5e4d_0000);
            race.provider.sim_latency_ms = slow.between(SLOW_SIM_MS.0, SLOW_SIM_MS.1) as i64;
        }
        // One seed in three keeps up with a stream of invites instead: a
        // few rows queued, fewer than a claim takes, and an invite arriving
        // in each slot while the relays poll, some before it and some after
        // it. A relay's claim then often finds more rows than another one's
        // did a moment before: claims overlap in part, not only wholly.
        // Drawn from a stream of its own, so the other races are drawn as
        // before.
        if seed % 3 == 2 {
            race.stream_in(seed, rows + invites, &people);
        }
        race
    }

    /// The race of `seed` keeping up with a stream of invites, whatever the
    /// seed: claims that overlap in part come from real timing, which a
    /// busy machine may shift out of one race, so every seed plays one.
    fn streaming(seed: u64) -> Race {
        let mut race = Race::random(seed);
        if seed % 3 != 2 {
            let mut people = people();
            Rng::new(seed).shuffle(&mut people);
            let first = race.queued.len() + race.invites.len();
            race.stream_in(seed, first, &people);
        }
        race
    }

    /// The race of a `seed` whose relays call `relay()` once, with a few
    /// rows queued, fewer than a claim takes, and another process inviting
    /// one more person while the relays send them: every claim is short,
    /// and a row arrives after one claim and before the next.
    fn mid_batch(seed: u64) -> Race {
        let mut race = Race::random(seed);
        let mut people = people();
        Rng::new(seed).shuffle(&mut people);
        let first = race.queued.len() + race.invites.len();
        let mut draw = Rng::new(seed ^ 0x3d1b_a7c4_0000);
        race.queued.truncate(draw.between(1, FEW_ROWS) as usize);
        race.polls = 1;
        race.mid_batch = Some(Invite {
            email: people[first].clone(),
            workspace: WORKSPACES[first % WORKSPACES.len()].to_string(),
        });
        race.provider.hold_nth = Some((1, vec![Moment::Ended(race.inviter())]));
        race.provider.hold_op = Some("relay".to_string());
        race.provider.hold_limit_ms = HOLD_LIMIT.as_millis() as u64;
        race.name =
            format!("random race with an invite during the relays' only call (seed {seed})");
        race
    }

    /// The race of a `seed` whose relays call `relay()` once, on a database
    /// the web app keeps busy: it takes the write lock right after each
    /// commit of a relay's, for a few ms. Two to three claims' worth of rows
    /// wait for each relay, so each call claims again after its sends, and
    /// that claim meets the lock: it waits its turn, as a write does on its
    /// busy timeout, and the call goes on until a claim comes back empty.
    fn busy(seed: u64) -> Race {
        let mut race = Race::random(seed);
        let mut draw = Rng::new(seed ^ 0x0b05_7a99_0000);
        let each = draw.between(2 * CLAIM_ROWS, 3 * CLAIM_ROWS);
        let rows = (each * u64::from(race.relays)).min(MOST_ROWS) as usize;
        let mut people = people();
        Rng::new(seed).shuffle(&mut people);
        race.queued = Race::queue(&people[..rows]);
        race.invites.clear();
        race.polls = 1;
        race.busy_after_commit_ms = draw.between(BUSY_HOLD_MS.0, BUSY_HOLD_MS.1);
        race.name = format!(
            "random race on a busy database (seed {seed}): the web app writes for {} ms after each of a relay's commits",
            race.busy_after_commit_ms
        );
        race
    }

    /// The process that makes [`Race::mid_batch`]'s invite: the one after
    /// the last relay.
    fn inviter(&self) -> u32 {
        self.relays + 1
    }

    /// Keeps a few rows queued, fewer than a claim takes, and streams two
    /// invites into each slot while the relays poll.
    fn stream_in(&mut self, seed: u64, first: usize, people: &[String]) {
        let mut stream = Rng::new(seed ^ 0x57ea_3a11_1e55);
        let queued = stream.between(1, FEW_ROWS) as usize;
        self.queued.truncate(queued);
        let slots = stream.between(SLOTS.0, SLOTS.1) as usize;
        let count = 2 * slots;
        self.streamed = people[first..first + count]
            .iter()
            .enumerate()
            .map(|(i, p)| Invite {
                email: p.clone(),
                workspace: WORKSPACES[(first + i) % WORKSPACES.len()].to_string(),
            })
            .collect();
        self.polls = slots + STREAM_POLLS_AFTER;
        self.poll_every_ms = Some(SLOT_MS);
        self.name = format!("random race with invites streaming in (seed {seed})");
    }

    /// Two relays, one row, and a provider that takes half a second a send:
    /// one relay sends it, the other should find nothing and be done.
    fn slow_provider() -> Race {
        let people = people();
        let name = format!(
            "a slow provider, {:.1} s a send",
            SLOW_SEND_MS as f64 / 1000.0
        );
        let mut race = Race::build(None, name, 2, 1, 0, 0, &people[100..], 11);
        race.provider.latency_ms = SLOW_SEND_MS;
        race.provider.sim_latency_ms = SLOW_SEND_MS as i64;
        // Whichever relay's first call comes second, its later ones fall
        // inside the other's send.
        race.poll_every_ms = Some(SLOW_SEND_MS / POLLS as u64);
        race
    }

    /// The workspace of the `i`th person of a race's people.
    fn workspace(i: usize) -> String {
        WORKSPACES[(i * 7 + 3) % WORKSPACES.len()].to_string()
    }

    /// `people`, each with a row queued for the workspace they joined.
    fn queue(people: &[String]) -> Vec<(String, String)> {
        people
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), Race::workspace(i)))
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        seed: Option<u64>,
        name: String,
        relays: u32,
        rows: usize,
        invites: usize,
        jitter_ms: u64,
        people: &[String],
        jitter_seed: u64,
    ) -> Race {
        let queued = Race::queue(&people[..rows]);
        let invites = people[rows..rows + invites]
            .iter()
            .enumerate()
            .map(|(i, p)| Invite {
                email: p.clone(),
                workspace: Race::workspace(rows + i),
            })
            .collect();
        Race {
            seed,
            name,
            relays,
            queued,
            invites,
            provider: ProviderScript {
                jitter_ms,
                ..ProviderScript::default()
            },
            jitter_seed,
            polls: POLLS,
            poll_every_ms: None,
            streamed: Vec::new(),
            mid_batch: None,
            busy_after_commit_ms: 0,
        }
    }

    /// Every row the relays must send: (recipient, body).
    fn rows(&self) -> Vec<(String, String)> {
        self.queued
            .iter()
            .map(|(p, w)| (p.clone(), w.clone()))
            .chain(
                self.invites
                    .iter()
                    .chain(&self.streamed)
                    .chain(&self.mid_batch)
                    .map(|i| (i.email.clone(), i.workspace.clone())),
            )
            .map(|(p, w)| (p, format!("You joined {w}")))
            .collect()
    }

    /// The setup process: the workspaces, the members and their queued
    /// emails as data, then the invites through the case.
    fn setup(&self, dir: &Path) -> Plan {
        let seats: Vec<String> = WORKSPACES
            .iter()
            .map(|w| format!("('{w}', 1000)"))
            .collect();
        // One transaction, one statement a row: a row the case's schema
        // refuses is named on its own in the error.
        let mut fixture = vec![
            "BEGIN".to_string(),
            format!(
                "INSERT INTO workspaces (id, free_seats) VALUES {}",
                seats.join(", ")
            ),
        ];
        for (p, w) in &self.queued {
            fixture.push(format!(
                "INSERT INTO memberships (email, workspace) VALUES ('{p}', '{w}')"
            ));
            fixture.push(format!(
                "INSERT INTO outbox (recipient, body) VALUES ('{p}', 'You joined {w}')"
            ));
        }
        fixture.push("COMMIT".to_string());
        Plan {
            dir: dir.to_path_buf(),
            process: 0,
            fixture,
            steps: self
                .invites
                .iter()
                .map(|i| Step::with("invite", i, &i.email))
                .collect(),
            seed: self.jitter_seed,
            ..Plan::default()
        }
    }

    /// Relay process `n` (1 to `relays`): named `relay-n`, it waits for the
    /// common start `at` (ms since the UNIX epoch), then calls `relay()`
    /// as many times as the race polls, back to back or spread out.
    fn relay(&self, dir: &Path, n: u32, at: u64) -> Plan {
        let worker = Worker {
            name: relay_name(n),
        };
        let poll = Step {
            op: "relay".into(),
            input: serde_json::to_value(&worker).expect("a worker is plain data"),
            subject: None,
        };
        let wait = |at: u64| Step {
            op: AT.into(),
            input: at.into(),
            subject: None,
        };
        let steps = match self.poll_every_ms {
            None => std::iter::once(wait(at))
                .chain(std::iter::repeat_n(poll, self.polls))
                .collect(),
            Some(every) => {
                // With invites streaming in, every relay but the first
                // reads after its slot's second invite has committed (two
                // early ones: the second would claim that invite as soon as
                // the first had claimed its own).
                let late = match !self.streamed.is_empty() && n > 1 {
                    true => INVITE_AT_MS + LATE_READ_MS,
                    false => 0,
                };
                (0..self.polls as u64)
                    .flat_map(|i| [wait(at + i * every + late), poll.clone()])
                    .collect()
            }
        };
        Plan {
            dir: dir.to_path_buf(),
            process: n,
            steps,
            provider: self.provider.clone(),
            seed: self.jitter_seed,
            busy_after_commit_ms: self.busy_after_commit_ms,
            ..Plan::default()
        }
    }

    fn describe(&self) -> String {
        let rows = self.rows().len();
        let plural = if rows == 1 { "" } else { "s" };
        format!("{} ({} relays, {rows} row{plural})", self.name, self.relays)
    }
}

fn relay_name(n: u32) -> String {
    format!("relay-{n}")
}

/// What one scenario left behind.
struct Played {
    /// Who each process was ("the setup", "relay-1", ...) and how it ended.
    exits: Vec<(String, Exit)>,
    history: History,
    /// Whether [`Race::mid_batch`]'s person joined: an invite that could
    /// not commit (a relay held the database past its wait) owes nothing.
    joined_mid_batch: bool,
}

impl Played {
    /// An ending no correct case has: a panic, a hang, an abort, a lab error.
    fn trouble(&self) -> Option<String> {
        self.exits.iter().find_map(|(who, exit)| match exit {
            Exit::Finished => None,
            other => Some(format!(
                "{who} {}",
                lab::timeline::plain_error(&other.describe())
            )),
        })
    }

    /// Every email the provider took for `recipient`, whatever came of it.
    fn sends_to<'a>(&'a self, recipient: &'a str) -> impl Iterator<Item = &'a Delivery> {
        self.history
            .attempts("email")
            .filter(move |d| d.recipient == recipient)
    }

    /// The first error a relay's `relay()` returned, with the relay's name.
    fn relay_error(&self) -> Option<String> {
        self.history
            .events
            .iter()
            .find(|e| e.kind == Kind::Error && e.op.as_deref() == Some("relay"))
            .map(|e| {
                format!(
                    "{}'s relay() failed: {}",
                    relay_name(e.process),
                    lab::timeline::plain_error(&e.text)
                )
            })
    }
}

fn play(case: &Case, race: &Race) -> Result<Played> {
    let dir = scenario_dir()?;
    let mut exits = vec![(
        "the setup".to_string(),
        case.start(&race.setup(dir.path()))?,
    )];
    if exits[0].1 == Exit::Finished {
        // Every relay opens the database, then waits for the same instant:
        // their first polls race, however long each took to start.
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
            + START_MARGIN_MS;
        let plans: Vec<Plan> = (1..=race.relays)
            .map(|n| race.relay(dir.path(), n, at))
            .collect();
        let app_db = dir.path().join(APP_DB);
        let (relays, inviter) = std::thread::scope(|scope| {
            if race.mid_batch.is_none() {
                match race.streamed.is_empty() {
                    true => scope.spawn(|| busy_writer(&app_db, at)),
                    false => scope.spawn(|| stream_writer(&app_db, at, &race.streamed)),
                };
            }
            match &race.mid_batch {
                None => case.start_together(&plans).map(|relays| (relays, None)),
                Some(invite) => invite_while_sending(case, race, dir.path(), &plans, invite),
            }
        })?;
        exits.extend((1..=race.relays).map(relay_name).zip(relays));
        exits.extend(inviter.map(|exit| ("the inviter".to_string(), exit)));
    }
    let history = History::read(dir.path())?;
    let joined_mid_batch = match &race.mid_batch {
        Some(invite) if dir.path().join(APP_DB).exists() => {
            read_pairs(dir.path(), "SELECT email, workspace FROM memberships")?
                .contains(&(invite.email.clone(), invite.workspace.clone()))
        }
        _ => false,
    };
    Ok(Played {
        exits,
        history,
        joined_mid_batch,
    })
}

/// How long a relay's held send waits for the inviter at most.
const HOLD_LIMIT: Duration = Duration::from_secs(20);

/// Plays the relays of a race with an invite in the middle of their only
/// call: once a relay has begun a send (held until the inviter ends) and
/// every other has begun one or returned,
/// another process makes the invite through the case's own `invite`. The
/// relays' sends wait for it and the inviter may wait for a relay's lock,
/// so each may run longer before it counts as hung.
fn invite_while_sending(
    case: &Case,
    race: &Race,
    dir: &Path,
    plans: &[Plan],
    invite: &Invite,
) -> Result<(Vec<Exit>, Option<Exit>)> {
    let world = Recorder::open(dir, 0)?;
    let held = Case {
        timeout: case.timeout * 2 + HOLD_LIMIT,
        ..case.clone()
    };
    // A relay that sends inside its claim holds the write lock: the invite
    // waits SQLite's busy timeout for it, then gives up, which is no hang.
    let waiting = Case {
        timeout: case.timeout + 2 * super::invite_world::LOCK_WAIT,
        ..case.clone()
    };
    let inviter = Plan {
        dir: dir.to_path_buf(),
        process: race.inviter(),
        steps: vec![Step::with("invite", invite, &invite.email)],
        seed: race.jitter_seed,
        ..Plan::default()
    };
    std::thread::scope(|scope| {
        let running = scope.spawn(|| held.start_together(plans));
        // Every relay's only call is under way: it is sending, or it has
        // returned. A relay slow to start (a busy machine) would otherwise
        // read after the invite and send its row, whatever the case does.
        // A relay that waits on a lock the held one keeps is waited for at
        // most `LOCK_WAIT` after the first send.
        let mut first_send: Option<std::time::Instant> = None;
        while !running.is_finished() {
            let mut all = true;
            for n in 1..=race.relays {
                let sending = world.reached(Moment::Sending(n))?;
                if sending && first_send.is_none() {
                    first_send = Some(std::time::Instant::now());
                }
                all &= sending || world.returned(n, "relay")?;
            }
            let waited_out =
                first_send.is_some_and(|t| t.elapsed() > super::invite_world::LOCK_WAIT);
            if (all && first_send.is_some()) || waited_out {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let invited = waiting.start(&inviter);
        Recorder::open(dir, race.inviter())?.record_ended(race.inviter())?;
        let relays = running
            .join()
            .expect("the thread running the relays does not panic")?;
        Ok((relays, Some(invited?)))
    })
}

/// Another writer, such as an invite, holds the service's database when the
/// relays wake up, and for [`BUSY_WRITER_MS`] after: every relay's first
/// write waits its turn, while reads go on. A claim that reads in one
/// statement and writes in another is then sure to read what another relay
/// is about to claim; a claim in one statement just waits. The writer
/// changes nothing and is best-effort: if it cannot get the lock, the race
/// is played without it.
fn busy_writer(app_db: &Path, at: u64) {
    let Ok(conn) = Connection::open(app_db) else {
        return;
    };
    until(at.saturating_sub(BUSY_WRITER_LEAD_MS));
    if conn.execute_batch("BEGIN IMMEDIATE").is_ok() {
        until(at + BUSY_WRITER_MS);
        let _ = conn.execute_batch("ROLLBACK");
    }
}

/// Sleeps until `ms` since the UNIX epoch, if that is still to come.
fn until(ms: u64) {
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    if let Ok(wait) = t.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
}

/// The invites of a race that streams them, two per slot of [`SLOT_MS`]
/// from `at`. The first commits just before the slot, so the first relay
/// finds a row when it reads at its start; then another writer holds the
/// database while it waits to claim it. The second invite commits at
/// [`INVITE_AT_MS`], as the web app's would, and the writer holds on while
/// the other relays read both rows. When it lets go, the first relay's
/// claim comes first (its waits between tries have grown longer): what it
/// read is older than what the others read, and the two overlap in part. The
/// rows are written as the setup writes the queued ones. Best-effort, as
/// [`busy_writer`]: an invite it cannot write is a race without it.
fn stream_writer(app_db: &Path, at: u64, invites: &[Invite]) {
    let Ok(conn) = Connection::open(app_db) else {
        return;
    };
    // Holds the write lock, writes `invite` and commits; then holds it again.
    let invite = |invite: &Invite| {
        let (p, w) = (&invite.email, &invite.workspace);
        let written = conn.execute_batch(&format!(
            "INSERT INTO memberships (email, workspace) VALUES ('{p}', '{w}');
             INSERT INTO outbox (recipient, body) VALUES ('{p}', 'You joined {w}');
             COMMIT"
        ));
        if written.is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        conn.execute_batch("BEGIN IMMEDIATE").is_ok()
    };
    for (i, pair) in invites.chunks(2).enumerate() {
        let slot = at + i as u64 * SLOT_MS;
        until(slot.saturating_sub(BUSY_WRITER_LEAD_MS));
        if conn.execute_batch("BEGIN IMMEDIATE").is_err() || !invite(&pair[0]) {
            continue;
        }
        until(slot + INVITE_AT_MS);
        if pair.get(1).is_none_or(&invite) {
            until(slot + HELD_UNTIL_MS);
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
}

/// How one scenario went, row by row.
struct Tally {
    rows: usize,
    /// Rows whose recipient got more than one email: (recipient, senders).
    twice: Vec<(String, Vec<u32>)>,
    /// Rows that reached the provider more than once: (recipient, sends, delivered).
    repeated: Vec<(String, usize, usize)>,
    /// Rows nobody delivered.
    unsent: Vec<String>,
    /// Sends per relay.
    per_relay: BTreeMap<u32, usize>,
}

impl Tally {
    fn of(race: &Race, played: &Played) -> Tally {
        let mut tally = Tally {
            rows: 0,
            twice: Vec::new(),
            repeated: Vec::new(),
            unsent: Vec::new(),
            per_relay: (1..=race.relays).map(|n| (n, 0)).collect(),
        };
        let owed = race.rows().into_iter().filter(|(recipient, _)| {
            played.joined_mid_batch
                || race
                    .mid_batch
                    .as_ref()
                    .is_none_or(|i| i.email != *recipient)
        });
        for (recipient, _) in owed {
            tally.rows += 1;
            let sends: Vec<&Delivery> = played.sends_to(&recipient).collect();
            let delivered: Vec<&Delivery> = sends
                .iter()
                .copied()
                .filter(|d| d.outcome == Outcome::Delivered)
                .collect();
            for d in &sends {
                *tally.per_relay.entry(d.process).or_insert(0) += 1;
            }
            if delivered.is_empty() {
                tally.unsent.push(recipient.clone());
            }
            if delivered.len() > 1 {
                let mut senders: Vec<u32> = delivered.iter().map(|d| d.process).collect();
                senders.sort_unstable();
                tally.twice.push((recipient.clone(), senders));
            }
            if sends.len() > 1 {
                tally
                    .repeated
                    .push((recipient.clone(), sends.len(), delivered.len()));
            }
        }
        tally
    }

    fn delivered(&self, played: &Played) -> usize {
        played.history.delivered("email").count()
    }
}

/// "relay-1 and relay-2", "relay-1, relay-2 and relay-3".
fn relay_list(processes: &[u32]) -> String {
    let names: Vec<String> = processes.iter().map(|&p| relay_name(p)).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The lines naming who got an email more than once, the first few of them.
fn twice_lines(tally: &Tally, shown: usize) -> Vec<String> {
    let mut lines: Vec<String> = tally
        .twice
        .iter()
        .take(shown)
        .map(|(recipient, senders)| {
            format!(
                "{recipient} got {} emails, from {}.",
                senders.len(),
                relay_list(senders)
            )
        })
        .collect();
    if tally.twice.len() > shown {
        lines.push(format!("... and {} more.", tally.twice.len() - shown));
    }
    lines
}

/// `notify run 3`: the chapter's race, once, told as a story.
fn run(case: &Case) -> Result<String> {
    let race = Race::chapter();
    let played = play(case, &race)?;
    let tally = Tally::of(&race, &played);
    let rows = race.rows().len();
    let mut out = format!(
        "{} relay processes poll one outbox of {rows} invitations\n",
        race.relays
    );
    for (process, sends) in &tally.per_relay {
        out.push_str(&format!("  {:<9}sent {sends}\n", relay_name(*process)));
    }
    out.push_str(&format!(
        "\nemails delivered: {} for {rows} rows\npeople who got the same email twice: {}\n",
        tally.delivered(&played),
        tally.twice.len()
    ));
    for line in twice_lines(&tally, 5) {
        out.push_str(&format!("  {line}\n"));
    }
    let dropped: usize = tally.repeated.iter().map(|(_, s, d)| s - d).sum();
    if dropped > 0 {
        out.push_str(&format!(
            "repeats the provider dropped by their key: {dropped}\n"
        ));
    }
    if !tally.unsent.is_empty() {
        out.push_str(&format!("rows never sent: {}\n", tally.unsent.len()));
        for r in tally.unsent.iter().take(5) {
            out.push_str(&format!("  {r} was never told.\n"));
        }
    }
    if let Some(error) = played.relay_error() {
        out.push_str(&format!("\n{error}\n"));
    }
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let races: Vec<Race> = std::iter::once(Race::chapter())
        .chain(options.seeds.iter().map(|&s| Race::random(s)))
        .chain(
            options
                .seeds
                .iter()
                .filter(|&&s| s % 3 != 2)
                .map(|&s| Race::streaming(s)),
        )
        .chain(
            options
                .seeds
                .iter()
                .filter(|&&s| s % 3 == 1)
                .flat_map(|&s| [Race::mid_batch(s), Race::busy(s)]),
        )
        .chain(std::iter::once(Race::slow_provider()))
        .collect();
    let played = play_all(case, &races)?;
    let processes: usize = played.iter().map(|p| p.exits.len()).sum();
    let rounds = Round::all(&races, &played);
    let races = rounds.len();
    let rows: usize = rounds.iter().map(|r| r.tally.rows).sum();
    let slow = rounds.last().expect("the slow provider is played");
    let mut verdicts = vec![
        judge(
            DELIVERED_ONCE,
            format!("{races} races, {rows} rows"),
            smallest(&rounds, twice),
        ),
        judge(
            EVERY_ROW,
            format!("{rows} of {rows} sent"),
            smallest(&rounds, unsent),
        ),
        judge(
            ONE_SEND,
            format!("{rows} sends for {rows} rows"),
            smallest(&rounds, repeated),
        ),
        judge(
            NO_WAIT,
            format!(
                "a {:.1} s send, nobody waited it out",
                SLOW_SEND_MS as f64 / 1000.0
            ),
            waited(slow),
        ),
    ];
    let explored = lab::explore::explore(
        &super::invite_world::Generated,
        "03",
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

/// Chapter 3's rule, held by the later chapters of the invite world: the
/// chapter's race (two relays over 120 queued rows and 3 more invites)
/// played on their case. A finding if a row went to the provider more than
/// once or the race did not finish; the rows, and the processes it ran.
pub(crate) fn replay_race(case: &Case) -> Result<(Option<Finding>, usize, usize)> {
    // With a race whose provider takes seconds a send: a batch outlasts
    // minutes of the scenario's time while the other relay claims.
    let races = [Race::chapter(), Race::random(SLOW_RACE_SEED)];
    let played = play_all(case, &races)?;
    let rounds = Round::all(&races, &played);
    let finding = smallest(&rounds, repeated);
    let rows = rounds.iter().map(|r| r.tally.rows).sum();
    let processes = played.iter().map(|p| p.exits.len()).sum();
    Ok((finding, rows, processes))
}

/// The random race [`replay_race`] plays beside the chapter's: one with a
/// slow provider.
const SLOW_RACE_SEED: u64 = 3;

/// Plays every race at once: they spend their time in fsyncs and in the
/// provider's sleeps, not on the processor.
fn play_all(case: &Case, races: &[Race]) -> Result<Vec<Played>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = races
            .iter()
            .map(|race| scope.spawn(|| play(case, race)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a scenario thread does not panic"))
            .collect()
    })
}

/// One race as played, with its tally.
struct Round<'a> {
    race: &'a Race,
    played: &'a Played,
    tally: Tally,
}

impl<'a> Round<'a> {
    fn all(races: &'a [Race], played: &'a [Played]) -> Vec<Round<'a>> {
        races
            .iter()
            .zip(played)
            .map(|(race, played)| Round {
                race,
                played,
                tally: Tally::of(race, played),
            })
            .collect()
    }
}

/// The finding of the smallest race (fewest rows, then fewest relays, then
/// the first played) in which `find` finds one. A race whose processes did
/// not finish counts for every property. The evidence of a race-count
/// finding says in how many races it was found.
fn smallest(rounds: &[Round], find: fn(&Round) -> Option<Finding>) -> Option<Finding> {
    let mut found: Vec<(usize, u32, Finding)> = rounds
        .iter()
        .filter_map(|r| {
            trouble_finding(r)
                .or_else(|| find(r))
                .map(|f| (r.tally.rows, r.race.relays, f))
        })
        .collect();
    let count = found.len();
    found.sort_by_key(|(rows, relays, _)| (*rows, *relays));
    let mut finding = found.into_iter().next()?.2;
    finding.evidence = finding
        .evidence
        .replace("{races}", &format!("{count} of {} races", rounds.len()));
    Some(finding)
}

fn trouble_finding(round: &Round) -> Option<Finding> {
    round.played.trouble().map(|trouble| Finding {
        evidence: "the case did not finish".to_string(),
        scenario: format!("{}: {trouble}", round.race.describe()),
        details: round.played.relay_error().into_iter().collect(),
        seed: round.race.seed,
        story: round.played.history.events.clone(),
        ..Default::default()
    })
}

fn twice(round: &Round) -> Option<Finding> {
    let tally = &round.tally;
    (!tally.twice.is_empty()).then(|| Finding {
        evidence: "delivered twice in {races}".to_string(),
        scenario: format!("{}:", round.race.describe()),
        details: twice_lines(tally, 3),
        seed: round.race.seed,
        story: round.played.history.events.clone(),
        ..Default::default()
    })
}

fn unsent(round: &Round) -> Option<Finding> {
    let tally = &round.tally;
    if tally.unsent.is_empty() {
        return None;
    }
    let mut details: Vec<String> = tally
        .unsent
        .iter()
        .take(3)
        .map(|r| format!("{r} was never told."))
        .collect();
    if tally.unsent.len() > 3 {
        details.push(format!("... and {} more.", tally.unsent.len() - 3));
    }
    details.extend(round.played.relay_error());
    Some(Finding {
        evidence: format!("{} of {} never sent", tally.unsent.len(), tally.rows),
        scenario: format!(
            "{}, each relay running relay() {}:",
            round.race.describe(),
            match round.race.polls {
                1 => "once".to_string(),
                n => format!("{n} times"),
            }
        ),
        details,
        seed: round.race.seed,
        story: round.played.history.events.clone(),
        ..Default::default()
    })
}

fn repeated(round: &Round) -> Option<Finding> {
    let tally = &round.tally;
    if tally.repeated.is_empty() {
        return None;
    }
    let mut details: Vec<String> = tally
        .repeated
        .iter()
        .take(3)
        .map(|(recipient, sends, delivered)| {
            let dropped = sends - delivered;
            let by_key = match dropped {
                0 => String::new(),
                1 => ", the provider dropped 1 by its key".to_string(),
                n => format!(", the provider dropped {n} by their key"),
            };
            format!("{recipient}'s email went to the provider {sends} times{by_key}.")
        })
        .collect();
    if tally.repeated.len() > 3 {
        details.push(format!("... and {} more rows.", tally.repeated.len() - 3));
    }
    Some(Finding {
        evidence: "sent more than once in {races}".to_string(),
        scenario: format!("{}:", round.race.describe()),
        details,
        seed: round.race.seed,
        story: round.played.history.events.clone(),
        ..Default::default()
    })
}

/// What one relay did in a scenario: how many sends it made and how long
/// it spent in `relay()` beyond them, in ms (waiting for the database, for
/// the processor, or for another relay).
struct Effort {
    sends: usize,
    beyond_ms: f64,
}

fn efforts(race: &Race, played: &Played) -> BTreeMap<u32, Effort> {
    let mut efforts: BTreeMap<u32, Effort> = (1..=race.relays)
        .map(|n| {
            let effort = Effort {
                sends: 0,
                beyond_ms: 0.0,
            };
            (n, effort)
        })
        .collect();
    for e in &played.history.events {
        if e.op.as_deref() == Some("relay") && matches!(e.kind, Kind::Return | Kind::Error) {
            if let Some(effort) = efforts.get_mut(&e.process) {
                effort.beyond_ms += e.elapsed_us.unwrap_or(0) as f64 / 1000.0;
            }
        }
    }
    for d in played.history.attempts("email") {
        if let Some(effort) = efforts.get_mut(&d.process) {
            effort.sends += 1;
            effort.beyond_ms -= race.provider.latency_ms as f64;
        }
    }
    efforts
}

/// How much longer, beyond its sends, a relay that sent less spent in
/// `relay()` than one that sent more: the time it waited out the other's
/// sends. Zero when no relay sent less than another.
fn waited_out(race: &Race, played: &Played) -> f64 {
    let efforts = efforts(race, played);
    let mut longest: f64 = 0.0;
    for idle in efforts.values() {
        for busy in efforts.values().filter(|b| b.sends > idle.sends) {
            longest = longest.max(idle.beyond_ms - busy.beyond_ms);
        }
    }
    longest
}

fn waited(round: &Round) -> Option<Finding> {
    if let Some(f) = trouble_finding(round) {
        return Some(f);
    }
    let longest = waited_out(round.race, round.played);
    (longest > WAIT_BOUND_MS as f64).then(|| Finding {
        evidence: format!("a relay waited {:.2} s", longest / 1000.0),
        scenario: format!("{}:", round.race.describe()),
        details: vec![format!(
            "the relay that sent nothing spent {:.2} s longer in relay() than the one that sent the row, beyond its send: it waited for that send to end.",
            longest / 1000.0
        )],
        seed: None,
        ..Default::default()
    })
}
