//! The outside world's providers, as the case sees them.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::db::lock;
use crate::rng::Rng;
use crate::scenario::{Fault, Moment, ProviderScript, HOLD_LIMIT_MS};
use crate::serve::EXIT_LAB_ERROR;
use crate::world::{Kind, Outcome, Recorder};

/// Why a send did not go through.
#[derive(Debug)]
pub enum SendError {
    /// The provider failed or is down (a 5xx, an outage): nothing was sent,
    /// and a later retry may work.
    Unavailable(String),
    /// The provider refused the message for good (a 4xx such as 400, 404,
    /// 410 or 422, e.g. an address that does not exist, a device token that
    /// is no longer registered): retrying cannot help.
    Rejected(String),
    /// Too many requests (a 429): nothing was sent, and the provider asks
    /// for no new request before `retry_after_ms` (its `Retry-After`) has
    /// passed. Transient, though it is a 4xx.
    RateLimited { retry_after_ms: i64, why: String },
    /// No answer came in time: the message may or may not have gone out.
    Timeout(String),
    /// The lab itself could not record the send (not the case's doing).
    Lab(anyhow::Error),
}

impl SendError {
    /// True when retrying the same message can never succeed.
    pub fn is_permanent(&self) -> bool {
        matches!(self, SendError::Rejected(_))
    }

    /// How long the provider asked the caller to wait before trying again
    /// (a 429's `Retry-After`), in milliseconds; `None` when it did not say.
    pub fn retry_after_ms(&self) -> Option<i64> {
        match self {
            SendError::RateLimited { retry_after_ms, .. } => Some(*retry_after_ms),
            _ => None,
        }
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Unavailable(why) => write!(f, "provider unavailable: {why}"),
            SendError::Rejected(why) => write!(f, "rejected for good: {why}"),
            SendError::RateLimited { why, .. } => write!(f, "rate limited: {why}"),
            SendError::Timeout(why) => write!(f, "no answer in time: {why}"),
            SendError::Lab(err) => write!(f, "the lab could not record the send: {err:#}"),
        }
    }
}

impl std::error::Error for SendError {}

impl From<anyhow::Error> for SendError {
    fn from(err: anyhow::Error) -> SendError {
        SendError::Lab(err)
    }
}

/// A provider of one channel (email or push). What it delivers reaches a
/// person at once and is recorded in the world, outside the service's
/// database: no rollback can recall it.
///
/// Like real provider APIs, it honours an idempotency key: a second send
/// with a key it delivered within the last 24 hours (of the lab's clock)
/// returns `Ok` and delivers nothing new.
pub struct Provider {
    channel: &'static str,
    recorder: Arc<Mutex<Recorder>>,
    script: ProviderScript,
    fault: Option<Fault>,
    sends: Mutex<HashMap<String, u32>>,
    rng: Mutex<Rng>,
}

/// Sends so far in this process, over every provider, that
/// [`ProviderScript::hold_op`] holds: what [`ProviderScript::hold_nth`]
/// counts.
static HELD_SENDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The email provider.
pub type Email = Provider;
/// The push provider.
pub type Push = Provider;

/// Ends the process on a send to `to`, before the provider gets it: the
/// world records the death with its recipient, so the grader knows the
/// world, not a fault of its own, ended the process.
fn killed_by(rec: &mut Recorder, to: &str) -> ! {
    let _ = rec.event_about(Kind::Crash, None, to, "process aborted");
    std::process::abort();
}

impl Provider {
    pub(crate) fn new(
        channel: &'static str,
        recorder: Arc<Mutex<Recorder>>,
        script: ProviderScript,
        fault: Option<Fault>,
        seed: u64,
    ) -> Provider {
        Provider {
            channel,
            recorder,
            script,
            fault,
            sends: Mutex::new(HashMap::new()),
            rng: Mutex::new(Rng::new(seed)),
        }
    }

    /// The channel this provider serves: "email" or "push".
    pub fn channel(&self) -> &str {
        self.channel
    }

    /// Sends `body` to `to`. When this returns `Ok`, the message is out.
    pub fn send(&self, to: &str, body: &str) -> Result<(), SendError> {
        self.deliver(to, body, None)
    }

