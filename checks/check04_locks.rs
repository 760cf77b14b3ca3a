//! Check 04: hold locks for a commit, not a send.
//!
//! Earlier invites have left emails waiting in the outbox. A relay process
//! starts sending them through a slow provider (a real sleep per send), and
//! at the same moment an invite process, on the same database, handles new
//! invites spread over the relay's sending window. Afterwards the relay runs
//! once more, with the provider fast again, to send what the new invites
//! queued. The check judges what the invites saw (their errors and how long
//! each one took, in real time) and who got which email. Besides the
//! chapter's batch, seeded random batches with other names, latencies and
//! sizes are played the same way, all at once. Real time is noisy, so a
//! batch whose invites failed or waited is played again, up to twice more,
//! and a timing failure counts only if every play shows it (a batch whose
//! every invite failed needs no replay: no stall explains that).

use anyhow::Result;

use super::invite_world::NAMES;
use super::invited::WORKSPACES;
use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::history::{read_pairs, History};
use lab::report::{judge, Finding};
use lab::rng::Rng;
use lab::runner::{scenario_dir, Case, Exit};
use lab::scenario::{Plan, ProviderScript, Step, APP_DB};
use lab::serve::SLEEP;
use lab::world::{Event, Kind};
use lab::{Invite, Worker};

pub const CHAPTER: Chapter = Chapter {
    number: 4,
    title: "hold locks for a commit, not a send",
    case_file: "cases/case04_locks.rs",
    text_file: "chapters/04-hold-locks-briefly.md",
    bin: "case04",
    shipped_hash: 0x14c0_426d_8871_ac19,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&super::invite_world::Generated, budget),
    bands: |history, _| lab::picture::bands(&super::invite_world::Generated, history),
};

const NO_FAILURE: &str = "no invite fails while the relay sends";
const SHORT_WAIT: &str = "no invite waits more than a quarter of a send";
const EXACTLY_ONE: &str = "every member gets exactly one email";
const RACED: &str = "each row goes to the provider once while two relays race (chapter 3)";

/// The busy timeout the shipped invite uses, in ms. The invites' schedule
/// is laid out around it: each one starts and ends well inside the relay's
/// sending window and well away from the moments the provider answers.
const SHIPPED_BUDGET_MS: u64 = 100;

/// Process numbers of a scenario's four case processes.
const SETUP: u32 = 1;
const RELAY: u32 = 2;
const INVITES: u32 = 3;
const NEXT_RELAY: u32 = 4;

/// A batch: who was invited earlier, who is invited while the relay sends,
/// and how slow the provider is.
struct Batch {
    /// `None` for the chapter's own batch.
    seed: Option<u64>,
    workspaces: Vec<(String, i64)>,
    /// Invited before the relay starts: their emails wait in the outbox.
    backlog: Vec<Invite>,
    /// Invited while the relay sends the backlog.
    invites: Vec<Invite>,
    /// Real time each send takes, in milliseconds.
    latency_ms: u64,
}

impl Batch {
    /// The chapter's batch: four emails waiting, three invites arriving,
    /// a provider that takes 300 ms a send.
    fn chapter() -> Batch {
        let invite = |name: &str| Invite {
            email: format!("{name}@example.com"),
            workspace: "ws_acme".to_string(),
        };
        Batch {
            seed: None,
            workspaces: vec![("ws_acme".into(), 20)],
            backlog: ["dana", "eli", "fay", "gus"].map(invite).to_vec(),
            invites: ["hal", "ivy", "jon"].map(invite).to_vec(),
            latency_ms: 300,
        }
    }

