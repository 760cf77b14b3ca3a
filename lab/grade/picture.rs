//! `notify check N --html FILE`: a failing scenario drawn on a time axis,
//! beside the reference's run of the same scenario. One page, with its CSS
//! and SVG inline: nothing is fetched from the network, and no script runs.
//!
//! The picture has one lane per case process and one per provider channel.
//! Each event the world saw is a mark on its lane, numbered; the table
//! under the picture says what each number was. Shaded bands show what the
//! chapter's rules say about time around those events: a backoff, an open
//! breaker, the sweep's threshold after a crash.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::chapter::Chapter;
use crate::explore::{hms, span, Explorer};
use crate::grades::body as esc;
use crate::history::History;
use crate::report::{CheckReport, Verdict};
use crate::runner::{Case, Taped};
use crate::scenario::Plan;
use crate::timeline::{short, when as clock};
use crate::world::{Delivery, Event, Kind, Outcome};

/// A stretch of simulated time a rule speaks about, on one lane.
#[derive(Clone, Debug)]
pub struct Band {
    /// The provider channel it lies on (`email`, `push`), or `None` for the
    /// case's processes.
    pub channel: Option<String>,
    pub from_ms: i64,
    pub to_ms: i64,
    pub label: String,
    pub tone: Tone,
}

/// How a band is shaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// A wait a rule asks for: a backoff, a Retry-After.
    Wait,
    /// A provider held off: an open breaker.
    Open,
    /// A claim too young to take back: the sweep's threshold.
    Sweep,
    /// The longest a message may wait before another channel must carry it.
    Deadline,
    /// A person's night, when pushes wait for the morning.
    Quiet,
}

/// For a chapter whose rules say nothing about time.
pub fn no_bands(_history: &History, _plans: &[Vec<Plan>]) -> Vec<Band> {
    Vec::new()
}

/// The bands of `explorer`'s rules over what `history` saw: a backoff after
/// each failed attempt of a message, the stretches in which a channel's
/// breaker may be open, and the sweep's threshold after each crash.
pub fn bands<E: Explorer>(explorer: &E, history: &History) -> Vec<Band> {
    let rules = explorer.invariants();
    let mut bands = Vec::new();
    let deliveries = &history.deliveries;
    // Backoffs: each message's attempts, a gap after each failure.
    let mut by_message: BTreeMap<(&str, &str, &str), Vec<&Delivery>> = BTreeMap::new();
    for d in deliveries {
        by_message
            .entry((&d.channel, &d.recipient, &d.body))
            .or_default()
            .push(d);
    }
    for attempts in by_message.values() {
        let mut failures = 0;
        for d in attempts.iter().take_while(|d| d.outcome == Outcome::Failed) {
            failures += 1;
            let Some(&gap) = rules.retry_gaps.get(failures - 1) else {
                break;
            };
            let why = if d.limited {
                " (a 429: its Retry-After may ask for longer)"
            } else {
                ""
            };
            bands.push(Band {
                channel: Some(d.channel.clone()),
                from_ms: d.at_ms,
                to_ms: d.at_ms + gap,
                label: format!(
                    "{}: backoff {failures}, {}{why}",
                    short(&d.recipient),
                    span(gap)
                ),
                tone: Tone::Wait,
            });
        }
    }
    // An open breaker: from the failure that fills its window with
    // failures, to the channel's next answer.
    if let Some(breaker) = rules.breaker {
        let channels: BTreeSet<&str> = deliveries.iter().map(|d| d.channel.as_str()).collect();
        let end = history.events.iter().map(|e| e.at_ms).max().unwrap_or(0);
        for channel in channels {
            let mut sends: Vec<&Delivery> =
                deliveries.iter().filter(|d| d.channel == channel).collect();
            sends.sort_by_key(|d| d.at_ms);
            let failed = |d: &Delivery| d.outcome == Outcome::Failed && !d.limited;
            let mut open: Option<i64> = None;
            for (k, d) in sends.iter().enumerate() {
                match open {
                    None if failed(d) => {
                        let window: Vec<&&Delivery> = sends[..=k]
                            .iter()
                            .filter(|o| o.at_ms >= d.at_ms - breaker.window)
                            .collect();
                        let bad = window.iter().filter(|o| failed(o)).count();
                        if window.len() >= breaker.opens_after && bad > breaker.opens_after / 2 {
                            open = Some(d.at_ms);
                        }
                    }
                    Some(from) if !failed(d) => {
                        bands.push(open_band(channel, from, d.began_ms, breaker.probe_after));
                        open = None;
                    }
                    _ => {}
                }
            }
            if let Some(from) = open {
                bands.push(open_band(channel, from, end.max(from), breaker.probe_after));
            }
        }
    }
    // The sweep's threshold after each crash.
    if rules.orphaned_after > 0 {
        for crash in history.events.iter().filter(|e| e.kind == Kind::Crash) {
            bands.push(Band {
                channel: None,
                from_ms: crash.at_ms,
                to_ms: crash.at_ms + rules.orphaned_after,
                label: format!(
                    "a claim younger than {} is not taken back",
                    span(rules.orphaned_after)
                ),
                tone: Tone::Sweep,
            });
        }
    }
    bands
}

