//! Check 10: render: templates that fail closed.
//!
//! People going to events hear about each new comment by email (a text body
//! and an HTML body) and by push. What they read comes from other people:
//! an event's title, a commenter's name, the comment itself, and their own
//! name if they gave one. The check reads every message the providers were
//! offered and judges it as its reader would: every field reads as typed
//! (escaped once in HTML, as typed in text and push), no template
//! placeholder reaches anyone, no push over the 4096-byte payload limit is
//! offered and a longer one arrives cut on a character boundary, and a
//! message that cannot be rendered (a field it needs is missing) is
//! dead-lettered at once with its reason.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::clock::{MINUTE, SECOND};
use lab::explore::hms as clock;
use lab::explore::{
    explore, Dimension, Explorer, Fate, FaultModel, Invariants, Observation, Row, Run,
};
use lab::history::{History, WAITING};
use lab::provider::PUSH_PAYLOAD_LIMIT;
use lab::report::{counted, first_found, judge, Finding};
use lab::rng::Rng;
use lab::runner::{in_parallel, scenario_dir, Case, Exit};
use lab::scenario::{Plan, ProviderScript, Step, APP_DB};
use lab::serve::Schedule;
use lab::world::{Delivery, Outcome};

use super::dispatch_world::{provider, Script, RETRY_GAPS};

pub const CHAPTER: Chapter = Chapter {
    number: 10,
    title: "render: templates that fail closed",
    case_file: "cases/case10_render.rs",
    text_file: "chapters/10-render-templates-that-fail-closed.md",
    bin: "case10",
    shipped_hash: 0xc020_6fb2_c5dc_c7ed,
    run,
    check,
    coverage: |budget| lab::explore::coverage(&Generated, budget),
    bands: |history, _| lab::picture::bands(&Generated, history),
};

const ESCAPED: &str =
    "every field reads as typed: escaped once in an HTML body, never in a text body or a push";
const PLACEHOLDERS: &str =
    "no placeholder reaches anyone: no {name}, no {{, no \"undefined\", no empty greeting or comment";
const FITS: &str =
    "every push arrives within 4096 bytes: none larger is offered, a longer text is cut on a character boundary";
const FAILS_CLOSED: &str =
    "a message missing a required field is dead-lettered at once (tried once, FAILED, the reason names the render); one missing an optional field goes with its default";

/// How often the dispatcher wakes up.
const WAKE_UP: i64 = MINUTE;
/// The gaps between attempts (chapter 5).
const CHANNELS: [&str; 2] = ["email", "push"];
/// How far below the limit a cut push may end: room for an ellipsis and
/// one character that did not fit.
const CUT_SLACK: usize = 16;

#[derive(Clone, Debug, Serialize)]
struct Person {
    id: String,
    /// The name they gave, if they gave one.
    name: Option<String>,
    email: Script,
    push: Script,
}

impl Person {
    fn recipient(&self, channel: &str) -> String {
        match channel {
            "push" => format!("{}-phone", self.id),
            _ => format!("{}@example.com", self.id),
        }
    }

    fn script(&self, channel: &str) -> Script {
        match channel {
            "push" => self.push,
            _ => self.email,
        }
    }
}

/// A comment on an event, for one person going to it.
#[derive(Clone, Debug, Serialize)]
struct Comment {
    /// Its number in the scenario: its title ends with `(#3)`.
    number: usize,
    person: String,
    title: String,
    author: Option<String>,
    /// `None` once a moderator removed it: a required field missing.
    text: Option<String>,
    at: i64,
}

impl Comment {
    /// What ties a message to its comment, whatever escaping did to the
    /// rest of the title.
    fn marker(&self) -> String {
        format!("(#{})", self.number)
    }

    /// The publish step's subject, contained in each of its fates' names.
    fn subject(&self) -> String {
        format!("#{} {}", self.number, self.person)
    }

    /// The push's whole text, as the template words it, when it has every
    /// field (an author's default is the fix's own words).
    fn push_text(&self) -> Option<String> {
        let author = self.author.as_ref()?;
        Some(format!(
            "{author} on {}: {}",
            self.title,
            self.text.as_ref()?
        ))
    }
}

/// A few people, and comments on their events.
#[derive(Clone, Debug, Serialize)]
struct Batch {
    /// `None` for the chapter's own batches.
    seed: Option<u64>,
    /// What `run` and a failure call it.
    about: &'static str,
    people: Vec<Person>,
    comments: Vec<Comment>,
    /// A deploy: the first process stops here and a new one carries on.
    restart_at: Option<i64>,
    /// A person who gives a new name while the deploy runs: (id, name).
    /// Their messages sent after it greet them by it.
    renamed: Option<(String, String)>,
}

fn person(id: &str, name: Option<&str>) -> Person {
    Person {
        id: id.to_string(),
        name: name.map(str::to_string),
        email: Script::Fine,
        push: Script::Fine,
    }
}

fn comment(number: usize, person: &str, title: &str, author: Option<&str>, text: &str) -> Comment {
    Comment {
        number,
        person: person.to_string(),
        title: format!("{title} (#{number})"),
        author: author.map(str::to_string),
        text: Some(text.to_string()),
        at: 0,
    }
}

/// The chapter's long comment: Japanese and emoji, every character 3 or 4
/// bytes, so a cut at a byte count falls inside one. In its push, an emoji
/// takes bytes 4090 to 4093: a cut at 4093 leaves three of its four.
fn long_comment() -> String {
    let mut text = String::from("写真、ありがとう！！");
    while text.len() < 4300 {
        text.push_str("楽しかったね🎉また行こう🗻");
    }
    text
}

