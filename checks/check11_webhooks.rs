//! Check 11: learn what happened: delivery webhooks.
//!
//! Emails go out, and the provider reports on each by webhook: delivered,
//! bounced (a hard bounce: the address does not exist), complained (marked
//! as spam). Its requests arrive late and out of order, some twice; the
//! endpoint is sometimes down, and then the provider sends them again,
//! signed afresh. Among them come requests the provider never signed (a
//! forged bounce), requests it signed days ago (a replay), and bodies or
//! headers nobody can read; and one report is taken by the endpoint in a
//! process of its own while the dispatcher is in the middle of a batch, as
//! a web server runs beside a worker. The check reads every request and answer the
//! world saw, every email, and the outbox as it was left, and judges: no
//! mail after a bounce or complaint was taken, nothing believed that the
//! provider did not send just now, every genuine report taken whatever its
//! bytes look like, each message's status the latest by the provider's
//! clock, and a 4xx for whatever cannot be read.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;

use super::dispatch_world::RETRY_GAPS;
use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::{DEFAULT_START, MINUTE, SECOND};
use lab::explore::clock;
use lab::explore::{
    explore, Dimension, Explorer, Fate, FaultModel, Invariants, Observation, Row, Run,
};
use lab::history::{read_pairs, History};
use lab::report::{first_found, judge, Finding};
use lab::rng::Rng;
use lab::runner::{in_parallel, scenario_dir, Case, Exit};
use lab::scenario::{Moment, Plan, ProviderScript, Step, APP_DB};
use lab::serve::Schedule;
use lab::webhook::{self, Answered, Delivery, Rotation, Signing, GARBLED_FORMS};
use lab::world::Recorder;

pub const CHAPTER: Chapter = Chapter {
    number: 11,
    title: "learn what happened: delivery webhooks",
    case_file: "cases/case11_webhooks.rs",
    text_file: "chapters/11-learn-what-happened-webhooks.md",
    bin: "case11",
    shipped_hash: 0x3e3f_be4f_2209_efd4,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&Generated, budget),
    bands: |history, _| lab::picture::bands(&Generated, history),
};

const SUPPRESSED: &str =
    "no email to an address once its hard bounce or complaint was taken from the provider";
const FORGED: &str =
    "a forged or replayed webhook changes nothing: its status never shows, its address keeps its mail";
const ACCEPTED: &str =
    "every genuine webhook is taken (2xx), whatever the order of its keys and its whitespace";
const ORDERED: &str =
    "each message ends with the latest status its genuine webhooks report, by the provider's clock";
const MALFORMED: &str = "an unreadable body or signature header gets a 4xx, never a 5xx or a crash";

/// The case's webhook endpoint.
const ENDPOINT: &str = "receive_webhook";
/// How often the dispatcher wakes up.
const WAKE_UP: i64 = MINUTE;
/// The gaps between attempts (chapter 5).
const DAY: i64 = 24 * 60 * MINUTE;
const NAMES: [&str; 6] = ["ada", "ben", "cleo", "dana", "eli", "fay"];

/// Where a webhook comes from, and so what the endpoint must make of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
enum Nature {
    /// Sent and signed by the provider just now: to be taken.
    Genuine,
    /// Signed without the secret.
    Forged,
    /// Signed by the provider long ago, sent again by someone else.
    Replayed,
    /// Signed with the provider's secret, its timestamp more than five
    /// minutes ahead of the service's clock: the tolerance bounds both
    /// sides, so it is refused as a replay is.
    Ahead,
    /// A body or a signature header that cannot be read.
    Malformed,
}

/// An event the provider reports.
#[derive(Clone, Debug, Serialize)]
struct Event {
    id: String,
    kind: &'static str,
    /// When it happened, on the provider's clock, in simulated ms.
    occurred: i64,
    message: String,
    to: String,
}

impl Event {
    fn suppresses(&self) -> bool {
        self.kind != "delivered"
    }
}

/// One webhook request, at a simulated time.
#[derive(Clone, Debug, Serialize)]
struct Hook {
    /// Its name in the scenario: the event's id for the provider's own.
    label: String,
    nature: Nature,
    /// What its body says, when it says something.
    event: Option<Event>,
    /// What it looks like, for the story: "keys reordered, pretty-printed".
    looks: String,
    body: String,
    signing: Signing,
    at: i64,
    /// The endpoint is down when it comes.
    down: bool,
    /// How long before it comes the provider signed it, in seconds;
    /// negative when the provider's clock is ahead.
    lag_s: i64,
    /// Signed with a second secret too, the provider's next one.
    rotation: Rotation,
}

/// The id of the first of `messages` to `to`, or of none (`msg_0`).
fn first_to(messages: &[Message], to: &str) -> String {
    messages
        .iter()
        .find(|m| m.to == to)
        .map_or_else(|| "msg_0".to_string(), |m| m.id.clone())
}

impl Hook {
    fn delivery(&self) -> Delivery {
        Delivery {
            event: self.label.clone(),
            body: self.body.clone(),
            signing: self.signing.clone(),
            down: self.down,
            lag_s: self.lag_s,
            rotation: self.rotation,
        }
    }

    fn said(&self) -> String {
        match &self.event {
            Some(e) => format!("{} {} {}", e.kind, e.message, e.to),
            None => self.looks.clone(),
        }
    }
}

/// An email to send, queued at a simulated time.
#[derive(Clone, Debug, Serialize)]
struct Message {
    id: String,
    to: String,
    at: i64,
}

impl Message {
    fn new(id: &str, to: &str, at: i64) -> Message {
        Message {
            id: id.to_string(),
            to: to.to_string(),
            at,
        }
    }

    fn text(&self) -> String {
        format!("Your receipt ({})", self.id)
    }
}

/// A scenario: emails, the webhooks about them, the provider's rounds of
/// sending again what got no 2xx.
#[derive(Clone, Debug, Serialize)]
struct Batch {
    /// `None` for the chapter's own batches.
    seed: Option<u64>,
    /// The name of one of the chapter's own batches.
    title: &'static str,
    messages: Vec<Message>,
    hooks: Vec<Hook>,
    /// When the provider sends again what was not taken.
    rounds: Vec<i64>,
    /// The endpoint is down `[from, to)`.
    outage: Option<(i64, i64)>,
    /// How the email provider takes the sends: down for a while, or one
    /// address it refuses, rate-limits or fails a few times.
    provider: ProviderScript,
    /// A deploy: the process stops at this moment and a new one carries
    /// on, waking the dispatcher at once, between whole minutes.
    deploy: Option<i64>,
    end: i64,
    /// A report the endpoint takes in a process of its own while the
    /// dispatcher is in the middle of a batch, as a web server and a worker
    /// run side by side: (the recipient whose send the provider holds until
    /// that process ends, the label of the hook it takes).
    during: Option<(String, String)>,
}

fn address(name: &str) -> String {
    format!("{name}@example.com")
}

/// How a provider might write an event: its keys in some order, with some
/// whitespace.
fn serialise(fields: &[(&str, Value)], order: &[usize], style: u64) -> String {
    let parts: Vec<String> = order
        .iter()
        .map(|&i| {
            let (k, v) = &fields[i];
            let sep = if style == 0 { ":" } else { ": " };
            format!("\"{k}\"{sep}{v}")
        })
        .collect();
    match style {
        0 => format!("{{{}}}", parts.join(",")),
        1 => format!("{{{}}}", parts.join(", ")),
        _ => format!("{{\n  {}\n}}\n", parts.join(",\n  ")),
    }
}

const STYLES: [&str; 3] = ["compact", "spaced", "pretty-printed"];

/// The body of `event`, in the provider's usual key order or another.
fn body(event: &Event, shuffled: Option<&mut Rng>, style: u64) -> (String, String) {
    let fields = [
        ("id", Value::from(event.id.clone())),
        ("type", Value::from(event.kind)),
        ("occurred_at", Value::from(unix(event.occurred))),
        ("message", Value::from(event.message.clone())),
        ("recipient", Value::from(event.to.clone())),
    ];
    let mut order: Vec<usize> = (0..fields.len()).collect();
    let mut looks = STYLES[style as usize].to_string();
    if let Some(rng) = shuffled {
        rng.shuffle(&mut order);
        looks = format!("keys reordered, {looks}");
    }
    (serialise(&fields, &order, style), looks)
}

/// Simulated ms as the provider's clock reads it: UNIX seconds.
fn unix(ms: i64) -> i64 {
    (DEFAULT_START + ms).div_euclid(1000)
}

fn event(id: &str, kind: &'static str, occurred: i64, message: &str, to: &str) -> Event {
    Event {
        id: id.to_string(),
        kind,
        occurred,
        message: message.to_string(),
        to: to.to_string(),
    }
}

