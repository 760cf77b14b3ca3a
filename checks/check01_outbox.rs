//! Check 01: send after commit, the outbox.
//!
//! Plays a batch of invites against the case and judges what the world saw:
//! who got an email, and who is a member. The batch is played as is, with
//! the process aborting straight after each invite commit (then restarted,
//! which runs the relay), and with each invite commit failing inside SQLite.
//! Besides the chapter's five invites, seeded random batches with other
//! names, workspaces and seat counts are played the same way. Then generated
//! scenarios are explored (see [`Generated`]): up to a dozen invites, some to
//! full plans, someone invited to two workspaces, a relay that runs only
//! every few invites, a deploy midway, under a crash after every invite and
//! relay commit and a failing commit of every invite.

use std::path::Path;

use anyhow::Result;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::MINUTE;

use super::invite_world::{play_invite_race, race_finding, seat_fixture, NAMES};
use super::invited::{Generated, WORKSPACES};
use lab::history::{read_pairs, History};
use lab::report::{judge, Finding};
use lab::rng::Rng;
use lab::runner::{first_trouble, in_parallel, scenario_dir, Case, Exit};
use lab::scenario::{Fault, Plan, Step};
use lab::world::Kind;
use lab::Invite;

pub const CHAPTER: Chapter = Chapter {
    number: 1,
    title: "send after commit: the outbox",
    case_file: "cases/case01_outbox.rs",
    text_file: "chapters/01-send-after-commit.md",
    bin: "case01",
    shipped_hash: 0x4b84_039e_e2c3_1853,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&Generated(1), budget),
    bands: |history, _| lab::picture::bands(&Generated(1), history),
};

const ROLLED_BACK: &str = "no email for an invite that rolled back";
const EXACTLY_ONE: &str = "every new member gets exactly one email";
const CRASH: &str = "a crash straight after the commit still sends the email, once";
const FAILING: &str = "no email when the commit itself fails";

/// A batch of invites and the workspaces they go to.
struct Batch {
    /// `None` for the chapter's own batch.
    seed: Option<u64>,
    workspaces: Vec<(String, i64)>,
    invites: Vec<Invite>,
}

impl Batch {
    /// The chapter's five invites: ws_orbit has no seat left.
    fn chapter() -> Batch {
        let invite = |name: &str, workspace: &str| Invite {
            email: format!("{name}@example.com"),
            workspace: workspace.to_string(),
        };
        Batch {
            seed: None,
            workspaces: vec![("ws_acme".into(), 10), ("ws_orbit".into(), 0)],
            invites: vec![
                invite("dana", "ws_acme"),
                invite("eli", "ws_acme"),
                invite("fay", "ws_orbit"),
                invite("gus", "ws_acme"),
                invite("hal", "ws_orbit"),
            ],
        }
    }

    /// A batch drawn from `seed`: other names, workspaces and seat counts,
    /// with at least one invite that fits and one that does not.
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
            let invites: Vec<Invite> = names[..rng.between(4, 7) as usize]
                .iter()
                .map(|name| Invite {
                    email: format!("{name}@example.com"),
                    workspace: rng.pick(&workspaces).0.clone(),
                })
                .collect();
            let batch = Batch {
                seed: Some(seed),
                workspaces,
                invites,
            };
            let fits = batch.seated().len();
            if fits > 0 && fits < batch.invites.len() {
                return batch;
            }
        }
    }

    /// The invites that find a free seat, played in order: who should join.
    fn seated(&self) -> Vec<&Invite> {
        let mut seats: Vec<(String, i64)> = self.workspaces.clone();
        self.invites
            .iter()
            .filter(
                |i| match seats.iter_mut().find(|(w, _)| *w == i.workspace) {
                    Some((_, free)) if *free > 0 => {
                        *free -= 1;
                        true
                    }
                    _ => false,
                },
            )
            .collect()
    }

    fn name(&self) -> String {
        match self.seed {
            None => "the chapter's batch".to_string(),
            Some(seed) => format!("random batch (seed {seed})"),
        }
    }

    fn workspace_of(&self, email: &str) -> &str {
        self.invites
            .iter()
            .find(|i| i.email == email)
            .map(|i| i.workspace.as_str())
            .unwrap_or("?")
    }

    fn plan(&self, dir: &std::path::Path, fault: Option<Fault>) -> Plan {
        let steps = self
            .invites
            .iter()
            .flat_map(|i| [Step::with("invite", i, &i.email), Step::new("relay")])
            .collect();
        Plan {
            dir: dir.to_path_buf(),
            process: 1,
            fixture: seat_fixture(&self.workspaces),
            steps,
            fault,
            ..Plan::default()
        }
    }
}