/// A text whose push (`prefix` then the text) is exactly `total` bytes, in
/// characters of `width` bytes after a little ASCII to line them up; with
/// `word`, in words of that many characters, one space apart, as people
/// write, then a few more characters and ASCII to make up the size.
fn sized_text(prefix: usize, total: usize, width: usize, word: Option<usize>) -> String {
    let unit = ["a", "é", "日", "😀"][width - 1];
    let room = total.saturating_sub(prefix);
    let Some(chars) = word else {
        let mut text = " ".repeat(room % width);
        text.push_str(&unit.repeat(room / width));
        return text;
    };
    let word = format!("{} ", unit.repeat(chars));
    let mut text = word.repeat(room / word.len());
    text.push_str(&unit.repeat((room - text.len()) / width));
    text.push_str(&"a".repeat(room - text.len()));
    text
}

impl Batch {
    /// The chapter's three comments: markup in a title, a person with no
    /// name, and a long comment in Japanese and emoji.
    fn chapter() -> Batch {
        Batch {
            seed: None,
            about: "three comments",
            people: vec![
                person("ada", Some("Ada")),
                person("cleo", None),
                person("finn", Some("Finn")),
            ],
            comments: vec![
                comment(
                    1,
                    "ada",
                    "Picnic <img src=x onerror=alert(1)>",
                    Some("Ben"),
                    "I'll bring the lemonade.",
                ),
                comment(
                    2,
                    "cleo",
                    "Book club",
                    Some("Dev"),
                    "Chapter 3 for Thursday?",
                ),
                comment(3, "finn", "Tokyo trip", Some("Gia"), &long_comment()),
            ],
            restart_at: None,
            renamed: None,
        }
    }

    /// Pushes at the limit's edges, in 2-, 3- and 4-byte characters, and
    /// fields that an escaper must get exactly right.
    fn edges() -> Batch {
        let mut comments = vec![
            comment(
                1,
                "hugo",
                "Fish &amp; chips <b>night</b>",
                Some("Ann & \"Bo\""),
                "Bring <i>vinegar</i> & salt",
            ),
            comment(2, "ivy", "Quiz", None, "Who is coming?"),
        ];
        for (i, (total, width)) in [(4096, 2), (4097, 3), (4098, 4), (4099, 4)]
            .into_iter()
            .enumerate()
        {
            let mut c = comment(3 + i, "ivy", "Long read", Some("Kai"), "");
            let prefix = c.push_text().map_or(0, |t| t.len());
            c.text = Some(sized_text(prefix, total, width, None));
            c.at = (i as i64 + 1) * MINUTE;
            comments.push(c);
        }
        // A comment a moderator removed: its messages have nothing to say.
        let mut removed = comment(7, "hugo", "Garden party", Some("Lou"), "");
        removed.text = None;
        removed.at = 5 * MINUTE;
        comments.push(removed);
        Batch {
            seed: None,
            about: "pushes at the limit, fields full of markup",
            people: vec![person("hugo", Some("<b>Hugo</b>")), person("ivy", None)],
            comments,
            restart_at: None,
            renamed: None,
        }
    }

