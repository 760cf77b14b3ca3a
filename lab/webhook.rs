//! Webhooks: the email provider telling the service what became of a
//! message (delivered, bounced, complained about), by HTTP requests of its
//! own.
//!
//! The provider signs every request the way Stripe documents for its
//! webhooks: a header `Webhook-Signature: t=<unix seconds>,v1=<hex>` where
//! the hex is the HMAC-SHA256, keyed with the endpoint's secret
//! ([`SECRET`]), of the timestamp, a full stop, and the body's exact bytes.
//! A request the service does not answer with a 2xx is sent again later,
//! the same body signed afresh with a new timestamp (see [`REDELIVER`]).
//!
//! Both sides meet here. The parent plans each request as a [`Delivery`]
//! (which event, its body as the provider serialised it, and how it is
//! signed: by the provider, or by someone without the secret, or long ago);
//! the case process signs it at the moment it is made, hands the case its
//! [`Request`], and records the request and the case's [`Response`] in the
//! world, where the parent reads them back with [`read`].

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use hmac::{Hmac, KeyInit, Mac};
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use crate::clock::Clock;
use crate::db::Db;
use crate::scenario::{Step, WORLD_DB};
use crate::serve::{Operation, Services};

/// The secret the provider and the service share: the provider showed it
/// once, when the endpoint was registered. The HMAC key is its bytes.
pub const SECRET: &str = "whsec_lab_5f0c9a2e7b1d4c8e";
/// What someone who does not know [`SECRET`] signs with.
const NOT_THE_SECRET: &str = "whsec_guessed_0000000000000000";
/// The provider's next secret, while it replaces [`SECRET`]: the endpoint
/// has not been given it yet, so its `v1` matches nothing the service
/// holds, and a header then carries two `v1`s.
const NEXT_SECRET: &str = "whsec_lab_rotated_9d41b07c3e25";
/// The header that carries the timestamp and the signature.
pub const SIGNATURE: &str = "Webhook-Signature";
/// What the provider records when the endpoint could not be reached.
pub const UNREACHABLE: u16 = 503;
/// The reason the provider records with [`UNREACHABLE`].
const NOT_REACHED: &str = "the endpoint could not be reached";
/// A step the lab runs itself: the provider sends again every webhook of
/// its own whose last request got no 2xx, signed afresh; its input names
/// the case's webhook operation.
pub const REDELIVER: &str = "@redeliver";

/// An HTTP request as it reached the service's endpoint.
#[derive(Clone, Debug)]
pub struct Request {
    /// Header names and values, as sent.
    pub headers: Vec<(String, String)>,
    /// The body's exact bytes, as the provider serialised them.
    pub body: Vec<u8>,
}

impl Request {
    /// The value of header `name`, whatever its case, if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The service's answer to a request: a status (2xx accepted, 4xx refused)
/// and a short reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub reason: String,
}

impl Response {
    /// An answer with `status` and `reason`.
    pub fn new(status: u16, reason: impl Into<String>) -> Response {
        Response {
            status,
            reason: reason.into(),
        }
    }

    /// 200: taken.
    pub fn ok() -> Response {
        Response::new(200, "ok")
    }
}

/// How a planned request is signed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signing {
    /// By the provider, with the secret, now.
    Genuine,
    /// By someone without the secret, now.
    Forged,
    /// By the provider, with the secret, at simulated time `signed_at_ms`
    /// (long before now): a captured request sent again by someone else.
    Replayed { signed_at_ms: i64 },
    /// A signature header nobody could read, in one of [`GARBLED_FORMS`]
    /// ways: `form` picks which.
    Garbled { form: u8 },
    /// No signature header at all.
    Unsigned,
}

impl Signing {
    /// Whether the provider itself sends it, and so sends it again until it
    /// gets a 2xx.
    pub fn from_provider(&self) -> bool {
        *self == Signing::Genuine
    }
}

/// One request the parent plans: an event's body and how it is signed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Delivery {
    /// The scenario's name for the event, e.g. `evt_3`: the step's subject.
    pub event: String,
    /// The body, byte for byte.
    pub body: String,
    pub signing: Signing,
    /// The endpoint is down: the request gets no answer from the service
    /// (the provider records [`UNREACHABLE`]) and the case is not called.
    #[serde(default)]
    pub down: bool,
    /// For a [`Signing::Genuine`] request: how many seconds before its
    /// arrival it was signed (it waited in the provider's queue), or, when
    /// negative, how far the provider's clock runs ahead of the service's.
    #[serde(default)]
    pub lag_s: i64,
    /// Signed during a secret rotation: [`Rotation::Second`] or
    /// [`Rotation::First`] puts a `v1` made with a secret the service does
    /// not hold before or after the request's own.
    #[serde(default)]
    pub rotation: Rotation,
}