/// What one scenario left behind.
struct Played {
    fault: Option<Fault>,
    exits: Vec<Exit>,
    history: History,
    members: Vec<String>,
}

impl Played {
    /// An ending no correct case has: a panic, a hang, an unplanned abort.
    fn trouble(&self) -> Option<String> {
        let planned_crash = matches!(self.fault, Some(Fault::CrashAfterCommit { .. }));
        first_trouble(&self.exits, "case", planned_crash)
    }

    fn emails_to(&self, email: &str) -> usize {
        self.history.emails_to(email).count()
    }

    fn is_member(&self, email: &str) -> bool {
        self.members.iter().any(|m| m == email)
    }

    /// Who the faulted commit was about.
    fn faulted(&self) -> Option<String> {
        self.history
            .events
            .iter()
            .find(|e| matches!(e.kind, Kind::CommitFailed | Kind::Crash))
            .and_then(|e| {
                // A crash is recorded after its commit, under the same subject.
                e.subject.clone().or_else(|| {
                    self.history
                        .events
                        .iter()
                        .rev()
                        .find(|c| c.kind == Kind::Commit && c.process == e.process)
                        .and_then(|c| c.subject.clone())
                })
            })
    }
}

fn play(case: &Case, batch: &Batch, fault: Option<Fault>) -> Result<Played> {
    let dir = scenario_dir()?;
    let mut exits = vec![case.start(&batch.plan(dir.path(), fault.clone()))?];
    if exits[0] == Exit::Aborted && matches!(fault, Some(Fault::CrashAfterCommit { .. })) {
        // The restart: a fresh process on the same files runs what the
        // service runs at start-up.
        let restart = Plan {
            dir: dir.path().to_path_buf(),
            process: 2,
            fixture: Vec::new(),
            steps: vec![Step::new("relay")],
            ..Plan::default()
        };
        exits.push(case.start(&restart)?);
    }
    let history = History::read(dir.path())?;
    let members = if dir.path().join(lab::scenario::APP_DB).exists() {
        read_pairs(dir.path(), "SELECT email, workspace FROM memberships")?
            .into_iter()
            .map(|(email, _)| email)
            .collect()
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

/// The batch with an invite made while a relay round is being sent (see
/// [`play_invite_race`]): its last seated invite, made during the round.
/// With the scenario's line for a finding.
fn play_race(case: &Case, batch: &Batch) -> Result<(Played, String)> {
    let last = batch.seated().last().map(|i| (*i).clone());
    let fixture = batch.plan(Path::new(""), None).fixture;
    let (name, invites) = (batch.name(), &batch.invites);
    let raced = play_invite_race(case, &name, fixture, invites, last.as_ref(), 60 * MINUTE)?;
    let played = Played {
        fault: None,
        exits: raced.exits,
        history: raced.history,
        members: raced.members.into_iter().map(|(email, _)| email).collect(),
    };
    Ok((played, raced.scenario))
}

/// `notify run 1`: the chapter's batch, once, told as a story.
fn run(case: &Case) -> Result<String> {
    let batch = Batch::chapter();
    let played = play(case, &batch, None)?;
    let mut out = format!("sending {} invitations\n", batch.invites.len());
    for invite in &batch.invites {
        let tried = played.history.events.iter().any(|e| {
            e.kind == Kind::Call
                && e.op.as_deref() == Some("invite")
                && e.subject.as_deref() == Some(invite.email.as_str())
        });
        let outcome = if played.is_member(&invite.email) {
            "added".to_string()
        } else {
            match played.history.error_for("invite", &invite.email) {
                Some(err) if err.contains("CHECK constraint failed") => {
                    "no free seat, rolled back".to_string()
                }
                Some(err) => format!("failed: {}", lab::timeline::plain_error(err)),
                None if tried => "not added".to_string(),
                None => "never tried: the case stopped before it".to_string(),
            }
        };
        out.push_str(&format!(
            "  {:<19}{:<10}{outcome}\n",
            invite.email, invite.workspace
        ));
    }
    let phantom: Vec<&Invite> = batch
        .invites
        .iter()
        .filter(|i| !played.is_member(&i.email) && played.emails_to(&i.email) > 0)
        .collect();
    out.push_str(&format!(
        "\nemails sent: {}\nemails for memberships that do not exist: {}\n",
        played.history.emails().count(),
        phantom.len()
    ));
    for i in &phantom {
        out.push_str(&format!(
            "  {} was told they joined {}. They did not.\n",
            i.email, i.workspace
        ));
    }
    let untold: Vec<&Invite> = batch
        .invites
        .iter()
        .filter(|i| played.is_member(&i.email) && played.emails_to(&i.email) == 0)
        .collect();
    if !untold.is_empty() {
        out.push_str(&format!("new members never told: {}\n", untold.len()));
        for i in &untold {
            out.push_str(&format!(
                "  {} joined {} and was not told.\n",
                i.email, i.workspace
            ));
        }
    }
    let twice: Vec<&Invite> = batch
        .invites
        .iter()
        .filter(|i| played.emails_to(&i.email) > 1)
        .collect();
    if !twice.is_empty() {
        out.push_str(&format!("people told more than once: {}\n", twice.len()));
        for i in &twice {
            out.push_str(&format!(
                "  {} got {} emails about {}.\n",
                i.email,
                played.emails_to(&i.email),
                i.workspace
            ));
        }
    }
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// Everything played for one batch.
struct Round<'a> {
    batch: &'a Batch,
    normal: Played,
    /// The batch with an invite made while a relay round is sending, and
    /// its scenario line.
    race: Option<(Played, String)>,
    crashes: Vec<Played>,
    failures: Vec<Played>,
}

impl Round<'_> {
    fn processes(&self) -> usize {
        std::iter::once(&self.normal)
            .chain(self.race.as_ref().map(|(played, _)| played))
            .chain(&self.crashes)
            .chain(&self.failures)
            .map(|p| p.exits.len())
            .sum()
    }
}

fn play_round<'a>(case: &Case, batch: &'a Batch) -> Result<Round<'a>> {
    let normal = play(case, batch, None)?;
    // A batch the case cannot finish as is names every property's failure:
    // its faults would only wait on the same hang again.
    if normal.trouble().is_some() {
        return Ok(Round {
            batch,
            normal,
            race: None,
            crashes: Vec::new(),
            failures: Vec::new(),
        });
    }

    // Every invite commit the normal run made is a crash point; every one it
    // attempted is a commit to fail.
    let crash_points = normal.history.commits("invite");
    let fail_points = normal.history.commit_attempts("invite");
    let faults: Vec<Fault> = crash_points
        .iter()
        .map(|&nth| Fault::CrashAfterCommit {
            op: "invite".into(),
            nth,
        })
        .chain(fail_points.iter().map(|&nth| Fault::FailCommit {
            op: "invite".into(),
            nth,
        }))
        .collect();
    // The race waits on the world, not on the cores: it runs beside them.
    let (race, played) = std::thread::scope(|scope| {
        let race = scope.spawn(|| play_race(case, batch));
        let played = in_parallel(&faults, |f| play(case, batch, Some(f.clone())));
        let race = race.join().expect("the race's thread does not panic");
        (race, played)
    });
    let race = Some(race?);
    let mut played = played.into_iter().collect::<Result<Vec<_>>>()?;
    let failures = played.split_off(crash_points.len());
    Ok(Round {
        batch,
        normal,
        race,
        crashes: played,
        failures,
    })
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let batches: Vec<Batch> = std::iter::once(Batch::chapter())
        .chain(options.seeds.iter().map(|&s| Batch::random(s)))
        .collect();
    let mut rounds = Vec::new();
    for batch in &batches {
        let round = play_round(case, batch)?;
        let troubled = round.normal.trouble().is_some();
        rounds.push(round);
        // Every property fails on this round first: later ones go unread.
        if troubled {
            break;
        }
    }
    let processes: usize = rounds.iter().map(Round::processes).sum();
    // A property that holds shows the chapter's batch's figure.
    let chapter = &rounds[0];
    let evidence = [
        format!("{} sent", phantoms(chapter).len()),
        format!("{} joined", chapter.normal.members.len()),
        format!("{} crash points", chapter.crashes.len()),
        format!("{} failing commits", chapter.failures.len()),
    ];
    let [rolled, joined, crashed, failed] = evidence;
    let trouble = chapter.normal.trouble();
    let mut verdicts = vec![
        judge(ROLLED_BACK, rolled, rounds.iter_mut().find_map(rolled_back)),
        judge(EXACTLY_ONE, joined, rounds.iter_mut().find_map(exactly_one)),
        judge(CRASH, crashed, rounds.iter_mut().find_map(crash)),
        judge(FAILING, failed, rounds.iter_mut().find_map(failing)),
    ];
    let explored = Generated(1).explored(case, options, trouble)?;
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

