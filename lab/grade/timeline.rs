//! Draws a scenario as a short timeline: one lane each for the service, its
//! database and the provider, one row per event, in the order they happened.

use crate::world::{Event, Kind, Lane};

use colored::Colorize;

/// The indent and the lanes' widths at [`WIDEST`] columns.
const WIDE: (usize, [usize; 3]) = (8, [32, 28, 36]);
/// The indent and the lanes' widths at [`NARROWEST`] columns: the provider
/// lane, where the evidence is, shrinks least. Widths in between are drawn
/// in between.
const NARROW: (usize, [usize; 3]) = (6, [20, 25, 29]);
/// The width a timeline takes when nothing says how wide the output is
/// (piped, no `COLUMNS`), and at most on a terminal.
pub const WIDEST: usize = 104;
/// The narrowest width a timeline is drawn for: a smaller terminal wraps it.
pub const NARROWEST: usize = 80;

/// Keeps the events a learner needs to follow what happened to `focus` (an
/// email address) and to anyone `also` names (the lines a finding says):
/// their events, every start, crash and panic, and everything after the
/// first restart.
pub fn focus<'a>(events: &'a [Event], focus: Option<&str>, also: &[String]) -> Vec<&'a Event> {
    let named = |subject: &str| also.iter().any(|line| line.contains(subject));
    events
        .iter()
        .filter(|e| e.kind != Kind::Return)
        .filter(|e| {
            focus.is_none()
                || e.subject.as_deref() == focus
                || e.subject.as_deref().is_some_and(named)
                || matches!(e.kind, Kind::Start | Kind::Crash | Kind::Panic)
                || e.process > 1
        })
        .collect()
}

/// A moment of simulated time as a send's time in its lane: `m:ss`, or
/// `h:mm:ss` from the first hour on.
pub(crate) fn when(ms: i64) -> String {
    let s = ms.div_euclid(1000);
    match s / 3600 {
        0 => format!("{}:{:02}", s / 60, s % 60),
        h => format!("{h}:{:02}:{:02}", s / 60 % 60, s % 60),
    }
}

/// Renders events as lanes, each line indented, for output `width`
/// columns wide (taken as [`NARROWEST`] when narrower, [`WIDEST`] when
/// wider). Each row holds one event: its text starts in its lane and may
/// run on into the empty lanes to its right, and wraps (keeping a
/// parenthesis together) only when the line is full, so that no word of an
/// error is lost. The lanes' header is dimmed when colour is on; the events
/// are the evidence and are not.
pub fn render(events: &[&Event], width: usize) -> String {
    let width = width.clamp(NARROWEST, WIDEST);
    let (indent, lanes) = layout(width);
    let mut out = String::new();
    let header = ["service", "database", "provider"];
    out.push_str(&format!(
        "{}\n",
        row(indent, &header.map(String::from), &lanes).dimmed()
    ));
    let rule = lanes.map(|w| "─".repeat(w - 2));
    out.push_str(&format!("{}\n", row(indent, &rule, &lanes).dimmed()));
    // Where the scenario's clock moves, the provider's lane says when each
    // send came: a backoff is read from those times.
    let timed = events
        .iter()
        .any(|e| Some(e.at_ms) != events.first().map(|f| f.at_ms));
    for event in events {
        let lane = match event.kind.lane() {
            Lane::Service => 0,
            Lane::Database => 1,
            Lane::Provider => 2,
        };
        let start = indent + lanes[..lane].iter().sum::<usize>();
        // A line never reaches the last column, where terminals wrap.
        let room = width - 1 - start;
        let said = match (timed, event.kind) {
            (true, Kind::Send) => format!("{} {}", when(event.at_ms), describe(event)),
            _ => describe(event),
        };
        for (i, line) in wrap(&said, room).into_iter().enumerate() {
            let indent = if i == 0 { start } else { start + 2 };
            out.push_str(&format!("{}{line}\n", " ".repeat(indent)));
        }
    }
    out
}

/// The indent and the lanes' widths for a line `width` columns wide,
/// between [`NARROWEST`] and [`WIDEST`].
fn layout(width: usize) -> (usize, [usize; 3]) {
    let (small, big) = (NARROW, WIDE);
    let span = WIDEST - NARROWEST;
    let step = width - NARROWEST;
    let between = |a: usize, b: usize| a + (b - a) * step / span;
    let indent = between(small.0, big.0);
    let first = between(small.1[0], big.1[0]);
    let second = between(small.1[1], big.1[1]);
    (indent, [first, second, width - indent - first - second])
}

/// `text` in lines of at most `room` characters, the second and later
/// indented by two (so `room - 2` of text). Breaks between words, never
/// inside a parenthesis that fits a line, and inside a word only when the
/// word alone is too long.
pub fn wrap(text: &str, room: usize) -> Vec<String> {
    wrap_to(text, room, room.saturating_sub(2))
}