fn open_band(channel: &str, from: i64, to: i64, probe_after: i64) -> Band {
    Band {
        channel: Some(channel.to_string()),
        from_ms: from,
        to_ms: to,
        label: format!("breaker open: one probe per {}", span(probe_after)),
        tone: Tone::Open,
    }
}

/// One failing property's picture: the learner's run of its scenario,
/// and the reference's run of the same scenario when there is one.
pub struct Scene<'a> {
    pub verdict: &'a Verdict,
    /// What the learner's case made of the scenario; `None` when the
    /// finding came with no events to draw.
    pub case: Option<History>,
    /// The reference's run, or why there is none.
    pub reference: Result<History, String>,
    /// The plans both runs were played from (none when the scenario was
    /// not found on the tape).
    pub plans: Vec<Vec<Plan>>,
    pub bands: fn(&History, &[Vec<Plan>]) -> Vec<Band>,
}

/// The page for a check of `case`, whose processes were taped
/// ([`Case::keep_tape`]): each failing property's scenario found on the
/// tape, and played again on `reference` (none when the reference itself
/// was checked, or for a chapter whose scenarios share a server).
pub fn render(
    chapter: &Chapter,
    report: &CheckReport,
    case: &Case,
    reference: Option<&Case>,
) -> String {
    let tape = case.tape();
    let mut replayed: BTreeMap<usize, Result<History, String>> = BTreeMap::new();
    let mut scenes = Vec::new();
    for v in report.verdicts.iter().filter(|v| !v.pass) {
        let events = if v.story.is_empty() {
            &v.timeline
        } else {
            &v.story
        };
        let found = (!events.is_empty()).then(|| find(&tape, events)).flatten();
        let case_history = match found {
            Some(i) => Some(tape[i].history.clone()),
            None if !events.is_empty() => Some(History {
                deliveries: Vec::new(),
                events: events.clone(),
            }),
            None => None,
        };
        let reference_history = match (found, reference) {
            (_, None) => Err("This is the reference solution: there is nothing to set beside it.".to_string()),
            (None, Some(_)) => Err("The scenario could not be found again to replay it on the reference.".to_string()),
            (Some(_), Some(_)) if chapter.number == 12 => Err(
                "Chapter 12's scenarios run on a shared PostgreSQL server: the reference's run is not replayed here."
                    .to_string(),
            ),
            (Some(i), Some(reference)) => replayed
                .entry(i)
                .or_insert_with(|| {
                    reference
                        .replay(&tape[i].groups)
                        .map_err(|e| format!("The reference could not replay the scenario: {e:#}"))
                })
                .clone(),
        };
        scenes.push(Scene {
            verdict: v,
            case: case_history,
            reference: reference_history,
            plans: found.map(|i| tape[i].groups.clone()).unwrap_or_default(),
            bands: chapter.bands,
        });
    }
    page(report, &scenes)
}

/// The taped scenario whose world saw `events`, in order: the one that saw
/// exactly them, or else the first that saw them among others (a timeline
/// cut down to one person's story).
fn find(tape: &[Taped], events: &[Event]) -> Option<usize> {
    let same = |a: &Event, b: &Event| {
        (
            a.process, a.kind, &a.op, a.nth, &a.subject, &a.text, a.at_ms,
        ) == (
            b.process, b.kind, &b.op, b.nth, &b.subject, &b.text, b.at_ms,
        )
    };
    let exact = tape.iter().position(|t| {
        t.history.events.len() == events.len()
            && t.history.events.iter().zip(events).all(|(a, b)| same(a, b))
    });
    exact.or_else(|| {
        tape.iter().position(|t| {
            let mut all = t.history.events.iter();
            events.iter().all(|e| all.any(|a| same(a, e)))
        })
    })
}

/// The most events a picture draws: a scenario of hours of wake-ups is cut
/// there, and says so.
const MOST: usize = 400;
/// How many events before the first difference a long run's picture
/// starts.
const LEAD: usize = 30;
/// Room for each event along the axis, in pixels.
const STEP: f64 = 14.0;
const LANE: f64 = 40.0;
const LEFT: f64 = 150.0;
const TOP: f64 = 34.0;

