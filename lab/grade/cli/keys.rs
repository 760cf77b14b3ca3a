//! The keys `notify watch` listens to. On a terminal they are single key
//! presses (raw mode, nothing echoed); otherwise, as when a test drives
//! the command, they arrive as lines on standard input.

use std::io::{BufRead, IsTerminal};
use std::sync::mpsc::Sender;

use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};

/// What the learner asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Key {
    /// `h`: the hint (pressed again: the second hint too).
    Hint,
    /// `r`: play the case's batch, as `notify run N` does.
    Run,
    /// `n`: move on to the next chapter, once this one passes.
    Next,
    /// `f`: the last check's full report.
    Full,
    /// Enter: check again now.
    Check,
    /// `q`, Esc, or the end of the input.
    Quit,
    /// Anything else typed on a line.
    Other,
}

/// Where keys come from.
pub(super) struct Keys {
    raw: bool,
}

impl Keys {
    /// Starts reading keys on a thread of their own, sending each with
    /// `wrap`. Single key presses when standard input is a terminal.
    pub(super) fn start<T: Send + 'static>(
        tx: Sender<T>,
        wrap: fn(Key) -> T,
    ) -> std::io::Result<Keys> {
        let raw = std::io::stdin().is_terminal();
        if raw {
            crossterm::terminal::enable_raw_mode()?;
            std::thread::spawn(move || read_presses(tx, wrap));
        } else {
            std::thread::spawn(move || read_lines(tx, wrap));
        }
        Ok(Keys { raw })
    }

    /// True when the terminal is in raw mode, where a new line needs a
    /// carriage return too.
    pub(super) fn raw(&self) -> bool {
        self.raw
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        if self.raw {
            let _ = crossterm::terminal::disable_raw_mode();
        }
    }
}

fn read_presses<T>(tx: Sender<T>, wrap: fn(Key) -> T) {
    loop {
        let key = match crossterm::event::read() {
            Ok(Event::Key(press)) if press.kind != KeyEventKind::Release => {
                match press.code {
                    // Raw mode turns Ctrl-C into a key: honour it at once,
                    // even in the middle of a check.
                    KeyCode::Char('c') if press.modifiers.contains(KeyModifiers::CONTROL) => {
                        let _ = crossterm::terminal::disable_raw_mode();
                        println!();
                        crate::runner::stop_all();
                        crate::runner::remove_run_dir();
                        std::process::exit(130);
                    }
                    KeyCode::Char('q') | KeyCode::Esc => Key::Quit,
                    KeyCode::Char('h') => Key::Hint,
                    KeyCode::Char('r') => Key::Run,
                    KeyCode::Char('n') => Key::Next,
                    KeyCode::Char('f') => Key::Full,
                    KeyCode::Enter => Key::Check,
                    _ => continue,
                }
            }
            Ok(_) => continue,
            Err(_) => Key::Quit,
        };
        if tx.send(wrap(key)).is_err() || key == Key::Quit {
            return;
        }
    }
}

fn read_lines<T>(tx: Sender<T>, wrap: fn(Key) -> T) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let key = match line.trim() {
            "q" | "quit" => Key::Quit,
            "h" | "hint" => Key::Hint,
            "r" | "run" => Key::Run,
            "n" | "next" => Key::Next,
            "f" | "full" => Key::Full,
            "" => Key::Check,
            _ => Key::Other,
        };
        if tx.send(wrap(key)).is_err() || key == Key::Quit {
            return;
        }
    }
    let _ = tx.send(wrap(Key::Quit));
}
