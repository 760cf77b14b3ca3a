//! Check 02: repeats are harmless, idempotency keys.
//!
//! Plays a batch of invites against the case, each followed by a relay
//! round, then a relay round a minute later and one more the next day. The
//! batch is replayed with the process aborting right after the provider
//! accepts each relay send and right after each relay commit (then restarted
//! five minutes later: the relay runs and the rest of the batch is played),
//! and with each relay send timing out, once after the provider accepted it
//! and once on its way there. Besides the chapter's batch, seeded random
//! batches are played the same way; each has someone invited to two
//! workspaces. Judged: who got how many emails about which workspace.
//! Then generated scenarios are explored (see [`Generated`]): more invites,
//! full plans, a relay that runs only every few invites, deploys, under a
//! crash after every commit and every accepted send, and a failing commit.

use std::path::Path;

use anyhow::Result;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::MINUTE;

use super::invite_world::{play_invite_race, race_finding, seat_fixture, NAMES, NEXT_DAY};
use super::invited::{Generated, WORKSPACES};
use lab::history::{read_pairs, History};
use lab::report::{judge, Finding};
use lab::rng::Rng;
use lab::runner::{first_trouble, scenario_dir, side_by_side, Case, Exit};
use lab::scenario::{Fault, Plan, Step};
use lab::world::{Event, Kind, Outcome};
use lab::Invite;

pub const CHAPTER: Chapter = Chapter {
    number: 2,
    title: "repeats are harmless: idempotency keys",
    case_file: "cases/case02_idempotency.rs",
    text_file: "chapters/02-repeats-are-harmless.md",
    bin: "case02",
    shipped_hash: 0x7ced_a3d4_3278_2e70,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&Generated(2), budget),
    bands: |history, _| lab::picture::bands(&Generated(2), history),
};

const AS_IS: &str = "every new member gets exactly one email";
const CRASH_TWICE: &str = "a crash and restart send no email twice";
const CRASH_LOST: &str = "a crash and restart lose no email";
const TIMEOUT: &str = "a send that times out is delivered exactly once";

/// How long the service is down after a crash.
const DOWNTIME: i64 = 5 * MINUTE;
/// Scenarios played side by side per core.
const PER_CORE: usize = 8;
/// The send, counted among the relay's sends, after which `run 2` crashes.
const STORY_CRASH: u32 = 2;
/// At most this many fault points of one kind are played per batch, so a
/// relay that sends in a loop still gets a verdict in reasonable time.
const MAX_POINTS: usize = 16;

/// A batch of invites and the workspaces they go to.
struct Batch {
    /// `None` for the chapter's own batch.
    seed: Option<u64>,
    workspaces: Vec<(String, i64)>,
    invites: Vec<Invite>,
}

fn invite(name: &str, workspace: &str) -> Invite {
    Invite {
        email: format!("{name}@example.com"),
        workspace: workspace.to_string(),
    }
}

impl Batch {
    /// The chapter's five invites; dana joins two workspaces.
    fn chapter() -> Batch {
        Batch {
            seed: None,
            workspaces: vec![("ws_acme".into(), 10), ("ws_orbit".into(), 5)],
            invites: vec![
                invite("dana", "ws_acme"),
                invite("eli", "ws_acme"),
                invite("fay", "ws_orbit"),
                invite("gus", "ws_acme"),
                invite("dana", "ws_orbit"),
            ],
        }
    }