/// The page for `report`, with a picture for each failing property.
pub fn page(report: &CheckReport, scenes: &[Scene]) -> String {
    let mut out = String::new();
    let held = report.verdicts.iter().filter(|v| v.pass).count();
    let title = format!("case {:02}: {}", report.chapter, report.title);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>{CSS}</style></head><body>\n",
        esc(&title)
    );
    let _ = write!(
        out,
        "<h1>{}</h1>\n<p class=\"file\">{} · {held} of {} properties hold · {} in {:.1} s</p>\n",
        esc(&title),
        esc(&report.file),
        report.verdicts.len(),
        crate::report::counted(report.processes, "case process"),
        report.seconds
    );
    if let Some(stopped) = &report.stopped {
        let _ = writeln!(
            out,
            "<section class=\"fail\"><h2><span class=\"mark\">STOP</span> {}</h2>\
             <p>process {} was doing {} when it stopped. Every property waits on it.</p></section>",
            esc(&stopped.exit.describe()),
            stopped.process,
            esc(&stopped.doing)
        );
    }
    out.push_str(LEGEND);
    for scene in scenes {
        out.push_str(&section(report, scene));
    }
    let passed: Vec<&Verdict> = report.verdicts.iter().filter(|v| v.pass).collect();
    if !passed.is_empty() {
        out.push_str("<section class=\"pass\"><h2>Properties that hold</h2><ul>\n");
        for v in passed {
            let on = v
                .explored
                .as_deref()
                .map(|e| format!("; judged on the chapter's own scenarios and on {e}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "<li><span class=\"mark ok\">PASS</span> {} <span class=\"evidence\">({}{})</span></li>",
                esc(&v.property),
                esc(&v.evidence),
                esc(&on)
            );
        }
        out.push_str("</ul></section>\n");
    }
    out.push_str("</body></html>\n");
    out
}

fn section(report: &CheckReport, scene: &Scene) -> String {
    let v = scene.verdict;
    let mut out = String::from("<section class=\"fail\">\n");
    let _ = write!(
        out,
        "<h2><span class=\"mark\">FAIL</span> {}</h2>\n<p class=\"evidence\">({})</p>\n",
        esc(&v.property),
        esc(&v.evidence)
    );
    if let Some(scenario) = &v.scenario {
        let _ = writeln!(out, "<p class=\"scenario\">{}</p>", esc(scenario));
    }
    if !v.details.is_empty() {
        out.push_str("<ul class=\"details\">");
        for d in &v.details {
            let _ = write!(out, "<li>{}</li>", esc(d));
        }
        out.push_str("</ul>\n");
    }
    if let Some(seed) = v.seed {
        let _ = writeln!(
            out,
            "<p class=\"replay\">replay it: <code>notify check {}{} --seed {seed}</code></p>",
            report.chapter, report.version_flags
        );
    }
    let Some(case) = &scene.case else {
        out.push_str(
            "<p class=\"note\">This finding came with no events to draw: the case's table rows tell it, above.</p>\n</section>\n",
        );
        return out;
    };
    let differ = scene
        .reference
        .as_ref()
        .ok()
        .map(|r| first_difference(case, r));
    let bands = (scene.bands)(case, &scene.plans);
    if let Some(d) = &differ {
        let _ = writeln!(out, "<p class=\"differ\">{}</p>", esc(&d.said));
    }
    out.push_str("<h3>Your case</h3>\n");
    out.push_str(&figure(case, &bands, differ.as_ref().map(|d| d.case)));
    out.push_str("<h3>The reference, on the same scenario</h3>\n");
    match &scene.reference {
        Ok(r) => out.push_str(&figure(
            r,
            &(scene.bands)(r, &scene.plans),
            differ.as_ref().map(|d| d.reference),
        )),
        Err(why) => {
            let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(why));
        }
    }
    out.push_str("</section>\n");
    out
}

/// Where two runs of a scenario first part, in what the providers saw.
struct Difference {
    /// The index, among each run's drawn events, of the first send that
    /// differs (or the end of the shorter run).
    case: usize,
    reference: usize,
    said: String,
}