    /// A batch drawn from `seed`: other names and workspaces, 3 or 4 emails
    /// waiting and 2 or 3 invites (or one and one), 280 to 320 ms a send.
    fn random(seed: u64) -> Batch {
        let mut rng = Rng::new(seed);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let mut spaces = WORKSPACES.to_vec();
        rng.shuffle(&mut spaces);
        let waiting = rng.between(3, 4) as usize;
        let arriving = rng.between(2, waiting as u64 - 1) as usize;
        // One seed in three finds a lone email waiting, as a relay that
        // keeps up mostly does, and one invite comes during its send.
        let (waiting, arriving) = match seed % 3 {
            1 => (1, 1),
            _ => (waiting, arriving),
        };
        let latency_ms = rng.between(28, 32) * 10;
        let workspaces: Vec<(String, i64)> = spaces[..rng.between(1, 2) as usize]
            .iter()
            .map(|w| {
                (
                    w.to_string(),
                    (waiting + arriving) as i64 + rng.between(0, 3) as i64,
                )
            })
            .collect();
        let mut invites: Vec<Invite> = names[..waiting + arriving]
            .iter()
            .map(|name| Invite {
                email: format!("{name}@example.com"),
                workspace: rng.pick(&workspaces).0.clone(),
            })
            .collect();
        let arriving = invites.split_off(waiting);
        Batch {
            seed: Some(seed),
            workspaces,
            backlog: invites,
            invites: arriving,
            latency_ms,
        }
    }

    fn name(&self) -> String {
        match self.seed {
            None => "the chapter's batch".to_string(),
            Some(seed) => format!("random batch (seed {seed})"),
        }
    }

    /// "the chapter's batch: 3 invites while the relay sends 4 emails, 300 ms each"
    fn scenario(&self) -> String {
        format!(
            "{}: {} invites while the relay sends {} emails, {} ms each:",
            self.name(),
            self.invites.len(),
            self.backlog.len(),
            self.latency_ms
        )
    }

    /// The longest an invite may take, in µs: a quarter of one send.
    fn bound_us(&self) -> u64 {
        self.latency_ms * 1000 / 4
    }

    fn bound(&self) -> String {
        ms(self.bound_us())
    }

    fn workspace_of(&self, email: &str) -> &str {
        self.backlog
            .iter()
            .chain(&self.invites)
            .find(|i| i.email == email)
            .map(|i| i.workspace.as_str())
            .unwrap_or("?")
    }

    /// The four processes: the backlog's invites, then the slow relay and
    /// the new invites together, then the relay's next run.
    fn plans(&self, dir: &std::path::Path) -> [Plan; 4] {
        let plan = |process: u32, steps: Vec<Step>| Plan {
            dir: dir.to_path_buf(),
            process,
            steps,
            seed: self.seed.unwrap_or(0),
            ..Plan::default()
        };
        // The same relay, named as chapter 3 names them, on both of its runs.
        let relay = || Step {
            input: serde_json::to_value(Worker {
                name: "relay-1".into(),
            })
            .expect("a worker is plain data"),
            ..Step::new("relay")
        };
        let mut setup = plan(
            SETUP,
            self.backlog
                .iter()
                .map(|i| Step::with("invite", i, &i.email))
                .collect(),
        );
        setup.fixture = self
            .workspaces
            .iter()
            .map(|(id, seats)| {
                format!("INSERT INTO workspaces (id, free_seats) VALUES ('{id}', {seats})")
            })
            .collect();
        let mut slow = plan(RELAY, vec![relay()]);
        slow.provider = ProviderScript {
            latency_ms: self.latency_ms,
            ..ProviderScript::default()
        };
        // The first invite starts halfway between the relay's start and its
        // first answer from the provider, and the next ones one send later
        // each: a shipped invite that gives up after its budget does so well
        // before the next answer, and well inside the sending window.
        let first = (self.latency_ms - SHIPPED_BUDGET_MS) / 2;
        let pause = self.latency_ms - SHIPPED_BUDGET_MS;
        let mut steps = vec![sleep(first)];
        for (k, i) in self.invites.iter().enumerate() {
            if k > 0 {
                steps.push(sleep(pause));
            }
            steps.push(Step::with("invite", i, &i.email));
        }
        let invites = plan(INVITES, steps);
        let next = plan(NEXT_RELAY, vec![relay()]);
        [setup, slow, invites, next]
    }
}

/// The lab's own step that waits `ms` real milliseconds.
fn sleep(ms: u64) -> Step {
    Step {
        input: ms.into(),
        ..Step::new(SLEEP)
    }
}