    /// A batch drawn from `seed`: other names, workspaces and seat counts.
    /// Someone always joins two workspaces, and some invite finds no seat.
    fn random(seed: u64) -> Batch {
        let mut rng = Rng::new(seed);
        loop {
            let mut names = NAMES.to_vec();
            rng.shuffle(&mut names);
            let mut spaces = WORKSPACES.to_vec();
            rng.shuffle(&mut spaces);
            let workspaces: Vec<(String, i64)> = spaces[..rng.between(2, 3) as usize]
                .iter()
                .map(|w| (w.to_string(), rng.between(0, 3) as i64))
                .collect();
            let people = &names[..rng.between(3, 4) as usize];
            let mut invites: Vec<Invite> = people
                .iter()
                .map(|name| invite(name, &rng.pick(&workspaces).0))
                .collect();
            // Someone already invited is invited to another workspace too.
            let again = invites[rng.between(0, invites.len() as u64 - 1) as usize].clone();
            let other = workspaces
                .iter()
                .map(|(w, _)| w)
                .find(|w| **w != again.workspace)
                .expect("a batch has two workspaces");
            let name = again.email.trim_end_matches("@example.com");
            let at = rng.between(1, invites.len() as u64) as usize;
            invites.insert(at, invite(name, other));
            let batch = Batch {
                seed: Some(seed),
                workspaces,
                invites,
            };
            let seated = batch.seated();
            let twice = seated
                .iter()
                .any(|i| seated.iter().filter(|j| j.email == i.email).count() > 1);
            if twice && seated.len() < batch.invites.len() {
                return batch;
            }
        }
    }

    /// The invites that find a free seat, played in order: who should join.
    fn seated(&self) -> Vec<&Invite> {
        let mut seats = self.workspaces.clone();
        let mut joined: Vec<&Invite> = Vec::new();
        for i in &self.invites {
            if joined.contains(&i) {
                continue;
            }
            if let Some((_, free)) = seats.iter_mut().find(|(w, _)| *w == i.workspace) {
                if *free > 0 {
                    *free -= 1;
                    joined.push(i);
                }
            }
        }
        joined
    }

    fn name(&self) -> String {
        match self.seed {
            None => "the chapter's batch".to_string(),
            Some(seed) => format!("random batch (seed {seed})"),
        }
    }

    /// Each invite followed by a relay round; then the relay's next round a
    /// minute later, and one more the next day.
    fn steps(invites: &[Invite]) -> Vec<Step> {
        let mut steps: Vec<Step> = invites
            .iter()
            .flat_map(|i| [Step::with("invite", i, &i.email), Step::new("relay")])
            .collect();
        steps.extend([Step::advance(MINUTE), Step::new("relay")]);
        steps.extend([Step::advance(NEXT_DAY), Step::new("relay")]);
        steps
    }

    /// The first process of a scenario: the whole batch, with `fault`.
    fn plan(&self, dir: &Path, fault: Option<Fault>) -> Plan {
        Plan {
            dir: dir.to_path_buf(),
            process: 1,
            fixture: seat_fixture(&self.workspaces),
            steps: Batch::steps(&self.invites),
            fault,
            ..Plan::default()
        }
    }

    /// The restart after a crash: five minutes later the service starts, runs
    /// the relay, and takes the invites the first process never reached.
    fn restart(&self, dir: &Path, done: usize) -> Plan {
        let mut steps = vec![Step::advance(DOWNTIME), Step::new("relay")];
        steps.extend(Batch::steps(&self.invites[done.min(self.invites.len())..]));
        Plan {
            dir: dir.to_path_buf(),
            process: 2,
            steps,
            ..Plan::default()
        }
    }
}

fn is_crash(fault: &Option<Fault>) -> bool {
    matches!(
        fault,
        Some(Fault::CrashAfterCommit { .. } | Fault::CrashAfterSend { .. })
    )
}

/// What one scenario left behind.
struct Played {
    fault: Option<Fault>,
    exits: Vec<Exit>,
    history: History,
    /// (email, workspace) pairs in the memberships table.
    members: Vec<(String, String)>,
}

impl Played {
    /// An ending no correct case has: a panic, a hang, an unplanned abort.
    fn trouble(&self) -> Option<String> {
        first_trouble(&self.exits, "case", is_crash(&self.fault))
    }

    /// Delivered emails to `email` that name `workspace`.
    fn emails_about(&self, email: &str, workspace: &str) -> usize {
        self.history
            .emails_to(email)
            .filter(|e| e.body.contains(workspace))
            .count()
    }