fn first_difference(case: &History, reference: &History) -> Difference {
    let sends = |h: &History| -> Vec<(usize, String)> {
        drawn(h)
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == Kind::Send)
            .map(|(i, e)| (i, format!("{} at {}", e.text, hms(e.at_ms))))
            .collect()
    };
    let (mine, theirs) = (sends(case), sends(reference));
    let at = mine
        .iter()
        .zip(&theirs)
        .position(|(a, b)| a.1 != b.1)
        .unwrap_or(mine.len().min(theirs.len()));
    let end = |h: &History| drawn(h).len().saturating_sub(1);
    let index = |list: &[(usize, String)], h: &History| list.get(at).map_or(end(h), |s| s.0);
    let said = match (mine.get(at), theirs.get(at)) {
        (None, None) => format!(
            "The providers saw the same {} in both runs: the difference is in what the database ends with (above).",
            crate::report::counted(mine.len(), "send")
        ),
        (Some(m), Some(t)) => format!(
            "First difference, at send {}: your case's was “{}”, the reference's “{}”.",
            at + 1,
            brief(&m.1),
            brief(&t.1)
        ),
        (Some(m), None) => format!(
            "First difference: your case makes send {} (“{}”), which the reference never makes.",
            at + 1,
            brief(&m.1)
        ),
        (None, Some(t)) => format!(
            "First difference: the reference makes send {} (“{}”), which your case never makes.",
            at + 1,
            brief(&t.1)
        ),
    };
    Difference {
        case: index(&mine, case),
        reference: index(&theirs, reference),
        said,
    }
}

/// The events a picture draws: what the world saw, and each request made
/// of the case, but not the wake-ups that did nothing.
fn drawn(history: &History) -> Vec<&Event> {
    history
        .events
        .iter()
        .filter(|e| match e.kind {
            Kind::Return => false,
            Kind::Call => e.subject.is_some(),
            _ => true,
        })
        .take(MOST)
        .collect()
}

/// Where a lane is: a process, or a provider's channel.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Row {
    Process(u32),
    Channel(String),
}

fn channel_of(e: &Event) -> String {
    e.text
        .split(" to ")
        .next()
        .unwrap_or("provider")
        .to_string()
}

fn row_of(e: &Event) -> Row {
    match e.kind {
        Kind::Send => Row::Channel(channel_of(e)),
        _ => Row::Process(e.process),
    }
}

/// x positions along the axis: one step per event, and more between
/// events the clock separates (growing with the log of the time between
/// them), so that seconds and hours both fit.
struct Axis {
    points: Vec<(i64, f64)>,
}

fn gap(ms: i64) -> f64 {
    if ms <= 0 {
        0.0
    } else {
        4.0 + 12.0 * (1.0 + ms as f64 / 1000.0).ln()
    }
}

impl Axis {
    fn new(events: &[&Event]) -> Axis {
        let mut points = Vec::new();
        let mut x = LEFT + STEP;
        let mut last: Option<i64> = None;
        for e in events {
            if let Some(t) = last {
                x += STEP + gap(e.at_ms - t);
            }
            points.push((e.at_ms, x));
            last = Some(e.at_ms);
        }
        Axis { points }
    }

    /// Where simulated time `t` falls: between the last event at or
    /// before it and the first after it.
    fn x(&self, t: i64) -> f64 {
        let Some(&(first_t, first_x)) = self.points.first() else {
            return LEFT;
        };
        if t <= first_t {
            return first_x - gap(first_t - t);
        }
        let after = self.points.iter().position(|&(pt, _)| pt > t);
        match after {
            None => {
                let &(lt, lx) = self.points.last().expect("not empty");
                lx + gap(t - lt)
            }
            Some(k) => {
                let (bt, bx) = self.points[k - 1];
                let (at, ax) = self.points[k];
                let left = bx + STEP / 2.0;
                let right = ax - STEP / 2.0;
                left + (right - left) * (t - bt) as f64 / (at - bt) as f64
            }
        }
    }
}

/// `bands` in order, those on the same lane over the same stretch as one,
/// their subjects joined: "ada, ben: backoff 1, 5 s".
fn merged(bands: &[Band]) -> Vec<Band> {
    let mut out: Vec<Band> = Vec::new();
    let mut sorted = bands.to_vec();
    sorted.sort_by_key(|b| (b.from_ms, b.to_ms));
    for b in sorted {
        let same = out.iter_mut().find(|o| {
            (&o.channel, o.from_ms, o.to_ms, o.tone) == (&b.channel, b.from_ms, b.to_ms, b.tone)
        });
        match (same, b.label.split_once(": ")) {
            (Some(o), Some((who, rest))) if o.label.ends_with(rest) => {
                let head = &o.label[..o.label.len() - rest.len() - 2];
                o.label = format!("{head}, {who}: {rest}");
            }
            (Some(_), _) => {}
            (None, _) => out.push(b),
        }
    }
    out
}