/// Invites that rolled back but whose invitee got an email.
fn phantoms<'a>(round: &'a Round) -> Vec<&'a Invite> {
    round
        .batch
        .invites
        .iter()
        .filter(|i| !round.normal.is_member(&i.email) && round.normal.emails_to(&i.email) > 0)
        .collect()
}

fn rolled_back(round: &mut Round) -> Option<Finding> {
    if let Some(f) = trouble_finding(round, &round.normal, "played as is") {
        return Some(f);
    }
    let phantoms = phantoms(round);
    if phantoms.is_empty() {
        return None;
    }
    let sent: usize = phantoms
        .iter()
        .map(|i| round.normal.emails_to(&i.email))
        .sum();
    Some(Finding {
        evidence: format!("{sent} sent"),
        scenario: format!("{}, played as is:", round.batch.name()),
        details: phantoms
            .iter()
            .map(|i| {
                format!(
                    "{} was told they joined {}. They did not.",
                    i.email, i.workspace
                )
            })
            .collect(),
        seed: round.batch.seed,
        ..Default::default()
    })
}

/// Members without exactly one email that names their workspace, described.
fn miscounted(batch: &Batch, played: &Played) -> (Tally, Vec<String>) {
    let (mut tally, mut lines) = (Tally::default(), Vec::new());
    for member in &played.members {
        let workspace = batch.workspace_of(member);
        let (about, other): (Vec<_>, Vec<_>) = played
            .history
            .emails_to(member)
            .partition(|e| e.body.contains(workspace));
        match about.len() {
            1 => {}
            0 => {
                tally.lost += 1;
                lines.push(format!("{member} joined {workspace} and got no email."));
            }
            n => {
                tally.twice += 1;
                lines.push(format!("{member} joined {workspace} and got {n} emails."));
            }
        }
        if !other.is_empty() {
            tally.wrong += 1;
            lines.push(format!(
                "{member} got an email that does not name {workspace}: {:?}",
                other[0].body
            ));
        }
    }
    (tally, lines)
}