    /// A batch drawn from `seed` over the chapter's whole world.
    fn generated(seed: u64) -> Batch {
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 10);
        let mut ids = IDS.to_vec();
        rng.shuffle(&mut ids);
        let count = rng.between(1, 3) as usize;
        let mut people: Vec<Person> = ids[..count]
            .iter()
            .map(|id| {
                let name = match rng.between(0, 3) {
                    0 => None,
                    _ => Some(*rng.pick(&NAMES)),
                };
                let email = match rng.between(0, 5) {
                    0 => Script::Flaky(rng.between(1, 2) as u32),
                    _ => Script::Fine,
                };
                let push = match rng.between(0, 7) {
                    0 => Script::Flaky(rng.between(1, 2) as u32),
                    1 => Script::Refused,
                    _ => Script::Fine,
                };
                Person {
                    id: id.to_string(),
                    name: name.map(str::to_string),
                    email,
                    push,
                }
            })
            .collect();
        let count = rng.between(1, 4) as usize;
        let mut removed = Rng::new(seed ^ 0x1010_7e47_0ded);
        // Half the long texts are words, one space apart, of 3 to 12
        // characters (from a stream of their own, so the rest is drawn as
        // before): a cut back to a space may fall far short of the limit.
        let mut words = Rng::new(seed ^ 0x1010_3d0e_5000);
        let mut comments: Vec<Comment> = (1..=count)
            .map(|number| {
                let who = rng.pick(&people).id.clone();
                let author = match rng.between(0, 5) {
                    0 => None,
                    _ => Some(*rng.pick(&AUTHORS)),
                };
                let title = *rng.pick(&TITLES);
                let mut c = comment(number, &who, title, author, "");
                c.at = rng.between(0, 20) as i64 * MINUTE;
                c.text = Some(match rng.between(0, 2) {
                    0 => {
                        let width = rng.between(1, 4) as usize;
                        let total = *rng.pick(&[4000, 4095, 4096, 4097, 4098, 4099, 5000]);
                        let prefix = c.push_text().map_or(0, |t| t.len());
                        let word =
                            (words.between(0, 1) == 0).then(|| words.between(3, 12) as usize);
                        sized_text(prefix, total, width, word)
                    }
                    _ => rng.pick(&TEXTS).to_string(),
                });
                // One comment in six was removed by a moderator (drawn
                // from a stream of its own, so the rest is drawn as before).
                if removed.between(0, 5) == 0 {
                    c.text = None;
                }
                c
            })
            .collect();
        // Every other seed, one more person, whose email fails three times
        // (the third retry waits 5 min) and whose phone is refused for good,
        // gets a comment at the time of another one. A deploy comes a few
        // seconds after the email's first failed attempt, or, on the next
        // such seed, after its second: the new process wakes at once, while
        // the retry must still wait its backoff (5 s, then 30 s).
        let mut restart_at = None;
        if seed % 2 == 1 {
            let mut extra = person(ids[people.len()], Some(*rng.pick(&NAMES)));
            extra.email = Script::Flaky(3);
            extra.push = Script::Refused;
            let at = rng.pick(&comments).at;
            let (title, author, text) =
                (*rng.pick(&TITLES), *rng.pick(&AUTHORS), *rng.pick(&TEXTS));
            let mut c = comment(comments.len() + 1, &extra.id, title, Some(author), text);
            c.at = at;
            comments.push(c);
            people.push(extra);
            let failures = (seed / 2 % 2) as i64;
            restart_at = Some(at + failures * WAKE_UP + rng.between(2, 4) as i64 * SECOND);
        }
        // The person whose email waits out the deploy gives a new name
        // meanwhile, as people edit their profiles at any time: what is
        // sent after it is rendered from the data as it is then.
        let renamed = restart_at.map(|_| {
            let extra = people.last().expect("the deploy's person was added");
            let mut names = Rng::new(seed ^ 0x7e4a_3ed0_a3e5);
            let others: Vec<&str> = NAMES
                .iter()
                .copied()
                .filter(|n| extra.name.as_deref() != Some(*n))
                .collect();
            (extra.id.clone(), names.pick(&others).to_string())
        });
        Batch {
            seed: Some(seed),
            about: "random comments",
            people,
            comments,
            restart_at,
            renamed,
        }
    }

    fn name(&self) -> String {
        let batch = match self.seed {
            None => self.about.to_string(),
            Some(seed) => format!("{} (seed {seed})", self.about),
        };
        match self.restart_at {
            Some(at) => {
                let renamed = match &self.renamed {
                    Some((id, name)) => format!(" and {id} gave the name {}", quoted(name)),
                    None => String::new(),
                };
                format!(
                    "{batch}, the dispatcher restarted at {}{renamed}",
                    clock(at)
                )
            }
            None => batch,
        }
    }

    fn person(&self, id: &str) -> &Person {
        self.people
            .iter()
            .find(|p| p.id == id)
            .expect("a comment names a person of its batch")
    }

    /// Whether `c` has every field the rules require of a message: its
    /// title and its comment. The reader's name and the author are
    /// optional: the fix says what stands in for them.
    fn renderable(&self, c: &Comment, _channel: &str) -> bool {
        c.text.is_some()
    }

    /// The name `id` goes by at `at`, if they gave one.
    fn name_at(&self, id: &str, at: i64) -> Option<&str> {
        match (&self.renamed, self.restart_at) {
            (Some((who, name)), Some(cut)) if who == id && at >= cut => Some(name),
            _ => self.person(id).name.as_deref(),
        }
    }

    /// The fields `channel`'s message of `c` shows, as typed, when it is
    /// rendered at `at`.
    fn fields(&self, c: &Comment, channel: &str, at: i64) -> Vec<(&'static str, String)> {
        let mut fields = vec![("title", c.title.clone())];
        if let Some(text) = &c.text {
            fields.push(("text", text.clone()));
        }
        if let Some(author) = &c.author {
            fields.push(("author", author.clone()));
        }
        if channel == "email" {
            if let Some(name) = self.name_at(&c.person, at) {
                fields.push(("name", name.to_string()));
            }
        }
        fields
    }

    /// When the scenario ends: twelve minutes after the last comment, room
    /// for every retry of chapter 5.
    fn end(&self) -> i64 {
        self.comments.iter().map(|c| c.at).max().unwrap_or(0) + 12 * MINUTE
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
        let mut comments: Vec<&Comment> = self
            .comments
            .iter()
            .filter(|c| (from..to).contains(&c.at))
            .collect();
        comments.sort_by_key(|c| c.at);
        let mut steps = Vec::new();
        let mut now = from;
        for c in comments {
            if c.at > now {
                steps.push(schedule(c.at));
                now = c.at;
            }
            let input = serde_json::json!({
                "person": c.person,
                "title": c.title,
                "author": c.author,
                "text": c.text,
            });
            steps.push(Step::with("publish", input, &c.subject()));
        }
        steps.push(schedule(to));
        steps
    }

    fn plans(&self, dir: &Path) -> Vec<Plan> {
        let fixture = self
            .people
            .iter()
            .map(|p| {
                let name = match &p.name {
                    Some(name) => format!("'{}'", name.replace('\'', "''")),
                    None => "NULL".to_string(),
                };
                format!(
                    "INSERT INTO people (id, name, email, device) VALUES ('{}', {name}, '{}', '{}')",
                    p.id,
                    p.recipient("email"),
                    p.recipient("push"),
                )
            })
            .collect();
        let end = self.end();
        let cut = self.restart_at.filter(|&at| at < end).unwrap_or(end);
        let plan = |process: u32, steps: Vec<Step>| Plan {
            dir: dir.to_path_buf(),
            process,
            steps,
            provider: self.provider("email"),
            push: self.provider("push"),
            seed: self.seed.unwrap_or(0),
            ..Plan::default()
        };
        let mut first = plan(1, self.steps(0, cut));
        first.fixture = fixture;
        let mut plans = vec![first];
        if cut < end {
            let mut next = plan(2, self.steps(cut, end));
            if let Some((id, name)) = &self.renamed {
                next.meanwhile = vec![format!(
                    "UPDATE people SET name = '{}' WHERE id = '{id}'",
                    name.replace('\'', "''")
                )];
            }
            plans.push(next);
        }
        plans
    }
}

const IDS: [&str; 8] = ["ada", "ben", "cleo", "dev", "emma", "finn", "gia", "hugo"];
/// Names people give: markup, quotes, ampersands, accents, CJK.
const NAMES: [&str; 7] = [
    "Ada",
    "Zoë",
    "O'Brien",
    "<b>Kai</b>",
    "Ann & Bob",
    "李雷",
    "\"Jo\"",
];
const AUTHORS: [&str; 5] = ["Ben", "Mia & Leo", "<i>Sam</i>", "Renée", "D'Arcy"];
const TITLES: [&str; 7] = [
    "Board games",
    "Picnic <img src=x onerror=alert(1)>",
    "Tom & Jerry's \"movie night\"",
    "<script>alert('hi')</script> Quiz",
    "Fish &amp; chips",
    "Café <b>crawl</b>",
    "5 < 6 > 4",
];
const TEXTS: [&str; 5] = [
    "See you there!",
    "Can we move it to 7 pm?",
    "I'll bring <b>cake</b> & tea",
    "ça marche 👍",
    // Typed text that looks like template syntax is text, not a template.
    "{{ 7*7 }} people? {% if rain %}bring {name}{% endif %}",
];

