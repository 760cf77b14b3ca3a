//! Check 09: decide: preferences and quiet hours.
//!
//! People in five time zones hear about their events by email and by push.
//! Some have turned a channel off for a kind of notification; some change
//! their mind while a message waits. Notices come through a night on which
//! a country changes its clocks, so quiet hours (22:00 to 08:00 on the
//! person's own clock) are an hour shorter or longer than usual there. The
//! dispatcher wakes every minute. The check reads every send the providers
//! saw, turns its simulated time into the recipient's local time (with the
//! IANA time zone database, through jiff), and judges: nothing on a channel
//! turned off, no push in quiet hours, every held push sent by 08:02, and a
//! security alert at once on every channel whatever the rest says.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::{instant, MINUTE, SECOND};
use lab::explore::hms as clock;
use lab::explore::{
    explore, Dimension, Explorer, Fate, FaultModel, Invariants, Observation, Row, Run,
};
use lab::history::{read_ledger, read_outbox, History, Queued, CANCELLED};
use lab::picture::{Band, Tone};
use lab::report::{counted, first_found, judge, Finding};
use lab::rng::Rng;
use lab::runner::{first_trouble, in_parallel, scenario_dir, Case, Exit};
use lab::scenario::{Plan, ProviderScript, Step};
use lab::serve::Schedule;
use lab::world::Outcome;

use super::dispatch_world::{answered, provider, Script, RETRY_GAPS};

pub const CHAPTER: Chapter = Chapter {
    number: 9,
    title: "decide: preferences and quiet hours",
    case_file: "cases/case09_decide.rs",
    text_file: "chapters/09-decide-preferences-and-quiet-hours.md",
    bin: "case09",
    shipped_hash: 0xc5a8_66f9_8e0d_177c,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&Generated, budget),
    bands,
};

const OPTED_OUT: &str =
    "nothing goes out on a channel its recipient turned off for that kind, before it was published or at any moment since; what is withdrawn ends CANCELLED, not as a dead letter";
const QUIET: &str =
    "no push other than a security alert between 22:00 and 08:00 on its recipient's clock";
const HELD: &str =
    "every push held for quiet hours is still sent, by 08:02 on its recipient's clock";
const CRITICAL: &str =
    "a security alert goes out at once, on every channel, whatever the hour and the preferences";

/// How often the dispatcher wakes up.
const WAKE_UP: i64 = MINUTE;
/// How late after 08:00 a held push may go: two wake-ups, room for a
/// provider that fails it once or twice.
const PROMPT: i64 = 2 * WAKE_UP;
/// The gaps between attempts (chapter 5).
/// The kind nobody can turn off or delay.
const SECURITY: &str = "security_alert";
const KINDS: [&str; 3] = ["date_chosen", "comment", "event_cancelled"];
const CHANNELS: [&str; 2] = ["email", "push"];

/// A night on which a time zone changes its clocks: the scenario's clock
/// starts at `starts_at` (UTC, ms since the UNIX epoch).
#[derive(Clone, Copy, Debug, Serialize)]
struct Night {
    name: &'static str,
    starts_at: i64,
}

/// 2026-03-28 20:00 UTC: Paris moves from 02:00 to 03:00 at 01:00 UTC.
const PARIS_SPRING: Night = Night {
    name: "the night of 28 March 2026, when Paris moves its clocks forward",
    starts_at: 1_774_728_000_000,
};
/// 2026-10-24 19:00 UTC: Paris moves from 03:00 back to 02:00 at 01:00 UTC.
const PARIS_FALL: Night = Night {
    name: "the night of 24 October 2026, when Paris moves its clocks back",
    starts_at: 1_792_868_400_000,
};
/// 2026-11-01 00:00 UTC: New York moves from 02:00 back to 01:00 at 06:00 UTC.
const NEW_YORK_FALL: Night = Night {
    name: "the night of 31 October 2026, when New York moves its clocks back",
    starts_at: 1_793_491_200_000,
};
/// 2026-03-08 00:00 UTC: New York moves from 02:00 to 03:00 at 07:00 UTC.
const NEW_YORK_SPRING: Night = Night {
    name: "the night of 7 March 2026, when New York moves its clocks forward",
    starts_at: 1_772_928_000_000,
};
/// 2026-04-04 09:00 UTC: Sydney moves from 03:00 back to 02:00 at 16:00 UTC.
const SYDNEY_FALL: Night = Night {
    name: "the night of 4 April 2026, when Sydney moves its clocks back",
    starts_at: 1_775_293_200_000,
};
/// 2026-10-03 09:00 UTC: Sydney moves from 02:00 to 03:00 at 16:00 UTC.
const SYDNEY_SPRING: Night = Night {
    name: "the night of 3 October 2026, when Sydney moves its clocks forward",
    starts_at: 1_791_018_000_000,
};
const NIGHTS: [Night; 6] = [
    PARIS_SPRING,
    PARIS_FALL,
    NEW_YORK_FALL,
    NEW_YORK_SPRING,
    SYDNEY_FALL,
    SYDNEY_SPRING,
];

const ZONES: [&str; 5] = [
    "Europe/Paris",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
    "Asia/Kolkata",
];

#[derive(Clone, Debug, Serialize)]
struct Person {
    name: String,
    zone: &'static str,
    /// (kind, channel) turned off before the scenario begins.
    off: Vec<(String, String)>,
    email: Script,
    push: Script,
}

impl Person {
    fn recipient(&self, channel: &str) -> String {
        match channel {
            "push" => format!("{}-phone", self.name),
            _ => format!("{}@example.com", self.name),
        }
    }

    fn script(&self, channel: &str) -> Script {
        match channel {
            "push" => self.push,
            _ => self.email,
        }
    }
}

/// Something published for one person, at a simulated time.
#[derive(Clone, Debug, Serialize)]
struct Notice {
    /// Its number in the scenario: `#3`.
    number: usize,
    person: String,
    kind: &'static str,
    at: i64,
}

impl Notice {
    fn text(&self) -> String {
        let what = match self.kind {
            "date_chosen" => "Book club: Thursday 19:00 it is",
            "comment" => "Lena commented on the climbing trip",
            "event_cancelled" => "Board games on Friday is cancelled",
            _ => "New sign-in to your account",
        };
        format!("{what} (#{})", self.number)
    }

    /// The publish step's subject, contained in each of its fates' names.
    fn subject(&self) -> String {
        format!("#{} {}", self.number, self.person)
    }

    fn critical(&self) -> bool {
        self.kind == SECURITY
    }
}

/// A person turning a channel on or off for a kind, at a simulated time.
#[derive(Clone, Debug, Serialize)]
struct Change {
    person: String,
    kind: &'static str,
    channel: &'static str,
    enabled: bool,
    at: i64,
}

/// A night's notices for a few people.
#[derive(Clone, Debug, Serialize)]
struct Batch {
    /// `None` for the chapter's own nights.
    seed: Option<u64>,
    night: Night,
    people: Vec<Person>,
    notices: Vec<Notice>,
    changes: Vec<Change>,
    /// A deploy: the first process stops here and a new one carries on.
    restart_at: Option<i64>,
}