/// Whether, and where, a request's header carries a second `v1`, made with
/// a secret the endpoint does not hold (the provider's next one): a
/// provider replacing its secret signs with both, and an endpoint takes
/// the request when any `v1` matches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rotation {
    /// One `v1`.
    #[default]
    None,
    /// The request's own `v1` first, the other after it.
    First,
    /// The other `v1` first, the request's own after it.
    Second,
}

impl Rotation {
    /// `header` (`t=..,v1=..`) with the other secret's `v1` put in.
    fn sign(self, header: String, timestamp: i64, body: &[u8]) -> String {
        let other = signature(NEXT_SECRET, timestamp, body);
        let other = other.split_once(",v1=").map_or("", |(_, v1)| v1);
        match (self, header.split_once(",v1=")) {
            (Rotation::None, _) | (_, None) => header,
            (Rotation::First, Some(_)) => format!("{header},v1={other}"),
            (Rotation::Second, Some((t, own))) => format!("{t},v1={other},v1={own}"),
        }
    }
}

impl Delivery {
    /// The step that makes this request to the case's operation `op`.
    pub fn step(&self, op: &str) -> Step {
        Step::with(op, self, &self.event)
    }

    /// The request as made at simulated time `now_ms`, real time `now_s`
    /// (UNIX seconds).
    fn request(&self, now_ms: i64, now_s: i64) -> Request {
        let body = self.body.as_bytes().to_vec();
        let rotated = |header: String, t: i64| self.rotation.sign(header, t, &body);
        let header = match &self.signing {
            Signing::Genuine => Some(rotated(
                signature(SECRET, now_s - self.lag_s, &body),
                now_s - self.lag_s,
            )),
            Signing::Forged => Some(rotated(forged(now_s, &body), now_s)),
            Signing::Replayed { signed_at_ms } => {
                let then = now_s - (now_ms - signed_at_ms).div_euclid(1000);
                Some(signature(SECRET, then, &body))
            }
            Signing::Garbled { form } => Some(garbled(*form, now_s, &body)),
            Signing::Unsigned => None,
        };
        let mut headers = vec![("Content-Type".to_string(), "application/json".to_string())];
        if let Some(header) = header {
            headers.push((SIGNATURE.to_string(), header));
        }
        Request { headers, body }
    }
}

/// How many ways [`Signing::Garbled`] has of spoiling a signature header.
pub const GARBLED_FORMS: u8 = 7;

/// A signature header that cannot be read, in way `form`: neither part
/// readable; a timestamp but no hex after `v1=`; the provider's own
/// signature under a timestamp that is no number; a timestamp alone; a
/// signature alone; nothing at all; the provider's own signature under a
/// timestamp that is a number but no time a clock can show (millions of
/// years ahead).
fn garbled(form: u8, now_s: i64, body: &[u8]) -> String {
    let genuine = signature(SECRET, now_s, body);
    let v1 = genuine.split_once(",v1=").map_or("", |(_, v1)| v1);
    match form % GARBLED_FORMS {
        0 => "t=now,v1=not-a-signature".to_string(),
        1 => format!("t={now_s},v1=not-a-signature"),
        2 => format!("t=soon,v1={v1}"),
        3 => format!("t={now_s}"),
        4 => format!("v1={v1}"),
        5 => String::new(),
        _ => format!("t=99999999999999,v1={v1}"),
    }
}

/// The step [`REDELIVER`] for the case's webhook operation `op`.
pub fn redeliver(op: &str) -> Step {
    Step {
        op: REDELIVER.to_string(),
        input: Value::String(op.to_string()),
        subject: None,
    }
}

/// A signature header made without the secret, in one of three shapes,
/// drawn from the body: a whole HMAC under another key, `v1=` with nothing
/// after it, or the first 16 hex digits of that HMAC. A forger may send
/// any bytes: a comparison that stops at the shorter of two signatures
/// takes the last two.
fn forged(now_s: i64, body: &[u8]) -> String {
    let whole = signature(NOT_THE_SECRET, now_s, body);
    let Some((t, v1)) = whole.split_once(",v1=") else {
        return whole;
    };
    match forged_shape(body) {
        0 => whole.clone(),
        1 => format!("{t},v1="),
        _ => format!("{t},v1={}", &v1[..16]),
    }
}

/// Which of [`forged`]'s shapes a forged request with `body` takes: 0 for
/// a whole signature, 1 for an empty one, 2 for one cut short.
pub fn forged_shape(body: &[u8]) -> u8 {
    (body.iter().map(|b| usize::from(*b)).sum::<usize>() % 3) as u8
}

/// The header value the provider sends: `t=<timestamp>,v1=<hex HMAC-SHA256
/// of "<timestamp>.<body>" keyed with `secret`>`.
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any size");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// One request the endpoint got, and its answer, as the world saw them.
#[derive(Clone, Debug, Serialize)]
pub struct Answered {
    /// The case process that got it.
    pub process: u32,
    pub event: String,
    pub signing: Signing,
    pub body: String,
    /// Simulated time of the request, in ms.
    pub at_ms: i64,
    /// The status answered; `None` when no answer came (the process died).
    pub status: Option<u16>,
    pub reason: String,
}

