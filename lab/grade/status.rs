//! One line of progress on the terminal, on standard error: what a check is
//! doing, how many case processes it has played, and what it is waiting
//! on when a process takes long. It is drawn only when standard error is a
//! terminal and the command asked for it (never for `--json`), and cleared
//! before anything else is printed and at the end.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ENABLED: AtomicBool = AtomicBool::new(false);
static PLAYED: AtomicUsize = AtomicUsize::new(0);

struct Line {
    /// What the command does, e.g. "checking case 1".
    label: String,
    /// What a slow process is doing, while it is.
    waiting: Option<String>,
    shown: bool,
    drawn: Option<Instant>,
}

static LINE: Mutex<Line> = Mutex::new(Line {
    label: String::new(),
    waiting: None,
    shown: false,
    drawn: None,
});

/// True when a status line can be drawn: standard error is a terminal
/// that understands it.
pub fn available() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// Turns the status line on (when [`available`]) or off.
pub fn enable(on: bool) {
    ENABLED.store(on && available(), Ordering::SeqCst);
}

/// True when the status line is on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Says what the command is doing now, e.g. "checking case 1".
pub fn label(text: &str) {
    if !enabled() {
        return;
    }
    let mut line = crate::db::lock(&LINE);
    line.label = text.to_string();
    line.waiting = None;
    PLAYED.store(0, Ordering::Relaxed);
    draw(&mut line, true);
}

/// Counts a case process started.
pub fn played() {
    if !enabled() {
        return;
    }
    PLAYED.fetch_add(1, Ordering::Relaxed);
    let mut line = crate::db::lock(&LINE);
    draw(&mut line, false);
}

/// Says what a slow case process is doing, or `None` once it has ended.
pub fn waiting(on: Option<String>) {
    if !enabled() {
        return;
    }
    let mut line = crate::db::lock(&LINE);
    let changed = line.waiting != on;
    line.waiting = on;
    draw(&mut line, changed);
}

/// Clears the status line, e.g. before printing a result.
pub fn clear() {
    if !enabled() {
        return;
    }
    let mut line = crate::db::lock(&LINE);
    if line.shown {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
        line.shown = false;
        line.drawn = None;
    }
}

/// Clears the line and forgets it: the command is done.
pub fn finish() {
    clear();
    ENABLED.store(false, Ordering::SeqCst);
}

fn draw(line: &mut Line, now: bool) {
    if !now
        && line
            .drawn
            .is_some_and(|at| at.elapsed() < Duration::from_millis(100))
    {
        return;
    }
    let played = PLAYED.load(Ordering::Relaxed);
    let mut text = line.label.clone();
    if played > 0 && line.waiting.is_none() {
        text.push_str(&format!(
            " · {played} case process{} played",
            if played == 1 { "" } else { "es" }
        ));
    }
    if let Some(waiting) = &line.waiting {
        text.push_str(&format!(" · {waiting}"));
    }
    // A terminal that does not say its width (0 columns) gets 80.
    let width = crossterm::terminal::size()
        .ok()
        .map(|(w, _)| w as usize)
        .filter(|&w| w > 0)
        .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
        .unwrap_or(80)
        .saturating_sub(1)
        .max(20);
    if text.chars().count() > width {
        text = text.chars().take(width - 1).collect::<String>() + "…";
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K{text}");
    let _ = err.flush();
    line.shown = true;
    line.drawn = Some(Instant::now());
}