/// The dispatcher's schedule until `until`.
fn schedule(until: i64) -> Step {
    Schedule::of(until, &[("dispatch", WAKE_UP)])
}

/// One outbox row as the service left it.
#[derive(Clone, Debug)]
struct OutboxRow {
    channel: String,
    recipient: String,
    title: String,
    status: String,
    attempts: i64,
    error: String,
}

/// The outbox as it was left, each row with its notification's title, and
/// placed by the contract rather than the case's bookkeeping: a `FAILED`
/// row is a dead letter, any other is `SENT` when the provider delivered
/// its comment on its channel, and waiting when it did not.
fn read_outbox(dir: &Path, batch: &Batch, history: &History) -> Result<Vec<OutboxRow>> {
    let path = dir.join(APP_DB);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let conn = rusqlite::Connection::open(&path)
        .with_context(|| format!("could not open the service's database {}", path.display()))?;
    let sql = "SELECT outbox.channel, outbox.recipient, notifications.title, outbox.status,
                      outbox.attempts, coalesce(outbox.last_error, '')
                 FROM outbox JOIN notifications ON notifications.id = outbox.notification
                ORDER BY outbox.id";
    let rows = conn
        .prepare(sql)
        .context("the service's database does not answer for the outbox and its notifications")?
        .query_map([], |r| {
            Ok(OutboxRow {
                channel: r.get(0)?,
                recipient: r.get(1)?,
                title: r.get(2)?,
                status: r.get(3)?,
                attempts: r.get(4)?,
                error: r.get(5)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
        .context("could not read the outbox")?;
    Ok(rows
        .into_iter()
        .map(|mut r: OutboxRow| {
            if r.status != "FAILED" {
                let delivered = batch.comments.iter().any(|c| {
                    c.title == r.title
                        && batch.person(&c.person).recipient(&r.channel) == r.recipient
                        && offered(batch, history, c, &r.channel)
                            .iter()
                            .any(|d| d.outcome == Outcome::Delivered)
                });
                r.status = if delivered { "SENT" } else { WAITING }.to_string();
            }
            r
        })
        .collect())
}

/// What one scenario left behind.
struct Played {
    batch: Batch,
    exits: Vec<Exit>,
    history: History,
    rows: Vec<OutboxRow>,
    unreadable: Option<String>,
}

impl Played {
    fn trouble(&self) -> Option<String> {
        if let Some((i, exit)) = self
            .exits
            .iter()
            .enumerate()
            .find(|(_, e)| **e != Exit::Finished)
        {
            let which = if i == 0 {
                "the service"
            } else {
                "the restarted service"
            };
            return Some(format!("{which} {}", exit.describe()));
        }
        self.unreadable.clone()
    }

    /// Every message `c` offered on `channel`, whatever the provider did.
    fn offered(&self, c: &Comment, channel: &str) -> Vec<&Delivery> {
        offered(&self.batch, &self.history, c, channel)
    }

    fn delivered(&self, c: &Comment, channel: &str) -> Vec<&Delivery> {
        self.offered(c, channel)
            .into_iter()
            .filter(|d| d.outcome == Outcome::Delivered)
            .collect()
    }

    fn row(&self, c: &Comment, channel: &str) -> Option<&OutboxRow> {
        row(&self.batch, &self.rows, c, channel)
    }
}

fn offered<'h>(
    batch: &Batch,
    history: &'h History,
    c: &Comment,
    channel: &str,
) -> Vec<&'h Delivery> {
    let recipient = batch.person(&c.person).recipient(channel);
    let marker = c.marker();
    history
        .deliveries
        .iter()
        .filter(|d| {
            d.channel == channel
                && d.recipient == recipient
                && (d.body.contains(&marker)
                    || d.html.as_ref().is_some_and(|h| h.contains(&marker)))
        })
        .collect()
}

fn row<'r>(
    batch: &Batch,
    rows: &'r [OutboxRow],
    c: &Comment,
    channel: &str,
) -> Option<&'r OutboxRow> {
    let recipient = batch.person(&c.person).recipient(channel);
    rows.iter()
        .find(|r| r.channel == channel && r.recipient == recipient && r.title == c.title)
}

fn play(case: &Case, batch: &Batch) -> Result<Played> {
    let dir = scenario_dir()?;
    let exits = case.start_in_turn(&batch.plans(dir.path()))?;
    let history = History::read(dir.path())?;
    let (rows, unreadable) = match read_outbox(dir.path(), batch, &history) {
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
        rows,
        unreadable,
    })
}

/// Decodes HTML's character references (`&lt;`, `&#39;`, `&#x2f;`...): the
/// text a browser shows for `html`, tags aside.
fn decode(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let reference = rest
            .find(';')
            .filter(|&end| end <= 10)
            .and_then(|end| Some((entity(&rest[1..end])?, end)));
        match reference {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}

/// Whether `field` would be markup if it were not escaped.
fn markup(field: &str) -> bool {
    field.contains('<') || field.contains('&')
}

/// At most `n` characters of `text`, on one line.
fn excerpt(text: &str, n: usize) -> String {
    let line = text.replace('\n', " ");
    match line.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// How a field of an email's HTML body reads, if not as typed.
fn html_trouble(html: &str, field: &str) -> Option<&'static str> {
    if markup(field) && html.contains(field) {
        return Some("unescaped");
    }
    let once = decode(html);
    if once.contains(field) {
        return None;
    }
    if decode(&once).contains(field) {
        return Some("escaped twice");
    }
    Some("missing")
}

/// How a field of a text body or a push reads, if not as typed.
fn text_trouble(text: &str, field: &str) -> Option<&'static str> {
    if text.contains(field) {
        None
    } else if decode(text).contains(field) {
        Some("escaped")
    } else {
        Some("missing")
    }
}

