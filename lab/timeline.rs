//! Draws a scenario as a short timeline: one lane each for the service, its
//! database and the provider, one row per event, in the order they happened.

use crate::world::{Event, Kind, Lane};

const INDENT: usize = 8;
const WIDTH: [usize; 3] = [32, 28, 36];

/// Keeps the events a learner needs to follow what happened to `focus` (an
/// email address): that person's events, every start, crash and panic, and
/// everything after the first restart.
pub fn focus<'a>(events: &'a [Event], focus: Option<&str>) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.kind != Kind::Return)
        .filter(|e| {
            focus.is_none()
                || e.subject.as_deref() == focus
                || matches!(e.kind, Kind::Start | Kind::Crash | Kind::Panic)
                || e.process > 1
        })
        .collect()
}

/// Renders events as lanes, plain text, each line indented.
pub fn render(events: &[&Event]) -> String {
    let mut out = String::new();
    let header = ["service", "database", "provider"];
    out.push_str(&row(&header.map(String::from)));
    out.push_str(&row(&WIDTH.map(|w| "─".repeat(w - 2))));
    for event in events {
        let text = describe(event);
        let cells = match event.kind.lane() {
            Lane::Service => [text, String::new(), String::new()],
            Lane::Database => [String::new(), text, String::new()],
            Lane::Provider => [String::new(), String::new(), text],
        };
        out.push_str(&row(&cells));
    }
    out
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
            Some((_, body)) => format!("✉ {who}: {body}"),
            None => format!("✉ {}", e.text),
        },
        Kind::Panic => format!("✖ panic: {}", e.text),
        Kind::Timeout if e.text == crate::provider::LOST_REQUEST => {
            "request lost: caller sees a timeout".to_string()
        }
        Kind::Timeout => "answer lost: caller sees a timeout".to_string(),
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
fn short(address: &str) -> String {
    address.split('@').next().unwrap_or(address).to_string()
}

fn row(cells: &[String; 3]) -> String {
    let mut line = " ".repeat(INDENT);
    for (cell, width) in cells.iter().zip(WIDTH) {
        line.push_str(&fit(cell, width));
    }
    format!("{}\n", line.trim_end())
}

fn fit(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count < width {
        format!("{text}{}", " ".repeat(width - count))
    } else {
        let cut: String = text.chars().take(width - 3).collect();
        format!("{cut}… ")
    }
}
