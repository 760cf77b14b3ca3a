//! The world of chapters 3 and 4 for the explorer: workspaces with a few
//! seats, invites (some of which find no seat and roll back), and relays
//! with names of their own that take turns between them, across one to
//! three processes (a deploy in between). The races between relays running
//! at once are each chapter's own scenarios; here the claim, the send and
//! the marking must simply keep every promise of chapters 1 and 2 while the
//! process aborts after any commit or accepted send, a commit fails, or a
//! send's answer is lost. A fault inside the relay may strand what it had
//! claimed (nobody hands a claim back until chapter 6's sweep), but never
//! sends a row twice, and never marks one sent that the provider never got.
//!
//! For chapters 1 and 2 it also plays an invite made while a relay round is
//! being sent ([`play_invite_race`]), as a web request can come at any time.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use lab::clock::MINUTE;
use lab::explore::{Dimension, Explorer, Fate, FaultModel, Invariants, Observation, Row, Run};
use lab::history::{read_pairs, History, MARKED_SENT, WAITING};
use lab::report::Finding;
use lab::rng::Rng;
use lab::runner::{scenario_dir, Case, Exit};
use lab::scenario::{self, Plan, ProviderScript, Step, APP_DB};
use lab::world::Recorder;
use lab::{Invite, Worker};

pub(crate) const NAMES: [&str; 20] = [
    "ada", "ben", "cleo", "dev", "emma", "finn", "gia", "hugo", "ivy", "jon", "kai", "lena",
    "milo", "nia", "omar", "pia", "rosa", "sam", "tara", "zoe",
];
/// The faults of a service that invites and relays, from chapter 2 on: a
/// crash after any commit or after a delivered relay send, a failing commit
/// in either, and a lost answer of a relay send. An invite that errs and
/// committed nothing is owed nothing.
pub const RELAY_FAULTS: FaultModel = FaultModel {
    crash_after_commit: &["invite", "relay"],
    fail_commit: &["invite", "relay"],
    crash_after_send: &["relay"],
    requests: &["invite"],
    keep_answers: false,
    lose_send: &["relay"],
    lose_request: &[],
    strands: &[],
};

const WORKSPACES: [&str; 5] = ["ws_nova", "ws_delta", "ws_pine", "ws_harbor", "ws_ember"];

/// What one step of a generated service does.
#[derive(Clone, Debug, Serialize)]
enum Call {
    Invite(Invite),
    /// A relay pass by relay number `n`.
    Relay(u32),
}

/// When chapter 2's relay runs once more: past the provider's 24-hour key
/// window.
pub(crate) const NEXT_DAY: i64 = 25 * 60 * MINUTE;

/// A generated stretch of the service's life.
#[derive(Clone, Debug, Serialize)]
pub struct Service {
    /// Workspaces and their free seats.
    workspaces: Vec<(String, i64)>,
    /// The calls of each process, one process after the other.
    processes: Vec<Vec<Call>>,
    /// The relay that makes the last pass, once the burst is in: whatever
    /// its name, it sends what waits, alone.
    closing: u32,
    /// The simulated time each send takes, in ms: a provider's answer takes
    /// time, so the clock a relay read at its claim is stale by the answer.
    send_ms: i64,
}

impl Service {
    fn invites(&self) -> impl Iterator<Item = &Invite> {
        self.processes.iter().flatten().filter_map(|c| match c {
            Call::Invite(i) => Some(i),
            Call::Relay(_) => None,
        })
    }
}

/// The fixture that opens `workspaces`, each with its free seats.
pub(crate) fn seat_fixture(workspaces: &[(String, i64)]) -> Vec<String> {
    workspaces
        .iter()
        .map(|(id, seats)| {
            format!("INSERT INTO workspaces (id, free_seats) VALUES ('{id}', {seats})")
        })
        .collect()
}