/// Fields that do not read as typed in what reached people.
fn escaped(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let mut lines = Vec::new();
    for c in &batch.comments {
        let label = format!("#{} {}", c.number, c.person);
        for d in played.delivered(c, "email") {
            for (what, field) in batch.fields(c, "email", d.began_ms) {
                if let Some(how) = d
                    .html
                    .as_deref()
                    .and_then(|html| html_trouble(html, &field))
                {
                    let shown = html_line(d.html.as_deref().unwrap_or(""), &field, &c.marker());
                    lines.push(format!(
                        "{label}: the {what} {} is {how} in the HTML body: {}",
                        quoted(&field),
                        excerpt(&shown, 90)
                    ));
                }
                if let Some(how) = text_trouble(&d.body, &field) {
                    lines.push(format!(
                        "{label}: the {what} {} is {how} in the text body",
                        quoted(&field)
                    ));
                }
            }
        }
        // A push may be cut short at its end: a field is judged there as
        // far as the push goes, and escaped is wrong wherever it shows.
        for d in played.delivered(c, "push") {
            for (what, field) in batch.fields(c, "push", d.began_ms) {
                if let Some("escaped") = text_trouble(&d.body, &field) {
                    lines.push(format!(
                        "{label}: the {what} {} is escaped in the push: {}",
                        quoted(&field),
                        excerpt(&d.body, 70)
                    ));
                }
            }
        }
    }
    lines
}

/// The line of `html` that shows `field`, or else the one with `marker`.
fn html_line(html: &str, field: &str, marker: &str) -> String {
    let lines: Vec<&str> = html.lines().collect();
    lines
        .iter()
        .find(|l| l.contains(field))
        .or_else(|| lines.iter().find(|l| decode(l).contains(field)))
        .or_else(|| lines.iter().find(|l| l.contains(marker)))
        .or(lines.first())
        .map(|l| l.to_string())
        .unwrap_or_default()
}

fn quoted(field: &str) -> String {
    format!("`{}`", excerpt(field, 40))
}

/// Text a template leaves when a field is missing or was never filled in
/// (each field the person typed already stands as a mark).
fn placeholder(text: &str) -> Option<&'static str> {
    const SIGNS: [&str; 9] = [
        "{",
        "}",
        "undefined",
        "Hello ,",
        "Hello none",
        "Hello None",
        "Hello null",
        "<p> commented on",
        "\n commented on",
    ];
    SIGNS
        .into_iter()
        .find(|sign| text.contains(sign))
        .or_else(|| text.starts_with(" on ").then_some(" on "))
        .or_else(|| text.starts_with("None on ").then_some("None on"))
        // A comment printed empty: the message ends where it should begin.
        .or_else(|| {
            text.contains("<blockquote></blockquote>")
                .then_some("<blockquote></blockquote>")
        })
        .or_else(|| text.trim_end().ends_with(':').then_some(":"))
}

/// Messages that reached someone with a placeholder in them.
fn placeholders(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let mut lines = Vec::new();
    for c in &batch.comments {
        for channel in CHANNELS {
            // What the person typed may hold braces or the words a
            // placeholder leaves: only the template's own text is judged.
            for d in played.delivered(c, channel) {
                let typed = batch.fields(c, channel, d.began_ms);
                let own = |body: &str| {
                    // Each field becomes a mark, so that what is left around
                    // it reads as the template put it ("Hello ▮,").
                    let strip = |text: String| {
                        typed
                            .iter()
                            .filter(|(_, field)| !field.is_empty())
                            .fold(text, |left, (_, field)| left.replace(field.as_str(), "▮"))
                    };
                    strip(decode(&strip(body.to_string())))
                };
                let bodies = [Some(d.body.as_str()), d.html.as_deref()];
                if let Some((body, sign)) = bodies
                    .into_iter()
                    .flatten()
                    .find_map(|b| Some((b, placeholder(&own(b))?)))
                {
                    let line = body
                        .lines()
                        .find(|l| l.contains(sign.trim()))
                        .unwrap_or(body);
                    lines.push(format!(
                        "#{} {} ({channel}): {}",
                        c.number,
                        c.person,
                        excerpt(line, 70)
                    ));
                }
            }
        }
    }
    lines
}

/// Pushes offered over the limit, broken, not a prefix of their text, cut
/// short, or never delivered.
fn fits(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let mut lines = Vec::new();
    for c in &batch.comments {
        let label = format!("#{} {}", c.number, c.person);
        for d in played.offered(c, "push") {
            if d.body.len() > PUSH_PAYLOAD_LIMIT {
                lines.push(format!(
                    "{label}: a push of {} bytes offered at {}; the provider answered 413",
                    d.body.len(),
                    clock(d.at_ms)
                ));
            }
        }
        // A removed comment has no push to judge; one whose author left
        // is judged on what its words do not change.
        if c.text.is_none() {
            continue;
        }
        let full = c.push_text();
        let delivered = played.delivered(c, "push");
        for d in &delivered {
            let body = &d.body;
            if body.contains('\u{FFFD}') {
                let at = body.find('\u{FFFD}').unwrap_or(0);
                lines.push(format!(
                    "{label}: the push arrived with a broken character (U+FFFD) at byte {at} of {}",
                    body.len()
                ));
                continue;
            }
            let Some(full) = &full else {
                continue;
            };
            let kept = body
                .strip_suffix('…')
                .or_else(|| body.strip_suffix("..."))
                .unwrap_or(body);
            if full.len() <= PUSH_PAYLOAD_LIMIT && body != full {
                lines.push(format!(
                    "{label}: a push of {} bytes fits, yet arrived as {} bytes: {}",
                    full.len(),
                    body.len(),
                    excerpt(body, 50)
                ));
            } else if !full.starts_with(kept) {
                lines.push(format!(
                    "{label}: the push that arrived is not its text cut short: {}",
                    excerpt(body, 50)
                ));
            } else if body.len() <= PUSH_PAYLOAD_LIMIT
                && kept.len() + CUT_SLACK < PUSH_PAYLOAD_LIMIT
                && kept.len() < full.len()
            {
                lines.push(format!(
                    "{label}: a push of {} bytes arrived cut to {} bytes, not as much as fits",
                    full.len(),
                    body.len()
                ));
            }
        }
        // A phone refused for good cannot be reached, whatever the size.
        let refused = batch.person(&c.person).push == Script::Refused;
        if delivered.is_empty() && !refused {
            lines.push(match &full {
                Some(full) => format!("{label}: the push of {} bytes never arrived", full.len()),
                None => format!("{label}: the push, its author gone, never arrived"),
            });
        }
    }
    lines
}