fn person(name: &str, zone: &'static str, off: &[(&str, &str)]) -> Person {
    Person {
        name: name.to_string(),
        zone,
        off: off
            .iter()
            .map(|(k, c)| (k.to_string(), c.to_string()))
            .collect(),
        email: Script::Fine,
        push: Script::Fine,
    }
}

/// The `changes` that change something, in their order: a switch is kept
/// when it turns its channel to what it was not just before, counting the
/// person's settings and the switches kept before it.
fn effective(people: &[Person], changes: Vec<Change>) -> Vec<Change> {
    let mut order: Vec<usize> = (0..changes.len()).collect();
    order.sort_by_key(|&i| changes[i].at);
    let mut state: BTreeMap<(&str, &str, &str), bool> = BTreeMap::new();
    let mut keep = vec![false; changes.len()];
    for i in order {
        let c = &changes[i];
        let on = state
            .entry((&c.person, c.kind, c.channel))
            .or_insert_with(|| {
                !people.iter().any(|p| {
                    p.name == c.person && p.off.contains(&(c.kind.into(), c.channel.into()))
                })
            });
        if *on != c.enabled {
            *on = c.enabled;
            keep[i] = true;
        }
    }
    changes
        .into_iter()
        .zip(keep)
        .filter_map(|(c, kept)| kept.then_some(c))
        .collect()
}

fn notice(number: usize, person: &str, kind: &'static str, at: i64) -> Notice {
    Notice {
        number,
        person: person.to_string(),
        kind,
        at,
    }
}

const HOUR: i64 = 60 * MINUTE;

impl Batch {
    /// The chapter's night (Paris moves its clocks forward), from 20:00 UTC.
    fn chapter() -> Batch {
        let mut ben = person("ben", "America/New_York", &[]);
        ben.push = Script::Flaky(2);
        Batch {
            seed: None,
            night: PARIS_SPRING,
            people: vec![
                person("ada", "Europe/Paris", &[("date_chosen", "email")]),
                ben,
                person("cleo", "Asia/Tokyo", &[]),
                person("dev", "Australia/Sydney", &[("date_chosen", "push")]),
                person("emma", "Asia/Kolkata", &[("security_alert", "push")]),
            ],
            notices: vec![
                notice(1, "ada", "date_chosen", 0),
                notice(2, "cleo", "date_chosen", 0),
                notice(3, "dev", "date_chosen", 0),
                notice(4, "emma", "security_alert", 30 * MINUTE),
                notice(5, "ada", "comment", 2 * HOUR),
                notice(6, "ben", "comment", 5 * HOUR + 58 * MINUTE),
            ],
            changes: vec![
                Change {
                    person: "dev".to_string(),
                    kind: "date_chosen",
                    channel: "push",
                    enabled: true,
                    at: 20 * MINUTE,
                },
                Change {
                    person: "cleo".to_string(),
                    kind: "date_chosen",
                    channel: "push",
                    enabled: false,
                    at: HOUR,
                },
            ],
            restart_at: None,
        }
    }

    /// Paris moves its clocks back, from 19:00 UTC: a comment at 23:00 waits
    /// for 08:00 on the winter clock, ten hours later.
    fn autumn() -> Batch {
        Batch {
            seed: None,
            night: PARIS_FALL,
            people: vec![
                person("ada", "Europe/Paris", &[]),
                person("jon", "Asia/Kolkata", &[("comment", "push")]),
            ],
            notices: vec![
                notice(1, "ada", "comment", 2 * HOUR),
                notice(2, "jon", "comment", 2 * HOUR),
                notice(3, "ada", "security_alert", 4 * HOUR),
            ],
            changes: vec![Change {
                person: "ada".to_string(),
                kind: "event_cancelled",
                channel: "push",
                enabled: false,
                at: 3 * HOUR,
            }],
            restart_at: None,
        }
    }