fn figure(history: &History, bands: &[Band], differ: Option<usize>) -> String {
    let events = drawn(history);
    if events.is_empty() {
        return "<p class=\"note\">Nothing happened in this run.</p>\n".to_string();
    }
    let timed = events.iter().any(|e| e.at_ms != events[0].at_ms);
    // A long run is drawn from a little before its first difference, so
    // that the page opens on it; the table still lists every event.
    let from = differ.filter(|&d| d > LEAD + 10).map_or(0, |d| d - LEAD);
    let axis = Axis::new(&events[from..]);
    // Lanes: each process, then each channel, in order.
    let mut rows: BTreeSet<Row> = events.iter().map(|e| row_of(e)).collect();
    for b in bands.iter() {
        if let Some(c) = &b.channel {
            rows.insert(Row::Channel(c.clone()));
        }
    }
    let rows: Vec<Row> = rows.into_iter().collect();
    let lane_y = |row: &Row| TOP + LANE * rows.iter().position(|r| r == row).unwrap_or(0) as f64;
    let ops = |p: u32| -> String {
        let mut seen: Vec<&str> = Vec::new();
        for e in events.iter().filter(|e| e.process == p) {
            if let Some(op) = e.op.as_deref() {
                let op = if op == crate::serve::RUN {
                    "schedule"
                } else {
                    op
                };
                if !seen.contains(&op) {
                    seen.push(op);
                }
            }
        }
        seen.truncate(3);
        seen.join(", ")
    };
    let end_t = bands
        .iter()
        .map(|b| b.to_ms)
        .chain(events.iter().map(|e| e.at_ms))
        .max()
        .unwrap_or(0);
    // Room after the last mark for the words of a difference drawn there.
    let width = axis.x(end_t).max(axis.points.last().map_or(LEFT, |p| p.1)) + 100.0;
    // One way of writing times in a picture: h:mm:ss once it runs past
    // the hour.
    let stamp = |t: i64| if end_t >= 3_600_000 { hms(t) } else { clock(t) };
    let height = TOP + LANE * rows.len() as f64 + 8.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<div class=\"scroll\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\">"
    );
    // Lanes, their names, then the bands over them.
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + LANE * i as f64;
        let (name, class) = match row {
            Row::Process(p) => (format!("process {p}"), "lane"),
            Row::Channel(c) => (format!("{c} provider"), "lane provider"),
        };
        let _ = write!(
            svg,
            "<rect class=\"{class}\" x=\"0\" y=\"{y:.0}\" width=\"{width:.0}\" height=\"{LANE:.0}\"/>\
             <text class=\"lanename\" x=\"6\" y=\"{:.0}\">{}</text>",
            y + 17.0,
            esc(&name)
        );
        if let Row::Process(p) = row {
            let _ = write!(
                svg,
                "<text class=\"ops\" x=\"6\" y=\"{:.0}\">{}</text>",
                y + 31.0,
                esc(&ops(*p))
            );
        }
        svg.push('\n');
    }
    let bands = merged(bands);
    // A band's words go inside it where they do not run into the last
    // words written on that lane; its tooltip always has them.
    let mut written: BTreeMap<i64, f64> = BTreeMap::new();
    for b in &bands {
        let (x0, x1) = (axis.x(b.from_ms).max(LEFT), axis.x(b.to_ms));
        if x1 <= x0 {
            continue;
        }
        let lanes: Vec<f64> = match &b.channel {
            Some(c) => vec![lane_y(&Row::Channel(c.clone()))],
            None => rows
                .iter()
                .filter(|r| matches!(r, Row::Process(_)))
                .map(lane_y)
                .collect(),
        };
        let class = match b.tone {
            Tone::Wait => "band wait",
            Tone::Open => "band open",
            Tone::Sweep => "band sweep",
            Tone::Deadline => "band deadline",
            Tone::Quiet => "band quiet",
        };
        for y in lanes {
            let _ = write!(
                svg,
                "<rect class=\"{class}\" x=\"{x0:.1}\" y=\"{:.0}\" width=\"{:.1}\" height=\"{:.0}\"><title>{}</title></rect>",
                y + 2.0,
                (x1 - x0).max(1.0),
                LANE - 4.0,
                esc(&b.label)
            );
            let free = written.get(&(y as i64)).is_none_or(|&end| x0 >= end);
            if x1 - x0 > 60.0 && free {
                written.insert(y as i64, x1);
                let _ = write!(
                    svg,
                    "<text class=\"bandname\" x=\"{:.1}\" y=\"{:.0}\">{}</text>",
                    x0 + 3.0,
                    y + LANE - 5.0,
                    esc(&clip(&b.label, ((x1 - x0) / 5.5) as usize))
                );
            }
        }
    }
    svg.push('\n');
    // The time axis: a label where the clock has moved, when there is room.
    if timed {
        let mut last_label = f64::MIN;
        let mut last_t = None;
        for &(t, x) in &axis.points {
            if last_t != Some(t) && x - last_label >= 46.0 {
                let _ = write!(
                    svg,
                    "<text class=\"tick\" x=\"{x:.1}\" y=\"14\">{}</text><line class=\"tickline\" x1=\"{x:.1}\" y1=\"18\" x2=\"{x:.1}\" y2=\"{TOP:.0}\"/>",
                    stamp(t)
                );
                last_label = x;
            }
            last_t = Some(t);
        }
    } else {
        let _ = write!(
            svg,
            "<text class=\"tick\" x=\"{LEFT:.0}\" y=\"14\">the order of events (this chapter's world has no clock) →</text>"
        );
    }
    // A crash cuts every process lane.
    let process_top = TOP;
    let process_bottom =
        TOP + LANE * rows.iter().filter(|r| matches!(r, Row::Process(_))).count() as f64;
    let deliveries = paired(&events, &history.deliveries);
    for (i, e) in events.iter().enumerate().skip(from) {
        let x = axis.points[i - from].1;
        let y = lane_y(&row_of(e)) + 24.0;
        let delivery = deliveries[i];
        let tip = format!(
            "#{} {}{}",
            i + 1,
            if timed {
                format!("{} ", stamp(e.at_ms))
            } else {
                String::new()
            },
            what(e, delivery)
        );
        if e.kind == Kind::Crash {
            let _ = write!(
                svg,
                "<line class=\"crash\" x1=\"{x:.1}\" y1=\"{process_top:.0}\" x2=\"{x:.1}\" y2=\"{process_bottom:.0}\"/>"
            );
        }
        let _ = write!(
            svg,
            "<g><title>{}</title>{}<text class=\"num\" x=\"{x:.1}\" y=\"{:.0}\">{}</text></g>",
            esc(&tip),
            glyph(e, delivery, x, y),
            y - 10.0,
            i + 1
        );
        if differ == Some(i) {
            let _ = write!(
                svg,
                "<line class=\"differ\" x1=\"{x:.1}\" y1=\"{:.0}\" x2=\"{x:.1}\" y2=\"{:.0}\"/>\
                 <text class=\"differ\" x=\"{:.1}\" y=\"{:.0}\">first difference</text>",
                TOP - 4.0,
                height - 4.0,
                x + 4.0,
                TOP + 10.0
            );
        }
        svg.push('\n');
    }
    svg.push_str("</svg></div>\n");
    if from > 0 {
        let _ = writeln!(
            svg,
            "<p class=\"note\">Drawn from event {}, a little before the first difference; events 1 to {from} are in the table.</p>",
            from + 1
        );
    }
    if history
        .events
        .iter()
        .filter(|e| e.kind != Kind::Return)
        .count()
        > MOST
    {
        let _ = writeln!(
            svg,
            "<p class=\"note\">The first {MOST} events are drawn; the run had more.</p>"
        );
    }
    // The table: what each number was.
    let _ = writeln!(
        svg,
        "<details><summary>the {} events, one per line</summary><table><tr><th>#</th><th>time</th><th>lane</th><th>what</th><th>key</th></tr>",
        events.len()
    );
    for (i, e) in events.iter().enumerate() {
        let delivery = deliveries[i];
        let lane = match row_of(e) {
            Row::Process(p) => format!("process {p}"),
            Row::Channel(c) => format!("{c} provider"),
        };
        let key = delivery
            .and_then(|d| d.key.as_deref())
            .map(esc)
            .unwrap_or_default();
        let mark = if differ == Some(i) {
            " class=\"differ\""
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            "<tr{mark}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{key}</code></td></tr>",
            i + 1,
            if timed { stamp(e.at_ms) } else { String::new() },
            esc(&lane),
            esc(&what(e, delivery))
        );
    }
    svg.push_str("</table></details>\n");
    svg
}