fn genuine(event: Event, at: i64, style: u64) -> Hook {
    let (body, looks) = body(&event, None, style);
    Hook {
        label: event.id.clone(),
        nature: Nature::Genuine,
        event: Some(event),
        looks,
        body,
        signing: Signing::Genuine,
        at,
        down: false,
        lag_s: 0,
        rotation: Rotation::None,
    }
}

/// The malformed requests a scenario may hold: (what, body, signing).
fn malformed(kind: u64, to: &str, at: i64) -> (String, String, Signing) {
    let id = format!("evt_x{}", at / SECOND);
    match kind {
        0 => (
            "a body cut short".to_string(),
            format!("{{\"id\":\"{id}\",\"type\":\"bounced\",\"occurred_at\":17"),
            Signing::Genuine,
        ),
        1 => (
            "a body with no message".to_string(),
            format!(
                "{{\"id\":\"{id}\",\"type\":\"delivered\",\"occurred_at\":{},\"recipient\":\"{to}\"}}",
                unix(at)
            ),
            Signing::Genuine,
        ),
        2 => (
            "a time written as text".to_string(),
            format!(
                "{{\"id\":\"{id}\",\"type\":\"delivered\",\"occurred_at\":\"yesterday\",\"message\":\"msg_1\",\"recipient\":\"{to}\"}}"
            ),
            Signing::Genuine,
        ),
        3 => (
            "an unreadable signature header".to_string(),
            format!("{{\"id\":\"{id}\",\"type\":\"bounced\"}}"),
            // Spoiled in one of the ways a header can be, by its minute.
            Signing::Garbled {
                form: (at / MINUTE % i64::from(GARBLED_FORMS)) as u8,
            },
        ),
        _ => (
            "no signature header".to_string(),
            format!("{{\"id\":\"{id}\",\"type\":\"bounced\"}}"),
            Signing::Unsigned,
        ),
    }
}

fn bad(label: &str, kind: u64, to: &str, at: i64) -> Hook {
    let (looks, body, signing) = malformed(kind, to, at);
    Hook {
        label: label.to_string(),
        nature: Nature::Malformed,
        event: None,
        looks,
        body,
        signing,
        at,
        down: false,
        lag_s: 0,
        rotation: Rotation::None,
    }
}

/// A whole minute after `m` minutes and `s` seconds: a time between two
/// wake-ups of the dispatcher.
fn at(m: i64, s: i64) -> i64 {
    m * MINUTE + s * SECOND
}

impl Batch {
    /// The chapter's batch: each mistake shows once.
    fn chapter() -> Batch {
        let first: Vec<Message> = ["ada", "ben", "cleo", "dana"]
            .iter()
            .enumerate()
            .map(|(i, n)| Message {
                id: format!("msg_{}", i + 1),
                to: address(n),
                at: 0,
            })
            .collect();
        // Between two wake-ups: ada's just before her bounce comes.
        let later: Vec<Message> = [
            ("ada", at(1, 5)),
            ("ben", at(1, 25)),
            ("cleo", at(2, 20)),
            ("dana", at(2, 30)),
        ]
        .iter()
        .enumerate()
        .map(|(i, (n, when))| Message {
            id: format!("msg_{}", i + 5),
            to: address(n),
            at: *when,
        })
        .collect();
        let ada = address("ada");
        let ben = address("ben");
        let cleo = address("cleo");
        let dana = address("dana");
        let mut hooks = vec![
            genuine(
                event("evt_1", "delivered", at(0, 5), "msg_1", &ada),
                at(0, 40),
                0,
            ),
            genuine(
                event("evt_2", "delivered", at(0, 8), "msg_2", &ben),
                at(0, 50),
                2,
            ),
            genuine(
                event("evt_3", "bounced", at(0, 30), "msg_1", &ada),
                at(1, 10),
                1,
            ),
            genuine(
                event("evt_4", "bounced", at(0, 30), "msg_4", &dana),
                at(1, 50),
                0,
            ),
            genuine(
                event("evt_5", "delivered", at(0, 10), "msg_4", &dana),
                at(2, 10),
                2,
            ),
            genuine(
                event("evt_6", "delivered", at(0, 9), "msg_3", &cleo),
                at(3, 10),
                1,
            ),
        ];
        let forged = event("evt_7", "bounced", at(1, 20), "msg_2", &ben);
        let (body_forged, looks) = body(&forged, None, 0);
        hooks.push(Hook {
            label: "evt_7".to_string(),
            nature: Nature::Forged,
            event: Some(forged),
            looks,
            body: body_forged,
            signing: Signing::Forged,
            at: at(1, 30),
            down: false,
            lag_s: 0,
            rotation: Rotation::None,
        });
        let old = event("evt_0", "complained", at(0, 0) - 3 * DAY, "msg_0", &cleo);
        let (body_old, looks) = body(&old, None, 0);
        hooks.push(Hook {
            label: "evt_0".to_string(),
            nature: Nature::Replayed,
            event: Some(old),
            looks,
            body: body_old,
            signing: Signing::Replayed {
                signed_at_ms: -3 * DAY + 20 * SECOND,
            },
            at: at(1, 40),
            down: false,
            lag_s: 0,
            rotation: Rotation::None,
        });
        hooks.push(bad("evt_x1", 0, &cleo, at(3, 30)));
        hooks.sort_by_key(|h| h.at);
        let mut messages = first;
        messages.extend(later);
        Batch {
            seed: None,
            title: "the chapter's batch",
            messages,
            hooks,
            rounds: vec![at(5, 45)],
            outage: None,
            provider: ProviderScript::default(),
            deploy: None,
            end: 7 * MINUTE,
            during: None,
        }
    }

    /// A forged copy of a real bounce, with the real event's id, comes a
    /// minute before it; a complaint comes while the endpoint is down, and
    /// is taken when the provider sends it again, five minutes later.
    fn second() -> Batch {
        let eli = address("eli");
        let fay = address("fay");
        let bounce = event("evt_1", "bounced", at(0, 20), "msg_1", &eli);
        let (copy, looks) = body(&bounce, None, 1);
        let forged = Hook {
            label: "evt_f1".to_string(),
            nature: Nature::Forged,
            event: Some(bounce.clone()),
            looks,
            body: copy,
            signing: Signing::Forged,
            at: at(0, 30),
            down: false,
            lag_s: 0,
            rotation: Rotation::None,
        };
        let mut complaint = genuine(
            event("evt_2", "complained", at(0, 40), "msg_2", &fay),
            at(1, 40),
            0,
        );
        complaint.down = true;
        Batch {
            seed: None,
            title: "a forged copy before a bounce, a complaint while the endpoint is down",
            messages: vec![
                Message::new("msg_1", &eli, 0),
                Message::new("msg_2", &fay, 0),
                Message::new("msg_3", &eli, at(2, 20)),
                Message::new("msg_4", &fay, at(7, 10)),
            ],
            hooks: vec![forged, genuine(bounce, at(1, 30), 2), complaint],
            rounds: vec![at(6, 45)],
            outage: Some((at(1, 35), at(4, 0))),
            provider: ProviderScript::default(),
            deploy: None,
            end: 9 * MINUTE,
            during: None,
        }
    }

    /// A bounce taken while the dispatcher is sending a batch: cleo's
    /// first email bounced, and the provider's report comes while the
    /// dispatcher is sending three more, two of them to cleo, one before
    /// and one after dana's in the order they were queued. The provider
    /// holds the send to dana until the endpoint, in a process of its own,
    /// has taken the report: whatever order the batch goes out in, one
    /// email to cleo is still to go once the bounce is taken, and only a
    /// look at the list right before that send stops it.
    fn racing() -> Batch {
        let cleo = address("cleo");
        let dana = address("dana");
        let bounce = genuine(
            event("evt_1", "bounced", at(1, 40), "msg_1", &cleo),
            at(2, 1),
            1,
        );
        Batch {
            seed: None,
            title: "a bounce taken while the dispatcher sends a batch",
            messages: vec![
                Message::new("msg_1", &cleo, 0),
                Message::new("msg_2", &cleo, at(1, 10)),
                Message::new("msg_3", &dana, at(1, 20)),
                Message::new("msg_4", &cleo, at(1, 30)),
            ],
            during: Some((dana, bounce.label.clone())),
            hooks: vec![bounce],
            // Whatever the endpoint did not take (it found the database
            // busy, say), the provider sends again.
            rounds: vec![at(3, 45)],
            outage: None,
            provider: ProviderScript::default(),
            deploy: None,
            end: 5 * MINUTE,
        }
    }