/// "60 ms", "62.5 ms": a bound, in the fewest digits.
fn ms(us: u64) -> String {
    if us.is_multiple_of(1000) {
        format!("{} ms", us / 1000)
    } else {
        format!("{:.1} ms", us as f64 / 1000.0)
    }
}

/// A measured time, always with one decimal.
fn took(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

/// What one invite that arrived during the relay's sends saw.
struct Answer<'a> {
    invite: &'a Invite,
    /// The error it returned, if any.
    error: Option<String>,
    /// Real time the operation took, in µs.
    elapsed_us: u64,
}

impl Answer<'_> {
    fn busy(&self) -> bool {
        self.error
            .as_deref()
            .is_some_and(|e| e.contains("database is locked"))
    }
}

/// What one scenario left behind.
struct Played {
    /// Setup, slow relay, invites, next relay (the last ones are missing
    /// when an earlier process went wrong).
    exits: Vec<Exit>,
    history: History,
    members: Vec<String>,
}

impl Played {
    /// An ending no correct case has: a panic, a hang, an abort.
    fn trouble(&self) -> Option<String> {
        const WHO: [&str; 4] = [
            "the process adding the earlier invites",
            "the relay",
            "the invites' process",
            "the relay's next run",
        ];
        self.exits
            .iter()
            .zip(WHO)
            .find(|(exit, _)| **exit != Exit::Finished)
            .map(|(exit, who)| format!("{who} {}", exit.describe()))
    }

    fn is_member(&self, email: &str) -> bool {
        self.members.iter().any(|m| m == email)
    }

    /// The operation about `subject` in `process`: its error (if it
    /// failed) and its elapsed time; `None` if it never answered.
    fn answer(&self, process: u32, subject: &str) -> Option<(Option<String>, u64)> {
        self.history
            .events
            .iter()
            .find(|e| {
                e.process == process
                    && e.op.as_deref() == Some("invite")
                    && e.subject.as_deref() == Some(subject)
                    && matches!(e.kind, Kind::Return | Kind::Error)
            })
            .map(|e| {
                let error = (e.kind == Kind::Error).then(|| e.text.clone());
                (error, e.elapsed_us.unwrap_or(0))
            })
    }

    /// The invites that arrived while the relay was sending, with what each saw.
    fn answers<'a>(&self, batch: &'a Batch) -> Vec<Answer<'a>> {
        batch
            .invites
            .iter()
            .filter_map(|invite| {
                self.answer(INVITES, &invite.email)
                    .map(|(error, elapsed_us)| Answer {
                        invite,
                        error,
                        elapsed_us,
                    })
            })
            .collect()
    }

    /// The relay's run against the slow provider: (elapsed µs, emails sent).
    fn relay_run(&self, process: u32) -> (Option<u64>, usize) {
        let elapsed = self
            .history
            .events
            .iter()
            .find(|e| {
                e.process == process
                    && e.op.as_deref() == Some("relay")
                    && matches!(e.kind, Kind::Return | Kind::Error)
            })
            .and_then(|e| e.elapsed_us);
        let sent = self
            .history
            .emails()
            .filter(|d| d.process == process)
            .count();
        (elapsed, sent)
    }

    /// The relay's and the invites' events while they ran together, for
    /// the timeline. The invites' own commits are left out: one that waited
    /// commits a moment after the relay, and two processes' events that
    /// close together can be recorded in either order.
    fn together(&self) -> Vec<Event> {
        self.history
            .events
            .iter()
            .filter(|e| match e.process {
                RELAY => e.kind != Kind::Start,
                INVITES => !matches!(e.kind, Kind::Start | Kind::Commit),
                _ => false,
            })
            .cloned()
            .collect()
    }
}

