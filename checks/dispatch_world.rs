//! The parts of the dispatcher world that chapters 5 to 11 share: the people
//! and their addresses, how a provider treats an address, and the words a
//! report uses for a provider's answers.
//!
//! Each chapter's world is built of these; what a chapter adds (outages,
//! deploys, preferences, templates, webhooks) stays with its check.

use lab::clock::{MINUTE, SECOND};
use lab::scenario::ProviderScript;
use lab::world::Outcome;
use serde::Serialize;

/// Chapter 5's backoff: after a row's n-th failed attempt, the next one
/// waits `RETRY_GAPS[n - 1]`; the fourth attempt is the last.
pub const RETRY_GAPS: [i64; 3] = [5 * SECOND, 30 * SECOND, 5 * MINUTE];

/// The names generated worlds draw their people from.
pub const NAMES: [&str; 20] = [
    "ada", "ben", "cleo", "dev", "emma", "finn", "gia", "hugo", "ivy", "jon", "kai", "lena",
    "milo", "nia", "omar", "pia", "rosa", "sam", "tara", "zoe",
];

/// Someone with a name and the channel they chose: where a message on
/// that channel goes follows from the two.
pub trait Addressed {
    fn name(&self) -> &str;
    fn channel(&self) -> &str;

    fn email(&self) -> String {
        format!("{}@example.com", self.name())
    }

    fn device(&self) -> String {
        format!("{}-phone", self.name())
    }

    /// Where a message on their channel goes: an address, or a phone's
    /// push token.
    fn recipient(&self) -> String {
        match self.channel() {
            "push" => self.device(),
            _ => self.email(),
        }
    }

    /// "dana@example.com (email)"
    fn label(&self) -> String {
        format!("{} ({})", self.recipient(), self.channel())
    }

    /// The SQL that puts the person in the case's `people` table; a
    /// person already there is left as they are.
    fn fixture(&self) -> String {
        format!(
            "INSERT OR IGNORE INTO people (id, email, device, channel) VALUES ('{}', '{}', '{}', '{}')",
            self.name(),
            self.email(),
            self.device(),
            self.channel()
        )
    }
}

/// The case's `publish` input: one person to tell one thing.
#[derive(Clone, Debug, Serialize)]
pub struct Notice {
    pub person: String,
    pub kind: String,
    pub text: String,
}

/// How a provider treats one recipient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Script {
    Fine,
    /// The first n sends fail with a 503, then it works.
    Flaky(u32),
    /// Every send fails with a 503.
    Dead,
    /// Every send reaches the provider and fails there, and no answer
    /// comes: the dispatcher sees a timeout, every time.
    Unanswered,
    /// Refused for good (a 4xx): the address does not exist, the phone is
    /// no longer registered.
    Refused,
    /// The first n sends are answered 429 with a `Retry-After`, then it
    /// works; [`ALWAYS`] for an address rate limited every time. A 429
    /// says the provider is up.
    Limited(u32),
    /// The first n sends are answered 429 as [`Script::Limited`]'s are;
    /// every send after them kills the process sending it before the
    /// provider gets it (a poison message, chapter 6).
    Poison(u32),
}

/// A [`Script::Limited`] that never ends.
pub const ALWAYS: u32 = u32::MAX;

impl Script {
    /// "fails 2x", "always 503"; nothing for a fine one.
    pub fn said(self) -> Option<String> {
        Some(match self {
            Script::Fine => return None,
            Script::Flaky(n) => format!("fails {n}x"),
            Script::Dead => "always 503".to_string(),
            Script::Unanswered => "never answers".to_string(),
            Script::Refused => "refused".to_string(),
            Script::Limited(ALWAYS) => "always 429".to_string(),
            Script::Limited(n) => format!("429 {n}x"),
            Script::Poison(0) => "kills every sender".to_string(),
            Script::Poison(n) => format!("429 {n}x, then kills every sender"),
        })
    }
}

/// The provider's script for these recipients, each treated as its
/// [`Script`] says; a 429 asks for `retry_after_s`. Outages, hangs and
/// latency are the chapter's to add.
pub fn provider(recipients: &[(String, Script)], retry_after_s: i64) -> ProviderScript {
    let with = |script: Script| {
        recipients
            .iter()
            .filter(|(_, s)| *s == script)
            .map(|(r, _)| r.clone())
            .collect()
    };
    ProviderScript {
        flaky: recipients
            .iter()
            .filter_map(|(r, s)| match *s {
                Script::Flaky(n) => Some((r.clone(), n)),
                _ => None,
            })
            .collect(),
        rate_limited: recipients
            .iter()
            .filter_map(|(r, s)| match *s {
                Script::Limited(n) | Script::Poison(n) if n > 0 => {
                    Some((r.clone(), n, retry_after_s))
                }
                _ => None,
            })
            .collect(),
        unreachable: with(Script::Dead),
        unanswered: with(Script::Unanswered),
        rejected: with(Script::Refused),
        crash_on: recipients
            .iter()
            .filter(|(_, s)| matches!(s, Script::Poison(_)))
            .map(|(r, _)| r.clone())
            .collect(),
        ..ProviderScript::default()
    }
}

/// One word for a provider's answer, as a report lists attempts.
pub fn answered(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Delivered => "sent",
        Outcome::Deduplicated => "repeat",
        Outcome::Failed => "failed",
        Outcome::Rejected => "refused",
    }
}