/// Who an invite is about, in reports and in the world: an address and
/// a workspace, since one person may be invited to two.
fn subject(invite: &Invite) -> String {
    format!("{} → {}", invite.email, invite.workspace)
}

/// The explorer of chapters 3 and 4.
pub struct Generated;

fn relay_step(n: u32) -> Step {
    Step::with(
        "relay",
        Worker {
            name: format!("relay-{n}"),
        },
        &format!("relay-{n}"),
    )
}

impl Explorer for Generated {
    type Scenario = Service;

    fn generate(&self, seed: u64) -> Service {
        let mut rng = Rng::new(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 34);
        let mut spaces = WORKSPACES.to_vec();
        rng.shuffle(&mut spaces);
        let workspaces: Vec<(String, i64)> = spaces[..rng.between(1, 3) as usize]
            .iter()
            .map(|w| (w.to_string(), rng.between(0, 4) as i64))
            .collect();
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let people = &names[..rng.between(2, 12) as usize];
        // How often a relay pass comes: after every invite, every few, or
        // only once the whole burst is in.
        let every = rng.between(1, 5);
        let mut calls = Vec::new();
        let mut invited: Vec<(String, String)> = Vec::new();
        for name in people {
            // Now and then the same person to a second workspace.
            for _ in 0..rng.between(1, 2) {
                let workspace = rng.pick(&workspaces).0.clone();
                let email = format!("{name}@example.com");
                if invited.contains(&(email.clone(), workspace.clone())) {
                    continue;
                }
                invited.push((email.clone(), workspace.clone()));
                calls.push(Call::Invite(Invite { email, workspace }));
                let invites = invited.len() as u64;
                if every < 5 && invites.is_multiple_of(every) {
                    calls.push(Call::Relay(rng.between(1, 3) as u32));
                }
            }
        }
        calls.push(Call::Relay(rng.between(1, 3) as u32));
        // Cut the calls into one to three processes.
        let cuts = rng.between(0, 2) as usize;
        let mut processes = Vec::new();
        let mut rest = calls;
        for _ in 0..cuts {
            if rest.len() < 2 {
                break;
            }
            let at = rng.between(1, rest.len() as u64 - 1) as usize;
            let tail = rest.split_off(at);
            processes.push(rest);
            rest = tail;
        }
        processes.push(rest);
        // A relay's name means nothing to the rules: any relay running
        // alone sends what waits. From a stream of its own, so the rest is
        // drawn as before.
        let closing = *Rng::new(seed ^ 0x0303_c105_e000).pick(&[1, 1, 2, 3, 9, 14]);
        let send_ms = *Rng::new(seed ^ 0x0304_5e4d_0000).pick(&SEND_MS);
        Service {
            workspaces,
            processes,
            closing,
            send_ms,
        }
    }

    fn plans(&self, service: &Service, dir: &Path) -> Vec<Plan> {
        service
            .processes
            .iter()
            .enumerate()
            .map(|(i, calls)| {
                let mut steps: Vec<Step> = calls
                    .iter()
                    .map(|call| match call {
                        Call::Invite(i) => Step::with("invite", i, &subject(i)),
                        Call::Relay(n) => relay_step(*n),
                    })
                    .collect();
                if i + 1 == service.processes.len() {
                    // Whatever is queued goes out before the service idles.
                    steps.push(relay_step(service.closing));
                }
                Plan {
                    dir: dir.to_path_buf(),
                    process: i as u32 + 1,
                    fixture: if i == 0 {
                        seat_fixture(&service.workspaces)
                    } else {
                        Vec::new()
                    },
                    steps,
                    provider: ProviderScript {
                        sim_latency_ms: service.send_ms,
                        ..ProviderScript::default()
                    },
                    ..Plan::default()
                }
            })
            .collect()
    }

    fn startup(&self) -> Vec<Step> {
        vec![relay_step(9)]
    }

