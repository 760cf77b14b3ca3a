//! `notify watch [N]`: re-check a case every time the learner saves it.
//!
//! The folder holding the case file is watched, not the file itself, and
//! events are filtered by the file's name: editors that save by writing a
//! new file and renaming it over the old one (or through swap files) are
//! seen too. A burst of events is one save (debounced), and a save that
//! leaves the file as it was last checked is not checked again.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use colored::Colorize;
use fswatch::{EventKind, RecursiveMode, Watcher};

use super::check::{self, Graded, Options};
use super::keys::{Key, Keys};
use super::terminal::{dumb, file_link};
use super::{does_not_compile, hint, prepare_warned, Prepared, Which, EXIT_PASS};
use crate::chapter::{fingerprint, Chapter};
use crate::progress::{Progress, Status};

/// How long the file must stay quiet before a burst of events counts as
/// one save: editors write, rename and touch within a few milliseconds.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// What the watch loop reacts to.
enum Signal {
    Saved,
    Key(Key),
    WatchFailed(String),
}

/// The chapter `notify watch` picks without a number: the first that does
/// not pass, or the last one when they all do.
pub(super) fn first_to_do<'a>(root: &Path, chapters: &'a [Chapter]) -> Result<&'a Chapter> {
    Progress::load(root)
        .next(root, chapters)
        .or(chapters.last())
        .ok_or_else(|| anyhow!("this workshop has no chapters to watch"))
}

/// Watches `chapter`'s case file (or, with `manual`, waits for Enter) and
/// checks it after every save until the learner quits.
pub(super) fn watch(
    root: &Path,
    chapters: &[Chapter],
    chapter: &Chapter,
    manual: bool,
    timeout: Duration,
    html: Option<std::path::PathBuf>,
) -> Result<i32> {
    let (tx, rx) = mpsc::channel();
    let watcher = if manual {
        None
    } else {
        Some(watch_file(root, chapter, tx.clone())?)
    };
    let keys =
        Keys::start(tx.clone(), Signal::Key).context("could not read keys from the terminal")?;
    let mut session = Session {
        root,
        chapters,
        chapter,
        watcher,
        tx,
        manual,
        options: Options {
            which: Which::default(),
            seed: None,
            thorough: None,
            shrink: true,
            timeout,
            json: false,
            json_to: None,
            junit: None,
            gradescope: None,
            html,
            show_output: false,
            coverage: false,
        },
        screen: Screen::new(keys.raw()),
        checked: None,
        hints_shown: 0,
        full_report: None,
    };
    session.check();
    session.serve(&rx);
    drop(keys);
    println!();
    Ok(EXIT_PASS)
}

/// Watches `chapter`'s case file for saves, or says how to do without.
fn watch_file(
    root: &Path,
    chapter: &Chapter,
    tx: Sender<Signal>,
) -> Result<fswatch::RecommendedWatcher> {
    let path = root.join(chapter.case_file);
    start_watcher(&path, tx).map_err(|err| {
        anyhow!(
            "could not watch {} for saves: {err}.\n`notify watch {} --manual` works without watching: it checks again each time you press Enter.",
            path.parent().unwrap_or(root).display(),
            chapter.number
        )
    })
}

/// Watches the folder of the file at `path`, reporting events that touch
/// the file (by name) as saves.
fn start_watcher(path: &Path, tx: Sender<Signal>) -> fswatch::Result<fswatch::RecommendedWatcher> {
    let folder = path
        .parent()
        .expect("a case file is in a folder")
        .to_path_buf();
    let name: OsString = path.file_name().expect("a case file has a name").into();
    let mut watcher = fswatch::recommended_watcher(
        move |event: fswatch::Result<fswatch::Event>| {
            let signal = match event {
                Ok(event) => {
                    // Opening and reading the file (cargo does, to build it)
                    // is not a save; closing it after writing is.
                    let reading = matches!(event.kind, EventKind::Access(access)
                        if access != fswatch::event::AccessKind::Close(fswatch::event::AccessMode::Write));
                    if reading || !event.paths.iter().any(|p| p.file_name() == Some(&name)) {
                        return;
                    }
                    Signal::Saved
                }
                Err(err) => Signal::WatchFailed(err.to_string()),
            };
            let _ = tx.send(signal);
        },
    )?;
    watcher.watch(&folder, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}

struct Session<'a> {
    root: &'a Path,
    chapters: &'a [Chapter],
    chapter: &'a Chapter,
    /// What watches the case file (none with `--manual`).
    watcher: Option<fswatch::RecommendedWatcher>,
    /// Where a new watcher sends, on moving to the next chapter.
    tx: Sender<Signal>,
    manual: bool,
    options: Options,
    screen: Screen,
    /// Fingerprint of the version of the file last checked.
    checked: Option<u64>,
    /// How many times `h` was pressed since the last check.
    hints_shown: usize,
    /// The last check's full report, for `f`, when the screen showed less.
    full_report: Option<String>,
}