    fn is_member(&self, invite: &Invite) -> bool {
        self.members
            .iter()
            .any(|(e, w)| *e == invite.email && *w == invite.workspace)
    }

    /// The sends of the first process that delivered something, as
    /// (operation, number among that operation's sends): the provider's count.
    fn delivering_sends(&self) -> Vec<(String, u32)> {
        // Every attempt records its delivery row and its event together, so
        // the n-th send event belongs to the n-th delivery.
        let sends = self.history.events.iter().filter(|e| e.kind == Kind::Send);
        let mut counts: Vec<(String, u32)> = Vec::new();
        let mut points = Vec::new();
        for (event, delivery) in sends.zip(&self.history.deliveries) {
            let Some(op) = event.op.as_deref().filter(|_| event.process == 1) else {
                continue;
            };
            let nth = match counts.iter_mut().find(|(o, _)| o == op) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    counts.push((op.to_string(), 1));
                    1
                }
            };
            if delivery.outcome == Outcome::Delivered {
                points.push((op.to_string(), nth));
            }
        }
        points
    }

    /// How many invites the first process called.
    fn invites_called(&self) -> usize {
        self.history
            .events
            .iter()
            .filter(|e| e.process == 1 && e.kind == Kind::Call && e.op.as_deref() == Some("invite"))
            .count()
    }
}

/// The batch with an invite made while a relay round is being sent (see
/// [`play_invite_race`]): its last seated invite, made during the round.
/// With the scenario's line for a finding.
fn play_race(case: &Case, batch: &Batch) -> Result<(Played, String)> {
    let last = batch.seated().last().map(|i| (*i).clone());
    let fixture = batch.plan(Path::new(""), None).fixture;
    let (name, invites) = (batch.name(), &batch.invites);
    let raced = play_invite_race(case, &name, fixture, invites, last.as_ref(), NEXT_DAY)?;
    let played = Played {
        fault: None,
        exits: raced.exits,
        history: raced.history,
        members: raced.members,
    };
    Ok((played, raced.scenario))
}

fn play(case: &Case, batch: &Batch, fault: Option<Fault>) -> Result<Played> {
    let dir = scenario_dir()?;
    let mut exits = vec![case.start(&batch.plan(dir.path(), fault.clone()))?];
    let mut history = History::read(dir.path())?;
    if exits[0] == Exit::Aborted && is_crash(&fault) {
        let done = history
            .events
            .iter()
            .filter(|e| e.kind == Kind::Call && e.op.as_deref() == Some("invite"))
            .count();
        exits.push(case.start(&batch.restart(dir.path(), done))?);
        history = History::read(dir.path())?;
    }
    let members = if dir.path().join(lab::scenario::APP_DB).exists() {
        read_pairs(dir.path(), "SELECT email, workspace FROM memberships")?
    } else {
        Vec::new()
    };
    Ok(Played {
        fault,
        exits,
        history,
        members,
    })
}

/// How the emails of one scenario fell on its memberships.
#[derive(Default)]
struct Tally {
    /// Members with no email that names their workspace.
    lost: Vec<(String, String)>,
    /// Members with more than one, and how many they got.
    twice: Vec<(String, String, usize)>,
    /// Emails that name none of their recipient's workspaces: (to, body).
    stray: Vec<(String, String)>,
}

impl Tally {
    fn of(played: &Played) -> Tally {
        let mut tally = Tally::default();
        for (email, workspace) in &played.members {
            match played.emails_about(email, workspace) {
                0 => tally.lost.push((email.clone(), workspace.clone())),
                1 => {}
                n => tally.twice.push((email.clone(), workspace.clone(), n)),
            }
        }
        for e in played.history.emails() {
            let named = played
                .members
                .iter()
                .any(|(m, w)| *m == e.recipient && e.body.contains(w.as_str()));
            if !named {
                tally.stray.push((e.recipient.clone(), e.body.clone()));
            }
        }
        tally
    }