/// `text` in lines, the first at most `room` characters, the others at
/// most `later`, broken as [`wrap`] breaks them.
pub fn wrap_to(text: &str, room: usize, later: usize) -> Vec<String> {
    if text.chars().count() <= room {
        return vec![text.to_string()];
    }
    let room = room.max(8);
    let later = later.max(8);
    // Words, with a parenthesis that fits a line kept as one piece.
    let mut pieces: Vec<String> = Vec::new();
    let mut open: Option<String> = None;
    for word in text.split(' ') {
        match open.as_mut() {
            Some(group) => {
                group.push(' ');
                group.push_str(word);
                if word.contains(')') {
                    let group = open.take().expect("a group is open");
                    if group.chars().count() <= later {
                        pieces.push(group);
                    } else {
                        pieces.extend(group.split(' ').map(String::from));
                    }
                }
            }
            None if word.starts_with('(') && !word.contains(')') => open = Some(word.to_string()),
            None => pieces.push(word.to_string()),
        }
    }
    if let Some(group) = open {
        pieces.extend(group.split(' ').map(String::from));
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for piece in pieces {
        let limit = if lines.is_empty() { room } else { later };
        let len = line.chars().count();
        let needed = piece.chars().count() + usize::from(len > 0);
        if len > 0 && len + needed <= limit {
            line.push(' ');
            line.push_str(&piece);
            continue;
        }
        if len > 0 {
            lines.push(std::mem::take(&mut line));
        }
        let mut piece = piece;
        loop {
            let limit = if lines.is_empty() { room } else { later };
            if piece.chars().count() <= limit {
                line = piece;
                break;
            }
            let head: String = piece.chars().take(limit).collect();
            piece = piece.chars().skip(limit).collect();
            lines.push(head);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

fn describe(e: &Event) -> String {
    let who = e.subject.as_deref().map(short).unwrap_or_default();
    match e.kind {
        Kind::Start if e.process > 1 => "↻ restart".to_string(),
        Kind::Start => "start".to_string(),
        Kind::Call if who.is_empty() => e.text.clone(),
        Kind::Call => format!("{} {who}", e.text),
        Kind::Return => "ok".to_string(),
        Kind::Error => format!("error: {}", plain_error(&e.text)),
        Kind::Commit => format!("COMMIT ({})", e.text),
        Kind::CommitFailed => "COMMIT fails: rollback".to_string(),
        Kind::Crash => "✖ crash: process aborts".to_string(),
        Kind::Send => match e.text.split_once(": ") {
            Some((_, body)) => format!("✉ {who}: {}", brief(body)),
            None => format!("✉ {}", e.text),
        },
        Kind::Panic => format!("✖ panic: {}", e.text),
        Kind::Timeout if e.text == crate::provider::LOST_REQUEST => {
            "request lost: caller sees a timeout".to_string()
        }
        Kind::Timeout => "answer lost: caller sees a timeout".to_string(),
    }
}

/// The start of a long message and its size, so that a push of 4 KB takes
/// a line or two of a timeline, not a screen, and an email's lines one.
fn brief(body: &str) -> String {
    const SHOWN: usize = 100;
    // One line in the provider's lane: a body's line breaks become ↵.
    let flat = body
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ↵ ");
    match flat.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}… ({} bytes)", &flat[..at], body.len()),
        None => flat,
    }
}

/// An error as a person would say it: rusqlite's codes left out, and the
/// commit hook's rollback named.
pub fn plain_error(text: &str) -> String {
    if text.contains("Error code 531") {
        return "COMMIT rolled back".to_string();
    }
    match text.split_once(": Error code") {
        Some((said, _)) => said.to_string(),
        None => text.to_string(),
    }
}

/// `dana@example.com` → `dana`: the lanes are narrow.
pub(crate) fn short(address: &str) -> String {
    address.split('@').next().unwrap_or(address).to_string()
}

/// The header's cells, each padded to its lane.
fn row(indent: usize, cells: &[String; 3], lanes: &[usize; 3]) -> String {
    let mut line = " ".repeat(indent);
    for (cell, width) in cells.iter().zip(lanes) {
        let count = cell.chars().count();
        line.push_str(cell);
        line.push_str(&" ".repeat(width.saturating_sub(count)));
    }
    line.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_text_is_one_line() {
        assert_eq!(
            wrap("COMMIT (relay commit 1)", 40),
            ["COMMIT (relay commit 1)"]
        );
    }

    #[test]
    fn a_parenthesis_stays_on_one_line() {
        let text = "error: no answer in time: the email provider did not answer (the message may have gone out)";
        assert_eq!(
            wrap(text, 71),
            [
                "error: no answer in time: the email provider did not answer",
                "(the message may have gone out)"
            ]
        );
    }

    #[test]
    fn a_word_longer_than_a_line_is_cut_into_lines() {
        assert_eq!(wrap("aaaaaaaaaaaa bb", 10), ["aaaaaaaaaa", "aa bb"]);
    }

    #[test]
    fn an_email_of_several_lines_takes_one_line_of_its_lane() {
        assert_eq!(
            brief("Hello Kai,\n\nRenée commented on Café:\n\nSee you!"),
            "Hello Kai, ↵ Renée commented on Café: ↵ See you!"
        );
    }

    #[test]
    fn lanes_fill_the_line() {
        assert_eq!(layout(WIDEST), WIDE);
        assert_eq!(layout(NARROWEST), NARROW);
        for width in NARROWEST..=WIDEST {
            let (indent, lanes) = layout(width);
            assert_eq!(indent + lanes.iter().sum::<usize>(), width);
        }
    }
}