impl<'a> Session<'a> {
    fn serve(&mut self, rx: &Receiver<Signal>) {
        let mut queued: VecDeque<Signal> = VecDeque::new();
        loop {
            let signal = match queued.pop_front() {
                Some(signal) => signal,
                None => match rx.recv() {
                    Ok(signal) => signal,
                    Err(_) => return,
                },
            };
            match signal {
                Signal::Saved => {
                    // Wait for the burst of events to end; keep what else came.
                    loop {
                        match rx.recv_timeout(DEBOUNCE) {
                            Ok(Signal::Saved) => {}
                            Ok(other) => queued.push_back(other),
                            Err(RecvTimeoutError::Timeout) => break,
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    if self.changed() {
                        self.check();
                    }
                }
                Signal::Key(Key::Quit) => return,
                Signal::Key(Key::Check) => self.check(),
                Signal::Key(Key::Hint) => self.hint(),
                Signal::Key(Key::Run) => self.run(),
                Signal::Key(Key::Next) => self.next(),
                Signal::Key(Key::Full) => self.full(),
                Signal::Key(Key::Other) => self.screen.print(&format!("{}\n", self.keys_line())),
                Signal::WatchFailed(err) => self.screen.print(&format!(
                    "{} watching {} failed: {err}.\nIf saves stop being noticed, quit and use `notify watch {} --manual`.\n",
                    "note:".yellow().bold(),
                    self.chapter.case_file,
                    self.chapter.number
                )),
            }
        }
    }

    /// True when the file differs from the version last checked (a file
    /// that is missing for a moment, mid-rename, is not a change yet).
    fn changed(&self) -> bool {
        match std::fs::read(self.root.join(self.chapter.case_file)) {
            Ok(bytes) => Some(fingerprint(&bytes)) != self.checked,
            Err(_) => false,
        }
    }

    fn header(&self) -> String {
        format!(
            "{} {}\n",
            format!("case {}: {} ·", self.chapter.number, self.chapter.title).bold(),
            file_link(
                &self.root.join(self.chapter.case_file),
                self.chapter.case_file
            )
        )
    }

    /// The chapter after this one, when this one passes.
    fn next_chapter(&self) -> Option<&'a Chapter> {
        let passes = Progress::load(self.root).status(self.root, self.chapter) == Status::Passing;
        let chapters: &'a [Chapter] = self.chapters;
        chapters
            .iter()
            .find(|c| c.number > self.chapter.number)
            .filter(|_| passes)
    }

    fn keys_line(&self) -> String {
        let next = if self.next_chapter().is_some() {
            "n next chapter · "
        } else {
            ""
        };
        let full = match &self.full_report {
            Some(_) => "f full report · ",
            None => "",
        };
        let keys = if self.screen.raw {
            format!("{next}{full}h hint · r run · q quit")
        } else {
            format!("{next}{full}h hint · r run · q quit (type a letter, then Enter)")
        };
        let line = if self.manual {
            format!("press Enter to check again · {keys}")
        } else {
            format!(
                "waiting for you to save {} · Enter checks now · {keys}",
                self.chapter.case_file
            )
        };
        // Wrapped between words, never inside one, on a narrow terminal.
        let wrapped =
            crate::report::lines("", 0, &line, 2, crate::report::columns(), |t| t.to_string());
        wrapped.trim_end_matches('\n').to_string()
    }

    /// Builds and checks the case, and shows the verdict in place.
    fn check(&mut self) {
        self.hints_shown = 0;
        self.checked = std::fs::read(self.root.join(self.chapter.case_file))
            .map(|bytes| fingerprint(&bytes))
            .ok();
        self.screen.clear();
        self.screen.print(&format!(
            "{}checking {}...\n",
            self.header(),
            self.chapter.case_file
        ));
        self.full_report = None;
        let body = match check::grade(self.root, self.chapter, &self.options) {
            Ok(Graded::Report(report)) => {
                let columns = crate::report::columns();
                if report.folded() > 0 {
                    self.full_report = Some(report.render_for(columns));
                }
                let picture = match &self.options.html {
                    Some(file) if !report.passed => format!("the picture: {}\n", file.display()),
                    _ => String::new(),
                };
                format!(
                    "{}{}{}{picture}",
                    report.warnings,
                    report.render_brief(columns),
                    check::passed_line(self.chapters, self.chapter, &report)
                )
            }
            Ok(Graded::DoesNotCompile(errors)) => format!(
                "{errors}{}\n",
                does_not_compile(self.chapter, &self.options.which)
            ),
            Err(err) => format!("{} {err:#}\n", "error:".red().bold()),
        };
        self.screen.clear();
        self.screen
            .print(&format!("{}\n{body}\n{}\n", self.header(), self.footer()));
    }

    /// What to do next, under a verdict.
    fn footer(&self) -> String {
        let progress = Progress::load(self.root);
        let mut out = String::new();
        if progress.status(self.root, self.chapter) == Status::Passing {
            match self.next_chapter() {
                Some(next) => out.push_str(&format!(
                    "{} press n to move on to case {}: {} ({})\n",
                    format!("case {} passes.", self.chapter.number)
                        .green()
                        .bold(),
                    next.number,
                    next.title,
                    next.case_file
                )),
                None if progress.next(self.root, self.chapters).is_none() => {
                    out.push_str(&format!("{}\n", "every chapter passes.".green().bold()))
                }
                None => {}
            }
        }
        out.push_str(&self.keys_line());
        out
    }

    /// Shows the last check's full report, every failure in full.
    fn full(&mut self) {
        let text = match &self.full_report {
            Some(report) => format!("{report}\n{}\n", self.keys_line()),
            None => format!(
                "the report above is the whole report.\n{}\n",
                self.keys_line()
            ),
        };
        self.screen.print(&text);
    }

    /// Moves on to the next chapter, once this one passes: watches its
    /// case file instead, and checks it.
    fn next(&mut self) {
        let Some(next) = self.next_chapter() else {
            self.screen.print(&format!(
                "case {} does not pass yet: n moves on once it does.\n{}\n",
                self.chapter.number,
                self.keys_line()
            ));
            return;
        };
        if !self.manual {
            // The old watcher goes first: one folder, one watch.
            self.watcher = None;
            match watch_file(self.root, next, self.tx.clone()) {
                Ok(watcher) => self.watcher = Some(watcher),
                Err(err) => {
                    self.screen
                        .print(&format!("{} {err:#}\n", "error:".red().bold()));
                    return;
                }
            }
        }
        self.chapter = next;
        self.check();
    }

    /// Shows the hint under the verdict; pressed again, the second hint.
    fn hint(&mut self) {
        self.hints_shown += 1;
        let text = hint::text(self.root, self.chapter, self.hints_shown > 1)
            .unwrap_or_else(|err| format!("{} {err:#}\n", "error:".red().bold()))
            .replace(
                &format!("notify hint {} --more", self.chapter.number),
                "press h again",
            );
        self.screen.print(&format!("\n{text}"));
    }

    /// Plays the case's batch, as `notify run N` does, in place of the verdict.
    fn run(&mut self) {
        self.screen.clear();
        self.screen.print(&format!(
            "{}running {}...\n",
            self.header(),
            self.chapter.bin
        ));
        let body = match prepare_warned(
            self.root,
            self.chapter,
            &self.options.which,
            self.options.timeout,
        ) {
            Ok((Prepared::Ready(case), warnings)) => format!(
                "{warnings}{}",
                (self.chapter.run)(&case)
                    .unwrap_or_else(|err| format!("{} {err:#}\n", "error:".red().bold()))
            ),
            Ok((Prepared::DoesNotCompile(errors), _)) => format!(
                "{errors}{}\n",
                does_not_compile(self.chapter, &self.options.which)
            ),
            Err(err) => format!("{} {err:#}\n", "error:".red().bold()),
        };
        // The verdict on screen no longer shows, so the next save re-checks.
        self.checked = None;
        self.screen.clear();
        self.screen.print(&format!(
            "{}\n{body}\n{}\n",
            self.header(),
            self.keys_line()
        ));
    }
}

/// The terminal, or whatever standard output is.
struct Screen {
    /// Raw mode: a new line needs a carriage return.
    raw: bool,
    /// Redraw in place: only when a person is at a terminal.
    redraw: bool,
}

impl Screen {
    fn new(raw: bool) -> Screen {
        Screen {
            raw,
            redraw: raw && std::io::stdout().is_terminal() && !dumb(),
        }
    }

    /// Clears the screen for the next verdict. The scrollback is kept
    /// (no ESC[3J): what the learner saw before stays a scroll away.
    fn clear(&self) {
        if self.redraw {
            let _ = crossterm::execute!(
                std::io::stdout(),
                crossterm::terminal::Clear(crossterm::terminal::ClearType::All),
                crossterm::cursor::MoveTo(0, 0)
            );
        }
    }

    fn print(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = if self.raw {
            out.write_all(text.replace('\n', "\r\n").as_bytes())
        } else {
            out.write_all(text.as_bytes())
        };
        let _ = out.flush();
    }
}