    /// A scenario drawn from `seed` over the chapter's whole world.
    fn generated(seed: u64) -> Batch {
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 11);
        let mut names = NAMES.to_vec();
        rng.shuffle(&mut names);
        let people: Vec<String> = names[..rng.between(2, 4) as usize]
            .iter()
            .map(|n| address(n))
            .collect();
        let mut messages: Vec<Message> = (1..=rng.between(2, 4))
            .map(|i| Message {
                id: format!("msg_{i}"),
                to: rng.pick(&people).clone(),
                at: 0,
            })
            .collect();
        // What the provider reports on the first emails, sent at 0:00.
        let mut hooks = Vec::new();
        let mut number = 0;
        let mut stamp = 0;
        let mut order = Rng::new(seed ^ 0x1111_0dde_7000);
        for m in messages.clone() {
            let kinds: &[&'static str] = match rng.between(0, 4) {
                0 => &["delivered"],
                1 => &["bounced"],
                2 => &["delivered", "complained"],
                3 => &["delivered", "bounced"],
                _ => &[],
            };
            // The provider's clock may put a delivery after the bounce or
            // the complaint of the same message: the rules go by that clock
            // alone, whatever the kinds. From a stream of its own.
            let kinds: Vec<&'static str> = match kinds.len() == 2 && order.between(0, 2) == 0 {
                true => kinds.iter().rev().copied().collect(),
                false => kinds.to_vec(),
            };
            let mut occurred = rng.between(3, 30) as i64 * SECOND;
            for kind in kinds {
                number += 1;
                // Distinct provider times for every event of the scenario.
                stamp += 1;
                occurred += stamp;
                let event = event(&format!("evt_{number}"), kind, occurred, &m.id, &m.to);
                let arrives = occurred + rng.between(1, 300) as i64 * SECOND;
                let arrives = if arrives % MINUTE == 0 {
                    arrives + 7 * SECOND
                } else {
                    arrives
                };
                let style = rng.between(0, 2);
                let shuffled = rng.between(0, 1) == 0;
                let (body, looks) = if shuffled {
                    body(&event, Some(&mut rng), style)
                } else {
                    body(&event, None, style)
                };
                // Signed when it was queued, up to five minutes before it
                // comes, never before the event; or by a clock that runs
                // up to five minutes ahead.
                let waited = (arrives - event.occurred) / SECOND;
                let lag_s = match *rng.pick(&[0, 0, 0, 30, 170, 300, -40, -300]) {
                    lag if lag > 0 => lag.min(waited),
                    lag => lag,
                };
                hooks.push(Hook {
                    label: event.id.clone(),
                    nature: Nature::Genuine,
                    event: Some(event),
                    looks,
                    body,
                    signing: Signing::Genuine,
                    at: arrives,
                    down: false,
                    lag_s,
                    rotation: Rotation::None,
                });
                // Sometimes the next report on the message happens in the
                // same second: the rules keep the first one taken.
                let gap = match rng.between(10, 60) {
                    gap if gap < 16 => 0,
                    gap => gap,
                };
                occurred += gap as i64 * SECOND;
            }
        }
        let genuine: Vec<Hook> = hooks.clone();
        // The provider sends some twice.
        if !genuine.is_empty() && rng.between(0, 2) == 0 {
            let mut again = rng.pick(&genuine).clone();
            again.at += rng.between(1, 4) as i64 * MINUTE;
            again.looks = format!("{}, sent twice", again.looks);
            hooks.push(again);
        }
        let warned: Vec<String> = genuine
            .iter()
            .filter_map(|h| h.event.as_ref())
            .filter(|e| e.suppresses())
            .map(|e| e.to.clone())
            .collect();
        let innocent: Vec<&String> = people.iter().filter(|p| !warned.contains(p)).collect();
        // Forged: a bounce for someone nothing bounced, or a copy of a
        // genuine event, made up before it comes.
        for f in 0..rng.between(0, 2) {
            let label = format!("evt_f{}", f + 1);
            let copy = rng.between(0, 1) == 0 && !genuine.is_empty();
            let (event, when) = if copy || innocent.is_empty() {
                let Some(h) = genuine.get(rng.between(0, genuine.len().max(1) as u64 - 1) as usize)
                else {
                    continue;
                };
                let e = h.event.clone().expect("genuine hooks have events");
                let when = (h.at - rng.between(10, 50) as i64 * SECOND).max(at(0, 2));
                (e, when)
            } else {
                let to = (*rng.pick(&innocent)).clone();
                let message = first_to(&messages, &to);
                let kind = *rng.pick(&["bounced", "complained"]);
                let occurred = rng.between(60, 300) as i64 * SECOND + 1;
                let when = occurred + rng.between(5, 50) as i64 * SECOND;
                (event(&label, kind, occurred, &message, &to), when)
            };
            let (body, looks) = body(&event, None, rng.between(0, 2));
            hooks.push(Hook {
                label,
                nature: Nature::Forged,
                event: Some(event),
                looks,
                body,
                signing: Signing::Forged,
                at: if when % MINUTE == 0 {
                    when + SECOND
                } else {
                    when
                },
                down: false,
                lag_s: 0,
                rotation: Rotation::None,
            });
        }
        // Replayed: an old bounce or complaint, captured days ago, or a
        // genuine event of this scenario sent again well after it came.
        for r in 0..rng.between(0, 2) {
            let label = format!("evt_r{}", r + 1);
            let recent = rng.between(0, 1) == 0 && !genuine.is_empty();
            let (event, signed_at, when) = if recent || innocent.is_empty() {
                let Some(h) = genuine.get(rng.between(0, genuine.len().max(1) as u64 - 1) as usize)
                else {
                    continue;
                };
                let e = h.event.clone().expect("genuine hooks have events");
                (e, h.at, h.at + rng.between(6, 10) as i64 * MINUTE)
            } else {
                let to = (*rng.pick(&innocent)).clone();
                let days = rng.between(1, 4) as i64 * DAY;
                let kind = *rng.pick(&["bounced", "complained"]);
                let e = event(&format!("evt_old{}", r + 1), kind, -days, "msg_0", &to);
                let when = rng.between(1, 8) as i64 * MINUTE + 25 * SECOND;
                (e, -days + 30 * SECOND, when)
            };
            let (body, looks) = body(&event, None, rng.between(0, 2));
            hooks.push(Hook {
                label,
                nature: Nature::Replayed,
                event: Some(event),
                looks,
                body,
                signing: Signing::Replayed {
                    signed_at_ms: signed_at,
                },
                at: when,
                down: false,
                lag_s: 0,
                rotation: Rotation::None,
            });
        }
        // Half the batches (drawn from a stream of their own, so the rest
        // is drawn as before) have a bounce for someone nothing bounced,
        // signed with the provider's secret but stamped six to ten minutes
        // ahead of the service's clock: out of the tolerance, on the side
        // a check of the age alone never looks at.
        let mut ahead = Rng::new(seed ^ 0x1111_f07e_0a0d);
        if ahead.between(0, 1) == 0 && !innocent.is_empty() {
            let to = (*ahead.pick(&innocent)).clone();
            let message = first_to(&messages, &to);
            let when = ahead.between(1, 9) as i64 * MINUTE + 50 * SECOND;
            let e = event("evt_a1", "bounced", when, &message, &to);
            let (body, looks) = body(&e, None, ahead.between(0, 2));
            hooks.push(Hook {
                label: "evt_a1".to_string(),
                nature: Nature::Ahead,
                event: Some(e),
                looks,
                body,
                signing: Signing::Replayed {
                    signed_at_ms: when + ahead.between(6, 10) as i64 * MINUTE,
                },
                at: when,
                down: false,
                lag_s: 0,
                rotation: Rotation::None,
            });
        }
        for b in 0..rng.between(0, 2) {
            let to = rng.pick(&people).clone();
            let when = rng.between(1, 9) as i64 * MINUTE + 35 * SECOND;
            hooks.push(bad(
                &format!("evt_x{}", b + 1),
                rng.between(0, 4),
                &to,
                when,
            ));
        }
        // Emails queued later, between wake-ups: after a bounce some of them
        // must not go.
        let first = messages.len();
        for i in 0..rng.between(2, 4) {
            messages.push(Message {
                id: format!("msg_{}", first as u64 + i + 1),
                to: rng.pick(&people).clone(),
                at: at(rng.between(1, 12) as i64, rng.between(10, 50) as i64),
            });
        }
        // Every address a genuine bounce or complaint names is emailed
        // again a few minutes after that report came, and once more after
        // the provider's second round of sending again: by then the report
        // was taken, whatever one fault did to its requests. From a stream of
        // its own, so the rest is drawn as before.
        let mut after = Rng::new(seed ^ 0x1111_b0a7_ce00);
        let mut warned_at: Vec<(String, i64)> = Vec::new();
        for h in &genuine {
            let Some(e) = h.event.as_ref().filter(|e| e.suppresses()) else {
                continue;
            };
            match warned_at.iter_mut().find(|(to, _)| *to == e.to) {
                Some((_, when)) => *when = (*when).max(h.at),
                None => warned_at.push((e.to.clone(), h.at)),
            }
        }
        for (to, came) in warned_at {
            let soon = came / MINUTE + after.between(1, 3) as i64;
            for (minute, second) in [(soon, after.between(10, 50)), (17, after.between(10, 40))] {
                if (12..17).contains(&minute) {
                    continue;
                }
                let number = messages.len() + 1;
                messages.push(Message {
                    id: format!("msg_{number}"),
                    to: to.clone(),
                    at: at(minute, second as i64),
                });
            }
        }
        // Sometimes the endpoint is down for a few minutes.
        let outage = (rng.between(0, 1) == 0).then(|| {
            let from = rng.between(1, 5) as i64 * MINUTE;
            (from, from + rng.between(2, 4) as i64 * MINUTE)
        });
        if let Some((from, to)) = outage {
            for h in hooks.iter_mut().filter(|h| (from..to).contains(&h.at)) {
                h.down = true;
            }
        }
        // A bounce or complaint for someone new, taken by a process of its
        // own, as a web server runs beside a worker, just after a wake-up
        // while the endpoint is up: the dispatcher is then sending a batch
        // with mail to that address on both sides of a send to someone
        // else. The explorer plays it in turn, after that wake-up's batch.
        // From a stream of its own.
        let mut racing = Rng::new(seed ^ 0x1111_2ace_0000);
        let wakes: Vec<i64> = (2..11)
            .map(|m| m * MINUTE)
            .filter(|w| outage.is_none_or(|(from, to)| !(from..to).contains(&(w + SECOND))))
            .collect();
        let mut during = None;
        if !wakes.is_empty() {
            let wake = wakes[racing.between(0, wakes.len() as u64 - 1) as usize];
            let (stopped, other) = (
                address(names[people.len()]),
                address(names[people.len() + 1]),
            );
            let first = format!("msg_{}", messages.len() + 1);
            messages.push(Message::new(&first, &stopped, 0));
            for (who, before) in [(&stopped, 50), (&other, 40), (&stopped, 30)] {
                let id = format!("msg_{}", messages.len() + 1);
                messages.push(Message::new(&id, who, wake - before * SECOND));
            }
            number += 1;
            let kind = *racing.pick(&["bounced", "complained"]);
            let occurred = racing.between(70, (wake / SECOND - 20) as u64) as i64 * SECOND;
            let stop = event(&format!("evt_{number}"), kind, occurred, &first, &stopped);
            let hook = self::genuine(stop, wake + SECOND, racing.between(0, 2));
            during = Some((other, hook.label.clone()));
            hooks.push(hook);
        }
        // The provider's side of sending: sometimes down for minutes while
        // later emails go out (chapter 5's backoff), and one more person,
        // who gets only a later email, whose address it refuses for good,
        // rate-limits once, or fails twice.
        let mut provider = ProviderScript::default();
        if rng.between(0, 1) == 0 {
            // Over by 13:30, so that a third failure's five minutes end
            // before the batch does.
            let from = rng.between(4, 8) as i64 * MINUTE + 30 * SECOND;
            provider.outages = vec![(from, from + rng.between(1, 5) as i64 * MINUTE)];
        }
        {
            let gus = address("gus");
            // By the seed, so that any three seeds in a row try all three.
            match seed % 3 {
                0 => provider.rejected.push(gus.clone()),
                1 => provider.rate_limited.push((gus.clone(), 1, 90)),
                _ => provider.flaky.push((gus.clone(), 2)),
            }
            let number = messages.len() + 1;
            messages.push(Message {
                id: format!("msg_{number}"),
                to: gus,
                at: at(rng.between(2, 8) as i64, rng.between(10, 50) as i64),
            });
        }
        hooks.sort_by_key(|h| h.at);
        // A deploy, whose new process wakes the dispatcher at once, between
        // two whole minutes. When the provider fails an address a few times
        // or asks it to wait, inside the wait after its first or second
        // failure, where only the backoff or the Retry-After keeps the new
        // process from trying again; otherwise, half the time, at any
        // moment. From a stream of its own.
        let mut deploying = Rng::new(seed ^ 0x1111_de91_0e00);
        let waits: Vec<(&String, Vec<i64>)> = provider
            .flaky
            .iter()
            .map(|(to, _)| (to, vec![5, 30]))
            .chain(
                provider
                    .rate_limited
                    .iter()
                    .map(|(to, _, s)| (to, vec![*s])),
            )
            .collect();
        let queued = |to: &String| messages.iter().find(|m| &m.to == to).map(|m| m.at);
        let deploy = match waits.first().and_then(|(to, w)| Some((queued(to)?, w))) {
            Some((queued, waits)) => {
                // Tried at the first whole minute, then at each one after
                // its wait.
                let tried = (queued + MINUTE - 1).div_euclid(MINUTE) * MINUTE;
                let k = deploying.between(0, waits.len() as u64 - 1) as usize;
                let failed = tried + k as i64 * MINUTE;
                Some(failed + deploying.between(1, waits[k] as u64 - 1) as i64 * SECOND)
            }
            None => (deploying.between(0, 1) == 0).then(|| {
                at(
                    deploying.between(1, 11) as i64,
                    deploying.between(1, 59) as i64,
                )
            }),
        };
        // While the provider replaces its secret it signs with both, its
        // next one before or after the one the service holds; a forger may
        // put two signatures in, neither the service's. From a stream of
        // its own.
        let mut rotating = Rng::new(seed ^ 0x1111_5ec2_e700);
        for h in hooks.iter_mut() {
            if matches!(h.signing, Signing::Genuine | Signing::Forged) {
                h.rotation = match rotating.between(0, 3) {
                    0 => Rotation::First,
                    1 => Rotation::Second,
                    _ => Rotation::None,
                };
            }
        }
        Batch {
            seed: Some(seed),
            title: "",
            messages,
            hooks,
            rounds: vec![at(12, 45), at(16, 45), at(17, 45)],
            outage,
            provider,
            deploy,
            end: 19 * MINUTE,
            during,
        }
    }

    fn name(&self) -> String {
        match self.seed {
            None => self.title.to_string(),
            Some(seed) => format!("random batch (seed {seed})"),
        }
    }

    /// The steps that carry the clock from `from` to `to`: the dispatcher
    /// wakes at every whole minute in between, and at `from` if it is one.
    fn pass(from: i64, to: i64) -> Vec<Step> {
        if to <= from {
            return Vec::new();
        }
        let first = (from + MINUTE - 1).div_euclid(MINUTE) * MINUTE;
        if first >= to {
            return vec![Step::advance(to - from)];
        }
        let mut steps = Vec::new();
        if first > from {
            steps.push(Step::advance(first - from));
        }
        steps.push(Schedule::of(to, &[("dispatch", WAKE_UP)]));
        steps
    }

    /// The steps of each process in turn: one, or two around the deploy.
    /// The hook labelled `taken_apart`, if any, is left out: another
    /// process takes it (see [`race`]).
    fn steps(&self, taken_apart: Option<&str>) -> Vec<Vec<Step>> {
        // `None`: the deploy.
        let mut due: Vec<(i64, Option<Step>)> = Vec::new();
        for m in &self.messages {
            let input = serde_json::json!({ "id": m.id, "to": m.to, "text": m.text() });
            due.push((m.at, Some(Step::with("enqueue", input, &m.id))));
        }
        for h in self
            .hooks
            .iter()
            .filter(|h| Some(h.label.as_str()) != taken_apart)
        {
            due.push((h.at, Some(h.delivery().step(ENDPOINT))));
        }
        for &r in &self.rounds {
            due.push((r, Some(webhook::redeliver(ENDPOINT))));
        }
        if let Some(at) = self.deploy {
            due.push((at, None));
        }
        due.sort_by_key(|(at, _)| *at);
        let mut processes = Vec::new();
        let mut steps = Vec::new();
        let mut now = 0;
        for (at, step) in due {
            steps.extend(Batch::pass(now, at));
            now = now.max(at);
            match step {
                Some(step) => steps.push(step),
                None => {
                    processes.push(std::mem::take(&mut steps));
                    steps.push(Step::new("dispatch"));
                }
            }
        }
        steps.extend(Batch::pass(now, self.end));
        processes.push(steps);
        processes
    }

    /// The service's processes, one after the other, every report taken
    /// among its steps at its time: what the explorer plays.
    fn plans(&self, dir: &Path) -> Vec<Plan> {
        self.plans_without(dir, None)
    }

    fn plans_without(&self, dir: &Path, taken_apart: Option<&str>) -> Vec<Plan> {
        self.steps(taken_apart)
            .into_iter()
            .zip(1..)
            .map(|(steps, process)| Plan {
                dir: dir.to_path_buf(),
                process,
                steps,
                provider: self.provider.clone(),
                seed: self.seed.unwrap_or(0),
                ..Plan::default()
            })
            .collect()
    }

    /// The genuine events, each once.
    fn genuine(&self) -> Vec<&Event> {
        let mut seen: Vec<&Event> = Vec::new();
        for h in self.hooks.iter().filter(|h| h.nature == Nature::Genuine) {
            if let Some(e) = &h.event {
                if !seen.iter().any(|s| s.id == e.id) {
                    seen.push(e);
                }
            }
        }
        seen
    }

    /// The genuine events about `message` in the latest whole second the
    /// provider's clock reads for it: one, or several reported in that
    /// same second.
    fn last_second(&self, message: &str) -> Vec<&Event> {
        let events: Vec<&Event> = self
            .genuine()
            .into_iter()
            .filter(|e| e.message == message)
            .collect();
        let last = events.iter().map(|e| unix(e.occurred)).max();
        events
            .into_iter()
            .filter(|e| Some(unix(e.occurred)) == last)
            .collect()
    }
}

