//! The generated world of chapters 1 and 2 for the explorer: one to twelve
//! invites over two to four workspaces with a few free seats (or none), so
//! that some invites roll back; now and then someone invited to a second
//! workspace; a relay that runs after every invite or only every few (and
//! always after the last), and sometimes a deploy midway, whose new process
//! runs the relay first, as the service does when it starts.
//!
//! Chapter 2's worlds go on: the relay runs again a minute after the last
//! invite and, in one world of two, the next day, past the provider's key
//! window; one in three starts a minute before midnight, so that a retry may
//! come on another day than the send it repeats.
//!
//! Faults go where each chapter's service survives them. Chapter 1: a crash
//! after any invite or relay commit (the restart's relay sends what the
//! outbox holds), and a failing invite commit (the invite is refused: owed
//! nothing); a crash after the provider accepted a relay send, or a failing
//! relay commit, sends an email twice, since the outbox is at-least-once
//! until chapter 2. Chapter 2 plays those too, and lost answers.
//!
//! A workspace with free seats never gets more invites than it has seats:
//! otherwise a refused invite would free a seat for a later one, which then
//! joins (and is told) where its fault-free run rolled back; the lab
//! compares every invite but the refused one with the fault-free run. Full
//! plans are the workspaces with no seat at all.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use lab::chapter::CheckOptions;
use lab::clock::{DEFAULT_START, MINUTE, SECOND};
use lab::explore::{
    explore, rules_of, Dimension, Explored, Explorer, FaultModel, Invariants, Observation, Rule,
    Run,
};
use lab::report::Verdict;
use lab::rng::Rng;
use lab::runner::Case;
use lab::scenario::{Plan, Step};
use lab::Invite;

use super::invite_world::{
    invite_dimensions, observe_invites, relayed_every, seat_fixture, Invites, Shape, NAMES,
    NEXT_DAY, RELAY_FAULTS,
};

/// No name is a prefix of another: an email names its workspace.
pub(crate) const WORKSPACES: [&str; 6] = [
    "ws_nova",
    "ws_delta",
    "ws_pine",
    "ws_harbor",
    "ws_quartz",
    "ws_ember",
];

/// How long a deploy keeps the service down: most are quick.
const DOWNTIMES: [i64; 4] = [0, 0, 10 * MINUTE, 3 * 60 * MINUTE];

/// 23:59:30 UTC, from the lab's default start at 18:00 UTC.
const BEFORE_MIDNIGHT: i64 = 6 * 60 * MINUTE - 30 * SECOND;

/// The explorer of chapter 1 (`Generated(1)`) or chapter 2 (`Generated(2)`).
pub(crate) struct Generated(pub u8);

/// A generated scenario.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Scenario {
    seed: u64,
    workspaces: Vec<(String, i64)>,
    invites: Vec<Invite>,
    /// The relay runs after every `relay_every`-th invite, and after the last.
    relay_every: usize,
    /// A deploy after this many invites: the process stops, and a new one
    /// starts with the relay and takes the rest.
    deploy_after: Option<usize>,
    /// Chapter 2's relay rounds after the last invite.
    #[serde(flatten)]
    later: Option<Later>,
    /// How long the service is down during the deploy, in ms: a deploy
    /// may take hours, and a row a failed send left waits that long.
    downtime: i64,
}

/// What chapter 2's worlds add after the last invite.
#[derive(Clone, Debug, Serialize)]
struct Later {
    /// Whether the relay runs once more the next day (it always runs a
    /// minute after the last invite).
    next_day: bool,
    /// When the scenario's clock starts, in UTC ms (the lab's default when
    /// `None`).
    starts_at: Option<i64>,
}