    fn faults(&self) -> FaultModel {
        // A relay that claims leaves a row it claimed and could not finish
        // (a crash, a failing commit, a lost answer) claimed until chapter
        // 6's sweep hands it back: the relay's faults may strand a row,
        // and are played for what else they must not do.
        FaultModel {
            strands: &["relay"],
            ..RELAY_FAULTS
        }
    }

    fn dimensions(&self) -> &'static [Dimension<Service>] {
        DIMENSIONS
    }

    fn invariants(&self) -> Invariants {
        Invariants {
            recorded: true,
            told_once: true,
            settled: true,
            keyed: true,
            sent_once: true,
            retry_gaps: &[],
            ..Invariants::default()
        }
    }

    fn observe(&self, service: &Service, run: &Run) -> Result<Observation> {
        observe_invites(service.invites(), run)
    }

    fn promised(&self, service: &Service, refused: &[String]) -> Option<BTreeMap<String, Fate>> {
        let mut seats = service.workspaces.clone();
        Some(
            service
                .invites()
                .map(|i| {
                    let asked = !refused.contains(&subject(i));
                    let seat = seats.iter_mut().find(|(w, _)| *w == i.workspace);
                    let member = match seat {
                        Some((_, free)) if asked && *free > 0 => {
                            *free -= 1;
                            true
                        }
                        _ => false,
                    };
                    let fate = Fate {
                        told: u32::from(member),
                        state: if member { "member" } else { "not a member" }.to_string(),
                        detail: String::new(),
                    };
                    (subject(i), fate)
                })
                .collect(),
        )
    }

    fn shrink(&self, service: &Service) -> Vec<Service> {
        let mut smaller = Vec::new();
        if service.processes.len() > 1 {
            smaller.push(Service {
                processes: vec![service.processes.concat()],
                ..service.clone()
            });
        }
        for (p, calls) in service.processes.iter().enumerate() {
            for i in 0..calls.len() {
                let mut processes = service.processes.clone();
                processes[p].remove(i);
                if processes[p].is_empty() {
                    processes.remove(p);
                }
                if !processes.is_empty() {
                    smaller.push(Service {
                        processes,
                        ..service.clone()
                    });
                }
            }
        }
        smaller
    }

    fn describe(&self, service: &Service) -> String {
        let seats: Vec<String> = service
            .workspaces
            .iter()
            .map(|(w, n)| format!("{w} with {n} free"))
            .collect();
        let processes: Vec<String> = service
            .processes
            .iter()
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| match c {
                        Call::Invite(i) => format!("invite {} to {}", i.email, i.workspace),
                        Call::Relay(n) => format!("relay-{n}"),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .collect();
        let closing = match service.closing {
            1 => String::new(),
            n => format!("; relay-{n} makes the last pass"),
        };
        let slow = match service.send_ms {
            0 => String::new(),
            ms => format!("; each send takes {ms} ms"),
        };
        format!(
            "{}; {}{closing}{slow}",
            seats.join(", "),
            processes.join("; a deploy; ")
        )
    }
}

/// What the rules fix after a scenario of `invites`: per invite (person and
/// workspace), how many emails that name the workspace reached the person,
/// and whether they are a member; per person, emails about none of their
/// invites; and the outbox's rows, sent or not.
pub(crate) fn observe_invites<'a>(
    invites: impl IntoIterator<Item = &'a Invite>,
    run: &Run,
) -> Result<Observation> {
    let invites: Vec<&Invite> = invites.into_iter().collect();
    let members = if run.dir.join(APP_DB).exists() {
        read_pairs(run.dir, "SELECT email, workspace FROM memberships")?
    } else {
        Vec::new()
    };
    let mut fates = BTreeMap::new();
    for &invite in &invites {
        let told = run
            .history
            .emails_to(&invite.email)
            .filter(|e| e.body.contains(&invite.workspace))
            .count() as u32;
        let member = members
            .iter()
            .any(|(e, w)| *e == invite.email && *w == invite.workspace);
        let state = if member { "member" } else { "not a member" };
        fates.insert(
            subject(invite),
            Fate {
                told,
                state: state.to_string(),
                detail: String::new(),
            },
        );
    }
    let mut stray: BTreeMap<String, u32> = BTreeMap::new();
    for email in run.history.emails() {
        let invited = invites
            .iter()
            .any(|i| i.email == email.recipient && email.body.contains(&i.workspace));
        if !invited {
            *stray.entry(email.recipient.clone()).or_default() += 1;
        }
    }
    for (to, told) in stray {
        fates.insert(
            format!("{to}, about no workspace they were invited to"),
            Fate {
                told,
                state: "emailed".to_string(),
                detail: String::new(),
            },
        );
    }
    Ok(Observation {
        fates,
        rows: read_rows(run.dir, run.history),
    })
}