/// Invites that should have joined and did not, and members who should not be.
fn misjoined(batch: &Batch, played: &Played) -> Vec<String> {
    let seated = batch.seated();
    let mut lines: Vec<String> = seated
        .iter()
        .filter(|i| !played.is_member(&i.email))
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
            .filter(|m| !seated.iter().any(|i| &i.email == *m))
            .map(|m| {
                format!(
                    "{m} joined {}, which had no seat for them.",
                    batch.workspace_of(m)
                )
            }),
    );
    lines
}

/// Emails that went wrong in one scenario, counted.
#[derive(Default)]
struct Tally {
    lost: usize,
    twice: usize,
    wrong: usize,
}

impl Tally {
    fn evidence(&self) -> String {
        let parts: Vec<String> = [
            (self.lost, "lost"),
            (self.twice, "sent more than once"),
            (self.wrong, "about the wrong thing"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        parts.join(", ")
    }
}

fn exactly_one(round: &mut Round) -> Option<Finding> {
    if let Some(f) = trouble_finding(round, &round.normal, "played as is") {
        return Some(f);
    }
    let joined = round.normal.members.len();
    let misjoined = misjoined(round.batch, &round.normal);
    let (tally, mut details) = miscounted(round.batch, &round.normal);
    let evidence = if misjoined.is_empty() {
        format!("{joined} joined, {}", tally.evidence())
    } else {
        format!("{joined} joined, {} expected", round.batch.seated().len())
    };
    details.splice(0..0, misjoined);
    if details.is_empty() {
        return raced_invite(round);
    }
    Some(Finding {
        evidence,
        scenario: format!("{}, played as is:", round.batch.name()),
        details,
        seed: round.batch.seed,
        ..Default::default()
    })
}

/// The invite made while a relay round was sending: whoever joined gets
/// exactly one email about it, the one invited mid-round included.
fn raced_invite(round: &Round) -> Option<Finding> {
    let (played, scenario) = round.race.as_ref()?;
    let (tally, details) = miscounted(round.batch, played);
    let judged = (tally.evidence(), details);
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
/// made no commit to put a fault on.
fn unfaultable(round: &Round, points: usize) -> Option<Finding> {
    if let Some(f) = trouble_finding(round, &round.normal, "played as is") {
        return Some(f);
    }
    (points == 0 && !round.batch.seated().is_empty()).then(|| Finding {
        evidence: "no invite commit".to_string(),
        scenario: format!("{}, played as is:", round.batch.name()),
        details: vec!["no invite committed anything, so there was nothing to replay.".to_string()],
        seed: round.batch.seed,
        ..Default::default()
    })
}

fn crash(round: &mut Round) -> Option<Finding> {
    if let Some(f) = unfaultable(round, round.crashes.len()) {
        return Some(f);
    }
    let batch = round.batch;
    let at = round
        .crashes
        .iter()
        .position(|p| p.trouble().is_some() || !miscounted(batch, p).1.is_empty())?;
    let played = round.crashes.remove(at);
    let fault = played
        .fault
        .as_ref()
        .map(Fault::describe)
        .unwrap_or_default();
    if let Some(f) = trouble_finding(round, &played, &fault) {
        return Some(f);
    }
    let (tally, details) = miscounted(batch, &played);
    let who = played.faulted();
    let whose = who
        .as_deref()
        .map(|w| format!(" ({w} → {})", batch.workspace_of(w)))
        .unwrap_or_default();
    Some(Finding {
        evidence: tally.evidence(),
        scenario: format!("{}, {fault}{whose}, then a restart:", batch.name()),
        details,
        seed: batch.seed,
        timeline: played.history.events,
        focus: who,
        story: Vec::new(),
    })
}

fn failing(round: &mut Round) -> Option<Finding> {
    if let Some(f) = unfaultable(round, round.failures.len()) {
        return Some(f);
    }
    let batch = round.batch;
    let told = |p: &Played| -> Option<String> {
        let who = p.faulted()?;
        (!p.is_member(&who) && p.emails_to(&who) > 0).then_some(who)
    };
    let sent: usize = round
        .failures
        .iter()
        .filter_map(|p| told(p).map(|who| p.emails_to(&who)))
        .sum();
    let at = round
        .failures
        .iter()
        .position(|p| p.trouble().is_some() || told(p).is_some())?;
    let played = round.failures.remove(at);
    let fault = played
        .fault
        .as_ref()
        .map(Fault::describe)
        .unwrap_or_default();
    if let Some(f) = trouble_finding(round, &played, &fault) {
        return Some(f);
    }
    let who = told(&played).expect("found above");
    let workspace = batch.workspace_of(&who);
    Some(Finding {
        evidence: format!("{sent} sent"),
        scenario: format!("{}, {fault} ({who} → {workspace}):", batch.name()),
        details: vec![format!(
            "{who} was told they joined {workspace}. The commit failed; they did not."
        )],
        seed: batch.seed,
        timeline: played.history.events,
        focus: Some(who),
        story: Vec::new(),
    })
}