impl Scenario {
    fn generate(seed: u64, chapter: u8) -> Scenario {
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ chapter as u64);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let mut spaces = WORKSPACES.to_vec();
        rng.shuffle(&mut spaces);
        let workspaces: Vec<(String, i64)> = spaces[..rng.between(2, 4) as usize]
            .iter()
            .map(|w| {
                // Chapter 2: a full plan one time in three, else 1 to 4 seats.
                let seats = match chapter {
                    1 => rng.between(0, 4),
                    _ => rng.between(0, 5).saturating_sub(1),
                };
                (w.to_string(), seats as i64)
            })
            .collect();
        let count = rng.between(1, 12) as usize;
        let mut invites: Vec<Invite> = Vec::new();
        let mut fresh = names.into_iter();
        while invites.len() < count {
            // Someone already invited, to another workspace, now and then.
            let again = !invites.is_empty() && rng.between(0, 3) == 0;
            let email = if again {
                rng.pick(&invites).email.clone()
            } else {
                match fresh.next() {
                    Some(name) => format!("{name}@example.com"),
                    None => break,
                }
            };
            let open: Vec<&String> = workspaces
                .iter()
                .filter(|(w, seats)| {
                    let taken = invites.iter().filter(|i| i.workspace == *w).count() as i64;
                    let twice = invites
                        .iter()
                        .any(|i| i.email == email && i.workspace == *w);
                    !twice && (*seats == 0 || taken < *seats)
                })
                .map(|(w, _)| w)
                .collect();
            if open.is_empty() {
                if again {
                    continue;
                }
                break;
            }
            let workspace = rng.pick(&open).to_string();
            invites.push(Invite { email, workspace });
        }
        // One world in three makes an invite twice (a double click, a
        // request retried): the person is already a member, so the second
        // owes nothing, neither a seat nor an email, whatever it answers.
        // From a stream of its own, so the rest is drawn as before.
        let mut twice = Rng::new(seed ^ 0x0101_2e9e_a700);
        if !invites.is_empty() && twice.between(0, 2) == 0 {
            let first = twice.between(0, invites.len() as u64 - 1) as usize;
            let at = twice.between(first as u64 + 1, invites.len() as u64) as usize;
            invites.insert(at, invites[first].clone());
        }
        let relay_every = rng.between(1, 4) as usize;
        let deploy_after = (invites.len() > 1 && rng.between(0, 2) == 0)
            .then(|| rng.between(1, invites.len() as u64 - 1) as usize);
        let later = (chapter == 2).then(|| Later {
            next_day: rng.between(0, 1) == 0,
            // From a stream of its own, so the rest is drawn as before.
            starts_at: (Rng::new(seed ^ 0x0202_2359_0000).between(0, 2) == 0)
                .then_some(DEFAULT_START + BEFORE_MIDNIGHT),
        });
        // From a stream of its own, so the rest is drawn as before: most
        // deploys are quick, some keep the service down for hours (within
        // the provider's key window).
        let downtime = *Rng::new(seed ^ 0x0d0e_0f10_0000).pick(&DOWNTIMES);
        Scenario {
            seed,
            workspaces,
            invites,
            relay_every,
            deploy_after,
            later,
            downtime,
        }
    }

    /// Who an invite is about, in the step and in the verdicts.
    fn subject(invite: &Invite) -> String {
        format!("{} → {}", invite.email, invite.workspace)
    }

    /// Whether invite `n` repeats an earlier one: its step is named apart,
    /// so that its refusal refuses nothing the first one asked for.
    fn again(&self, n: usize) -> bool {
        self.invites[..n].contains(&self.invites[n])
    }

    /// The steps of invites `range`: each invite, and the relay after every
    /// `relay_every`-th and after the last.
    fn steps(&self, range: std::ops::Range<usize>) -> Vec<Step> {
        let mut steps = Vec::new();
        for n in range {
            let invite = &self.invites[n];
            let mut subject = Scenario::subject(invite);
            if self.again(n) {
                subject.push_str(" (again)");
            }
            steps.push(Step::with("invite", invite, &subject));
            if (n + 1) % self.relay_every == 0 || n + 1 == self.invites.len() {
                steps.push(Step::new("relay"));
            }
        }
        steps
    }

    fn plans(&self, dir: &Path) -> Vec<Plan> {
        let cut = self.deploy_after.unwrap_or(self.invites.len());
        let mut plans = vec![Plan {
            dir: dir.to_path_buf(),
            process: 1,
            fixture: seat_fixture(&self.workspaces),
            steps: self.steps(0..cut),
            ..Plan::default()
        }];
        if cut < self.invites.len() {
            let mut steps = Vec::new();
            if self.downtime > 0 {
                steps.push(Step::advance(self.downtime));
            }
            steps.push(Step::new("relay"));
            steps.extend(self.steps(cut..self.invites.len()));
            plans.push(Plan {
                dir: dir.to_path_buf(),
                process: 2,
                steps,
                ..Plan::default()
            });
        }
        if let Some(later) = &self.later {
            for plan in &mut plans {
                plan.starts_at = later.starts_at;
            }
            let last = plans.last_mut().expect("a scenario has a process");
            last.steps
                .extend([Step::advance(MINUTE), Step::new("relay")]);
            if later.next_day {
                last.steps
                    .extend([Step::advance(NEXT_DAY), Step::new("relay")]);
            }
        }
        plans
    }

    /// The scenario without invite `n`.
    fn without(&self, n: usize) -> Scenario {
        let mut invites = self.invites.clone();
        invites.remove(n);
        let deploy_after = self
            .deploy_after
            .map(|d| if n < d { d - 1 } else { d })
            .filter(|d| *d > 0 && *d < invites.len());
        Scenario {
            invites,
            deploy_after,
            ..self.clone()
        }
    }

    /// "ws_nova 2 seats, ws_pine no seat; dana → ws_nova, eli → ws_pine;
    /// the relay runs after every 2nd invite and after the last; a deploy
    /// after invite 1" (chapter 2 adds "a minute later", "the next day" and
    /// a start before midnight).
    fn describe(&self) -> String {
        let invites = &self.invites;
        let seats: Vec<String> = self
            .workspaces
            .iter()
            .filter(|(w, _)| invites.iter().any(|i| i.workspace == *w))
            .map(|(w, n)| match n {
                0 => format!("{w} no seat"),
                1 => format!("{w} 1 seat"),
                n => format!("{w} {n} seats"),
            })
            .collect();
        let invited: Vec<String> = invites
            .iter()
            .enumerate()
            .map(|(n, i)| {
                let name = i.email.split('@').next().unwrap_or(&i.email);
                let again = if self.again(n) { " again" } else { "" };
                format!("{name} → {}{again}", i.workspace)
            })
            .collect();
        let mut when = match self.relay_every {
            1 => vec!["after every invite".to_string()],
            k => {
                let nth = match k {
                    2 => "2nd".to_string(),
                    3 => "3rd".to_string(),
                    k => format!("{k}th"),
                };
                vec![format!("after every {nth} invite"), "after the last".into()]
            }
        };
        let mut midnight = "";
        if let Some(later) = &self.later {
            when.push("a minute later".to_string());
            if later.next_day {
                when.push("the next day".to_string());
            }
            if later.starts_at.is_some() {
                midnight = "; it starts at 23:59:30 UTC";
            }
        }
        let last = when.pop().unwrap_or_default();
        let runs = match when.is_empty() {
            true => last,
            false => format!("{} and {last}", when.join(", ")),
        };
        let deploy = match (self.deploy_after, self.downtime) {
            (None, _) => String::new(),
            (Some(d), 0) => format!("; a deploy after invite {d}"),
            (Some(d), down) => format!(
                "; a deploy after invite {d}, the service down for {}",
                lab::explore::span(down)
            ),
        };
        format!(
            "{}; {}; the relay runs {runs}{deploy}{midnight}",
            seats.join(", "),
            invited.join(", "),
        )
    }
}