    /// A night drawn from `seed` over the chapter's whole world.
    fn generated(seed: u64) -> Batch {
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 9);
        let night = *rng.pick(&NIGHTS);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let count = rng.between(1, 4) as usize;
        // How many times a flaky address fails, from a stream of its own so
        // the rest is drawn as before: up to three, the most a row's four
        // attempts survive, so a hold that costs an attempt shows.
        let mut deep = Rng::new(seed ^ 0x0909_f1a6_0003);
        let mut people: Vec<Person> = names[..count]
            .iter()
            .map(|name| {
                let zone = *rng.pick(&ZONES);
                let mut off = Vec::new();
                if rng.between(0, 2) == 0 {
                    let kind = *rng.pick(&[KINDS[0], KINDS[1], KINDS[2], SECURITY]);
                    off.push((kind.to_string(), rng.pick(&CHANNELS).to_string()));
                }
                let mut script = || match rng.between(0, 5) {
                    0 => {
                        let n = rng.between(1, 2) as u32;
                        Script::Flaky(n.max(deep.between(1, 3) as u32))
                    }
                    _ => Script::Fine,
                };
                Person {
                    name: name.to_string(),
                    zone,
                    off,
                    email: script(),
                    push: script(),
                }
            })
            .collect();
        let count = rng.between(1, 6) as usize;
        let mut notices: Vec<Notice> = (1..=count)
            .map(|number| {
                let p = rng.pick(&people);
                let kind = match rng.between(0, 7) {
                    0 => SECURITY,
                    _ => *rng.pick(&KINDS),
                };
                // Some land a few minutes either side of 22:00 or 08:00 on
                // the person's clock, at any second, so that the wake-up
                // after a publish may fall on the other side of the edge;
                // the rest anywhere in eight hours.
                let at = match rng.between(0, 3) {
                    0 => {
                        let edge = local_edge(night, p.zone, rng.between(0, 1) == 0);
                        (edge + (rng.between(0, 360) as i64 - 180) * SECOND).max(0)
                    }
                    _ => rng.between(0, 480) as i64 * MINUTE,
                };
                notice(number, &p.name, kind, at)
            })
            .collect();
        let changes = (0..rng.between(0, 2))
            .map(|_| {
                let n = rng.pick(&notices);
                Change {
                    person: n.person.clone(),
                    kind: n.kind,
                    channel: CHANNELS[rng.between(0, 1) as usize],
                    enabled: rng.between(0, 2) != 0,
                    at: rng.between(0, 480) as i64 * MINUTE,
                }
            })
            .collect();
        let mut changes = effective(&people, changes);
        let mut restart_at = (rng.between(0, 2) == 0).then(|| rng.between(1, 600) as i64 * MINUTE);
        // Every other seed, one more person gets a notice, not an alert,
        // at the time of another one: their email fails three times (the
        // third retry waits 5 min), and their phone is refused for good (no
        // retry at all). A deploy comes a few seconds after the email's
        // first failed attempt, or, on the next such seed, after its second:
        // the new process wakes at once, while the retry must still wait its
        // backoff (5 s after the first failure, 30 s after the second).
        if seed % 2 == 1 {
            let zone = *rng.pick(&ZONES);
            let mut extra = person(names[people.len()], zone, &[]);
            extra.email = Script::Flaky(3);
            extra.push = Script::Refused;
            let at = rng.pick(&notices).at;
            let kind = *rng.pick(&KINDS);
            notices.push(notice(notices.len() + 1, &extra.name, kind, at));
            people.push(extra);
            let failures = (seed / 2 % 2) as i64;
            restart_at = Some(at + failures * WAKE_UP + rng.between(2, 4) as i64 * SECOND);
            // Half of them (from a stream of their own) turn push off for
            // that kind a few minutes later, once their phone's refusal
            // made the push a dead letter: it stays one.
            let mut later = Rng::new(seed ^ 0x0909_dead_1e77);
            if later.between(0, 1) == 0 && kind != SECURITY {
                changes.push(Change {
                    person: names[people.len() - 1].to_string(),
                    kind,
                    channel: "push",
                    enabled: false,
                    at: at + later.between(2, 5) as i64 * MINUTE + 17 * SECOND,
                });
            }
        }
        let mut batch = Batch {
            seed: Some(seed),
            night,
            people,
            notices,
            changes,
            restart_at,
        };
        batch.opt_out_while_waiting(seed);
        batch.changes = effective(&batch.people, std::mem::take(&mut batch.changes));
        batch.fails_into_the_night(seed);
        batch
    }

    /// A third of the worlds (drawn from a stream of their own, so the
    /// rest is drawn as before) have one more person, whose phone fails
    /// their only push three times, published a minute or two before 22:00
    /// on their clock. Its retries run into quiet hours and wait for the
    /// morning; only its fourth attempt goes through, so a hold that costs
    /// an attempt leaves it a dead letter.
    fn fails_into_the_night(&mut self, seed: u64) {
        let mut rng = Rng::new(seed ^ 0x0909_22f1_a3c0);
        if rng.between(0, 2) != 0 {
            return;
        }
        let Some(name) = NAMES
            .iter()
            .find(|n| !self.people.iter().any(|p| p.name == **n))
        else {
            return;
        };
        let zone = *rng.pick(&ZONES);
        let mut late = person(name, zone, &[]);
        late.push = Script::Flaky(3);
        let at = local_edge(self.night, zone, true) - rng.between(1, 2) as i64 * MINUTE;
        let kind = *rng.pick(&KINDS);
        self.notices
            .push(notice(self.notices.len() + 1, name, kind, at.max(0)));
        self.people.push(late);
    }

    /// Half the worlds (drawn from a stream of their own, so the rest of
    /// the world is drawn as before) have one more switch: someone turns a
    /// channel off for a kind while a message of that kind waits on it, to
    /// be retried (its first sends fail) or for the morning. The opt-out
    /// must win: the rules speak of a switch made "since", not only of one
    /// made before the publish or at the send.
    fn opt_out_while_waiting(&mut self, seed: u64) {
        let mut rng = Rng::new(seed ^ 0x0909_5717_c4e5);
        if rng.between(0, 1) == 1 {
            return;
        }
        let n = rng.pick(&self.notices).clone();
        let channel = *rng.pick(&CHANNELS);
        let untouched = !self
            .changes
            .iter()
            .any(|c| c.person == n.person && c.kind == n.kind && c.channel == channel);
        // The person's first message: a provider fails an address's first
        // sends, whichever message they carry, and an earlier one would
        // take the failures or not as a fault refuses its publish or not.
        let first = !self
            .notices
            .iter()
            .any(|o| o.person == n.person && o.number != n.number && o.at <= n.at);
        // A security alert is drawn too: rule 6 says no opt-out withdraws
        // it, and a fix that withdraws whatever waits must not take it.
        if !untouched || !first || !(n.critical() || self.enabled(&n.person, n.kind, channel, n.at))
        {
            return;
        }
        let failures = rng.between(1, 2) as u32;
        let person = self
            .people
            .iter_mut()
            .find(|p| p.name == n.person)
            .expect("a notice names a person of its batch");
        let script = match channel {
            "push" => &mut person.push,
            _ => &mut person.email,
        };
        if *script == Script::Fine {
            *script = Script::Flaky(failures);
        }
        // Within the two minutes its retries take, never on a wake-up.
        let seconds = rng.between(1, 118) as i64;
        let seconds = seconds + i64::from(seconds >= 60);
        let off_at = n.at + seconds * SECOND;
        self.changes.push(Change {
            person: n.person.clone(),
            kind: n.kind,
            channel,
            enabled: false,
            at: off_at,
        });
        // Half the time (from a stream of their own) someone else, in the
        // same zone and with the same luck with their provider, has a
        // message of the same kind waiting on the same channel: the
        // opt-out withdraws this person's message, never theirs.
        let mut next_door = Rng::new(seed ^ 0x0909_4e1b_0c0d);
        let free = NAMES
            .iter()
            .find(|name| !self.people.iter().any(|p| p.name == **name));
        if let (0, Some(name)) = (next_door.between(0, 1), free) {
            let mut neighbour = self::person(name, self.person(&n.person).zone, &[]);
            let mine = self.person(&n.person);
            neighbour.email = mine.email;
            neighbour.push = mine.push;
            self.notices
                .push(notice(self.notices.len() + 1, name, n.kind, n.at));
            self.people.push(neighbour);
        }
        // Half of these people (drawn from a stream of their own) turn it
        // back on before the message's next attempt: the opt-out still
        // wins, since an opt-in brings nothing back.
        let mut back = Rng::new(seed ^ 0x0909_0b0b_a0a0);
        let before_wake = (off_at / WAKE_UP + 1) * WAKE_UP - off_at;
        if back.between(0, 1) == 0 && before_wake >= 2 * SECOND {
            let seconds = back.between(1, (before_wake / SECOND - 1) as u64) as i64;
            self.changes.push(Change {
                person: n.person.clone(),
                kind: n.kind,
                channel,
                enabled: true,
                at: off_at + seconds * SECOND,
            });
        }
    }

    fn name(&self) -> String {
        let batch = match self.seed {
            None => self.night.name.to_string(),
            Some(seed) => format!("random night (seed {seed}), {}", self.night.name),
        };
        match self.restart_at {
            Some(at) => format!("{batch}, the dispatcher restarted at {}", clock(at)),
            None => batch,
        }
    }

    fn person(&self, name: &str) -> &Person {
        self.people
            .iter()
            .find(|p| p.name == name)
            .expect("a notice names a person of its batch")
    }

    /// The local time at simulated time `ms` on `person`'s clock.
    fn local(&self, person: &str, ms: i64) -> jiff::ZonedDateTime {
        local(self.night, self.person(person).zone, ms)
    }

    /// Whether `person` has `channel` on for `kind` at simulated time
    /// `ms`: the switches made at `ms` or before count.
    fn enabled(&self, person: &str, kind: &str, channel: &str, ms: i64) -> bool {
        let mut on = !self
            .person(person)
            .off
            .iter()
            .any(|(k, c)| k == kind && c == channel);
        let mut changes: Vec<&Change> = self
            .changes
            .iter()
            .filter(|c| c.person == person && c.kind == kind && c.channel == channel && c.at <= ms)
            .collect();
        changes.sort_by_key(|c| c.at);
        if let Some(last) = changes.last() {
            on = last.enabled;
        }
        on
    }

    /// Whether `channel` of `notice` is turned off at any moment after it
    /// was published.
    fn turned_off_later(&self, n: &Notice, channel: &str) -> bool {
        self.turned_off_at(n, channel, i64::MAX).is_some()
    }

    /// When `channel` of `notice` was first turned off after it was
    /// published, at `ms` or before (a switch and a wake-up at the same
    /// moment: the switch comes first).
    fn turned_off_at(&self, n: &Notice, channel: &str, ms: i64) -> Option<i64> {
        self.changes
            .iter()
            .filter(|c| {
                c.person == n.person
                    && c.kind == n.kind
                    && c.channel == channel
                    && !c.enabled
                    && c.at > n.at
                    && c.at <= ms
            })
            .map(|c| c.at)
            .min()
    }

    /// Whether the rules forbid sending `channel` of `notice` at `ms`: it
    /// was off when published, or turned off at any moment since (rule 3:
    /// turning it back on brings nothing back).
    fn forbidden(&self, n: &Notice, channel: &str, ms: i64) -> bool {
        !n.critical()
            && (!self.enabled(&n.person, n.kind, channel, n.at)
                || self.turned_off_at(n, channel, ms).is_some())
    }

    /// When a push published at `at` may go out at the earliest: `at`, or
    /// the end of the quiet hours it falls in.
    fn morning(&self, person: &str, at: i64) -> Option<i64> {
        let local = self.local(person, at);
        let day = match local.hour() {
            h if h >= 22 => local.date().tomorrow().ok()?,
            h if h < 8 => local.date(),
            _ => return None,
        };
        let end = day.at(8, 0, 0, 0).in_tz(self.person(person).zone).ok()?;
        Some(end.timestamp().as_millisecond() - self.night.starts_at)
    }

    /// When the scenario ends: ten minutes after the last thing due. A push
    /// whose retries run into 22:00 is due the next morning.
    fn end(&self) -> i64 {
        let last = self
            .notices
            .iter()
            .map(|n| {
                let retried = n.at + 10 * MINUTE;
                self.morning(&n.person, retried).unwrap_or(retried)
            })
            .chain(self.changes.iter().map(|c| c.at))
            .max()
            .unwrap_or(0);
        last + 10 * MINUTE
    }

    fn provider(&self, channel: &str) -> ProviderScript {
        let scripts: Vec<(String, Script)> = self
            .people
            .iter()
            .map(|p| (p.recipient(channel), p.script(channel)))
            .collect();
        provider(&scripts, 0)
    }

    /// The steps that cover simulated time `[from, to)`.
    fn steps(&self, from: i64, to: i64) -> Vec<Step> {
        let mut due: Vec<(i64, Step)> = Vec::new();
        for n in self.notices.iter().filter(|n| (from..to).contains(&n.at)) {
            let input = serde_json::json!({
                "person": n.person,
                "kind": n.kind,
                "text": n.text(),
            });
            due.push((n.at, Step::with("publish", input, &n.subject())));
        }
        for c in self.changes.iter().filter(|c| (from..to).contains(&c.at)) {
            let input = serde_json::json!({
                "person": c.person,
                "kind": c.kind,
                "channel": c.channel,
                "enabled": c.enabled,
            });
            due.push((c.at, Step::with("set_preference", input, &c.person)));
        }
        due.sort_by_key(|(at, _)| *at);
        let mut steps = Vec::new();
        let mut now = from;
        for (at, step) in due {
            if at > now {
                steps.extend(Batch::wait(from, now, at));
                now = at;
            }
            steps.push(step);
        }
        steps.extend(Batch::wait(from, now, to));
        steps
    }

    /// The dispatcher's wake-ups from `now` until `until`, on its minute
    /// grid: a publish or a switch between two wake-ups does not wake it,
    /// so a push published at 21:59:30 is first claimed at 22:00. A process
    /// that starts (at `from`) wakes at once.
    fn wait(from: i64, now: i64, until: i64) -> Vec<Step> {
        let next = (now + WAKE_UP - 1).div_euclid(WAKE_UP) * WAKE_UP;
        if now == from || next == now {
            return vec![schedule(until)];
        }
        if until <= next {
            return vec![Step::advance(until - now)];
        }
        vec![Step::advance(next - now), schedule(until)]
    }

    fn plans(&self, dir: &Path) -> Vec<Plan> {
        let end = self.end();
        let cut = self.restart_at.filter(|&at| at < end).unwrap_or(end);
        let plan = |process: u32, steps: Vec<Step>| Plan {
            dir: dir.to_path_buf(),
            process,
            steps,
            provider: self.provider("email"),
            push: self.provider("push"),
            seed: self.seed.unwrap_or(0),
            starts_at: Some(self.night.starts_at),
            ..Plan::default()
        };
        let mut first = plan(1, self.steps(0, cut));
        first.fixture = self
            .people
            .iter()
            .map(|p| {
                format!(
                    "INSERT INTO people (id, email, device, time_zone) VALUES ('{}', '{}', '{}', '{}')",
                    p.name,
                    p.recipient("email"),
                    p.recipient("push"),
                    p.zone
                )
            })
            .chain(self.people.iter().flat_map(|p| {
                p.off.iter().map(move |(kind, channel)| {
                    format!(
                        "INSERT INTO preferences (person, kind, channel, enabled) VALUES ('{}', '{kind}', '{channel}', 0)",
                        p.name
                    )
                })
            }))
            .collect();
        let mut plans = vec![first];
        if cut < end {
            plans.push(plan(2, self.steps(cut, end)));
        }
        plans
    }
}