impl Answered {
    /// Whether the service took it (a 2xx).
    pub fn accepted(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// Whether the service refused it (a 4xx).
    pub fn refused(&self) -> bool {
        self.status.is_some_and(|s| (400..500).contains(&s))
    }

    /// Whether the request reached the service at all: it did not when
    /// the endpoint was down.
    pub fn reached(&self) -> bool {
        !(self.status == Some(UNREACHABLE) && self.reason == NOT_REACHED)
    }
}

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS webhooks (
        seq     INTEGER PRIMARY KEY,
        process INTEGER NOT NULL,
        event   TEXT NOT NULL,
        signing TEXT NOT NULL,
        body    TEXT NOT NULL,
        at_ms   INTEGER NOT NULL,
        status  INTEGER,
        reason  TEXT NOT NULL DEFAULT ''
    );
";

/// The scenario's folder and this process's number, once serving.
static SERVING: OnceLock<(PathBuf, u32)> = OnceLock::new();

/// Tells the webhook side where the world of this case process is.
pub(crate) fn serving_in(dir: &Path, process: u32) {
    let _ = SERVING.set((dir.to_path_buf(), process));
}

fn open(dir: &Path) -> Result<Connection> {
    let conn = crate::world::open(dir)?;
    conn.execute_batch(SCHEMA)
        .context("could not set up the webhooks in the world")?;
    Ok(conn)
}

/// Every request the endpoint got in the scenario in `dir`, in order.
pub fn read(dir: &Path) -> Result<Vec<Answered>> {
    if !dir.join(WORLD_DB).exists() {
        return Ok(Vec::new());
    }
    let conn = open(dir)?;
    let mut stmt = conn.prepare(
        "SELECT process, event, signing, body, at_ms, status, reason FROM webhooks ORDER BY seq",
    )?;
    let rows = stmt
        .query_map([], |row| {
            Ok((
                row.get::<_, u32>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, i64>(4)?,
                row.get::<_, Option<u16>>(5)?,
                row.get::<_, String>(6)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
        .context("could not read the webhooks from the world")?;
    rows.into_iter()
        .map(|(process, event, signing, body, at_ms, status, reason)| {
            Ok(Answered {
                process,
                event,
                signing: serde_json::from_str(&signing)
                    .context("the world holds a webhook signed in a way the lab does not know")?,
                body,
                at_ms,
                status,
                reason,
            })
        })
        .collect()
}

/// The provider's own requests whose last attempt got no 2xx: what it
/// sends again (see [`REDELIVER`]).
pub(crate) fn owed(dir: &Path) -> Result<Vec<Delivery>> {
    let mut last: Vec<Answered> = Vec::new();
    for answered in read(dir)? {
        if !answered.signing.from_provider() {
            continue;
        }
        last.retain(|a| a.event != answered.event);
        last.push(answered);
    }
    Ok(last
        .into_iter()
        .filter(|a| !a.accepted())
        .map(|a| Delivery {
            event: a.event,
            body: a.body,
            signing: Signing::Genuine,
            down: false,
            lag_s: 0,
            rotation: Rotation::None,
        })
        .collect())
}

/// Marks `fn(&mut Db, &Clock, &Request) -> Result<Response>`: an endpoint
/// that answers webhooks.
pub struct Answering;

impl<F> Operation<Answering> for F
where
    F: Fn(&mut Db, &Clock, &Request) -> Result<Response>,
{
    fn call_with(&self, s: &mut Services, value: &Value) -> Result<Result<()>> {
        let delivery: Delivery = serde_json::from_value(value.clone())
            .context("the step's input is not a webhook the lab can send")?;
        let (dir, process) = SERVING
            .get()
            .context("a webhook came before the case process was serving")?;
        let now_ms = s.clock.now()?;
        let request = delivery.request(now_ms, s.clock.utc()?.as_second());
        let conn = open(dir)?;
        conn.execute(
            "INSERT INTO webhooks (process, event, signing, body, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                process,
                delivery.event,
                serde_json::to_string(&delivery.signing)?,
                delivery.body,
                now_ms
            ],
        )
        .context("could not record a webhook in the world")?;
        let seq = conn.last_insert_rowid();
        let answer = |status: u16, reason: &str| {
            conn.execute(
                "UPDATE webhooks SET status = ?2, reason = ?3 WHERE seq = ?1",
                params![seq, status, reason],
            )
            .context("could not record a webhook's answer in the world")
        };
        if delivery.down {
            answer(UNREACHABLE, NOT_REACHED)?;
            return Ok(Ok(()));
        }
        match self(&mut s.db, &s.clock, &request) {
            Ok(response) => {
                answer(response.status, &response.reason)?;
                Ok(Ok(()))
            }
            Err(err) => {
                // As a web framework does with a handler's error.
                answer(500, &format!("{err:#}"))?;
                Ok(Err(err))
            }
        }
    }
}