impl Invites for Scenario {
    fn shape(&self) -> Shape {
        relayed_every(
            &self.workspaces,
            &self.invites,
            self.relay_every,
            self.deploy_after,
        )
    }
}

/// The invite world's situations: chapter 1's.
const DIMENSIONS_1: &[Dimension<Scenario>] = {
    const SHARED: [Dimension<Scenario>; 6] = invite_dimensions::<Scenario>();
    &[
        SHARED[0],
        SHARED[1],
        SHARED[2],
        SHARED[3],
        SHARED[4],
        SHARED[5],
        TWICE,
        LONG_DEPLOY,
    ]
};

/// A deploy that keeps the service down for hours after a relay pass: a
/// row a failed send left waits that long, and must still go out.
const LONG_DEPLOY: Dimension<Scenario> = Dimension {
    name: "a deploy that keeps the service down for hours, after a relay whose send may fail",
    reached: |s| {
        s.deploy_after.is_some_and(|after| after >= s.relay_every) && s.downtime >= 60 * MINUTE
    },
};

/// An invite made twice: the second owes nothing.
const TWICE: Dimension<Scenario> = Dimension {
    name: "an invite made twice (a double click, a request retried)",
    reached: |s| (0..s.invites.len()).any(|n| s.again(n)),
};

/// The invite world's situations, and one of chapter 2's own.
const DIMENSIONS_2: &[Dimension<Scenario>] = {
    const SHARED: [Dimension<Scenario>; 6] = invite_dimensions::<Scenario>();
    &[
        SHARED[0],
        SHARED[1],
        SHARED[2],
        SHARED[3],
        SHARED[4],
        SHARED[5],
        TWICE,
        Dimension {
            name: "a relay a minute before midnight, so a retry may come on the next day",
            reached: |s| s.later.as_ref().is_some_and(|l| l.starts_at.is_some()),
        },
        LONG_DEPLOY,
    ]
};