    /// Sends `body` to `to` under an idempotency key: repeating a send with
    /// the same key within 24 hours delivers it only once.
    pub fn send_with_key(&self, key: &str, to: &str, body: &str) -> Result<(), SendError> {
        self.deliver(to, body, Some(key))
    }

    /// Sends an email with a text body and an HTML body under an
    /// idempotency key, as [`Provider::send_with_key`] does: the world keeps
    /// both bodies exactly as given.
    pub fn send_html_with_key(
        &self,
        key: &str,
        to: &str,
        text: &str,
        html: &str,
    ) -> Result<(), SendError> {
        self.deliver_message(to, text, Some(html), Some(key))
    }

    fn deliver(&self, to: &str, body: &str, key: Option<&str>) -> Result<(), SendError> {
        self.deliver_message(to, body, None, key)
    }

    fn deliver_message(
        &self,
        to: &str,
        body: &str,
        html: Option<&str>,
        key: Option<&str>,
    ) -> Result<(), SendError> {
        // A commit the world holds comes before the send: a crash right
        // after it strikes before the request leaves.
        lock(&self.recorder).settle_held()?;
        let in_op = match &self.script.hold_op {
            None => true,
            Some(op) => lock(&self.recorder).op() == Some(op.as_str()),
        };
        let nth_held = in_op && {
            let n = HELD_SENDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            self.script
                .hold_nth
                .as_ref()
                .is_some_and(|(at, _)| *at == n)
        };
        let own_hold = match &self.script.hold_nth {
            Some((_, moments)) if nth_held => Some(moments),
            _ => self
                .script
                .hold_each
                .iter()
                .find(|(r, _)| r == to)
                .filter(|_| in_op)
                .map(|(_, moments)| moments),
        };
        if in_op && (self.script.announce || own_hold.is_some()) {
            lock(&self.recorder).record_sending()?;
        }
        // The provider's latency is real time, spent outside every lock.
        let jitter = match self.script.jitter_ms {
            0 => 0,
            max => lock(&self.rng).between(0, max),
        };
        let wait = self.script.latency_ms + jitter;
        if wait > 0 {
            std::thread::sleep(Duration::from_millis(wait));
        }
        let held = match own_hold {
            Some(moments) => moments,
            None => &self.script.hold_until_any,
        };
        if in_op && !held.is_empty() {
            self.hold(to, held)?;
        }

        let mut rec = lock(&self.recorder);
        let sim_latency_ms = self
            .script
            .sim_latency_each
            .iter()
            .find(|(r, _)| r == to)
            .map_or(self.script.sim_latency_ms, |(_, ms)| *ms);
        if sim_latency_ms > 0 {
            let began = rec.now_ms()?;
            rec.advance(sim_latency_ms)?;
            rec.began(began);
        }
        let op = rec.op().unwrap_or("start-up").to_string();
        let nth = {
            let mut sends = lock(&self.sends);
            let n = sends.entry(op.clone()).or_insert(0);
            *n += 1;
            *n
        };
        if let Some((_, n)) = self.script.crash_first.iter().find(|(r, _)| r == to) {
            if rec.kills_of(to)? < *n {
                // The host is lost mid-send: nothing reaches the provider.
                killed_by(&mut rec, to);
            }
        }
        if self.script.crash_on.iter().any(|r| r == to) && !self.fails_first(&rec, to)? {
            // A poison message: the process dies on it before the provider
            // gets it, every time, however often it is restarted.
            killed_by(&mut rec, to);
        }
        if let Some(Fault::TimeoutBeforeSend { op: o, nth: n }) = &self.fault {
            if *o == op && *n == nth {
                // Nothing reached the provider, so the world records no
                // attempt; the caller cannot tell this from a lost answer.
                let _ = rec.event_about(Kind::Timeout, Some(nth), to, LOST_REQUEST);
                return Err(timeout(self.channel));
            }
        }
        let now = rec.now_ms()?;
        if self
            .script
            .hangs
            .iter()
            .any(|&(from, until)| (from..until).contains(&now))
        {
            // The request reaches a provider that never answers: nothing is
            // delivered, and the caller is left waiting until it gives up.
            rec.attempt_with_html(self.channel, to, body, html, key, Some(Outcome::Failed))?;
            return Err(timeout(self.channel));
        }
        // A provider that is down answers 503 to everyone: it cannot look
        // at an address to refuse it, nor count its requests to slow it.
        let down = self
            .script
            .outages
            .iter()
            .any(|&(from, until)| (from..until).contains(&now));
        let retry_after = match down {
            true => None,
            false => self.rate_limit(&rec, to)?,
        };
        // A push payload over the limit is refused whole, whatever else
        // holds, by a provider that is up.
        let too_large = !down && self.channel == "push" && body.len() > PUSH_PAYLOAD_LIMIT;
        let refused = match retry_after {
            _ if too_large => Some(Outcome::Rejected),
            Some(_) => Some(Outcome::Failed),
            None if down => Some(Outcome::Failed),
            None => self.refusal(&rec, to)?,
        };
        if retry_after.is_some() {
            rec.limited();
        }
        let outcome = rec.attempt_with_html(self.channel, to, body, html, key, refused)?;
        if self.script.unanswered.iter().any(|r| r == to) {
            // The provider got the request and failed it; the answer is lost.
            let _ = rec.event_about(Kind::Timeout, Some(nth), to, NO_ANSWER);
            return Err(timeout(self.channel));
        }
        if too_large {
            return Err(SendError::Rejected(format!(
                "the push provider answered 413 PayloadTooLarge: the payload is {} bytes, \
                 over the limit of {PUSH_PAYLOAD_LIMIT}",
                body.len()
            )));
        }
        if let Some(seconds) = retry_after {
            return Err(SendError::RateLimited {
                retry_after_ms: seconds * 1000,
                why: self.too_many(to, seconds),
            });
        }
        match outcome {
            Outcome::Failed => {
                return Err(SendError::Unavailable(format!(
                    "the {} provider answered 503",
                    self.channel
                )))
            }
            Outcome::Rejected => return Err(SendError::Rejected(self.refused(to))),
            Outcome::Delivered | Outcome::Deduplicated => {}
        }
        match &self.fault {
            Some(Fault::CrashAfterSend { op: o, nth: n }) if *o == op && *n == nth => {
                let _ = rec.event(Kind::Crash, None, "process aborted");
                std::process::abort();
            }
            Some(Fault::TimeoutAfterSend { op: o, nth: n }) if *o == op && *n == nth => {
                let _ = rec.event(Kind::Timeout, Some(nth), "the answer is lost");
                Err(timeout(self.channel))
            }
            _ => Ok(()),
        }
    }