const NAMES: [&str; 12] = [
    "ada", "ben", "cleo", "dev", "emma", "finn", "gia", "hugo", "ivy", "jon", "kai", "lena",
];

/// The simulated time, in a scenario of `night`, at which the clock of
/// `zone` next shows 22:00 (`evening`) or 08:00, from the scenario's start.
fn local_edge(night: Night, zone: &str, evening: bool) -> i64 {
    let start = local(night, zone, 0);
    let hour = if evening { 22 } else { 8 };
    let mut day = start.date();
    for _ in 0..2 {
        if let Ok(at) = day.at(hour, 0, 0, 0).in_tz(zone) {
            let ms = at.timestamp().as_millisecond() - night.starts_at;
            if ms >= 0 {
                return ms;
            }
        }
        day = day.tomorrow().unwrap_or(day);
    }
    0
}

fn local(night: Night, zone: &str, ms: i64) -> jiff::ZonedDateTime {
    instant(night.starts_at, ms)
        .and_then(|t| Ok(t.in_tz(zone)?))
        .expect("the chapter's zones are in the bundled database")
}

/// The picture's bands: chapter 5's backoffs, and each person's quiet
/// hours on their own clock, read from the people the scenario's first
/// plan sets up (the fixture [`Batch::plans`] writes).
fn bands(history: &History, plans: &[Vec<Plan>]) -> Vec<Band> {
    let mut bands = lab::picture::bands(&Generated, history);
    let Some(first) = plans.first().and_then(|group| group.first()) else {
        return bands;
    };
    let starts_at = first.starts_at.unwrap_or(lab::clock::DEFAULT_START);
    let end = history.events.iter().map(|e| e.at_ms).max().unwrap_or(0);
    const PEOPLE: &str = "INSERT INTO people (id, email, device, time_zone) VALUES ('";
    for line in &first.fixture {
        let Some(values) = line.strip_prefix(PEOPLE) else {
            continue;
        };
        let fields: Vec<&str> = values.trim_end_matches("')").split("', '").collect();
        let [name, _, _, zone] = fields[..] else {
            continue;
        };
        let Ok(start) = instant(starts_at, 0).and_then(|t| Ok(t.in_tz(zone)?)) else {
            continue;
        };
        let mut day = start.date().yesterday().unwrap_or(start.date());
        while let (Ok(evening), Ok(morning)) = (
            day.at(22, 0, 0, 0).in_tz(zone),
            day.tomorrow().and_then(|d| d.at(8, 0, 0, 0).in_tz(zone)),
        ) {
            let from = evening.timestamp().as_millisecond() - starts_at;
            let to = morning.timestamp().as_millisecond() - starts_at;
            if from > end {
                break;
            }
            if to > 0 {
                bands.push(Band {
                    channel: Some("push".to_string()),
                    from_ms: from.max(0),
                    to_ms: to.min(end),
                    label: format!("{name}: quiet hours, 22:00 to 08:00 in {zone}"),
                    tone: Tone::Quiet,
                });
            }
            let Ok(next) = day.tomorrow() else { break };
            day = next;
        }
    }
    bands
}