/// One outbox row as it was left.
#[derive(Clone, Debug)]
struct Left {
    message: String,
    status: String,
    delivery: String,
    error: String,
}

/// What one scenario left behind.
struct Played {
    batch: Batch,
    exits: Vec<Exit>,
    history: History,
    answered: Vec<Answered>,
    rows: Vec<Left>,
    unreadable: Option<String>,
}

impl Played {
    fn trouble(&self) -> Option<String> {
        if let Some(exit) = self.exits.iter().find(|e| **e != Exit::Finished) {
            return Some(format!("the service {}", exit.describe()));
        }
        self.unreadable.clone()
    }

    fn answers(&self, label: &str) -> Vec<&Answered> {
        self.answered.iter().filter(|a| a.event == label).collect()
    }

    /// When the endpoint first took `label`, if it did.
    fn taken(&self, label: &str) -> Option<i64> {
        self.answers(label)
            .into_iter()
            .find(|a| a.accepted())
            .map(|a| a.at_ms)
    }

    /// The genuine event whose status `message` must end with: the latest
    /// by the provider's clock, which reads whole seconds; of several in
    /// the same second, the first the endpoint took, since only a later
    /// event changes a status.
    fn latest(&self, message: &str) -> Option<&Event> {
        self.batch
            .last_second(message)
            .into_iter()
            .min_by_key(|e| self.taken(&e.id).unwrap_or(i64::MAX))
    }