/// Each event's delivery, for a send: the first not yet taken that the
/// same process made to the same recipient. Processes that send at once
/// record their deliveries and their events in separate transactions, so
/// the two lists need not be in the same order.
fn paired<'a>(events: &[&Event], deliveries: &'a [Delivery]) -> Vec<Option<&'a Delivery>> {
    let mut taken = vec![false; deliveries.len()];
    events
        .iter()
        .map(|e| {
            if e.kind != Kind::Send {
                return None;
            }
            let k = deliveries.iter().enumerate().position(|(k, d)| {
                !taken[k]
                    && d.process == e.process
                    && Some(d.recipient.as_str()) == e.subject.as_deref()
                    && e.text.starts_with(&format!("{} to ", d.channel))
            })?;
            taken[k] = true;
            Some(&deliveries[k])
        })
        .collect()
}

/// An event in words, with its send's answer.
fn what(e: &Event, delivery: Option<&Delivery>) -> String {
    let text = crate::timeline::plain_error(&e.text);
    let who = e.subject.as_deref().unwrap_or_default();
    match e.kind {
        Kind::Start if e.process > 1 => "restart".to_string(),
        Kind::Start => "start".to_string(),
        Kind::Call => format!("{text} {who}"),
        Kind::Commit => format!("COMMIT ({text})"),
        Kind::CommitFailed => "COMMIT fails: rollback".to_string(),
        Kind::Crash => "crash: the process aborts".to_string(),
        Kind::Panic => format!("panic: {text}"),
        Kind::Error => format!("error: {text}"),
        Kind::Timeout => format!("no answer: {text}"),
        Kind::Send => {
            let answer = delivery.map_or("", |d| answer(d).1);
            let begun = match delivery {
                Some(d) if d.began_ms != d.at_ms => format!(", begun at {}", clock(d.began_ms)),
                _ => String::new(),
            };
            let answer = match answer {
                "" => String::new(),
                a => format!(" → {a}{begun}"),
            };
            format!("{}{answer}", brief(&text))
        }
        Kind::Return => "ok".to_string(),
    }
}