    /// Blocks until one of the script's moments has happened, looking at
    /// the world every 2 ms and holding the lock only for each look. If none
    /// happens within the hold's limit, the process stops with a lab error:
    /// a send must never wait for ever on a process that will not come.
    fn hold(&self, to: &str, moments: &[Moment]) -> Result<(), SendError> {
        let limit = match self.script.hold_limit_ms {
            0 => HOLD_LIMIT_MS,
            ms => ms,
        };
        let started = Instant::now();
        loop {
            {
                let rec = lock(&self.recorder);
                for &moment in moments {
                    if rec.reached(moment)? {
                        return Ok(());
                    }
                }
            }
            if started.elapsed() >= Duration::from_millis(limit) {
                let awaited: Vec<String> = moments.iter().map(Moment::describe).collect();
                crate::capture::lab_message(&format!(
                    "the scenario held the {} send to {to} until {}, and none of that happened \
                     within {:.1} s: the lab stops the process rather than let it wait for ever",
                    self.channel,
                    awaited.join(" or "),
                    limit as f64 / 1000.0
                ));
                std::process::exit(EXIT_LAB_ERROR);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Why the provider refuses `to` for good, as it would say it. A push
    /// provider (APNs, FCM) accepts a push for a phone that is switched off
    /// and keeps it; what it refuses for good is a device token that is no
    /// longer registered: APNs answers 410 `Unregistered`, FCM 404
    /// `UNREGISTERED`.
    fn refused(&self, to: &str) -> String {
        match self.channel {
            "push" => format!(
                "the push provider answered 410 Unregistered: the device token {to} is no longer valid"
            ),
            channel => format!("the {channel} provider answered 422: it will not deliver to {to}"),
        }
    }

    /// Why the provider asks the caller to slow down. A push provider counts
    /// the pushes to one device: APNs answers 429 `TooManyRequests`, FCM 429
    /// `QUOTA_EXCEEDED`.
    fn too_many(&self, to: &str, seconds: i64) -> String {
        match self.channel {
            "push" => format!(
                "the push provider answered 429 with Retry-After: {seconds}: too many pushes to {to}"
            ),
            channel => format!("the {channel} provider answered 429 with Retry-After: {seconds}"),
        }
    }

    /// The `Retry-After` seconds of a 429, when the script rate-limits this
    /// attempt.
    fn rate_limit(&self, rec: &Recorder, to: &str) -> anyhow::Result<Option<i64>> {
        match self.script.rate_limited.iter().find(|(r, _, _)| r == to) {
            Some((_, n, seconds)) if rec.attempts_to(self.channel, to)? < *n => Ok(Some(*seconds)),
            _ => Ok(None),
        }
    }

    /// Whether this attempt is one of the first `n` that the script's
    /// `flaky` fails for `to`: a poison recipient meets those 503s before
    /// its sends start killing the process.
    fn fails_first(&self, rec: &Recorder, to: &str) -> anyhow::Result<bool> {
        let flaky = self.script.flaky.iter().map(|(r, n)| (r, *n));
        let limited = self.script.rate_limited.iter().map(|(r, n, _)| (r, *n));
        match flaky.chain(limited).find(|(r, _)| *r == to) {
            Some((_, n)) => Ok(rec.attempts_to(self.channel, to)? < n),
            None => Ok(false),
        }
    }

    /// Whether the script makes this attempt fail, and how.
    fn refusal(&self, rec: &Recorder, to: &str) -> anyhow::Result<Option<Outcome>> {
        let s = &self.script;
        if s.rejected.iter().any(|r| r == to) {
            return Ok(Some(Outcome::Rejected));
        }
        if s.unreachable.iter().chain(&s.unanswered).any(|r| r == to) {
            return Ok(Some(Outcome::Failed));
        }
        let now = rec.now_ms()?;
        if s.outages
            .iter()
            .any(|&(from, to)| (from..to).contains(&now))
        {
            return Ok(Some(Outcome::Failed));
        }
        if let Some((_, n)) = s.flaky.iter().find(|(r, _)| r == to) {
            if rec.attempts_to(self.channel, to)? < *n {
                return Ok(Some(Outcome::Failed));
            }
        }
        Ok(None)
    }
}

/// The largest push payload the push provider takes, in bytes: APNs and
/// FCM both refuse a regular notification over 4096 bytes (APNs answers 413
/// `PayloadTooLarge`). The lab's provider counts the body it is given as the
/// whole payload.
pub const PUSH_PAYLOAD_LIMIT: usize = 4096;

/// The text of the event a request lost on its way records.
pub const LOST_REQUEST: &str = "the request is lost: nothing reached the provider";

/// The text of the event a send whose answer never comes records.
pub const NO_ANSWER: &str = "the provider failed it, and no answer comes";

/// The error a caller sees when no answer comes, whether or not the send went out.
fn timeout(channel: &str) -> SendError {
    SendError::Timeout(format!(
        "the {channel} provider did not answer (the message may have gone out)"
    ))
}

/// Every channel's provider, for code that sends on whichever channel a row names.
pub struct Providers {
    pub email: Email,
    pub push: Push,
}

impl Providers {
    /// The provider for `channel` ("email" or "push").
    pub fn channel(&self, channel: &str) -> anyhow::Result<&Provider> {
        match channel {
            "email" => Ok(&self.email),
            "push" => Ok(&self.push),
            other => anyhow::bail!("no provider serves the channel {other:?}"),
        }
    }
}