    fn row(&self, message: &str) -> Option<&Left> {
        self.rows.iter().find(|r| r.message == message)
    }

    /// The emails that reached people: (simulated time, recipient, text).
    fn emails(&self) -> Vec<(i64, String, String)> {
        self.history
            .emails()
            .map(|d| (d.at_ms, d.recipient.clone(), d.body.clone()))
            .collect()
    }

    fn sent(&self, m: &Message) -> Vec<i64> {
        let text = m.text();
        self.emails()
            .into_iter()
            .filter(|(_, to, body)| *to == m.to && *body == text)
            .map(|(at, _, _)| at)
            .collect()
    }
}

fn answer(a: &Answered) -> String {
    match a.status {
        Some(s) => format!("{s}"),
        None => "no answer".to_string(),
    }
}

fn play(case: &Case, batch: &Batch) -> Result<Played> {
    let dir = scenario_dir()?;
    let exits = match &batch.during {
        Some((held, label)) => race(case, batch, dir.path(), held, label)?,
        None => case.start_in_turn(&batch.plans(dir.path()))?,
    };
    let history = History::read(dir.path())?;
    let answered = webhook::read(dir.path())?;
    let (rows, unreadable) = match read_left(dir.path()) {
        Ok(rows) => (rows, None),
        Err(err) => (
            Vec::new(),
            Some(format!("the outbox could not be read: {err:#}")),
        ),
    };
    Ok(Played {
        batch: batch.clone(),
        exits,
        history,
        answered,
        rows,
        unreadable,
    })
}