/// The outbox as it was left, each row judged by what the world saw, not
/// by the case's own marks (a `sent` flag, a status, a cursor elsewhere): a
/// row is SENT when its email reached its recipient, and waiting when it
/// did not. The marks are held against the world: a row still `PROCESSING`
/// once the service is idle is a claim chapter 3's relay took and never
/// finished, which only chapter 6's sweep would hand back; a row marked
/// sent (chapter 3's `SENT`, chapter 1's `sent` flag) whose email never
/// reached the provider is lost for good. A case whose outbox has no
/// recipient and body shows no rows.
fn read_rows(dir: &Path, history: &History) -> Vec<Row> {
    if !dir.join(APP_DB).exists() {
        return Vec::new();
    }
    let mut delivered: Vec<(&str, &str)> = history
        .emails()
        .map(|e| (e.recipient.as_str(), e.body.as_str()))
        .collect();
    let message = "recipient || char(10) || body";
    // The case's own mark: chapter 3's status, else chapter 1's sent flag.
    ["status", "CASE WHEN sent THEN 'SENT' ELSE '' END", "''"]
        .iter()
        .find_map(|mark| {
            read_pairs(
                dir,
                &format!("SELECT {message}, {mark} FROM outbox ORDER BY id"),
            )
            .ok()
        })
        .unwrap_or_default()
        .into_iter()
        .map(|(message, status)| {
            let (recipient, body) = message.split_once('\n').unwrap_or((&message, ""));
            let sent = delivered
                .iter()
                .position(|d| *d == (recipient, body))
                .map(|i| delivered.remove(i));
            let status = match (status.to_ascii_uppercase().as_str(), sent) {
                ("PROCESSING", _) => "PROCESSING",
                (_, Some(_)) => "SENT",
                ("SENT", None) => MARKED_SENT,
                (_, None) => WAITING,
            };
            Row {
                subject: format!("the email to {:?}", format!("{recipient}: {body}")),
                status: status.to_string(),
                error: None,
                message: None,
                wrong: None,
            }
        })
        .collect()
}

/// One moment of an invite world's life, as the relay's rules see it.
pub(crate) enum Moment<'a> {
    Invite(&'a Invite),
    /// A relay pass.
    Relay,
    /// The process stops and a new one starts (its relay pass comes next).
    Deploy,
}

/// What an invite world does, in the words of chapters 1 to 4's rules: the
/// invites each relay pass finds waiting, whether each found a seat.
#[derive(Default)]
pub(crate) struct Shape {
    /// Per relay pass, the invites made since the one before, each with
    /// whether it found a seat.
    pub passes: Vec<Vec<(String, bool)>>,
    /// Invites waited for a relay pass when the process stopped.
    pub backlog_at_deploy: bool,
    /// A workspace's last free seat was taken.
    pub filled: bool,
}