/// Whether a batch turns a channel off while a message of that kind, a
/// `critical` one or not, waits on that channel to be retried.
fn opted_out_while_retried(b: &Batch, critical: bool) -> bool {
    b.changes.iter().any(|c| {
        !c.enabled
            && b.notices.iter().any(|n| {
                n.person == c.person
                    && n.kind == c.kind
                    && n.critical() == critical
                    && matches!(b.person(&n.person).script(c.channel), Script::Flaky(_))
                    && (n.at + 1..n.at + 2 * MINUTE).contains(&c.at)
            })
    })
}

fn in_quiet_hours(local: &jiff::ZonedDateTime) -> bool {
    local.hour() >= 22 || local.hour() < 8
}

/// "23:04" on the local clock; "Sun 08:00" when the day matters.
fn hhmm(local: &jiff::ZonedDateTime) -> String {
    local.strftime("%H:%M").to_string()
}

/// The dispatcher's schedule until `until`.
fn schedule(until: i64) -> Step {
    Schedule::of(until, &[("dispatch", WAKE_UP)])
}

/// What one scenario left behind.
struct Played {
    batch: Batch,
    exits: Vec<Exit>,
    history: History,
    /// The outbox as the contract places its rows.
    ledger: Vec<Queued>,
    unreadable: Option<String>,
}

impl Played {
    fn trouble(&self) -> Option<String> {
        first_trouble(&self.exits, "service", false).or_else(|| self.unreadable.clone())
    }

    /// Every attempt to send `notice` on `channel`: (simulated time, outcome).
    fn attempts(&self, n: &Notice, channel: &str) -> Vec<(i64, Outcome)> {
        attempts(&self.batch, &self.history, n, channel)
    }

    fn sent(&self, n: &Notice, channel: &str) -> Vec<i64> {
        self.attempts(n, channel)
            .into_iter()
            .filter(|a| a.1 == Outcome::Delivered)
            .map(|a| a.0)
            .collect()
    }

    /// Every attempt of `notice` on `channel`, on its recipient's clock,
    /// as a report lists them: " Its attempts: 21:58 failed, 22:03 sent."
    /// Nothing when it had one attempt or none.
    fn story(&self, n: &Notice, channel: &str) -> String {
        let attempts = self.attempts(n, channel);
        if attempts.len() < 2 {
            return String::new();
        }
        let said: Vec<String> = attempts
            .iter()
            .map(|&(ms, outcome)| format!("{} {}", self.at(n, ms), answered(outcome)))
            .collect();
        format!(" Its attempts: {}.", said.join(", "))
    }

    /// "23:00 Europe/Paris"
    fn at(&self, n: &Notice, ms: i64) -> String {
        hhmm(&self.batch.local(&n.person, ms))
    }
}

fn attempts(batch: &Batch, history: &History, n: &Notice, channel: &str) -> Vec<(i64, Outcome)> {
    let recipient = batch.person(&n.person).recipient(channel);
    let text = n.text();
    history
        .attempts(channel)
        .filter(|d| d.recipient == recipient && d.body == text)
        .map(|d| (d.at_ms, d.outcome))
        .collect()
}

fn play(case: &Case, batch: &Batch) -> Result<Played> {
    let dir = scenario_dir()?;
    let exits = case.start_in_turn(&batch.plans(dir.path()))?;
    let history = History::read(dir.path())?;
    let (ledger, unreadable) = match read_ledger(dir.path(), &history) {
        Ok(ledger) => (ledger, None),
        Err(err) => (
            Vec::new(),
            Some(format!("the outbox could not be read: {err:#}")),
        ),
    };
    Ok(Played {
        batch: batch.clone(),
        exits,
        history,
        ledger,
        unreadable,
    })
}