impl Explorer for Generated {
    type Scenario = Scenario;

    fn generate(&self, seed: u64) -> Scenario {
        Scenario::generate(seed, self.0)
    }

    fn plans(&self, scenario: &Scenario, dir: &Path) -> Vec<Plan> {
        scenario.plans(dir)
    }

    fn startup(&self) -> Vec<Step> {
        vec![Step::new("relay")]
    }

    fn faults(&self) -> FaultModel {
        match self.0 {
            1 => FaultModel {
                crash_after_commit: &["invite", "relay"],
                fail_commit: &["invite"],
                crash_after_send: &[],
                requests: &["invite"],
                keep_answers: false,
                lose_send: &[],
                // No key yet: a request lost on its way, never an answer.
                lose_request: &["relay"],
                strands: &[],
            },
            _ => RELAY_FAULTS,
        }
    }

    fn dimensions(&self) -> &'static [Dimension<Scenario>] {
        match self.0 {
            1 => DIMENSIONS_1,
            _ => DIMENSIONS_2,
        }
    }

    fn invariants(&self) -> Invariants {
        // Every scenario ends with a relay (chapter 2's with one a minute
        // after the last), and a restart begins with one, so the reference
        // leaves no row unsent once idle, even when a relay commit failed.
        // Chapter 2's key is judged from chapter 2 on.
        Invariants {
            told_once: true,
            settled: true,
            keyed: self.0 >= 2,
            recorded: self.0 >= 2,
            retry_gaps: &[],
            ..Invariants::default()
        }
    }

    fn observe(&self, scenario: &Scenario, run: &Run) -> Result<Observation> {
        observe_invites(&scenario.invites, run)
    }

    fn shrink(&self, scenario: &Scenario) -> Vec<Scenario> {
        let n = scenario.invites.len();
        // Most failures need one invite: try each alone first, then cut.
        let mut smaller: Vec<Scenario> = (0..n)
            .filter(|_| n > 1)
            .map(|keep| {
                (0..n)
                    .rev()
                    .filter(|i| *i != keep)
                    .fold(scenario.clone(), |s, drop| s.without(drop))
            })
            .collect();
        if scenario.deploy_after.is_some() {
            smaller.push(Scenario {
                deploy_after: None,
                ..scenario.clone()
            });
        }
        if scenario.downtime > 0 {
            smaller.push(Scenario {
                downtime: 0,
                ..scenario.clone()
            });
        }
        if let Some(later) = scenario.later.as_ref().filter(|l| l.next_day) {
            smaller.push(Scenario {
                later: Some(Later {
                    next_day: false,
                    ..later.clone()
                }),
                ..scenario.clone()
            });
        }
        if n > 3 {
            for keep in [0..n / 2, n / 2..n] {
                let mut half = scenario.clone();
                for drop in (0..n).rev().filter(|i| !keep.contains(i)) {
                    half = half.without(drop);
                }
                smaller.push(half);
            }
        }
        if n > 1 {
            smaller.extend((0..n).map(|i| scenario.without(i)));
        }
        if scenario.relay_every > 1 {
            smaller.push(Scenario {
                relay_every: 1,
                ..scenario.clone()
            });
        }
        smaller
    }

    fn describe(&self, scenario: &Scenario) -> String {
        scenario.describe()
    }
}

impl Generated {
    /// The explorer's verdicts. None is played when the case did not finish
    /// the chapter's batch (`trouble`): every generated scenario would end
    /// the same way, and prove nothing; each property fails with that.
    pub(crate) fn explored(
        &self,
        case: &Case,
        options: &CheckOptions,
        trouble: Option<String>,
    ) -> Result<Explored> {
        let Some(trouble) = trouble else {
            let chapter = format!("{:02}", self.0);
            return explore(
                self,
                &chapter,
                case,
                options.reference.as_ref(),
                options.budget,
            );
        };
        let verdicts = rules_of(self)
            .into_iter()
            .filter(|rule| *rule != Rule::Agrees || options.reference.is_some())
            .map(|rule| {
                Verdict::fail(
                    rule.property(),
                    "the case did not finish".to_string(),
                    format!(
                        "the chapter's batch, played as is: {trouble}; no generated scenario was played"
                    ),
                    Vec::new(),
                )
            })
            .collect();
        Ok(Explored {
            verdicts,
            processes: 0,
        })
    }
}