impl Shape {
    pub(crate) fn of<'a>(
        workspaces: &[(String, i64)],
        moments: impl IntoIterator<Item = Moment<'a>>,
    ) -> Shape {
        let mut free: BTreeMap<&str, i64> =
            workspaces.iter().map(|(w, n)| (w.as_str(), *n)).collect();
        let mut shape = Shape::default();
        let mut waiting: Vec<(String, bool)> = Vec::new();
        let mut members: Vec<&Invite> = Vec::new();
        for moment in moments {
            match moment {
                // A member invited again takes no second seat.
                Moment::Invite(i) if members.contains(&i) => {}
                Moment::Invite(i) => {
                    let seat = free.get_mut(i.workspace.as_str()).filter(|n| **n > 0);
                    if seat.is_some() {
                        members.push(i);
                    }
                    let admitted = seat.is_some();
                    if let Some(n) = seat {
                        *n -= 1;
                        shape.filled |= *n == 0;
                    }
                    waiting.push((i.email.clone(), admitted));
                }
                Moment::Relay => shape.passes.push(std::mem::take(&mut waiting)),
                Moment::Deploy => shape.backlog_at_deploy |= waiting.iter().any(|(_, a)| *a),
            }
        }
        shape.passes.push(waiting);
        shape
    }

    /// One person has two invites that found a seat waiting for one pass.
    pub(crate) fn one_person_twice_in_a_pass(&self) -> bool {
        self.passes.iter().any(|pass| {
            let admitted: Vec<&String> = pass.iter().filter(|(_, a)| *a).map(|(e, _)| e).collect();
            admitted
                .iter()
                .enumerate()
                .any(|(n, e)| admitted[n + 1..].contains(e))
        })
    }

    /// A relay pass finds several rows waiting.
    pub(crate) fn several_rows_in_a_pass(&self) -> bool {
        self.passes
            .iter()
            .any(|pass| pass.iter().filter(|(_, a)| *a).count() >= 2)
    }

    /// An invite finds no seat and rolls back.
    pub(crate) fn rolls_back(&self) -> bool {
        self.passes.iter().flatten().any(|(_, a)| !*a)
    }

    /// An invite that found a seat shares its relay pass with one that did
    /// not.
    pub(crate) fn rollback_beside_a_member(&self) -> bool {
        self.passes
            .iter()
            .any(|pass| pass.iter().any(|(_, a)| *a) && pass.iter().any(|(_, a)| !*a))
    }
}

/// A world of invites whose [`Shape`] the rules can be asked about.
pub(crate) trait Invites {
    fn shape(&self) -> Shape;
}

/// A question to a world's [`Shape`].
type Question = fn(&Shape) -> bool;

/// The situations chapters 1 to 4's rules turn on, each a question to a
/// world's [`Shape`].
const SITUATIONS: [(&str, Question); 6] = [
    (
        "one person with two invites waiting for the same relay pass",
        Shape::one_person_twice_in_a_pass,
    ),
    (
        "a relay pass that finds several rows waiting",
        Shape::several_rows_in_a_pass,
    ),
    (
        "an invite that finds no seat and rolls back",
        Shape::rolls_back,
    ),
    (
        "a rollback and a new member waiting for the same relay pass",
        Shape::rollback_beside_a_member,
    ),
    ("a workspace's last free seat taken", |s| s.filled),
    ("a deploy while new members wait for the relay", |s| {
        s.backlog_at_deploy
    }),
];

/// Whether world `w` reaches situation `I` of [`SITUATIONS`].
fn reaches<W: Invites, const I: usize>(w: &W) -> bool {
    (SITUATIONS[I].1)(&w.shape())
}

/// The situations chapters 1 to 4's rules turn on, in a world of invites.
pub(crate) const fn invite_dimensions<W: Invites>() -> [Dimension<W>; 6] {
    [
        Dimension {
            name: SITUATIONS[0].0,
            reached: reaches::<W, 0>,
        },
        Dimension {
            name: SITUATIONS[1].0,
            reached: reaches::<W, 1>,
        },
        Dimension {
            name: SITUATIONS[2].0,
            reached: reaches::<W, 2>,
        },
        Dimension {
            name: SITUATIONS[3].0,
            reached: reaches::<W, 3>,
        },
        Dimension {
            name: SITUATIONS[4].0,
            reached: reaches::<W, 4>,
        },
        Dimension {
            name: SITUATIONS[5].0,
            reached: reaches::<W, 5>,
        },
    ]
}