/// A send's answer: the class its mark is drawn in, and its words.
fn answer(d: &Delivery) -> (&'static str, &'static str) {
    match d.outcome {
        Outcome::Failed if d.limited => ("limited", "429: slow down"),
        Outcome::Delivered => ("delivered", "delivered"),
        Outcome::Deduplicated => ("repeat", "a repeat key: nothing sent"),
        Outcome::Failed => ("failed", "failed (5xx)"),
        Outcome::Rejected => ("refused", "refused for good (4xx)"),
    }
}

/// The mark of one event on its lane, centred on `x`, `y`.
fn glyph(e: &Event, delivery: Option<&Delivery>, x: f64, y: f64) -> String {
    match e.kind {
        Kind::Send => {
            let class = match delivery {
                Some(d) => answer(d).0,
                None if e.text.contains("provider failed") => "failed",
                None if e.text.contains("rejected") => "refused",
                None if e.text.contains("repeat of key") => "repeat",
                None => "delivered",
            };
            format!("<circle class=\"send {class}\" cx=\"{x:.1}\" cy=\"{y:.0}\" r=\"5.5\"/>")
        }
        Kind::Commit => format!(
            "<rect class=\"commit\" x=\"{:.1}\" y=\"{:.0}\" width=\"9\" height=\"9\"/>",
            x - 4.5,
            y - 4.5
        ),
        Kind::CommitFailed => format!(
            "<rect class=\"commitfailed\" x=\"{:.1}\" y=\"{:.0}\" width=\"9\" height=\"9\"/>\
             <line class=\"crash\" x1=\"{:.1}\" y1=\"{:.0}\" x2=\"{:.1}\" y2=\"{:.0}\"/>",
            x - 4.5,
            y - 4.5,
            x - 4.5,
            y + 4.5,
            x + 4.5,
            y - 4.5
        ),
        Kind::Crash | Kind::Panic => format!(
            "<path class=\"cross\" d=\"M{:.1} {:.0} l10 10 m0 -10 l-10 10\"/>",
            x - 5.0,
            y - 5.0
        ),
        Kind::Start => format!(
            "<path class=\"start{}\" d=\"M{:.1} {:.0} l9 5 l-9 5 z\"/>",
            if e.process > 1 { " restart" } else { "" },
            x - 4.0,
            y - 5.0
        ),
        Kind::Error | Kind::Timeout => format!(
            "<path class=\"error\" d=\"M{x:.1} {:.0} l5 5 l-5 5 l-5 -5 z\"/>",
            y - 5.0
        ),
        Kind::Call | Kind::Return => {
            format!("<circle class=\"call\" cx=\"{x:.1}\" cy=\"{y:.0}\" r=\"3\"/>")
        }
    }
}

/// The first 90 characters of a send's text, on one line.
fn brief(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    clip(&flat, 90)
}