/// Plays `batch`'s service, its processes one after the other, while
/// another process takes the report `label` as soon as the service's
/// dispatcher has begun a send to `held`: the provider answers that send
/// only once the other process has ended, so the report is taken in the
/// middle of the batch. The other process moves the clock a second on
/// first, so that what the batch sent before it and after it never share a
/// time. Returns every exit, the other process's last.
fn race(case: &Case, batch: &Batch, dir: &Path, held: &str, label: &str) -> Result<Vec<Exit>> {
    let mut service = batch.plans_without(dir, Some(label));
    let apart = service.len() as u32 + 1;
    for plan in &mut service {
        plan.provider.hold_each = vec![(held.to_string(), vec![Moment::Ended(apart)])];
        plan.provider.hold_op = Some("dispatch".to_string());
    }
    let hook = batch
        .hooks
        .iter()
        .find(|h| h.label == label)
        .expect("the report taken meanwhile is one of the batch's hooks");
    let endpoint = Plan {
        dir: dir.to_path_buf(),
        process: apart,
        steps: vec![Step::advance(SECOND), hook.delivery().step(ENDPOINT)],
        ..Plan::default()
    };
    // The service waits for the endpoint's process: it may run for longer
    // before it counts as hung.
    let waiting = Case {
        timeout: case.timeout * 2,
        ..case.clone()
    };
    // The parent watches the world for the send, so it makes the world
    // before either process starts.
    let world = Recorder::open(dir, 0)?;
    let sending = || -> Result<bool> {
        for plan in &service {
            if world.reached(Moment::Sending(plan.process))? {
                return Ok(true);
            }
        }
        Ok(false)
    };
    std::thread::scope(|scope| -> Result<Vec<Exit>> {
        let running = scope.spawn(|| waiting.start_in_turn(&service));
        while !running.is_finished() && !sending()? {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let taken = case.start(&endpoint);
        Recorder::open(dir, apart)?.record_ended(apart)?;
        let mut exits = running
            .join()
            .expect("the thread running the service does not panic")?;
        exits.push(taken?);
        Ok(exits)
    })
}

/// The outbox as it was left, by message.
fn read_left(dir: &Path) -> Result<Vec<Left>> {
    if !dir.join(APP_DB).exists() {
        return Ok(Vec::new());
    }
    let statuses = read_pairs(
        dir,
        "SELECT message, status || '|' || coalesce(delivery, '') || '|' || coalesce(last_error, '')
           FROM outbox ORDER BY id",
    )?;
    Ok(statuses
        .into_iter()
        .map(|(message, rest)| {
            let mut parts = rest.splitn(3, '|');
            let status = parts.next().unwrap_or("").to_string();
            let delivery = parts.next().unwrap_or("").to_string();
            let error = parts.next().unwrap_or("").to_string();
            Left {
                message,
                status,
                delivery,
                error,
            }
        })
        .collect())
}

/// `notify run 11`: the chapter's batch, told as a story.
fn run(case: &Case) -> Result<String> {
    let batch = Batch::chapter();
    let played = play(case, &batch)?;
    let mut out = String::from(
        "4 emails at 0:00, 4 more from 1:05; the dispatcher wakes every minute\n\
         the provider's webhooks, as they arrive (it sends again what gets no 2xx at 5:45)\n\n",
    );
    out.push_str(&format!(
        "  {:<6}{:<8}{:<34}{:<16}{}\n",
        "at", "event", "says", "signed by", "answer"
    ));
    for a in &played.answered {
        let Some(h) = batch.hooks.iter().find(|h| h.label == a.event) else {
            continue;
        };
        let signed = match h.nature {
            Nature::Genuine | Nature::Malformed => "the provider",
            Nature::Forged => "not the secret",
            Nature::Replayed => "3 days ago",
            Nature::Ahead => "minutes ahead",
        };
        out.push_str(&format!(
            "  {:<6}{:<8}{:<34}{:<16}{}\n",
            clock(a.at_ms),
            a.event,
            h.said(),
            signed,
            answer(a)
        ));
    }
    out.push_str(&format!(
        "\n  {:<8}{:<18}{:<9}{:<9}{}\n",
        "message", "to", "sent", "status", "provider says"
    ));
    for m in &batch.messages {
        let sent: Vec<String> = played.sent(m).iter().map(|&t| clock(t)).collect();
        let sent = if sent.is_empty() {
            "-".to_string()
        } else {
            sent.join(", ")
        };
        let (status, said) = match played.row(&m.id) {
            Some(r) => (r.status.clone(), r.delivery.clone()),
            None => ("-".to_string(), String::new()),
        };
        let said = if said.is_empty() {
            "-".to_string()
        } else {
            said
        };
        out.push_str(&format!(
            "  {:<8}{:<18}{:<9}{:<9}{}\n",
            m.id, m.to, sent, status, said
        ));
    }
    let after = suppressed(&played).len();
    let believed = played
        .answered
        .iter()
        .filter(|a| a.accepted())
        .filter(|a| {
            batch.hooks.iter().any(|h| {
                h.label == a.event
                    && matches!(h.nature, Nature::Forged | Nature::Replayed | Nature::Ahead)
            })
        })
        .count();
    let overwritten = ordered(&played).len();
    let crashed = malformed_lines(&played).len();
    out.push_str(&format!(
        "\nemails after a bounce or complaint was taken: {after}\n\
         forged or replayed webhooks taken: {believed}\n\
         statuses not the latest by the provider's clock: {overwritten}\n\
         unreadable requests answered with a 5xx: {crashed}\n"
    ));
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// Emails sent to an address after its bounce or complaint was taken.
fn suppressed(played: &Played) -> Vec<String> {
    let mut lines = Vec::new();
    for e in played
        .batch
        .genuine()
        .into_iter()
        .filter(|e| e.suppresses())
    {
        let Some(taken) = played.taken(&e.id) else {
            continue;
        };
        for (at, to, body) in played.emails() {
            if to == e.to && at >= taken {
                lines.push(format!(
                    "{to} got {body:?} at {}, though its {} ({}) was taken at {}.",
                    clock(at),
                    e.kind,
                    e.id,
                    clock(taken)
                ));
            }
        }
    }
    lines.sort();
    lines.dedup();
    lines
}

/// What forged and replayed webhooks changed.
fn forged(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let warned: Vec<&String> = batch
        .genuine()
        .into_iter()
        .filter(|e| e.suppresses())
        .map(|e| &e.to)
        .collect();
    let mut lines = Vec::new();
    for h in batch
        .hooks
        .iter()
        .filter(|h| matches!(h.nature, Nature::Forged | Nature::Replayed | Nature::Ahead))
    {
        let Some(e) = &h.event else { continue };
        let how = match h.nature {
            Nature::Forged => "forged",
            Nature::Ahead => "minutes-ahead",
            _ => "replayed",
        };
        if e.suppresses() && !warned.contains(&&e.to) {
            for m in batch.messages.iter().filter(|m| m.to == e.to) {
                if played.sent(m).is_empty() {
                    lines.push(format!(
                        "{} to {} never went, though only a {how} {} ({}) named that address.",
                        m.id, e.to, e.kind, h.label
                    ));
                }
            }
        }
        let Some(row) = played.row(&e.message) else {
            continue;
        };
        let genuine_kind = batch
            .genuine()
            .iter()
            .any(|g| g.message == e.message && g.kind == e.kind);
        if row.delivery == e.kind && !genuine_kind {
            lines.push(format!(
                "{} ends {}, as only a {how} webhook ({}) says.",
                e.message, row.delivery, h.label
            ));
        }
    }
    lines.sort();
    lines.dedup();
    lines
}

/// Genuine webhooks refused, or never taken.
fn accepted(played: &Played) -> Vec<String> {
    let mut lines = Vec::new();
    let batch = &played.batch;
    for e in batch.genuine() {
        let answers = played.answers(&e.id);
        let genuine_answers: Vec<&&Answered> = answers
            .iter()
            .filter(|a| a.signing == Signing::Genuine)
            .collect();
        let looks = batch
            .hooks
            .iter()
            .find(|h| h.label == e.id && h.nature == Nature::Genuine)
            .map(|h| h.looks.clone())
            .unwrap_or_default();
        if let Some(refused) = genuine_answers.iter().find(|a| a.refused()) {
            lines.push(format!(
                "{} ({} {}, {looks}) got {} at {}: {}",
                e.id,
                e.kind,
                e.message,
                answer(refused),
                clock(refused.at_ms),
                refused.reason
            ));
        } else if !genuine_answers.iter().any(|a| a.accepted()) {
            lines.push(format!(
                "{} ({} {}) was never taken.",
                e.id, e.kind, e.message
            ));
        }
    }
    lines
}

/// Messages whose status is not the latest by the provider's clock.
fn ordered(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let mut lines = Vec::new();
    for m in &batch.messages {
        let Some(latest) = played.latest(&m.id) else {
            continue;
        };
        let Some(row) = played.row(&m.id) else {
            continue;
        };
        if row.delivery == latest.kind {
            continue;
        }
        // A status only a forged or replayed webhook gave is judged there.
        let made_up = batch.hooks.iter().any(|h| {
            matches!(h.nature, Nature::Forged | Nature::Replayed | Nature::Ahead)
                && h.event
                    .as_ref()
                    .is_some_and(|e| e.message == m.id && e.kind == row.delivery)
        });
        if made_up {
            continue;
        }
        let said = if row.delivery.is_empty() {
            "no status".to_string()
        } else {
            row.delivery.clone()
        };
        let tied = batch.last_second(&m.id).len() > 1;
        lines.push(format!(
            "{} ends with {said}, but the provider's latest is {} at {} ({}, came at {}){}.",
            m.id,
            latest.kind,
            clock(latest.occurred),
            latest.id,
            batch
                .hooks
                .iter()
                .find(|h| h.label == latest.id)
                .map(|h| clock(h.at))
                .unwrap_or_default(),
            if tied {
                ", taken first of the reports in that second: a later one in the same second is not later"
            } else {
                ""
            }
        ));
    }
    lines
}

/// Unreadable requests that got a 5xx, a 2xx, or no answer.
fn malformed_lines(played: &Played) -> Vec<String> {
    let mut lines = Vec::new();
    for h in played
        .batch
        .hooks
        .iter()
        .filter(|h| h.nature == Nature::Malformed)
    {
        for a in played.answers(&h.label).into_iter().filter(|a| a.reached()) {
            if !a.refused() {
                lines.push(format!(
                    "{} ({}) got {} at {}: {}",
                    h.label,
                    h.looks,
                    answer(a),
                    clock(a.at_ms),
                    a.reason
                ));
            }
        }
    }
    lines
}

fn first(played: &[Played], judge: impl Fn(&Played) -> Vec<String>, what: &str) -> Option<Finding> {
    first_found(
        played,
        Played::trouble,
        |p| (p.batch.name(), p.batch.seed),
        |p| &p.history.events,
        judge,
        what,
    )
    .1
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let mut batches = vec![Batch::chapter(), Batch::second(), Batch::racing()];
    batches.extend(
        options
            .seeds
            .iter()
            .map(|&s| Batch::generated(s.wrapping_add(1000))),
    );
    let played: Vec<Played> = in_parallel(&batches, |b| play(case, b))
        .into_iter()
        .collect::<Result<_>>()?;
    let processes: usize = played.iter().map(|p| p.exits.len()).sum();
    let count = |f: &dyn Fn(&Played) -> usize| -> usize { played.iter().map(f).sum() };
    let bounces = count(&|p| p.batch.genuine().iter().filter(|e| e.suppresses()).count());
    let fakes = count(&|p| {
        p.batch
            .hooks
            .iter()
            .filter(|h| matches!(h.nature, Nature::Forged | Nature::Replayed | Nature::Ahead))
            .count()
    });
    let genuine = count(&|p| p.batch.genuine().len());
    let messages = count(&|p| p.batch.messages.len());
    let unreadable = count(&|p| {
        p.batch
            .hooks
            .iter()
            .filter(|h| h.nature == Nature::Malformed)
            .count()
    });
    let mut verdicts = vec![
        judge(
            SUPPRESSED,
            format!("{bounces} bounces and complaints, no email after any was taken"),
            first(&played, suppressed, "emails after a bounce or complaint"),
        ),
        judge(
            FORGED,
            format!("{fakes} forged or replayed webhooks, none changed anything"),
            first(
                &played,
                forged,
                "changes made by forged or replayed webhooks",
            ),
        ),
        judge(
            ACCEPTED,
            format!("{genuine} genuine events, each taken"),
            first(&played, accepted, "genuine events refused or never taken"),
        ),
        judge(
            ORDERED,
            format!("{messages} messages, each with the provider's latest status"),
            first(&played, ordered, "messages not at their latest status"),
        ),
        judge(
            MALFORMED,
            format!("{unreadable} unreadable requests, each answered with a 4xx"),
            first(
                &played,
                malformed_lines,
                "unreadable requests not answered 4xx",
            ),
        ),
    ];
    let explored = explore(
        &Generated,
        "11",
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

/// Chapter 11's world for the explorer: a few emails, the provider's
/// reports on them arriving late, out of order and some twice, forged and
/// replayed ones, unreadable ones, sometimes an endpoint down for minutes,
/// and the provider's rounds of sending again. Faults: a crash after any
/// commit of `enqueue`, of the endpoint and of `dispatch`, and right after
/// a send the provider accepted; a failing commit of the endpoint (it
/// answers 500, and the provider sends the event again) and of `dispatch`.
struct Generated;

/// Whether `batch` has a hook `that` holds for.
fn any_hook(batch: &Batch, that: impl Fn(&Hook) -> bool) -> bool {
    batch.hooks.iter().any(that)
}

/// Whether `batch` has a hook `that` holds for that comes while the
/// endpoint is up, so that it is answered.
fn any_answered(batch: &Batch, that: impl Fn(&Hook) -> bool) -> bool {
    any_hook(batch, |h| !h.down && that(h))
}

/// Whether a genuine report of the batch was signed with two secrets, the
/// service's where `rotation` puts it.
fn rotated(b: &Batch, rotation: Rotation) -> bool {
    any_hook(b, |h| {
        h.nature == Nature::Genuine && h.signing == Signing::Genuine && h.rotation == rotation
    })
}

/// Whether a hook's signature header is spoiled in one of `forms` ways.
fn garbled(hook: &Hook, forms: &[u8]) -> bool {
    matches!(hook.signing, Signing::Garbled { form } if forms.contains(&(form % GARBLED_FORMS)))
}

/// The situations chapter 11's rules turn on. A request that comes while
/// the endpoint is down gets no answer, and only the provider sends its own
/// again: one nobody signed, or signed with another key, that comes then
/// reaches none of the situations its answer is judged on.
const DIMENSIONS: &[Dimension<Batch>] = &[
    Dimension {
        name: "a signed body that cannot be read",
        reached: |b| {
            any_hook(b, |h| {
                h.nature == Nature::Malformed && h.signing == Signing::Genuine
            })
        },
    },
    Dimension {
        name: "a signature header whose timestamp is no number",
        reached: |b| any_answered(b, |h| garbled(h, &[0, 2])),
    },
    Dimension {
        name: "a signature header whose signature is no hex",
        reached: |b| any_answered(b, |h| garbled(h, &[0, 1])),
    },
    Dimension {
        name: "a signature header without its timestamp or its signature",
        reached: |b| any_answered(b, |h| garbled(h, &[3, 4, 5])),
    },
    Dimension {
        name: "a signature header whose timestamp is a number no clock shows",
        reached: |b| any_answered(b, |h| garbled(h, &[6])),
    },
    Dimension {
        name: "a forged signature shorter than the provider's (empty, or cut)",
        reached: |b| {
            any_answered(b, |h| {
                h.signing == Signing::Forged
                    && webhook::forged_shape(h.body.as_bytes()) != 0
            })
        },
    },
    Dimension {
        name: "no signature header",
        reached: |b| any_answered(b, |h| h.signing == Signing::Unsigned),
    },
    Dimension {
        name: "a forged webhook",
        reached: |b| any_answered(b, |h| h.nature == Nature::Forged),
    },
    Dimension {
        name: "a genuine webhook replayed days later",
        reached: |b| any_answered(b, |h| h.nature == Nature::Replayed),
    },
    Dimension {
        name: "a webhook stamped more than five minutes ahead of the service's clock",
        reached: |b| any_answered(b, |h| h.nature == Nature::Ahead),
    },
    Dimension {
        name: "a genuine webhook signed by a provider clock ahead of the service's",
        reached: |b| any_hook(b, |h| h.nature == Nature::Genuine && h.lag_s < 0),
    },
    Dimension {
        name: "a genuine webhook signed with two secrets, the service's second",
        reached: |b| rotated(b, Rotation::Second),
    },
    Dimension {
        name: "a genuine webhook signed with two secrets, the service's first",
        reached: |b| rotated(b, Rotation::First),
    },
    Dimension {
        name: "a genuine webhook signed minutes before it came",
        reached: |b| any_hook(b, |h| h.nature == Nature::Genuine && h.lag_s >= 60),
    },
    Dimension {
        name: "a message's statuses arriving in another order than they happened",
        reached: |b| {
            let genuine: Vec<(i64, &Event)> = b
                .hooks
                .iter()
                .filter(|h| h.nature == Nature::Genuine)
                .filter_map(|h| Some((h.at, h.event.as_ref()?)))
                .collect();
            genuine.iter().any(|(came, e)| {
                genuine.iter().any(|(later, l)| {
                    later > came && l.message == e.message && unix(l.occurred) < unix(e.occurred)
                })
            })
        },
    },
    Dimension {
        name: "two reports on one message in the same second, the first taken standing",
        reached: |b| {
            let genuine = b.genuine();
            genuine.iter().any(|e| {
                genuine.iter().any(|l| {
                    l.id != e.id && l.message == e.message && unix(l.occurred) == unix(e.occurred)
                })
            })
        },
    },
    // The latest report is the message's status, but a bounce or a
    // complaint stops its address whether or not it is the latest.
    Dimension {
        name: "a bounce or complaint that changes no status, a later delivery of its message taken first, then mail to that address",
        reached: stale_stop,
    },
    Dimension {
        name: "the endpoint down while a webhook comes",
        reached: |b| any_hook(b, |h| h.down),
    },
    // A bounce or complaint stops an address for good: a delivery the
    // provider reports later, of another email in flight, changes nothing.
    Dimension {
        name: "an address delivered to after its bounce or complaint, then emailed again",
        reached: |b| delivered_after_suppressed(b, false),
    },
    Dimension {
        name: "a message delivered after its own bounce or complaint, then its address emailed again",
        reached: |b| delivered_after_suppressed(b, true),
    },
    // Chapter 5's backoff holds whenever the dispatcher wakes, not only on
    // the whole minutes of its schedule.
    Dimension {
        name: "a deploy whose new process wakes between whole minutes, after a failed send",
        reached: |b| b.deploy.is_some() && !b.provider.flaky.is_empty(),
    },
];

/// The genuine events that come while the endpoint is up, each with when
/// it comes.
fn taken_when(b: &Batch) -> Vec<(i64, &Event)> {
    b.hooks
        .iter()
        .filter(|h| h.nature == Nature::Genuine && !h.down)
        .filter_map(|h| Some((h.at, h.event.as_ref()?)))
        .collect()
}

/// Whether some address has a genuine delivery that happened after its
/// genuine bounce or complaint, on the provider's clock, and came after it
/// too, and an email queued to it after both came. With `same`, the
/// delivery is of the message that bounced or drew the complaint.
fn delivered_after_suppressed(b: &Batch, same: bool) -> bool {
    let genuine = taken_when(b);
    genuine
        .iter()
        .filter(|(_, e)| e.suppresses())
        .any(|(came, stop)| {
            genuine.iter().any(|(later, d)| {
                !d.suppresses()
                    && d.to == stop.to
                    && (!same || d.message == stop.message)
                    && unix(d.occurred) > unix(stop.occurred)
                    && later > came
                    && b.messages.iter().any(|m| m.to == stop.to && m.at > *later)
            })
        })
}

/// A bounce or complaint taken after a delivered report of the same
/// message that happened in the same second or later: it changes no status.
/// Its address is emailed again afterwards, and nothing else stopped it by
/// then, so only that bounce or complaint can.
fn stale_stop(b: &Batch) -> bool {
    let genuine = taken_when(b);
    let stale = |came: i64, stop: &Event| {
        genuine.iter().any(|(earlier, d)| {
            !d.suppresses()
                && d.message == stop.message
                && *earlier < came
                && unix(d.occurred) >= unix(stop.occurred)
        })
    };
    b.messages.iter().any(|m| {
        let stops: Vec<&(i64, &Event)> = genuine
            .iter()
            .filter(|(came, e)| e.suppresses() && e.to == m.to && *came < m.at)
            .collect();
        !stops.is_empty() && stops.iter().all(|(came, e)| stale(*came, e))
    })
}

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

    /// A process that starts wakes the dispatcher at once, as after the
    /// deploy: after a crash, or after a failing commit (the service's next
    /// pass), what the fault left due goes out then.
    fn startup(&self) -> Vec<Step> {
        vec![Step::new("dispatch")]
    }

    fn faults(&self) -> FaultModel {
        // The dispatcher claims and marks rows as chapters 3 and 5 taught,
        // so its commits crash and fail, and it dies right after a send the
        // provider took, as in chapter 10. Without chapter 6's sweep, such
        // a fault may strand what it had claimed, never send it twice.
        // `enqueue`'s commit never fails: the provider's scripted reports
        // would then speak of a message the service refused.
        FaultModel {
            crash_after_commit: &["enqueue", ENDPOINT, "dispatch"],
            fail_commit: &[ENDPOINT, "dispatch"],
            requests: &[],
            ..FaultModel::PUBLISH
        }
    }

    fn invariants(&self) -> Invariants {
        Invariants {
            recorded: true,
            told_once: true,
            settled: true,
            keyed: true,
            retry_gaps: &RETRY_GAPS,
            ..Invariants::default()
        }
    }

    fn observe(&self, batch: &Batch, run: &Run) -> Result<Observation> {
        let left = read_left(run.dir)?;
        let answered = webhook::read(run.dir)?;
        let mut fates = BTreeMap::new();
        for m in &batch.messages {
            let text = m.text();
            let told = run
                .history
                .emails()
                .filter(|d| d.recipient == m.to && d.body == text)
                .count() as u32;
            let state = match left.iter().find(|r| r.message == m.id) {
                Some(r) if r.delivery.is_empty() => r.status.clone(),
                Some(r) => format!("{}, {}", r.status, r.delivery),
                None => "no row".to_string(),
            };
            // Chapter 5's rules fix how often the provider is tried, and
            // when: compared without faults only.
            let tries: Vec<String> = run
                .history
                .attempts("email")
                .filter(|d| d.recipient == m.to && d.body == text)
                .map(|d| clock(d.at_ms))
                .collect();
            let detail = match tries.len() {
                0 => "never tried".to_string(),
                _ => format!("tried at {}", tries.join(", ")),
            };
            fates.insert(
                format!("{} to {}", m.id, m.to),
                Fate {
                    told,
                    state,
                    detail,
                },
            );
        }
        let mut labels: Vec<&String> = batch.hooks.iter().map(|h| &h.label).collect();
        labels.dedup();
        for label in labels {
            let mut sent = answered.iter().filter(|a| &a.event == label);
            let last = sent.next_back();
            let mut state = match last {
                Some(a) if a.accepted() => "taken (2xx)",
                Some(a) if a.refused() => "refused (4xx)",
                Some(a) if a.status.is_some() => "failed (5xx)",
                _ => "no answer",
            }
            .to_string();
            // Rule 3 holds in every play: a genuine report is never refused,
            // not even once before the 2xx that takes it (a failing commit
            // is the endpoint's own trouble, not the request's).
            let genuine = batch
                .hooks
                .iter()
                .any(|h| &h.label == label && h.nature == Nature::Genuine);
            if genuine && last.is_some_and(|a| !a.refused()) && sent.any(|a| a.refused()) {
                state.push_str(", refused (4xx) before");
            }
            fates.insert(
                format!("webhook {label}"),
                Fate {
                    told: 0,
                    state,
                    detail: String::new(),
                },
            );
        }
        let rows = left
            .into_iter()
            .map(|r| Row {
                subject: format!("{} ({})", r.message, r.status),
                status: r.status,
                error: (!r.error.is_empty()).then_some(r.error),
                message: None,
                wrong: None,
            })
            .collect();
        Ok(Observation { fates, rows })
    }

    /// Under a fault a bounce may be taken later than without it (its
    /// request failed and came again): an email to that address in between
    /// may go or not, so such emails are compared by their status only.
    /// One fault loses at most one of a report's requests, so by the
    /// provider's second round of sending again after the report last came,
    /// it was taken: an email queued after that is judged in full.
    /// Of two reports in the same second, the first taken stands, and a
    /// fault may change which is taken first: either status will do.
    fn under_faults(&self, batch: &Batch, fates: BTreeMap<String, Fate>) -> BTreeMap<String, Fate> {
        let mut taken_by: Vec<(String, i64)> = Vec::new();
        for h in batch.hooks.iter().filter(|h| h.nature == Nature::Genuine) {
            let Some(e) = h.event.as_ref().filter(|e| e.suppresses()) else {
                continue;
            };
            let by = batch
                .rounds
                .iter()
                .filter(|r| **r > h.at)
                .nth(1)
                .copied()
                .unwrap_or(i64::MAX);
            match taken_by.iter_mut().find(|(to, _)| *to == e.to) {
                Some((_, when)) => *when = (*when).max(by),
                None => taken_by.push((e.to.clone(), by)),
            }
        }
        let in_between: Vec<String> = batch
            .messages
            .iter()
            .filter(|m| taken_by.iter().any(|(to, by)| *to == m.to && m.at <= *by))
            .map(|m| format!("{} to {}", m.id, m.to))
            .collect();
        let tied: Vec<(String, Vec<&str>)> = batch
            .messages
            .iter()
            .filter_map(|m| {
                let kinds: Vec<&str> = batch.last_second(&m.id).iter().map(|e| e.kind).collect();
                (kinds.len() > 1).then(|| (format!("{} to {}", m.id, m.to), kinds))
            })
            .collect();
        let fates = fates.into_iter().map(|(subject, mut fate)| {
            if let Some((_, kinds)) = tied.iter().find(|(s, _)| *s == subject) {
                if let Some((status, kind)) = fate.state.split_once(", ") {
                    if kinds.contains(&kind) {
                        fate.state = format!("{status}, {} (same second)", kinds.join(" or "));
                    }
                }
            }
            (subject, fate)
        });
        fates
            .map(|(subject, fate)| {
                if in_between.contains(&subject) {
                    let state = fate.state.split(", ").nth(1).unwrap_or("").to_string();
                    (
                        subject,
                        Fate {
                            told: 0,
                            state,
                            detail: String::new(),
                        },
                    )
                } else {
                    (subject, fate)
                }
            })
            .collect()
    }

    fn shrink(&self, batch: &Batch) -> Vec<Batch> {
        let mut smaller = Vec::new();
        if batch.deploy.is_some() {
            smaller.push(Batch {
                deploy: None,
                ..batch.clone()
            });
        }
        if batch.provider != ProviderScript::default() {
            smaller.push(Batch {
                provider: ProviderScript::default(),
                ..batch.clone()
            });
        }
        if batch.outage.is_some() {
            let mut b = batch.clone();
            b.outage = None;
            for h in &mut b.hooks {
                h.down = false;
            }
            smaller.push(b);
        }
        for i in 0..batch.hooks.len() {
            let mut hooks = batch.hooks.clone();
            hooks.remove(i);
            smaller.push(Batch {
                hooks,
                ..batch.clone()
            });
        }
        for (i, m) in batch.messages.iter().enumerate() {
            let named = batch
                .hooks
                .iter()
                .any(|h| h.event.as_ref().is_some_and(|e| e.message == m.id));
            if !named && batch.messages.len() > 1 {
                let mut messages = batch.messages.clone();
                messages.remove(i);
                smaller.push(Batch {
                    messages,
                    ..batch.clone()
                });
            }
        }
        smaller
    }

    fn describe(&self, batch: &Batch) -> String {
        let messages: Vec<String> = batch
            .messages
            .iter()
            .map(|m| format!("{} to {} at {}", m.id, m.to, clock(m.at)))
            .collect();
        let hooks: Vec<String> = batch
            .hooks
            .iter()
            .map(|h| {
                let nature = match h.nature {
                    Nature::Genuine => "",
                    Nature::Forged => "forged ",
                    Nature::Replayed => "replayed ",
                    Nature::Ahead => "signed minutes ahead: ",
                    Nature::Malformed => "unreadable: ",
                };
                let down = if h.down { ", endpoint down" } else { "" };
                format!("{} {nature}{} at {}{down}", h.label, h.said(), clock(h.at))
            })
            .collect();
        let hooks = if hooks.is_empty() {
            "no webhooks".to_string()
        } else {
            format!("webhooks: {}", hooks.join(", "))
        };
        let mut text = format!("{}; {hooks}", messages.join(", "));
        if let Some((from, to)) = batch.outage {
            text.push_str(&format!("; endpoint down {} to {}", clock(from), clock(to)));
        }
        let p = &batch.provider;
        for (from, to) in &p.outages {
            text.push_str(&format!(
                "; provider down {} to {}",
                clock(*from),
                clock(*to)
            ));
        }
        for to in &p.rejected {
            text.push_str(&format!("; provider refuses {to}"));
        }
        for (to, n, s) in &p.rate_limited {
            text.push_str(&format!(
                "; provider answers {to} 429 {n}x, retry after {s} s"
            ));
        }
        for (to, n) in &p.flaky {
            text.push_str(&format!("; provider fails {to} {n}x"));
        }
        if let Some(at) = batch.deploy {
            text.push_str(&format!(
                "; a deploy at {} (the new process wakes the dispatcher at once)",
                clock(at)
            ));
        }
        text
    }
}