/// The shape of a world of invites made one process after another: the
/// relay after every `relay_every`-th invite and after the last, and a
/// deploy (whose new process starts with a relay pass) after
/// `deploy_after` of them (chapters 1 and 2).
pub(crate) fn relayed_every(
    workspaces: &[(String, i64)],
    invites: &[Invite],
    relay_every: usize,
    deploy_after: Option<usize>,
) -> Shape {
    let cut = deploy_after.unwrap_or(invites.len());
    let mut moments = Vec::new();
    for (n, invite) in invites.iter().enumerate() {
        if n == cut {
            moments.extend([Moment::Deploy, Moment::Relay]);
        }
        moments.push(Moment::Invite(invite));
        if (n + 1) % relay_every == 0 || n + 1 == invites.len() {
            moments.push(Moment::Relay);
        }
    }
    Shape::of(workspaces, moments)
}

impl Invites for Service {
    fn shape(&self) -> Shape {
        let last = self.processes.len() - 1;
        let moments = self.processes.iter().enumerate().flat_map(|(p, calls)| {
            let calls = calls.iter().map(|c| match c {
                Call::Invite(i) => Moment::Invite(i),
                Call::Relay(_) => Moment::Relay,
            });
            // A restart begins with a relay pass; the service ends with one.
            let start = (p > 0).then_some([Moment::Deploy, Moment::Relay]);
            let end = (p == last).then_some(Moment::Relay);
            start.into_iter().flatten().chain(calls).chain(end)
        });
        Shape::of(&self.workspaces, moments)
    }
}

/// The situations of chapters 3 and 4's world.
const DIMENSIONS: &[Dimension<Service>] = {
    const SHARED: [Dimension<Service>; 6] = invite_dimensions::<Service>();
    &[
        SHARED[0],
        SHARED[1],
        SHARED[2],
        SHARED[3],
        SHARED[4],
        SHARED[5],
        Dimension {
            name: "the last pass made alone by a relay that is not relay-1",
            reached: |s| s.closing != 1,
        },
        Dimension {
            name:
                "sends that take simulated time, so the clock moves between a claim and its marks",
            reached: |s| s.send_ms > 0,
        },
    ]
};

/// The simulated time a send takes in chapters 3 and 4's world, drawn per
/// world: most answer at once, some take as long as chapter 3's races'.
const SEND_MS: [i64; 4] = [0, 0, 150, 400];

/// How long SQLite lets the raced invite wait for the write lock (rusqlite's
/// default busy timeout), which a relay that keeps a transaction open across
/// its send holds: the processes of the race get that much more time, so
/// that such a relay meets a refused invite, never a hang.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(5);

/// What a relay round raced by an invite left behind.
pub struct Raced {
    /// The scenario's line for a finding about it.
    pub scenario: String,
    pub exits: Vec<Exit>,
    pub history: History,
    /// (email, workspace) pairs in the memberships table.
    pub members: Vec<(String, String)>,
}

