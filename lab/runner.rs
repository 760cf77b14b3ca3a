//! The parent's side of a scenario: start a case process on a plan, wait for
//! it with a timeout, and say how it ended.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;
use tempfile::TempDir;

use crate::scenario::{Plan, STDERR_FILE};
use crate::serve::{EXIT_LAB_ERROR, EXIT_PANIC};
use crate::world::{History, Kind};

/// A built case binary, ready to run scenarios.
#[derive(Clone, Debug)]
pub struct Case {
    /// The binary's path.
    pub exe: PathBuf,
    /// Its name, e.g. `case01` or `case01-solution`.
    pub name: String,
    /// How long one process may run before it counts as hung.
    pub timeout: Duration,
    /// The fingerprint of the source it was built from.
    pub source: u64,
}

/// How a case process ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "exit", content = "detail", rename_all = "snake_case")]
pub enum Exit {
    /// It ran every step and exited normally.
    Finished,
    /// It aborted (the lab's crash fault, or the case's own abort).
    Aborted,
    /// The case panicked, with this message.
    Panicked(String),
    /// It was still running after the timeout and was killed.
    TimedOut(u64),
    /// The lab could not carry out the plan (e.g. the schema does not run).
    LabError(String),
    /// Anything else: another signal or exit code.
    Failed(String),
}

impl Exit {
    /// Says how the process ended, for a verdict's evidence.
    pub fn describe(&self) -> String {
        match self {
            Exit::Finished => "finished".into(),
            Exit::Aborted => "aborted".into(),
            Exit::Panicked(msg) => format!("panicked: {msg}"),
            Exit::TimedOut(ms) => format!("did not finish within {:.1} s", *ms as f64 / 1000.0),
            Exit::LabError(msg) => format!("could not run: {msg}"),
            Exit::Failed(msg) => format!("ended abnormally: {msg}"),
        }
    }
}

impl Case {
    /// This case with a timeout of at least `patience`. Checks whose
    /// scenarios run long stretches of simulated time, or wait in real time
    /// for another process, use it so a busy machine is not taken for a hang;
    /// a longer `--timeout` still wins.
    pub fn patient(&self, patience: Duration) -> Case {
        Case {
            timeout: self.timeout.max(patience),
            ..self.clone()
        }
    }

    /// Runs one process of the case on `plan` and waits for it.
    pub fn start(&self, plan: &Plan) -> Result<Exit> {
        let mut exits = self.start_together(std::slice::from_ref(plan))?;
        Ok(exits.remove(0))
    }

    /// Runs one process per plan, all at once (e.g. relays racing on one
    /// database), and waits for every one. Each plan needs its own `process`
    /// number; the timeout applies to each process from the common start.
    pub fn start_together(&self, plans: &[Plan]) -> Result<Vec<Exit>> {
        let mut children = Vec::new();
        for plan in plans {
            children.push(Some(self.spawn(plan)?));
        }
        let started = Instant::now();
        let mut exits: Vec<Option<Exit>> = plans.iter().map(|_| None).collect();
        while exits.iter().any(Option::is_none) {
            for (i, slot) in children.iter_mut().enumerate() {
                let Some(child) = slot else { continue };
                if let Some(status) = child.try_wait().context("could not wait for the case")? {
                    exits[i] = Some(classify(status, &plans[i]));
                    *slot = None;
                } else if started.elapsed() > self.timeout {
                    let _ = child.kill();
                    let _ = child.wait();
                    exits[i] = Some(Exit::TimedOut(self.timeout.as_millis() as u64));
                    *slot = None;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(exits.into_iter().flatten().collect())
    }

    fn spawn(&self, plan: &Plan) -> Result<Child> {
        let path = plan.save()?;
        let stderr_path = stderr_file(plan);
        let stderr = File::create(&stderr_path)
            .with_context(|| format!("could not create {}", stderr_path.display()))?;
        Command::new(&self.exe)
            .arg(&path)
            .current_dir(&plan.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("could not start the case binary {}", self.exe.display()))
    }
}

/// Where process `plan.process` of a scenario writes its standard error.
fn stderr_file(plan: &Plan) -> PathBuf {
    plan.dir.join(format!("{}.{}", STDERR_FILE, plan.process))
}

fn classify(status: ExitStatus, plan: &Plan) -> Exit {
    let dir = &plan.dir;
    let stderr = std::fs::read_to_string(stderr_file(plan)).unwrap_or_default();
    let tail = last_lines(&stderr, 6);
    if aborted(&status) {
        return Exit::Aborted;
    }
    match status.code() {
        Some(0) => Exit::Finished,
        Some(EXIT_PANIC) => {
            let message = History::read(dir)
                .ok()
                .and_then(|h| {
                    h.events
                        .iter()
                        .find(|e| e.kind == Kind::Panic && e.process == plan.process)
                        .map(|e| e.text.clone())
                })
                .unwrap_or(tail);
            Exit::Panicked(message)
        }
        Some(EXIT_LAB_ERROR) => Exit::LabError(tail),
        Some(code) => Exit::Failed(format!("exit code {code}; {tail}")),
        None => Exit::Failed(format!("{status}; {tail}")),
    }
}

#[cfg(unix)]
fn aborted(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(6)
}

#[cfg(not(unix))]
fn aborted(status: &ExitStatus) -> bool {
    status.code() == Some(3) || status.code() == Some(0xC000_0409_u32 as i32)
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].join(" | ")
}

/// Where scenario folders go: `TMPDIR` when it is set, else a memory-backed
/// folder where the system has one (`/dev/shm`), else the temp folder. A
/// scenario's crash is a process abort, not a power cut: what a commit wrote
/// survives it in the page cache either way, so scenarios need no fsync to
/// reach a disk, and skipping it makes a check about twice as fast.
fn scenario_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if std::env::var_os("TMPDIR").is_none() && shm.is_dir() {
        let writable = std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly());
        if writable {
            return shm.to_path_buf();
        }
    }
    std::env::temp_dir()
}

/// A fresh, empty folder for one scenario, removed when dropped.
pub fn scenario_dir() -> Result<TempDir> {
    let base = scenario_base();
    tempfile::Builder::new()
        .prefix("notify-")
        .tempdir_in(&base)
        .with_context(|| {
            format!(
                "could not create a scenario folder in {}: make it writable, or point TMPDIR at a folder that is",
                base.display()
            )
        })
}

/// Maps `f` over `items` on every core, keeping the order of the results.
pub fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let result = f(item);
                crate::db::lock(&results)[i] = Some(result);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.expect("every item was run"))
        .collect()
}