fn clip(text: &str, most: usize) -> String {
    match text.char_indices().nth(most.max(2)) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

const LEGEND: &str = "<div class=\"legend\"><svg width=\"800\" height=\"26\" role=\"img\">\
<circle class=\"send delivered\" cx=\"10\" cy=\"13\" r=\"5.5\"/><text x=\"20\" y=\"17\">delivered</text>\
<circle class=\"send failed\" cx=\"90\" cy=\"13\" r=\"5.5\"/><text x=\"100\" y=\"17\">failed (5xx)</text>\
<circle class=\"send limited\" cx=\"185\" cy=\"13\" r=\"5.5\"/><text x=\"195\" y=\"17\">429</text>\
<circle class=\"send refused\" cx=\"235\" cy=\"13\" r=\"5.5\"/><text x=\"245\" y=\"17\">refused</text>\
<circle class=\"send repeat\" cx=\"310\" cy=\"13\" r=\"5.5\"/><text x=\"320\" y=\"17\">repeat key</text>\
<rect class=\"commit\" x=\"398\" y=\"8\" width=\"9\" height=\"9\"/><text x=\"412\" y=\"17\">commit</text>\
<rect class=\"commitfailed\" x=\"470\" y=\"8\" width=\"9\" height=\"9\"/><text x=\"484\" y=\"17\">failing commit</text>\
<path class=\"cross\" d=\"M585 8 l10 10 m0 -10 l-10 10\"/><text x=\"600\" y=\"17\">crash</text>\
<path class=\"start restart\" d=\"M650 8 l9 5 l-9 5 z\"/><text x=\"663\" y=\"17\">(re)start</text>\
<path class=\"error\" d=\"M730 8 l5 5 l-5 5 l-5 -5 z\"/><text x=\"740\" y=\"17\">error</text>\
</svg><p>Numbers are the order of events; the table under a picture says what each was. Shaded: <span class=\"sw wait\"></span> a wait the rules ask for \
<span class=\"sw open\"></span> an open breaker <span class=\"sw sweep\"></span> the sweep's threshold \
<span class=\"sw deadline\"></span> a deadline for another channel \
<span class=\"sw quiet\"></span> quiet hours. Hover a mark or a band for its words.</p></div>\n";

const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1a1a1a;background:#fff}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:0 0 6px}h3{font-size:14px;margin:14px 0 4px;color:#444}\
.file{color:#555;margin-top:0}.mark{display:inline-block;padding:1px 6px;border-radius:3px;background:#c62828;color:#fff;font-size:12px;font-weight:700}\
.mark.ok{background:#2e7d32}section{border:1px solid #ddd;border-radius:6px;padding:12px 16px;margin:16px 0}\
section.fail{border-left:5px solid #c62828}section.pass{border-left:5px solid #2e7d32}section.pass ul{list-style:none;padding-left:0}\
.evidence{color:#555}.scenario{color:#8a5a00;font-weight:600}.details li{margin:2px 0}.differ{color:#b00020;font-weight:600}\
.note{color:#666;font-style:italic}.scroll{overflow-x:auto;border:1px solid #eee}code{background:#f4f4f4;padding:0 3px}\
table{border-collapse:collapse;font-size:12px;margin-top:6px}td,th{border-bottom:1px solid #eee;padding:2px 8px;text-align:left;vertical-align:top}\
tr.differ td{background:#fde7e9}.legend{font-size:12px;color:#444}.legend p{margin:2px 0}\
.sw{display:inline-block;width:14px;height:10px;margin:0 3px 0 8px;vertical-align:middle}\
rect.lane{fill:#fafafa;stroke:#e2e2e2}rect.lane.provider{fill:#f3f6fb}\
.lanename{font-size:12px;font-weight:600;fill:#333}.ops{font-size:10px;fill:#777}\
.band,.sw{opacity:.55}.band.wait,.sw.wait{fill:#90caf9;background:#90caf9}.band.open,.sw.open{fill:#ffab91;background:#ffab91}\
.band.sweep,.sw.sweep{fill:#d7ccc8;background:#d7ccc8}.band.deadline,.sw.deadline{fill:#fff59d;background:#fff59d}.band.quiet,.sw.quiet{fill:#9fa8da;background:#9fa8da}.bandname{font-size:9px;fill:#37474f}\
.tick{font-size:10px;fill:#555;text-anchor:middle}.tickline{stroke:#ccc}.num{font-size:8px;fill:#666;text-anchor:middle}\
.send{stroke:#333;stroke-width:.6}.delivered{fill:#2e7d32}.failed{fill:#ef6c00}.limited{fill:#8e24aa}.refused{fill:#c62828}.repeat{fill:#9e9e9e}\
.commit{fill:#1565c0}.commitfailed{fill:#fff;stroke:#c62828;stroke-width:1.5}.cross{stroke:#c62828;stroke-width:2.5;fill:none}\
line.crash{stroke:#c62828;stroke-width:1.5;stroke-dasharray:3 2}.start{fill:#9e9e9e}.start.restart{fill:#2e7d32}.error{fill:#ff8f00}.call{fill:#777}\
line.differ{stroke:#b00020;stroke-width:2;stroke-dasharray:6 3}text.differ{font-size:10px;fill:#b00020;font-weight:700}";