/// Messages that could not be rendered and were sent, offered, retried, or
/// left without a reason; and messages failed as unrenderable that were not.
fn fails_closed(played: &Played) -> Vec<String> {
    let batch = &played.batch;
    let mut lines = Vec::new();
    for c in &batch.comments {
        for channel in CHANNELS {
            let label = format!("#{} {} ({channel})", c.number, c.person);
            let row = played.row(c, channel);
            let renderable = batch.renderable(c, channel);
            let render_error = row.is_some_and(|r| r.error.to_lowercase().contains("render"));
            if renderable {
                if render_error && row.is_some_and(|r| r.status == "FAILED") {
                    let optional: Vec<&str> = [
                        (c.author.is_none(), "no author"),
                        (
                            channel == "email" && batch.person(&c.person).name.is_none(),
                            "no name",
                        ),
                    ]
                    .into_iter()
                    .filter_map(|(missing, what)| missing.then_some(what))
                    .collect();
                    let has = match optional.is_empty() {
                        true => "has every field".to_string(),
                        false => format!(
                            "has every required field ({}: an optional field takes its default)",
                            optional.join(", ")
                        ),
                    };
                    lines.push(format!(
                        "{label}: {has}, yet FAILED: {}",
                        excerpt(&row.map(|r| r.error.clone()).unwrap_or_default(), 60)
                    ));
                }
                continue;
            }
            let missing = "comment (a moderator removed it)";
            let offered = played.offered(c, channel);
            if let Some(d) = offered.first() {
                let what = if d.outcome == Outcome::Delivered {
                    "sent anyway"
                } else {
                    "offered to the provider anyway"
                };
                lines.push(format!(
                    "{label}: no {missing}, {what}: {}",
                    excerpt(d.body.lines().next().unwrap_or(""), 50)
                ));
                continue;
            }
            match row {
                None => lines.push(format!("{label}: no {missing}, and no row left to say why")),
                Some(r) if r.status != "FAILED" => lines.push(format!(
                    "{label}: no {missing}, left {} after {} tries",
                    r.status, r.attempts
                )),
                Some(r) if !render_error => lines.push(format!(
                    "{label}: no {missing}, FAILED with a reason that does not name the render: {:?}",
                    excerpt(&r.error, 60)
                )),
                Some(r) if r.attempts > 1 => lines.push(format!(
                    "{label}: no {missing}, rendered {} times before it FAILED: {}",
                    r.attempts,
                    excerpt(&r.error, 60)
                )),
                Some(_) => {}
            }
        }
    }
    lines
}

/// `notify run 10`: the chapter's comments, told as a story.
fn run(case: &Case) -> Result<String> {
    let batch = Batch::chapter();
    let played = play(case, &batch)?;
    let long = &batch.comments[2];
    let mut out = format!(
        "three comments, one each for ada, cleo and finn: the dispatcher wakes every minute\n\
         #1 is on an event titled `{}`;\n\
         cleo never gave her name; #3's comment is {} bytes of Japanese and emoji\n\n",
        batch.comments[0].title,
        long.text.as_deref().map_or(0, str::len)
    );
    out.push_str(&format!(
        "  {:<3}{:<6}{:<9}{:<8}{}\n",
        "#", "who", "channel", "row", "what reached them"
    ));
    let (mut raw, mut holes, mut large) = (0, 0, 0);
    for c in &batch.comments {
        for channel in CHANNELS {
            let status = played.row(c, channel).map_or("-", |r| r.status.as_str());
            let delivered = played.delivered(c, channel);
            let mut said = String::from("-");
            let mut note = String::new();
            if let Some(d) = delivered.first() {
                let html = d.html.as_deref().unwrap_or("");
                said = match channel {
                    "push" if d.body.len() > 100 => {
                        format!("{} ({} bytes)", excerpt(&d.body, 40), d.body.len())
                    }
                    "push" => d.body.clone(),
                    // Someone with no name: how the email greets them.
                    _ if batch.person(&c.person).name.is_none() => {
                        excerpt(html.lines().next().unwrap_or(""), 80)
                    }
                    _ => excerpt(&html_line(html, &c.marker(), &c.marker()), 80),
                };
                if let Some((what, field)) = batch
                    .fields(c, channel, d.began_ms)
                    .into_iter()
                    .find(|(_, f)| channel == "email" && html_trouble(html, f) == Some("unescaped"))
                {
                    raw += 1;
                    said = excerpt(&html_line(html, &field, &c.marker()), 80);
                    note = format!("  the {what}'s markup, unescaped");
                } else if d.body.contains('\u{FFFD}') {
                    note = "  a broken character (U+FFFD)".to_string();
                } else if let Some(sign) = placeholder(&d.body) {
                    holes += 1;
                    said = excerpt(d.body.lines().find(|l| l.contains(sign)).unwrap_or(""), 70);
                    note = "  a placeholder".to_string();
                }
            } else if let Some(d) = played
                .offered(c, channel)
                .into_iter()
                .find(|d| d.body.len() > PUSH_PAYLOAD_LIMIT)
            {
                large += 1;
                said = format!(
                    "refused: 413 PayloadTooLarge ({} bytes offered)",
                    d.body.len()
                );
            } else if let Some(r) = played.row(c, channel) {
                said = excerpt(&r.error, 70);
            }
            out.push_str(&format!(
                "  {:<3}{:<6}{:<9}{:<8}{said}{note}\n",
                c.number, c.person, channel, status
            ));
        }
    }
    out.push_str(&format!(
        "\nHTML bodies with unescaped markup in them: {raw}\n\
         messages with a placeholder in them: {holes}\n\
         pushes the provider refused as too large: {large}\n"
    ));
    if let Some(trouble) = played.trouble() {
        out.push_str(&format!("\n{trouble}\n"));
    }
    Ok(out)
}