/// `notify run 9`: the chapter's night, told as a story.
fn run(case: &Case) -> Result<String> {
    let batch = Batch::chapter();
    let played = play(case, &batch)?;
    let mut out = format!(
        "{}: the dispatcher wakes every minute\n\
         ada (Paris) turned email off for date_chosen, dev (Sydney) push off for date_chosen,\n\
         emma (Kolkata) push off for security_alert; ben's phone fails twice\n\
         at 0:20:00 dev turns push back on for date_chosen; at 1:00:00 cleo turns it off\n\n",
        batch.night.name
    );
    out.push_str(&format!(
        "  {:<4}{:<6}{:<16}{:<17}{:<9}{:<8}{}\n",
        "#", "who", "kind", "zone", "channel", "queued", "sent (their clock)"
    ));
    let mut off = 0;
    let mut night = 0;
    for n in &batch.notices {
        for channel in CHANNELS {
            let sent = played.sent(n, channel);
            let mut said: Vec<String> = sent.iter().map(|&ms| played.at(n, ms)).collect();
            if said.is_empty() {
                said.push("-".to_string());
            }
            let mut notes = Vec::new();
            for &ms in &sent {
                if batch.forbidden(n, channel, ms) {
                    off += 1;
                    notes.push("turned off");
                }
                if channel == "push" && !n.critical() && in_quiet_hours(&batch.local(&n.person, ms))
                {
                    night += 1;
                    notes.push("in quiet hours");
                }
            }
            let note = if notes.is_empty() {
                String::new()
            } else {
                format!("  {}", notes.join(", "))
            };
            out.push_str(&format!(
                "  {:<4}{:<6}{:<16}{:<17}{:<9}{:<8}{}{note}\n",
                format!("{}", n.number),
                n.person,
                n.kind,
                batch.person(&n.person).zone,
                channel,
                played.at(n, n.at),
                said.join(", "),
            ));
        }
    }
    out.push_str(&format!(
        "\nmessages on a channel its recipient had turned off: {off}\npushes in quiet hours: {night}\n"
    ));
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// The first scenario whose `judge` finds something, with how many things
/// it found over all of them.
fn first(
    played: &[Played],
    judge: impl Fn(&Played) -> Vec<String>,
    what: &str,
) -> (usize, Option<Finding>) {
    first_found(
        played,
        Played::trouble,
        |p| (p.batch.name(), p.batch.seed),
        |p| &p.history.events,
        judge,
        what,
    )
}

/// Sends on a channel turned off for their kind when it was published or
/// at any moment since, and withdrawn messages not left `CANCELLED`.
fn opted_out(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let mut lines = Vec::new();
    for n in batch.notices.iter().filter(|n| !n.critical()) {
        for channel in CHANNELS {
            for ms in played.sent(n, channel) {
                if batch.forbidden(n, channel, ms) {
                    let then = batch.enabled(&n.person, n.kind, channel, n.at);
                    let now = batch.enabled(&n.person, n.kind, channel, ms);
                    let when = match (then, now) {
                        (true, false) => "turned off after it was published".to_string(),
                        (true, true) => format!(
                            "turned off at {} after it was published (turned on again later: that brings nothing back)",
                            played.at(n, batch.turned_off_at(n, channel, ms).unwrap_or(ms))
                        ),
                        (false, true) => {
                            "off when it was published (turned on later)".to_string()
                        }
                        (false, false) => "turned off".to_string(),
                    };
                    lines.push(format!(
                        "#{} {} ({}): {} sent at {}, {channel} {when} for {}.",
                        n.number,
                        n.person,
                        batch.person(&n.person).zone,
                        channel,
                        played.at(n, ms),
                        n.kind
                    ));
                }
            }
            lines.extend(withdrawn(played, n, channel));
        }
    }
    lines
}

/// What is wrong with how `channel` of `notice` ended, if its recipient
/// withdrew it (turned the channel off after it was queued, before it went
/// out): it must end `CANCELLED` with its reason, not a dead letter, which
/// an operator's alerts take for a failure. A row the provider refused for
/// good is a dead letter whatever came after, and a channel off when the
/// notice was published may have no row at all.
fn withdrawn(played: &Played, n: &Notice, channel: &str) -> Option<String> {
    let batch = &played.batch;
    let tried = played.attempts(n, channel);
    let refused = tried.iter().any(|a| a.1 == Outcome::Rejected);
    if tried.iter().any(|a| a.1 == Outcome::Delivered) || !batch.forbidden(n, channel, i64::MAX) {
        return None;
    }
    let recipient = batch.person(&n.person).recipient(channel);
    let text = n.text();
    let row = played
        .ledger
        .iter()
        .find(|q| q.channel == channel && q.recipient == recipient && q.body == text)?;
    let how = match (row.status.as_str(), &row.error) {
        // Refused for good before the opt-out: a dead letter it stays.
        (CANCELLED, _) if refused => {
            "refused for good, then left CANCELLED: the dead letter and the provider's answer are gone".to_string()
        }
        _ if refused => return None,
        (CANCELLED, Some(_)) => return None,
        (CANCELLED, None) => "left CANCELLED with no reason kept".to_string(),
        ("FAILED", _) => "left a dead letter (FAILED): a withdrawn message is no failure, it ends CANCELLED with its reason".to_string(),
        _ => return None,
    };
    Some(format!(
        "#{} {} ({}): {} {channel} queued at {}, withdrawn, {how}.{}",
        n.number,
        n.person,
        batch.person(&n.person).zone,
        n.kind,
        played.at(n, n.at),
        played.story(n, channel)
    ))
}

/// Non-critical pushes sent in quiet hours on the recipient's clock.
fn quiet(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let mut lines = Vec::new();
    for n in batch.notices.iter().filter(|n| !n.critical()) {
        for ms in played.sent(n, "push") {
            let local = batch.local(&n.person, ms);
            if in_quiet_hours(&local) {
                lines.push(format!(
                    "#{} {} ({}): {} push queued at {}, sent at {} ({} UTC).{}",
                    n.number,
                    n.person,
                    batch.person(&n.person).zone,
                    n.kind,
                    played.at(n, n.at),
                    hhmm(&local),
                    local.timestamp().strftime("%H:%M"),
                    played.story(n, "push")
                ));
            }
        }
    }
    lines
}

/// Pushes the person wanted that never went out (unless their device is
/// refused for good), and pushes held for quiet hours that went out later
/// than 08:02.
fn held(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let mut lines = Vec::new();
    for n in batch.notices.iter().filter(|n| !n.critical()) {
        if !batch.enabled(&n.person, n.kind, "push", n.at)
            || batch.turned_off_later(n, "push")
            || batch.person(&n.person).push == Script::Refused
        {
            continue;
        }
        let sent = played.sent(n, "push");
        let label = format!(
            "#{} {} ({}): {} push queued at {}",
            n.number,
            n.person,
            batch.person(&n.person).zone,
            n.kind,
            played.at(n, n.at)
        );
        let Some(&first) = sent.first() else {
            lines.push(format!("{label}, never sent.{}", played.story(n, "push")));
            continue;
        };
        let Some(morning) = batch.morning(&n.person, n.at) else {
            continue;
        };
        if sent
            .iter()
            .any(|&ms| in_quiet_hours(&batch.local(&n.person, ms)))
        {
            continue;
        }
        if first > morning + PROMPT {
            lines.push(format!(
                "{label}, sent at {}, not by {} ({} late).{}",
                played.at(n, first),
                hhmm(&batch.local(&n.person, morning + PROMPT)),
                lab::explore::span(first - morning),
                played.story(n, "push")
            ));
        }
    }
    lines
}

/// Security alerts not sent on both channels within two wake-ups (on a
/// channel the provider does not refuse them for good).
fn critical(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let mut lines = Vec::new();
    for n in batch.notices.iter().filter(|n| n.critical()) {
        // A channel whose provider refuses them for good cannot reach them.
        let reachable = CHANNELS
            .into_iter()
            .filter(|c| batch.person(&n.person).script(c) != Script::Refused);
        for channel in reachable {
            let sent = played.sent(n, channel);
            let late = match sent.first() {
                None => Some("never sent".to_string()),
                Some(&ms) if ms > n.at + PROMPT => Some(format!(
                    "sent at {}, {} after it was raised",
                    played.at(n, ms),
                    lab::explore::span(ms - n.at)
                )),
                Some(_) => None,
            };
            if let Some(late) = late {
                let off = if batch.enabled(&n.person, n.kind, channel, n.at) {
                    ""
                } else {
                    " (they turned it off)"
                };
                lines.push(format!(
                    "#{} {} ({}): security alert at {}, {channel}{off} {late}.",
                    n.number,
                    n.person,
                    batch.person(&n.person).zone,
                    played.at(n, n.at)
                ));
            }
        }
    }
    lines
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    // Nights of ten hours and more, a minute at a time.
    let case = case.patient(std::time::Duration::from_secs(20));
    let mut batches = vec![Batch::chapter(), Batch::autumn()];
    batches.extend(
        options
            .seeds
            .iter()
            .map(|&s| Batch::generated(s.wrapping_add(1000))),
    );
    let played: Vec<Played> = in_parallel(&batches, |b| play(&case, b))
        .into_iter()
        .collect::<Result<_>>()?;
    let processes: usize = played.iter().map(|p| p.exits.len()).sum();

    let sends: usize = played
        .iter()
        .map(|p| {
            p.history
                .deliveries
                .iter()
                .filter(|d| d.outcome == Outcome::Delivered)
                .count()
        })
        .sum();
    let pushes: usize = played
        .iter()
        .map(|p| p.history.delivered("push").count())
        .sum();
    let (_, f_off) = first(
        &played,
        opted_out,
        "sent after an opt-out, or withdrawn as a dead letter",
    );
    let (_, f_quiet) = first(&played, quiet, "pushes in quiet hours");
    let (_, f_held) = first(&played, held, "held pushes lost or late");
    let (_, f_critical) = first(&played, critical, "alerts not sent at once");
    let held_count: usize = played
        .iter()
        .map(|p| {
            p.batch
                .notices
                .iter()
                .filter(|n| !n.critical() && p.batch.morning(&n.person, n.at).is_some())
                .filter(|n| !p.sent(n, "push").is_empty())
                .count()
        })
        .sum();
    let alerts: usize = played
        .iter()
        .map(|p| p.batch.notices.iter().filter(|n| n.critical()).count())
        .sum();
    let mut verdicts = vec![
        judge(
            OPTED_OUT,
            format!(
                "{}, none on a channel turned off",
                counted(sends, "message")
            ),
            f_off,
        ),
        judge(
            QUIET,
            format!("{}, none in quiet hours", counted(pushes, "push")),
            f_quiet,
        ),
        judge(
            HELD,
            format!(
                "{} published in quiet hours, each sent by 08:02",
                counted(held_count, "push")
            ),
            f_held,
        ),
        judge(
            CRITICAL,
            format!(
                "{}, each sent at once on both channels",
                counted(alerts, "alert")
            ),
            f_critical,
        ),
    ];
    let explored = explore(
        &Generated,
        "09",
        &case,
        options.reference.as_ref(),
        options.budget,
    )?;
    verdicts.extend(explored.verdicts);
    Ok(Checked {
        verdicts,
        processes: processes + explored.processes,
    })
}

/// Chapter 9's world for the explorer: a night on which Paris, New York or
/// Sydney changes its clocks, up to four people across five zones, notices
/// of every kind (some a few minutes either side of 22:00 or 08:00 on the
/// recipient's clock), switches turned on and off while messages wait,
/// providers that fail a message once or twice, and sometimes a deploy;
/// every other night, one more person whose email fails three times and
/// whose phone is refused for good, with a deploy seconds after one of the
/// email's failures.
/// Faults go where a dispatcher without chapter 6's sweep survives them:
/// a crash after any commit of `publish` and `set_preference`, and a
/// failing `publish` commit (the notice is refused).
struct Generated;

/// The situations chapter 9's rules turn on.
const DIMENSIONS: &[Dimension<Batch>] = &[
    Dimension {
        name: "a push that fails three times from just before quiet hours: a retry held for the night must not cost an attempt",
        reached: |b| {
            b.notices.iter().any(|n| {
                // Their only message: a provider fails an address's first
                // sends, whichever message they carry.
                let only = b.notices.iter().filter(|o| o.person == n.person).count() == 1;
                only && !n.critical()
                    && b.person(&n.person).push == Script::Flaky(3)
                    && b.enabled(&n.person, n.kind, "push", n.at)
                    && b.morning(&n.person, n.at).is_none()
                    && b.morning(&n.person, n.at + PROMPT).is_some()
            })
        },
    },
    Dimension {
        name: "an opt-out made while a message of that kind waits on that channel to be retried",
        reached: |b| opted_out_while_retried(b, false),
    },
    Dimension {
        name: "an opt-out of a security alert's channel while the alert waits to be retried: it still goes",
        reached: |b| opted_out_while_retried(b, true),
    },
    Dimension {
        name: "an opt-out made while a push waits for the morning",
        reached: |b| {
            b.changes.iter().any(|c| {
                !c.enabled
                    && c.channel == "push"
                    && b.notices.iter().any(|n| {
                        n.person == c.person
                            && n.kind == c.kind
                            && !n.critical()
                            && b.morning(&n.person, n.at)
                                .is_some_and(|m| (n.at..m).contains(&c.at))
                    })
            })
        },
    },
    Dimension {
        name: "a push published in the last minute before quiet hours, first claimed after they begin",
        reached: |b| {
            b.notices.iter().any(|n| {
                !n.critical()
                    && n.at % WAKE_UP != 0
                    && b.enabled(&n.person, n.kind, "push", n.at)
                    && b.morning(&n.person, n.at).is_none()
                    && b.morning(&n.person, n.at + WAKE_UP).is_some()
                    // No deploy before the next wake-up, whose new process
                    // would wake at once.
                    && b.restart_at.is_none_or(|r| r <= n.at || r >= n.at + WAKE_UP)
            })
        },
    },
    Dimension {
        name: "a push published in quiet hours, held for the morning",
        reached: |b| {
            b.notices.iter().any(|n| {
                !n.critical()
                    && b.enabled(&n.person, n.kind, "push", n.at)
                    && b.morning(&n.person, n.at).is_some()
            })
        },
    },
    Dimension {
        name: "a security alert whose push fails in quiet hours",
        reached: |b| {
            b.notices.iter().any(|n| {
                n.critical()
                    && matches!(b.person(&n.person).push, Script::Flaky(_))
                    && b.morning(&n.person, n.at).is_some()
            })
        },
    },
    Dimension {
        name: "a channel turned back on",
        reached: |b| b.changes.iter().any(|c| c.enabled),
    },
    Dimension {
        name: "an opt-out while a message waits, turned back on before its next attempt: the opt-out still wins",
        reached: |b| {
            b.changes.iter().any(|off| {
                let next = (off.at / WAKE_UP + 1) * WAKE_UP;
                !off.enabled
                    && b.changes.iter().any(|on| {
                        on.enabled
                            && on.person == off.person
                            && on.kind == off.kind
                            && on.channel == off.channel
                            && (off.at..next).contains(&on.at)
                    })
                    && b.notices.iter().any(|n| {
                        n.person == off.person
                            && n.kind == off.kind
                            && !n.critical()
                            && n.at < off.at
                            && b.enabled(&n.person, n.kind, off.channel, n.at)
                    })
            })
        },
    },
    Dimension {
        name: "a deploy while a retry waits its backoff",
        reached: |b| {
            b.restart_at.is_some_and(|r| {
                b.notices.iter().any(|n| {
                    let p = b.person(&n.person);
                    let flaky = CHANNELS
                        .iter()
                        .any(|c| matches!(p.script(c), Script::Flaky(_)));
                    flaky && (n.at..n.at + 2 * MINUTE).contains(&r)
                })
            })
        },
    },
];

/// A notification's fate before anything reached the provider.
const NOT_SENT: &str = "not sent";

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

    /// A notification is "not sent" until its push or email goes out.
    fn waiting(&self, fate: &Fate) -> bool {
        fate.state == NOT_SENT
    }

    fn faults(&self) -> FaultModel {
        FaultModel {
            crash_after_commit: &["publish", "set_preference"],
            ..FaultModel::PUBLISH
        }
    }

    fn invariants(&self) -> Invariants {
        Invariants {
            recorded: true,
            told_once: true,
            settled: true,
            withdraws: true,
            keyed: true,
            // No sweep hands a live claim to another process here.
            sent_once: true,
            retry_gaps: &RETRY_GAPS,
            ..Invariants::default()
        }
    }

    fn observe(&self, batch: &Batch, run: &Run) -> Result<Observation> {
        let mut rows = read_rows(run.dir, run.history)?;
        for row in &mut rows {
            row.wrong = withdrawn_unasked(batch, row);
        }
        let mut fates = BTreeMap::new();
        for n in &batch.notices {
            for channel in CHANNELS {
                let tried = attempts(batch, run.history, n, channel);
                let told = tried.iter().filter(|a| a.1 == Outcome::Delivered).count() as u32;
                let times: Vec<String> = tried
                    .iter()
                    .map(|(ms, outcome)| {
                        let said = match outcome {
                            Outcome::Delivered => "sent",
                            Outcome::Deduplicated => "repeat",
                            Outcome::Failed => "503",
                            Outcome::Rejected => "refused",
                        };
                        format!("{} {said}", hhmm(&batch.local(&n.person, *ms)))
                    })
                    .collect();
                let detail = if times.is_empty() {
                    "no attempt".to_string()
                } else {
                    format!("on their clock: {}", times.join(", "))
                };
                // A dead letter is told apart from a message withdrawn or
                // never queued: the rules end a withdrawn one CANCELLED.
                let dead = told == 0
                    && rows.iter().any(|r| {
                        r.status == "FAILED"
                            && r.subject
                                == subject_of(
                                    &batch.person(&n.person).recipient(channel),
                                    channel,
                                    &n.text(),
                                )
                    });
                let state = match (told, dead) {
                    (0, true) => "a dead letter",
                    (0, false) => NOT_SENT,
                    _ => "sent",
                };
                fates.insert(
                    format!("{} {channel} ({})", n.subject(), n.kind),
                    Fate {
                        told,
                        state: state.to_string(),
                        detail,
                    },
                );
            }
        }
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
        for i in 0..batch.notices.len() {
            if batch.notices.len() > 1 {
                let mut notices = batch.notices.clone();
                notices.remove(i);
                smaller.push(Batch {
                    notices,
                    ..batch.clone()
                });
            }
        }
        for i in 0..batch.changes.len() {
            let mut changes = batch.changes.clone();
            changes.remove(i);
            smaller.push(Batch {
                changes,
                ..batch.clone()
            });
        }
        for p in &batch.people {
            let busy = batch.notices.iter().any(|n| n.person == p.name)
                || batch.changes.iter().any(|c| c.person == p.name);
            if !busy && batch.people.len() > 1 {
                smaller.push(Batch {
                    people: batch
                        .people
                        .iter()
                        .filter(|q| q.name != p.name)
                        .cloned()
                        .collect(),
                    ..batch.clone()
                });
            }
        }
        smaller
    }

    fn describe(&self, batch: &Batch) -> String {
        let people: Vec<String> = batch
            .people
            .iter()
            .map(|p| {
                let mut said = format!("{} in {}", p.name, p.zone);
                for (kind, channel) in &p.off {
                    said.push_str(&format!(", {channel} off for {kind}"));
                }
                for channel in CHANNELS {
                    if let Some(script) = p.script(channel).said() {
                        said.push_str(&format!(", {channel} {script}"));
                    }
                }
                said
            })
            .collect();
        let notices: Vec<String> = batch
            .notices
            .iter()
            .map(|n| {
                format!(
                    "#{} {} for {} at {}",
                    n.number,
                    n.kind,
                    n.person,
                    hhmm(&batch.local(&n.person, n.at))
                )
            })
            .collect();
        let changes: Vec<String> = batch
            .changes
            .iter()
            .map(|c| {
                format!(
                    "{} turns {} {} for {} at {}",
                    c.person,
                    c.channel,
                    if c.enabled { "on" } else { "off" },
                    c.kind,
                    hhmm(&batch.local(&c.person, c.at))
                )
            })
            .collect();
        let mut text = format!(
            "{}; {}; {}",
            batch.night.name,
            people.join("; "),
            notices.join(", ")
        );
        if !changes.is_empty() {
            text.push_str(&format!("; {}", changes.join(", ")));
        }
        if let Some(at) = batch.restart_at {
            text.push_str(&format!("; the dispatcher restarts at {}", clock(at)));
        }
        text
    }
}

/// The outbox as it was left.
fn read_rows(dir: &Path, history: &History) -> Result<Vec<Row>> {
    read_outbox(dir, history, |q| {
        subject_of(&q.recipient, &q.channel, &q.body)
    })
}

/// What is wrong with `row` if it ended CANCELLED though no rule withdrew
/// it: only its own recipient, turning its channel off for its kind, may
/// withdraw a message (a security alert, never).
fn withdrawn_unasked(batch: &Batch, row: &Row) -> Option<String> {
    let (channel, recipient, body) = row.message.as_ref()?;
    if row.status != CANCELLED {
        return None;
    }
    let notices: Vec<&Notice> = batch
        .notices
        .iter()
        .filter(|n| batch.person(&n.person).recipient(channel) == *recipient && n.text() == *body)
        .collect();
    let asked = notices
        .iter()
        .any(|n| batch.forbidden(n, channel, i64::MAX));
    let n = notices.first().filter(|_| !asked)?;
    Some(format!(
        "is CANCELLED, though {} never turned {channel} off for {}",
        n.person, n.kind
    ))
}

/// How a row is named in the invariants' findings.
fn subject_of(recipient: &str, channel: &str, body: &str) -> String {
    format!("{recipient} ({channel}): {body}")
}