/// An invite made while a relay round is being sent, as a web request can
/// come at any moment. Process 1 makes the `invites` but `raced` with no
/// relay between them, then runs a relay round whose first send answers
/// only once process 2 has made the `raced` invite; the round goes on, and the
/// relay runs again a minute later. Process 3 is the service's next pass,
/// a minute after that and again `later`. Whoever joined is owed exactly
/// one email, the one invited mid-round included; a relay that marks rows
/// it never sent loses that one.
pub fn play_invite_race(
    case: &Case,
    batch: &str,
    fixture: Vec<String>,
    invites: &[Invite],
    raced: Option<&Invite>,
    later: i64,
) -> Result<Raced> {
    let queued = invites.iter().filter(|i| Some(*i) != raced);
    let dir = scenario_dir()?;
    let dir = dir.path();
    // The parent watches the world for the first send, so it makes the
    // world before either process starts.
    let world = Recorder::open(dir, 0)?;
    let invite = |i: &Invite| Step::with("invite", i, &i.email);
    let mut steps: Vec<Step> = queued.map(invite).collect();
    steps.extend([
        Step::new("relay"),
        Step::advance(MINUTE),
        Step::new("relay"),
    ]);
    let first = Plan {
        dir: dir.to_path_buf(),
        process: 1,
        fixture: fixture.clone(),
        steps,
        provider: ProviderScript {
            announce: true,
            hold_until_any: vec![scenario::Moment::Ended(2)],
            hold_op: Some("relay".to_string()),
            hold_limit_ms: (case.timeout * 3 / 2 + 2 * LOCK_WAIT).as_millis() as u64,
            ..ProviderScript::default()
        },
        ..Plan::default()
    };
    // If process 1 ends before it has made the database, process 2 makes it.
    let second = Plan {
        dir: dir.to_path_buf(),
        process: 2,
        fixture,
        steps: raced.into_iter().map(invite).collect(),
        ..Plan::default()
    };
    let third = Plan {
        dir: dir.to_path_buf(),
        process: 3,
        steps: vec![
            Step::advance(MINUTE),
            Step::new("relay"),
            Step::advance(later),
            Step::new("relay"),
        ],
        ..Plan::default()
    };
    // Process 1 waits for process 2, which may wait for process 1's lock:
    // each may run longer before it counts as hung.
    let held = Case {
        timeout: case.timeout * 2 + 2 * LOCK_WAIT,
        ..case.clone()
    };
    let waiting = Case {
        timeout: case.timeout + 2 * LOCK_WAIT,
        ..case.clone()
    };
    let mut exits = std::thread::scope(|scope| -> Result<Vec<Exit>> {
        let running = scope.spawn(|| held.start(&first));
        while !running.is_finished() && !world.reached(scenario::Moment::Sending(1))? {
            std::thread::sleep(Duration::from_millis(1));
        }
        let second = waiting.start(&second);
        Recorder::open(dir, 2)?.record_ended(2)?;
        let first = running
            .join()
            .expect("the thread running process 1 does not panic");
        Ok(vec![first?, second?])
    })?;
    exits.push(case.start(&third)?);
    let history = History::read(dir)?;
    let members = match dir.join(APP_DB).exists() {
        true => read_pairs(dir, "SELECT email, workspace FROM memberships")?,
        false => Vec::new(),
    };
    let scenario = match raced {
        Some(who) => format!(
            "{batch}, its invites but {}'s queued first, then a relay round during which another process invites {} to {} (the round's first send answers once that invite is done):",
            who.email, who.email, who.workspace
        ),
        None => format!("{batch}, its invites queued, then a relay round:"),
    };
    Ok(Raced {
        scenario,
        exits,
        history,
        members,
    })
}

/// The finding of a race: the trouble that stopped it, or what went wrong
/// for the `joined` members (`evidence`, one line each in `details`);
/// `None` when nothing did.
pub fn race_finding(
    scenario: &str,
    trouble: Option<String>,
    joined: usize,
    (evidence, details): (String, Vec<String>),
    history: &History,
    seed: Option<u64>,
) -> Option<Finding> {
    if let Some(trouble) = trouble {
        return Some(Finding {
            evidence: "the case did not finish".to_string(),
            scenario: format!("{scenario} {trouble}"),
            seed,
            ..Default::default()
        });
    }
    if details.is_empty() {
        return None;
    }
    Some(Finding {
        evidence: format!("{joined} joined, {evidence}"),
        scenario: scenario.to_string(),
        details,
        seed,
        timeline: history.events.clone(),
        ..Default::default()
    })
}