/// The first scenario whose `judge` finds something, with how many things
/// it found over all of them.
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
    // The chapter's properties read every world the explorer plays too:
    // its seeds reach each edge the rules turn on.
    let mut batches = vec![Batch::chapter(), Batch::edges()];
    batches.extend(
        options
            .seeds
            .iter()
            .map(|&s| Batch::generated(s.wrapping_add(1000))),
    );
    batches.extend(
        lab::explore::seeds_of(&Generated, options.budget)
            .into_iter()
            .map(Batch::generated),
    );
    let played: Vec<Played> = in_parallel(&batches, |b| play(case, b))
        .into_iter()
        .collect::<Result<_>>()?;
    let processes: usize = played.iter().map(|p| p.exits.len()).sum();

    let count = |channel: &str| -> usize {
        played
            .iter()
            .map(|p| p.history.delivered(channel).count())
            .sum()
    };
    let (emails, pushes) = (count("email"), count("push"));
    let longest = played
        .iter()
        .flat_map(|p| p.history.delivered("push"))
        .map(|d| d.body.len())
        .max()
        .unwrap_or(0);
    let unrenderable: usize = played
        .iter()
        .map(|p| {
            p.batch
                .comments
                .iter()
                .flat_map(|c| CHANNELS.map(|ch| p.batch.renderable(c, ch)))
                .filter(|r| !r)
                .count()
        })
        .sum();
    let mut verdicts = vec![
        judge(
            ESCAPED,
            format!(
                "{} and {}, every field as typed",
                counted(emails, "email"),
                counted(pushes, "push")
            ),
            first(&played, escaped, "fields not as typed"),
        ),
        judge(
            PLACEHOLDERS,
            format!(
                "{}, none with a placeholder",
                counted(emails + pushes, "message")
            ),
            first(&played, placeholders, "messages with a placeholder"),
        ),
        judge(
            FITS,
            format!("{}, the longest {longest} bytes", counted(pushes, "push")),
            first(&played, fits, "pushes too large, broken or lost"),
        ),
        judge(
            FAILS_CLOSED,
            format!(
                "{} missing a required field, each FAILED at once",
                counted(unrenderable, "message")
            ),
            first(
                &played,
                fails_closed,
                "messages that did not fail closed, or failed for want of an optional field",
            ),
        ),
    ];
    let explored = explore(
        &Generated,
        "10",
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

/// Chapter 10's world for the explorer: up to three people, some who never
/// gave a name, some whose name is markup; up to four comments within
/// twenty minutes, with titles full of markup, quotes and ampersands, an
/// author who may have left, and a text that is short or makes a push of
/// 4000 to 5000 bytes (at the limit and just over it) in 1- to 4-byte
/// characters; providers that fail a message once or twice, and phones
/// refused for good; every other batch, one more person whose email fails
/// three times and whose phone is refused for good, with a deploy seconds
/// after one of the email's failures. Faults go where a dispatcher without chapter 6's sweep
/// survives them: a crash after a `publish` commit, and a failing one (the
/// comment is refused).
struct Generated;

/// Whether `batch` has a comment `that` holds for.
fn any_comment(batch: &Batch, that: impl Fn(&Comment) -> bool) -> bool {
    batch.comments.iter().any(that)
}

/// The situations chapter 10's rules turn on.
const DIMENSIONS: &[Dimension<Batch>] = &[
    Dimension {
        name: "markup in a title",
        reached: |b| any_comment(b, |c| c.title.contains('<')),
    },
    Dimension {
        name: "an entity already written in a title (&amp;)",
        reached: |b| any_comment(b, |c| c.title.contains("&amp;")),
    },
    Dimension {
        name: "text beyond ASCII (é, ç, an emoji)",
        reached: |b| {
            any_comment(b, |c| {
                !(c.title.is_ascii() && c.text.as_deref().is_none_or(str::is_ascii))
            })
        },
    },
    Dimension {
        name: "a comment with no author: an optional field missing",
        reached: |b| any_comment(b, |c| c.author.is_none() && c.text.is_some()),
    },
    Dimension {
        name: "a comment a moderator removed: a required field missing",
        reached: |b| any_comment(b, |c| c.text.is_none()),
    },
    Dimension {
        name: "a person with no name",
        reached: |b| b.people.iter().any(|p| p.name.is_none()),
    },
    Dimension {
        name: "a push of exactly 4096 bytes",
        reached: |b| {
            any_comment(b, |c| {
                c.push_text().is_some_and(|t| t.len() == PUSH_PAYLOAD_LIMIT)
            })
        },
    },
    Dimension {
        name: "a push a few bytes over 4096, to be cut",
        reached: |b| {
            any_comment(b, |c| {
                c.push_text().is_some_and(|t| {
                    (PUSH_PAYLOAD_LIMIT + 1..PUSH_PAYLOAD_LIMIT + 4).contains(&t.len())
                })
            })
        },
    },
    Dimension {
        name: "a long text of words, a space every few bytes, whose push must be cut",
        reached: |b| {
            any_comment(b, |c| {
                c.text.as_deref().is_some_and(|t| {
                    t.len() > PUSH_PAYLOAD_LIMIT - 100 && t.trim_start().contains(' ')
                })
            })
        },
    },
    Dimension {
        name: "a push over the limit whose author left: the words for them take room too",
        reached: |b| {
            any_comment(b, |c| {
                c.author.is_none()
                    && c.text
                        .as_deref()
                        .is_some_and(|t| t.len() >= PUSH_PAYLOAD_LIMIT)
            })
        },
    },
    Dimension {
        name: "a push refused for good",
        reached: |b| b.people.iter().any(|p| p.push == Script::Refused),
    },
    Dimension {
        name: "a deploy while a retry waits its backoff",
        reached: |b| b.restart_at.is_some(),
    },
    Dimension {
        name: "a name given while a message waits: rendered as it is at the send",
        reached: |b| b.renamed.is_some(),
    },
];

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

    /// A message is its comment's, on its channel: rendered at each send,
    /// its text follows the data (a name given between two attempts), and
    /// the title carries the comment's number whatever escaping did.
    fn message_of(&self, batch: &Batch, channel: &str, recipient: &str, body: &str) -> String {
        batch
            .comments
            .iter()
            .find(|c| {
                body.contains(&c.marker())
                    && batch.person(&c.person).recipient(channel) == recipient
            })
            .map_or_else(
                || body.to_string(),
                |c| format!("the {channel} of comment {}", c.marker()),
            )
    }

    fn faults(&self) -> FaultModel {
        FaultModel::PUBLISH
    }

    fn invariants(&self) -> Invariants {
        Invariants {
            recorded: true,
            told_once: true,
            settled: true,
            keyed: true,
            // No sweep hands a live claim to another process here.
            sent_once: true,
            retry_gaps: &RETRY_GAPS,
            ..Invariants::default()
        }
    }

    fn observe(&self, batch: &Batch, run: &Run) -> Result<Observation> {
        let outbox = read_outbox(run.dir, batch, run.history)?;
        let mut fates = BTreeMap::new();
        for c in &batch.comments {
            for channel in CHANNELS {
                let tried = offered(batch, run.history, c, channel);
                let told = tried
                    .iter()
                    .filter(|d| d.outcome == Outcome::Delivered)
                    .count() as u32;
                let state = match row(batch, &outbox, c, channel) {
                    // Deleted once delivered: SENT all the same.
                    None if told > 0 => "SENT".to_string(),
                    None => "no row".to_string(),
                    Some(r) => match r.status.as_str() {
                        "FAILED" => format!("FAILED ({})", error_class(&r.error)),
                        status => status.to_string(),
                    },
                };
                let times: Vec<String> = tried
                    .iter()
                    .map(|d| {
                        let said = match d.outcome {
                            Outcome::Delivered => "sent",
                            Outcome::Deduplicated => "repeat",
                            Outcome::Failed => "503",
                            Outcome::Rejected => "refused",
                        };
                        format!("{} {said}", clock(d.at_ms))
                    })
                    .collect();
                let detail = match times.is_empty() {
                    true => "no attempt".to_string(),
                    false => times.join(", "),
                };
                fates.insert(
                    format!("{} {channel}", c.subject()),
                    Fate {
                        told,
                        state,
                        detail,
                    },
                );
            }
        }
        let rows = outbox
            .iter()
            .map(|r| Row {
                subject: format!("{} ({}): {}", r.recipient, r.channel, r.title),
                status: r.status.clone(),
                error: (!r.error.is_empty()).then(|| r.error.clone()),
                message: None,
                wrong: None,
            })
            .collect();
        Ok(Observation { fates, rows })
    }

    fn shrink(&self, batch: &Batch) -> Vec<Batch> {
        let mut smaller = Vec::new();
        if batch.restart_at.is_some() {
            smaller.push(Batch {
                restart_at: None,
                renamed: None,
                ..batch.clone()
            });
        }
        for i in 0..batch.comments.len() {
            if batch.comments.len() > 1 {
                let mut comments = batch.comments.clone();
                comments.remove(i);
                smaller.push(Batch {
                    comments,
                    ..batch.clone()
                });
            }
        }
        for p in &batch.people {
            let busy = batch.comments.iter().any(|c| c.person == p.id);
            if !busy && batch.people.len() > 1 {
                smaller.push(Batch {
                    people: batch
                        .people
                        .iter()
                        .filter(|q| q.id != p.id)
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
                let mut said = match &p.name {
                    Some(name) => format!("{} named {}", p.id, quoted(name)),
                    None => format!("{} with no name", p.id),
                };
                for channel in CHANNELS {
                    if let Some(script) = p.script(channel).said() {
                        said.push_str(&format!(", {channel} {script}"));
                    }
                }
                said
            })
            .collect();
        let comments: Vec<String> = batch
            .comments
            .iter()
            .map(|c| {
                let author = match &c.author {
                    Some(a) => format!("by {}", quoted(a)),
                    None => "by someone who left".to_string(),
                };
                let author = match c.text {
                    Some(_) => author,
                    None => format!("{author}, removed by a moderator"),
                };
                let size = c
                    .push_text()
                    .map(|t| format!(", a push of {} bytes", t.len()))
                    .unwrap_or_default();
                format!(
                    "#{} for {} at {} on {} {author}{size}",
                    c.number,
                    c.person,
                    clock(c.at),
                    quoted(&c.title)
                )
            })
            .collect();
        let mut text = format!("{}; {}", people.join("; "), comments.join("; "));
        if let Some(at) = batch.restart_at {
            text.push_str(&format!("; the dispatcher restarts at {}", clock(at)));
            if let Some((id, name)) = &batch.renamed {
                text.push_str(&format!(
                    ", and meanwhile {id} gives the name {}",
                    quoted(name)
                ));
            }
        }
        text
    }
}

/// Why a row failed, in the rules' words: what the reference and a fix
/// must agree on, not the wording.
fn error_class(error: &str) -> &'static str {
    let error = error.to_lowercase();
    if error.contains("render") {
        "render"
    } else if error.contains("413") {
        "too large"
    } else if error.contains("rejected") || error.contains("refused") {
        "refused"
    } else {
        "provider"
    }
}