    /// One line per member who got no email or more than one.
    fn harm_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .twice
            .iter()
            .map(|(m, w, n)| format!("{m} joined {w} and got {n} emails."))
            .collect();
        lines.extend(
            self.lost
                .iter()
                .map(|(m, w)| format!("{m} joined {w} and got no email.")),
        );
        lines
    }

    /// Every problem, one line each.
    fn lines(&self) -> Vec<String> {
        let mut lines = self.harm_lines();
        lines.extend(self.stray.iter().map(|(to, body)| {
            format!("{to} got an email about a workspace they are not in: {body:?}")
        }));
        lines
    }

    fn evidence(&self) -> String {
        let parts: Vec<String> = [
            (self.lost.len(), "lost"),
            (self.twice.len(), "sent more than once"),
            (self.stray.len(), "about the wrong thing"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        parts.join(", ")
    }

    /// The member the first problem is about, for the scenario line and timeline.
    fn first(&self) -> Option<(String, String)> {
        self.twice
            .first()
            .map(|(m, w, _)| (m.clone(), w.clone()))
            .or_else(|| self.lost.first().cloned())
    }
}

/// `notify run 2`: the chapter's batch with one crash, told as a story.
fn run(case: &Case) -> Result<String> {
    let batch = Batch::chapter();
    let fault = Fault::CrashAfterSend {
        op: "relay".into(),
        nth: STORY_CRASH,
    };
    let played = play(case, &batch, Some(fault))?;
    let mut out = format!(
        "sending {} invitations; the process crashes once, right after the provider accepts an email\n",
        batch.invites.len()
    );
    let outcomes = invite_outcomes(&played.history);
    let crashed_after = played
        .history
        .first(Kind::Crash)
        .map(|_| played.invites_called());
    for (n, i) in batch.invites.iter().enumerate() {
        let outcome = if played.is_member(i) {
            format!(
                "added, {}",
                times(played.emails_about(&i.email, &i.workspace))
            )
        } else {
            match outcomes.get(n).cloned().flatten() {
                Some(err) if err.contains("CHECK constraint failed") => {
                    "no free seat, rolled back".to_string()
                }
                Some(err) => format!("failed: {}", lab::timeline::plain_error(&err)),
                None if n < outcomes.len() => "not added".to_string(),
                None => "never played".to_string(),
            }
        };
        out.push_str(&format!("  {:<19}{:<10}{outcome}\n", i.email, i.workspace));
        if crashed_after == Some(n + 1) {
            out.push_str(&crash_lines(&played));
        }
    }
    if crashed_after.is_none() {
        out.push_str(&format!(
            "  (the planned crash never came: the relay accepted fewer than {STORY_CRASH} sends)\n"
        ));
    }

    let tally = Tally::of(&played);
    out.push_str(&format!(
        "\nemails delivered: {}\n",
        played.history.emails().count()
    ));
    let repeats: Vec<_> = played
        .history
        .deliveries
        .iter()
        .filter(|d| d.channel == "email" && d.outcome == Outcome::Deduplicated)
        .collect();
    if !repeats.is_empty() {
        out.push_str(&format!(
            "repeats the provider recognised by their key: {}\n",
            repeats.len()
        ));
        for d in repeats {
            out.push_str(&format!(
                "  {} (key {}): nothing new delivered.\n",
                d.recipient,
                d.key.as_deref().unwrap_or("")
            ));
        }
    }
    out.push_str(&format!(
        "people told more than once: {}\n",
        tally.twice.len()
    ));
    for (m, w, n) in &tally.twice {
        out.push_str(&format!("  {m} got {n} emails about {w}.\n"));
    }
    if !tally.lost.is_empty() {
        out.push_str(&format!("new members never told: {}\n", tally.lost.len()));
        for (m, w) in &tally.lost {
            out.push_str(&format!("  {m} joined {w} and was not told.\n"));
        }
    }
    if !tally.stray.is_empty() {
        out.push_str(&format!(
            "emails about workspaces the person is not in: {}\n",
            tally.stray.len()
        ));
        for (to, body) in &tally.stray {
            out.push_str(&format!("  {to} got {body:?}.\n"));
        }
    }
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// "emailed once", "emailed twice", "never emailed", "emailed 3 times".
fn times(n: usize) -> String {
    match n {
        0 => "never emailed".to_string(),
        1 => "emailed once".to_string(),
        2 => "emailed twice".to_string(),
        n => format!("emailed {n} times"),
    }
}

/// For each invite called, in order: the error it returned, if any.
fn invite_outcomes(history: &History) -> Vec<Option<String>> {
    let mut outcomes: Vec<Option<String>> = Vec::new();
    let mut current = false;
    for e in &history.events {
        match e.kind {
            Kind::Call => {
                current = e.op.as_deref() == Some("invite");
                if current {
                    outcomes.push(None);
                }
            }
            Kind::Error if current => {
                if let Some(last) = outcomes.last_mut() {
                    *last = Some(e.text.clone());
                }
            }
            _ => {}
        }
    }
    outcomes
}

/// The story's crash and restart, in two indented lines.
fn crash_lines(played: &Played) -> String {
    let events = &played.history.events;
    let crash = events.iter().position(|e| e.kind == Kind::Crash);
    let whose = crash
        .and_then(|at| events[..at].iter().rev().find(|e| e.kind == Kind::Send))
        .and_then(|e| e.subject.as_deref())
        .map(|to| format!("{}'s", to.split('@').next().unwrap_or(to)))
        .unwrap_or_else(|| "an".to_string());
    let restarted = if played.exits.len() > 1 {
        "    ↻ five minutes later the service restarts, runs the relay, and carries on\n"
    } else {
        ""
    };
    format!(
        "    ✖ the provider accepts {whose} email, then the process crashes before the relay hears back\n{restarted}"
    )
}

/// Everything played for one batch.
struct Round<'a> {
    batch: &'a Batch,
    normal: Played,
    /// The batch with an invite made while a relay round is sending, and
    /// its scenario line.
    race: Option<(Played, String)>,
    crashes: Vec<Played>,
    timeouts: Vec<Played>,
}

/// The faults to play on a batch, from what its clean run did: each send
/// that delivered something, and each commit of the relay.
fn faults(normal: &Played) -> (Vec<Fault>, Vec<Fault>) {
    let sends: Vec<(String, u32)> = normal
        .delivering_sends()
        .into_iter()
        .take(MAX_POINTS)
        .collect();
    let commits = normal.history.commits("relay").into_iter().take(MAX_POINTS);
    let crashes = sends
        .iter()
        .map(|(op, nth)| Fault::CrashAfterSend {
            op: op.clone(),
            nth: *nth,
        })
        .chain(commits.map(|nth| Fault::CrashAfterCommit {
            op: "relay".to_string(),
            nth,
        }))
        .collect();
    let timeouts = sends
        .iter()
        .map(|(op, nth)| Fault::TimeoutAfterSend {
            op: op.clone(),
            nth: *nth,
        })
        .chain(sends.iter().map(|(op, nth)| Fault::TimeoutBeforeSend {
            op: op.clone(),
            nth: *nth,
        }))
        .collect();
    (crashes, timeouts)
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let batches: Vec<Batch> = std::iter::once(Batch::chapter())
        .chain(options.seeds.iter().map(|&s| Batch::random(s)))
        .collect();
    // Every batch's clean run first, then every fault of every batch in one
    // pool, so the cores stay busy.
    let normals = side_by_side(&batches, PER_CORE, |b| play(case, b, None))
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    // A batch the case cannot finish as is names every property's failure,
    // so its faults and every later batch's go unread: they would only
    // wait on the same hang again (as in check 1).
    let troubled = normals.iter().position(|n| n.trouble().is_some());
    // A case that cannot finish a batch as is is not raced: its trouble is
    // what the learner sees first.
    let raced: &[Batch] = match troubled {
        Some(_) => &[],
        None => &batches,
    };
    let mut races = side_by_side(raced, PER_CORE, |b| play_race(case, b))
        .into_iter()
        .collect::<Result<Vec<_>>>()?
        .into_iter();
    let mut jobs: Vec<(usize, Fault)> = Vec::new();
    let mut sizes = Vec::new();
    for (b, normal) in normals.iter().enumerate() {
        let (crashes, timeouts) = match troubled {
            Some(t) if b >= t => (Vec::new(), Vec::new()),
            _ => faults(normal),
        };
        sizes.push((crashes.len(), timeouts.len()));
        jobs.extend(crashes.into_iter().chain(timeouts).map(|f| (b, f)));
    }
    let mut played = side_by_side(&jobs, PER_CORE, |(b, f)| {
        play(case, &batches[*b], Some(f.clone()))
    })
    .into_iter()
    .collect::<Result<Vec<_>>>()?
    .into_iter();
    let mut rounds = Vec::new();
    for ((batch, normal), (crashes, timeouts)) in batches.iter().zip(normals).zip(sizes) {
        rounds.push(Round {
            batch,
            normal,
            race: races.next(),
            crashes: played.by_ref().take(crashes).collect(),
            timeouts: played.by_ref().take(timeouts).collect(),
        });
    }
    let processes: usize = rounds
        .iter()
        .flat_map(|r| {
            std::iter::once(&r.normal)
                .chain(r.race.as_ref().map(|(played, _)| played))
                .chain(&r.crashes)
                .chain(&r.timeouts)
        })
        .map(|p| p.exits.len())
        .sum();

    let chapter = &rounds[0];
    let trouble = chapter.normal.trouble();
    let joined = format!("{} joined", chapter.normal.members.len());
    let crash_points = format!("{} crash points", chapter.crashes.len());
    let timeouts = format!("{} timeouts", chapter.timeouts.len());
    let mut verdicts = vec![
        judge(AS_IS, joined, rounds.iter_mut().find_map(as_is)),
        judge(
            CRASH_TWICE,
            crash_points.clone(),
            rounds.iter_mut().find_map(|r| crashed(r, Harm::Twice)),
        ),
        judge(
            CRASH_LOST,
            crash_points,
            rounds.iter_mut().find_map(|r| crashed(r, Harm::Lost)),
        ),
        judge(TIMEOUT, timeouts, rounds.iter_mut().find_map(timed_out)),
    ];
    let explored = Generated(2).explored(case, options, trouble)?;
    verdicts.extend(explored.verdicts);
    Ok(Checked {
        verdicts,
        processes: processes + explored.processes,
    })
}

fn trouble_finding(round: &Round, played: &Played, what: &str) -> Option<Finding> {
    played.trouble().map(|trouble| {
        Finding::unfinished(
            format!("{}, {what}: {trouble}", round.batch.name()),
            round.batch.seed,
        )
    })
}

/// Invites that should have joined and did not, and members who should not be.
fn misjoined(batch: &Batch, played: &Played) -> Vec<String> {
    let seated = batch.seated();
    let mut lines: Vec<String> = seated
        .iter()
        .filter(|i| !played.is_member(i))
        .map(|i| {
            format!(
                "{} had a seat in {} but did not join.",
                i.email, i.workspace
            )
        })
        .collect();
    lines.extend(
        played
            .members
            .iter()
            .filter(|(m, w)| !seated.iter().any(|i| i.email == *m && i.workspace == *w))
            .map(|(m, w)| format!("{m} joined {w}, which had no seat for them.")),
    );
    lines
}

fn as_is(round: &mut Round) -> Option<Finding> {
    if let Some(f) = trouble_finding(round, &round.normal, "played as is") {
        return Some(f);
    }
    let joined = round.normal.members.len();
    let misjoined = misjoined(round.batch, &round.normal);
    let tally = Tally::of(&round.normal);
    let evidence = if misjoined.is_empty() {
        format!("{joined} joined, {}", tally.evidence())
    } else {
        format!("{joined} joined, {} expected", round.batch.seated().len())
    };
    let mut details = misjoined;
    details.extend(tally.lines());
    if details.is_empty() {
        return raced_invite(round);
    }
    Some(Finding {
        evidence,
        scenario: format!(
            "{}, played as is (the relay runs after each invite, a minute later, and the next day):",
            round.batch.name()
        ),
        details,
        seed: round.batch.seed,
        story: round.normal.history.events.clone(),
        ..Default::default()
    })
}

/// The invite made while a relay round was sending: whoever joined gets
/// exactly one email about it, the one invited mid-round included.
fn raced_invite(round: &Round) -> Option<Finding> {
    let (played, scenario) = round.race.as_ref()?;
    let tally = Tally::of(played);
    let judged = (tally.evidence(), tally.lines());
    race_finding(
        scenario,
        played.trouble(),
        played.members.len(),
        judged,
        &played.history,
        round.batch.seed,
    )
}

/// A fault property cannot hold when the batch it replays did not run, or
/// its relay delivered nothing to put a fault on.
fn unfaultable(round: &Round) -> Option<Finding> {
    if let Some(f) = trouble_finding(round, &round.normal, "played as is") {
        return Some(f);
    }
    let nothing = round.normal.delivering_sends().is_empty() && !round.batch.seated().is_empty();
    nothing.then(|| Finding {
        evidence: "no email sent".to_string(),
        scenario: format!("{}, played as is:", round.batch.name()),
        details: vec![
            "no email was delivered, so there was no send to crash or time out.".to_string(),
        ],
        seed: round.batch.seed,
        ..Default::default()
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Harm {
    Twice,
    Lost,
}

fn harmed(played: &Played, harm: Harm) -> bool {
    let tally = Tally::of(played);
    played.trouble().is_some()
        || match harm {
            Harm::Twice => !tally.twice.is_empty(),
            Harm::Lost => !tally.lost.is_empty(),
        }
}

fn crashed(round: &mut Round, harm: Harm) -> Option<Finding> {
    if let Some(f) = unfaultable(round) {
        return Some(f);
    }
    let hit = round.crashes.iter().filter(|p| harmed(p, harm)).count();
    let at = round.crashes.iter().position(|p| harmed(p, harm))?;
    let played = &round.crashes[at];
    let fault = describe(played);
    if let Some(f) = trouble_finding(round, played, &fault) {
        return Some(f);
    }
    let what = match harm {
        Harm::Twice => "send an email twice",
        Harm::Lost => "lose an email",
    };
    let evidence = format!("{hit} of {} crash points {what}", round.crashes.len());
    Some(finding(round, played, evidence, ", then a restart"))
}

fn timed_out(round: &mut Round) -> Option<Finding> {
    if let Some(f) = unfaultable(round) {
        return Some(f);
    }
    let bad = |p: &Played| harmed(p, Harm::Twice) || harmed(p, Harm::Lost);
    let twice = round
        .timeouts
        .iter()
        .filter(|p| harmed(p, Harm::Twice))
        .count();
    let lost = round
        .timeouts
        .iter()
        .filter(|p| harmed(p, Harm::Lost))
        .count();
    let at = round.timeouts.iter().position(bad)?;
    let played = &round.timeouts[at];
    if let Some(f) = trouble_finding(round, played, &describe(played)) {
        return Some(f);
    }
    let total = round.timeouts.len();
    let evidence = match (twice, lost) {
        (t, 0) => format!("{t} of {total} timeouts send an email twice"),
        (0, l) => format!("{l} of {total} timeouts lose an email"),
        (t, l) => format!("{t} of {total} timeouts send an email twice, {l} lose one"),
    };
    Some(finding(round, played, evidence, ""))
}

fn describe(played: &Played) -> String {
    played
        .fault
        .as_ref()
        .map(Fault::describe)
        .unwrap_or_default()
}

/// A failing fault scenario, named by its fault and the member it hurt.
fn finding(round: &Round, played: &Played, evidence: String, then: &str) -> Finding {
    let tally = Tally::of(played);
    let who = tally.first();
    let whose = who
        .as_ref()
        .map(|(m, w)| format!(" ({m} → {w})"))
        .unwrap_or_default();
    let details = tally.harm_lines();
    Finding {
        evidence,
        scenario: format!("{}, {}{whose}{then}:", round.batch.name(), describe(played)),
        details,
        seed: round.batch.seed,
        timeline: story(round.batch, &played.history.events, who.as_ref()),
        ..Default::default()
    }
}

/// The events a learner needs to follow what happened to one membership:
/// every start, crash and panic, the invite that made it, the first call
/// after a restart, and each call that sent (or tried to send) its email,
/// with that call's commits and errors. Everything about others is left out.
fn story(batch: &Batch, events: &[Event], who: Option<&(String, String)>) -> Vec<Event> {
    let Some((email, workspace)) = who else {
        return events.to_vec();
    };
    // An email about another of this person's workspaces is not this story.
    let other_workspace = |text: &str| {
        batch
            .workspaces
            .iter()
            .any(|(w, _)| w != workspace && text.contains(w.as_str()))
    };
    let mine =
        |e: &Event| e.subject.as_deref() == Some(email.as_str()) && !other_workspace(&e.text);
    let first_process_invites = events
        .iter()
        .filter(|e| e.process == 1 && e.kind == Kind::Call && e.op.as_deref() == Some("invite"))
        .count();

    let mut out = Vec::new();
    let mut call: Vec<&Event> = Vec::new();
    let mut next_invite = 0;
    let mut relevant = false;
    for (i, e) in events.iter().enumerate() {
        let boundary = matches!(e.kind, Kind::Start | Kind::Call);
        if boundary {
            if relevant {
                out.extend(keep_in_call(&call, &mine));
            }
            call.clear();
            relevant = false;
        }
        let call_after_start = events[..i].last().is_some_and(|p| p.kind == Kind::Start);
        match e.kind {
            Kind::Start => {
                if e.process > 1 {
                    next_invite = first_process_invites;
                }
                out.push(e.clone());
                continue;
            }
            // What a restarted service does first is always part of the story.
            Kind::Call if e.process > 1 && call_after_start => relevant = true,
            Kind::Call if e.op.as_deref() == Some("invite") => {
                let invite = batch.invites.get(next_invite);
                next_invite += 1;
                relevant = invite.is_some_and(|i| i.email == *email && i.workspace == *workspace);
            }
            Kind::Crash | Kind::Panic => relevant = true,
            Kind::Send | Kind::Timeout if mine(e) => relevant = true,
            // A lost answer follows the send it belongs to.
            Kind::Timeout => relevant |= i > 0 && mine(&events[i - 1]),
            _ => {}
        }
        call.push(e);
    }
    if relevant {
        out.extend(keep_in_call(&call, &mine));
    }
    out
}

/// The events of one relevant call worth drawing: no returns, no sends to
/// other people, and no commits that follow such a send (they record it).
fn keep_in_call(call: &[&Event], mine: &impl Fn(&Event) -> bool) -> Vec<Event> {
    let mut kept = Vec::new();
    let mut after_others = false;
    for e in call {
        let keep = match e.kind {
            Kind::Return => false,
            Kind::Send => {
                after_others = !mine(e);
                !after_others
            }
            Kind::Timeout => mine(e) || !after_others,
            Kind::Commit | Kind::CommitFailed => !after_others,
            _ => true,
        };
        if keep {
            kept.push((*e).clone());
        }
    }
    kept
}