fn play(case: &Case, batch: &Batch) -> Result<Played> {
    let dir = scenario_dir()?;
    let [setup, slow, invites, next] = batch.plans(dir.path());
    let mut exits = vec![case.start(&setup)?];
    if exits[0] == Exit::Finished {
        exits.extend(case.start_together(&[slow, invites])?);
        if exits.iter().all(|e| *e == Exit::Finished) {
            exits.push(case.start(&next)?);
        }
    }
    let history = History::read(dir.path())?;
    let members = if dir.path().join(APP_DB).exists() {
        read_pairs(dir.path(), "SELECT email, workspace FROM memberships")?
            .into_iter()
            .map(|(email, _)| email)
            .collect()
    } else {
        Vec::new()
    };
    Ok(Played {
        exits,
        history,
        members,
    })
}

/// `notify run 4`: the chapter's batch, once, told as a story.
fn run(case: &Case) -> Result<String> {
    let batch = Batch::chapter();
    let played = play(case, &batch)?;
    let mut out = format!(
        "the outbox holds {} emails; the relay starts sending them\nthe provider takes {} ms a send\n\nmeanwhile, {} invitations arrive:\n",
        batch.backlog.len(),
        batch.latency_ms,
        batch.invites.len()
    );
    let answers = played.answers(&batch);
    for invite in &batch.invites {
        let outcome = match answers.iter().find(|a| a.invite.email == invite.email) {
            None => "no answer".to_string(),
            Some(a) => match &a.error {
                None if played.is_member(&invite.email) => {
                    format!("added in {}", took(a.elapsed_us))
                }
                None => format!("answered ok after {}, not added", took(a.elapsed_us)),
                Some(err) => format!(
                    "failed after {}: {}",
                    took(a.elapsed_us),
                    lab::timeline::plain_error(err)
                ),
            },
        };
        out.push_str(&format!(
            "  {:<19}{:<10}{outcome}\n",
            invite.email, invite.workspace
        ));
    }
    let (elapsed, sent) = played.relay_run(RELAY);
    match elapsed {
        Some(us) => out.push_str(&format!(
            "\nthe relay took {} and sent {sent} emails\n",
            took(us)
        )),
        None => out.push_str(&format!(
            "\nthe relay never finished; it sent {sent} emails\n"
        )),
    }
    let (_, later) = played.relay_run(NEXT_RELAY);
    if played.exits.len() == 4 {
        out.push_str(&format!(
            "its next run sent {later} emails to the new members\n"
        ));
    }
    let failed = answers.iter().filter(|a| a.error.is_some()).count();
    let busy = answers.iter().filter(|a| a.busy()).count();
    out.push_str(&format!(
        "\ninvites that failed: {failed} of {}",
        batch.invites.len()
    ));
    if busy > 0 {
        let how_many = if busy == failed {
            "all".to_string()
        } else {
            busy.to_string()
        };
        out.push_str(&format!(", {how_many} with \"database is locked\""));
    }
    out.push('\n');
    if let Some(longest) = answers.iter().map(|a| a.elapsed_us).max() {
        out.push_str(&format!(
            "longest invite: {}, against {} ms for one send\n",
            took(longest),
            batch.latency_ms
        ));
    }
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// A timing failure, with how many invites it concerns: of two plays that
/// both fail, the smaller failure is the one reported.
type Counted = (usize, Finding);

/// Plays every batch at once: the scenarios spend their time in the
/// provider's sleeps, and played one after another they would take seconds
/// each.
fn play_all(case: &Case, batches: &[&Batch]) -> Result<Vec<Played>> {
    std::thread::scope(|scope| {
        let running: Vec<_> = batches
            .iter()
            .map(|&batch| scope.spawn(move || play(case, batch)))
            .collect();
        running
            .into_iter()
            .map(|handle| handle.join().expect("a scenario thread does not panic"))
            .collect()
    })
}

/// How many times at most a batch is played: once, and twice more while
/// every play of it fails a timing property.
const PLAYS: usize = 3;

/// Whether a batch must be played again before its timing failures count:
/// every play so far failed one of the timing properties. A case that could
/// not run, or whose relay sent nothing, needs no second opinion, and
/// neither does a batch whose every invite failed: no stall of the machine
/// explains that.
fn needs_replay(batch: &Batch, plays: &[Played]) -> bool {
    let first = &plays[0];
    let answers = first.answers(batch);
    let all_failed =
        answers.len() == batch.invites.len() && answers.iter().all(|a| a.error.is_some());
    let always = |judge: fn(&Batch, &Played) -> Option<Counted>| {
        plays.iter().all(|played| judge(batch, played).is_some())
    };
    untested(batch, first).is_none() && !all_failed && (always(failures) || always(waits))
}

/// A timing failure counts only if every play of the batch shows it: a
/// machine can stall a process for a moment, but a relay that holds its
/// lock across a send does it every time. Returns the smallest of the
/// failures, or `None` if any play passed.
fn confirmed(
    batch: &Batch,
    plays: &[Played],
    judge: fn(&Batch, &Played) -> Option<Counted>,
) -> Option<Finding> {
    let mut findings = Vec::new();
    for played in plays {
        findings.push(judge(batch, played)?);
    }
    findings
        .into_iter()
        .min_by_key(|(size, _)| *size)
        .map(|(_, f)| f)
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let batches: Vec<Batch> = std::iter::once(Batch::chapter())
        .chain(options.seeds.iter().map(|&s| Batch::random(s)))
        .collect();
    let mut plays: Vec<Vec<Played>> = play_all(case, &batches.iter().collect::<Vec<_>>())?
        .into_iter()
        .map(|played| vec![played])
        .collect();
    // Replay, all at once, every batch whose invites failed or waited in
    // every play so far, up to PLAYS plays in all.
    for _ in 1..PLAYS {
        let suspects: Vec<usize> = (0..batches.len())
            .filter(|&i| needs_replay(&batches[i], &plays[i]))
            .collect();
        if suspects.is_empty() {
            break;
        }
        let replays = play_all(
            case,
            &suspects.iter().map(|&i| &batches[i]).collect::<Vec<_>>(),
        )?;
        for (i, played) in suspects.into_iter().zip(replays) {
            plays[i].push(played);
        }
    }
    let processes: usize = plays.iter().flatten().map(|p| p.exits.len()).sum();

    let chapter = &batches[0];
    // The last play of the chapter's batch: a replay, if there was one,
    // shows everyone an earlier play's stall kept out.
    let members = plays[0].last().map_or(0, |p| p.members.len());
    let rounds: Vec<(&Batch, &[Played])> = batches
        .iter()
        .zip(&plays)
        .map(|(b, p)| (b, p.as_slice()))
        .collect();
    let mut verdicts = vec![
        judge(
            NO_FAILURE,
            format!("0 of {} failed", chapter.invites.len()),
            rounds.iter().find_map(|(b, p)| confirmed(b, p, failures)),
        ),
        judge(
            SHORT_WAIT,
            format!(
                "every invite under {}; a send takes {} ms",
                chapter.bound(),
                chapter.latency_ms
            ),
            rounds.iter().find_map(|(b, p)| confirmed(b, p, waits)),
        ),
        judge(
            EXACTLY_ONE,
            format!("{members} members, one email each"),
            rounds
                .iter()
                .find_map(|(b, p)| p.iter().find_map(|played| exactly_one(b, played))),
        ),
    ];
    // Chapter 3's race, after the timed plays, so that it does not slow them.
    let (raced, rows, race_processes) = super::check03_claim::replay_race(case)?;
    verdicts.push(judge(RACED, format!("{rows} sends for {rows} rows"), raced));
    let explored = lab::explore::explore(
        &super::invite_world::Generated,
        "04",
        case,
        options.reference.as_ref(),
        options.budget,
    )?;
    verdicts.extend(explored.verdicts);
    Ok(Checked {
        verdicts,
        processes: processes + race_processes + explored.processes,
    })
}

fn trouble_finding(batch: &Batch, played: &Played) -> Option<Finding> {
    played.trouble().map(|trouble| Finding {
        story: played.history.events.clone(),
        ..Finding::unfinished(format!("{}: {trouble}", batch.name()), batch.seed)
    })
}

/// The invites only meet the slow relay if it really sends the waiting
/// emails while they run: a relay that sent nothing tested nothing.
fn untested(batch: &Batch, played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(batch, played) {
        return Some(f);
    }
    let (_, sent) = played.relay_run(RELAY);
    (sent < batch.backlog.len()).then(|| Finding {
        evidence: "the relay did not send".to_string(),
        scenario: format!("{}, played as is:", batch.name()),
        details: vec![format!(
            "the relay sent {sent} of the {} waiting emails while the invites ran, so nothing was tested.",
            batch.backlog.len()
        )],
        seed: batch.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}

/// Invites that returned an error while the relay was sending.
fn failures(batch: &Batch, played: &Played) -> Option<Counted> {
    if let Some(f) = untested(batch, played) {
        return Some((0, f));
    }
    let answers = played.answers(batch);
    let failed: Vec<&Answer> = answers.iter().filter(|a| a.error.is_some()).collect();
    if failed.is_empty() {
        return None;
    }
    let evidence = format!("{} of {} failed", failed.len(), batch.invites.len());
    let finding = Finding {
        evidence,
        scenario: batch.scenario(),
        details: failed
            .iter()
            .map(|a| {
                let error = a.error.as_deref().unwrap_or_default();
                format!("{}: {}", a.invite.email, lab::timeline::plain_error(error))
            })
            .collect(),
        seed: batch.seed,
        timeline: played.together(),
        ..Default::default()
    };
    Some((failed.len(), finding))
}

/// Invites that took longer than a quarter of one send.
fn waits(batch: &Batch, played: &Played) -> Option<Counted> {
    if let Some(f) = untested(batch, played) {
        return Some((0, f));
    }
    let answers = played.answers(batch);
    let slow: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.elapsed_us > batch.bound_us())
        .collect();
    if slow.is_empty() {
        return None;
    }
    // One timeline per scenario: if the invites also failed, the first
    // property already drew it.
    let failed = answers.iter().any(|a| a.error.is_some());
    let finding = Finding {
        evidence: format!(
            "{} of {} took over {}",
            slow.len(),
            batch.invites.len(),
            batch.bound()
        ),
        scenario: batch.scenario(),
        details: slow
            .iter()
            .map(|a| format!("{} took {}", a.invite.email, took(a.elapsed_us)))
            .collect(),
        seed: batch.seed,
        timeline: if failed {
            Vec::new()
        } else {
            played.together()
        },
        story: played.history.events.clone(),
        ..Default::default()
    };
    Some((slow.len(), finding))
}

/// Members without exactly one email naming their workspace, and invites
/// that answered ok without adding anyone.
fn exactly_one(batch: &Batch, played: &Played) -> Option<Finding> {
    if let Some(f) = trouble_finding(batch, played) {
        return Some(f);
    }
    let (mut lost, mut twice, mut missing) = (0, 0, 0);
    let mut details = Vec::new();
    for (process, invites) in [(SETUP, &batch.backlog), (INVITES, &batch.invites)] {
        for invite in invites {
            let answered_ok = matches!(played.answer(process, &invite.email), Some((None, _)));
            if answered_ok && !played.is_member(&invite.email) {
                missing += 1;
                details.push(format!(
                    "{}'s invite answered ok, but they are not a member of {}.",
                    invite.email, invite.workspace
                ));
            }
        }
    }
    for member in &played.members {
        let workspace = batch.workspace_of(member);
        let about = played
            .history
            .emails_to(member)
            .filter(|e| e.body.contains(workspace))
            .count();
        match about {
            1 => {}
            0 => {
                lost += 1;
                details.push(format!("{member} joined {workspace} and got no email."));
            }
            n => {
                twice += 1;
                details.push(format!("{member} joined {workspace} and got {n} emails."));
            }
        }
    }
    if details.is_empty() {
        return None;
    }
    let evidence: Vec<String> = [
        (lost, "lost"),
        (twice, "sent more than once"),
        (missing, "invites not added"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    Some(Finding {
        evidence: evidence.join(", "),
        scenario: format!(
            "{}, then the relay's next run:",
            batch.scenario().trim_end_matches(':')
        ),
        details,
        seed: batch.seed,
        story: played.history.events.clone(),
        ..Default::default()
    })
}
