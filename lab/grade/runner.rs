//! The parent's side of a scenario: start a case process on a plan, wait for
//! it with a timeout, and say how it ended.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;
use tempfile::TempDir;

use crate::history::History;
use crate::output::Output;
use crate::scenario::{Fault, Plan, DONE_FILE, STDERR_FILE};
use crate::serve::{Schedule, ADVANCE, AT, EXIT_LAB_ERROR, EXIT_PANIC, RUN, SLEEP};
use crate::world::{Event, Kind, Recorder};

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
    /// What its processes did that a learner must hear about, shared by
    /// every copy of this case.
    pub log: Arc<Mutex<Log>>,
}

/// What a case's processes left for the report: their incidents (a hang,
/// an early end, a panic), and, when asked, every process's output.
#[derive(Debug, Default)]
pub struct Log {
    incidents: Vec<Incident>,
    /// Every process's output, in the order they ended, when kept.
    outputs: Option<Vec<Output>>,
    /// Every scenario's plans and what its world saw, when kept (`check
    /// --html`, which replays a failing scenario on the reference).
    tape: Option<Vec<Taped>>,
}

/// One scenario as it was played: its plans, a group of processes started
/// together at a time, and what its world saw after the last of them.
#[derive(Clone, Debug)]
pub struct Taped {
    pub groups: Vec<Vec<Plan>>,
    pub history: History,
}

/// A case process that did not end as a process of the lab should: it hung,
/// ended before its plan was done, panicked, or aborted unplanned.
#[derive(Clone, Debug, Serialize)]
pub struct Incident {
    /// How it ended.
    pub exit: Exit,
    /// What it was doing then, e.g. "relay, after invite dana".
    pub doing: String,
    /// The process, as numbered in its scenario.
    pub process: u32,
    /// The scenario's events up to that point, for the timeline.
    #[serde(skip)]
    pub timeline: Vec<Event>,
    /// What the process printed.
    pub output: Option<Output>,
    /// Orders incidents the same way on every run (see [`Case::note`]).
    #[serde(skip)]
    key: (usize, Vec<usize>, usize),
}

impl Incident {
    /// True for a hang or an early end: nothing after it in the scenario
    /// could be judged, so it is the finding a check reports first.
    pub fn stops_the_plan(&self) -> bool {
        matches!(self.exit, Exit::TimedOut { .. } | Exit::EndedEarly { .. })
    }
}

/// How a hang is said in a verdict (see [`Exit::describe`]).
pub const HUNG: &str = "hung: ";
/// How an early end is said in a verdict.
pub const ENDED_EARLY: &str = "ended before its plan was done";

/// How many incidents a log keeps.
const INCIDENTS: usize = 64;

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
    /// It was still running after the timeout and was killed, with
    /// everything it had started, while doing `doing`.
    TimedOut { ms: u64, doing: String },
    /// It exited (the case's own `std::process::exit`) before its plan was
    /// done, with this code, while doing `doing`.
    EndedEarly { code: i32, doing: String },
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
            Exit::TimedOut { ms, doing } => format!(
                "{HUNG}{doing} did not finish within {:.1} s",
                *ms as f64 / 1000.0
            ),
            Exit::EndedEarly { code, doing } => {
                format!("{ENDED_EARLY}: it exited (code {code}) during {doing}")
            }
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

    /// Keeps every process's output from now on, for `run`.
    pub fn keep_outputs(&self) {
        crate::db::lock(&self.log)
            .outputs
            .get_or_insert_with(Vec::new);
    }

    /// The output of every process since [`Case::keep_outputs`].
    pub fn outputs(&self) -> Vec<Output> {
        crate::db::lock(&self.log)
            .outputs
            .clone()
            .unwrap_or_default()
    }

    /// Keeps every scenario's plans and history from now on, so that a
    /// failing one can be found again and replayed ([`Case::replay`]).
    pub fn keep_tape(&self) {
        crate::db::lock(&self.log).tape.get_or_insert_with(Vec::new);
    }

    /// The scenarios played since [`Case::keep_tape`].
    pub fn tape(&self) -> Vec<Taped> {
        crate::db::lock(&self.log).tape.clone().unwrap_or_default()
    }

    /// Plays `groups` (a scenario's plans, as [`Taped`] holds them) again
    /// with this case, in a folder of its own, and returns what its world
    /// saw: another version of the case, faced with the same scenario.
    pub fn replay(&self, groups: &[Vec<Plan>]) -> Result<History> {
        let dir = scenario_dir()?;
        for group in groups {
            let plans: Vec<Plan> = group
                .iter()
                .map(|plan| Plan {
                    dir: dir.path().to_path_buf(),
                    ..plan.clone()
                })
                .collect();
            self.start_together(&plans)?;
        }
        History::read(dir.path())
    }

    /// Adds a group of plans just played to the tape, when one is kept.
    fn tape_group(&self, plans: &[Plan]) {
        let Some(dir) = plans.first().map(|p| p.dir.clone()) else {
            return;
        };
        if crate::db::lock(&self.log).tape.is_none() {
            return;
        }
        let history = History::read(&dir).unwrap_or_default();
        let mut log = crate::db::lock(&self.log);
        let Some(tape) = log.tape.as_mut() else {
            return;
        };
        // A folder is the scenario: the latest entry on it, unless a new
        // scenario took the same path (its first process is process 1).
        let fresh = plans.iter().any(|p| p.process <= 1);
        match tape.iter_mut().rev().find(|t| t.groups[0][0].dir == dir) {
            Some(taped) if !fresh => {
                taped.groups.push(plans.to_vec());
                taped.history = history;
            }
            _ => tape.push(Taped {
                groups: vec![plans.to_vec()],
                history,
            }),
        }
    }

    /// The incidents of the case's processes, the same order on every run.
    pub fn incidents(&self) -> Vec<Incident> {
        let mut all = crate::db::lock(&self.log).incidents.clone();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }

    fn note(&self, plan: &Plan, exit: &Exit) {
        let planned_abort = *exit == Exit::Aborted && planned_abort(plan);
        let mut log = crate::db::lock(&self.log);
        if let Some(outputs) = &mut log.outputs {
            if let Some(output) = Output::read(&plan.dir, plan.process) {
                outputs.push(output);
            }
        }
        if *exit == Exit::Finished || planned_abort || log.incidents.len() >= INCIDENTS {
            return;
        }
        let step = last_step(plan);
        let doing = match exit {
            Exit::TimedOut { doing, .. } | Exit::EndedEarly { doing, .. } => doing.clone(),
            _ => doing(plan, step),
        };
        // The fault-free play of a first process first, where a learner
        // can follow it best; then the fewest steps played; then the one
        // the check lists first (checks play their own batch before
        // others), whichever ended first; then the one noted first.
        let key = (
            usize::from(plan.fault.is_some()) * 1_000_000
                + plan.process as usize * 10_000
                + step.unwrap_or(0),
            PLAY.with(|p| p.borrow().clone()),
            log.incidents.len(),
        );
        log.incidents.push(Incident {
            exit: exit.clone(),
            doing,
            process: plan.process,
            timeline: History::read(&plan.dir)
                .map(|h| h.events)
                .unwrap_or_default(),
            output: Output::read(&plan.dir, plan.process),
            key,
        });
    }

    /// Runs one process of the case on `plan` and waits for it.
    pub fn start(&self, plan: &Plan) -> Result<Exit> {
        let mut exits = self.start_together(std::slice::from_ref(plan))?;
        Ok(exits.remove(0))
    }

    /// Runs one process per plan, one after the other, as a service is
    /// stopped and started again, until one of them does not finish: the
    /// plans after it are never started. Returns the exits of those run.
    pub fn start_in_turn(&self, plans: &[Plan]) -> Result<Vec<Exit>> {
        let mut exits = Vec::new();
        for plan in plans {
            let exit = self.start(plan)?;
            let stop = exit != Exit::Finished;
            exits.push(exit);
            if stop {
                break;
            }
        }
        Ok(exits)
    }

    /// Runs one process per plan, all at once (e.g. relays racing on one
    /// database), and waits for every one. Each plan needs its own `process`
    /// number; the timeout applies to each process from the common start.
    pub fn start_together(&self, plans: &[Plan]) -> Result<Vec<Exit>> {
        let mut children = Vec::new();
        for plan in plans {
            children.push(Some(self.spawn(plan)?));
            crate::status::played();
        }
        let started = Instant::now();
        // Each child has a thread that blocks until it ends and then wakes
        // this loop: no polling while a case runs.
        let (wake, woken) = std::sync::mpsc::channel::<()>();
        for child in children.iter().flatten() {
            watch_exit(child, wake.clone());
        }
        let mut exits: Vec<Option<Exit>> = plans.iter().map(|_| None).collect();
        let mut told: Option<Instant> = None;
        let mut first = true;
        while exits.iter().any(Option::is_none) {
            if !first {
                // Woken by an exit, or by the time to look at the timeout
                // and the status line.
                let _ = woken.recv_timeout(LOOK_EVERY);
            }
            first = false;
            for (i, slot) in children.iter_mut().enumerate() {
                let Some(child) = slot else { continue };
                if exited(child) {
                    // Whatever the process left running goes with it.
                    stop_group(child);
                    let status = child.wait().context("could not wait for the case")?;
                    forget_group(child);
                    let exit = classify(status, &plans[i]);
                    self.note(&plans[i], &exit);
                    exits[i] = Some(exit);
                    *slot = None;
                } else if started.elapsed() > self.timeout {
                    let doing = doing(&plans[i], last_step(&plans[i]));
                    stop_group(child);
                    let _ = child.wait();
                    forget_group(child);
                    let exit = Exit::TimedOut {
                        ms: self.timeout.as_millis() as u64,
                        doing,
                    };
                    self.note(&plans[i], &exit);
                    exits[i] = Some(exit);
                    *slot = None;
                } else if started.elapsed() > Duration::from_secs(1)
                    && crate::status::enabled()
                    && told.is_none_or(|t| t.elapsed() > Duration::from_millis(500))
                {
                    told = Some(Instant::now());
                    crate::status::waiting(Some(format!(
                        "waiting on {}: {:.0} s (hung at {:.1} s)",
                        doing(&plans[i], last_step(&plans[i])),
                        started.elapsed().as_secs_f64(),
                        self.timeout.as_secs_f64()
                    )));
                }
            }
        }
        if told.is_some() {
            crate::status::waiting(None);
        }
        self.tape_group(plans);
        Ok(exits.into_iter().flatten().collect())
    }

    fn spawn(&self, plan: &Plan) -> Result<Child> {
        let path = plan.save()?;
        let stderr_path = stderr_file(plan);
        let stderr = File::create(&stderr_path)
            .with_context(|| format!("could not create {}", stderr_path.display()))?;
        let mut command = Command::new(&self.exe);
        command
            .arg(&path)
            .current_dir(&plan.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        steady_heap(&mut command);
        // A group of its own: on a hang, the process and everything it
        // started are stopped together.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command
            .spawn()
            .with_context(|| format!("could not start the case binary {}", self.exe.display()))?;
        remember_group(&child);
        Ok(child)
    }
}

/// Asks glibc's allocator in the case process to keep the memory it frees
/// and to grow its heap in large steps. With its defaults, a case process
/// that opens its databases and runs its statements hands memory back to
/// the kernel and asks for it again about 1,700 times (brk), and `notify
/// check 7 --solution` spent 2.3 s in the kernel instead of 1.4 s. Other
/// allocators ignore the variable. A setting already in the environment
/// comes after these, so where both name a tunable, it wins.
/// The value is made once: a check starts hundreds of case processes.
fn steady_heap(command: &mut Command) {
    const TUNABLES: &str = "glibc.malloc.trim_threshold=67108864:glibc.malloc.top_pad=16777216";
    static VALUE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let value = VALUE.get_or_init(|| match std::env::var("GLIBC_TUNABLES") {
        Ok(theirs) if !theirs.is_empty() => format!("{TUNABLES}:{theirs}"),
        _ => TUNABLES.to_string(),
    });
    command.env("GLIBC_TUNABLES", value);
}

/// True when the process planned to abort: a crash fault, or a message
/// its provider is scripted to die on.
fn planned_abort(plan: &Plan) -> bool {
    let dies = |script: &crate::scenario::ProviderScript| {
        !script.crash_on.is_empty() || !script.crash_first.is_empty()
    };
    plan.fault.as_ref().is_some_and(Fault::is_crash) || dies(&plan.provider) || dies(&plan.push)
}

/// The last step of its plan process `plan.process` began, from the world.
fn last_step(plan: &Plan) -> Option<usize> {
    Recorder::open(&plan.dir, 0)
        .and_then(|r| r.last_step(plan.process))
        .ok()
        .flatten()
}

/// What a process is doing at step `step` of its plan, in the learner's
/// words: "invite dana", "relay, after invite dana", "its schedule (relay
/// every 1 s) at 0:35".
pub fn doing(plan: &Plan, step: Option<usize>) -> String {
    let Some(k) = step.filter(|&k| k < plan.steps.len()) else {
        return "start-up, before its first operation".to_string();
    };
    let named = |k: usize| {
        let s = &plan.steps[k];
        match &s.subject {
            Some(who) => format!("{} {}", s.op, who.split('@').next().unwrap_or(who)),
            None => s.op.clone(),
        }
    };
    let step = &plan.steps[k];
    match step.op.as_str() {
        RUN => {
            let jobs = serde_json::from_value::<Schedule>(step.input.clone())
                .map(|s| {
                    s.jobs
                        .iter()
                        .map(|j| format!("{} every {}", j.op, seconds(j.every_ms)))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let now = Recorder::open(&plan.dir, 0)
                .and_then(|r| r.now_ms())
                .map(|ms| format!(" at {}:{:02}", ms / 60_000, ms / 1000 % 60))
                .unwrap_or_default();
            format!("its schedule ({jobs}){now}")
        }
        ADVANCE | SLEEP | AT => "a pause of the lab's".to_string(),
        _ if step.subject.is_some() => named(k),
        _ => match (0..k).rev().find(|&j| plan.steps[j].subject.is_some()) {
            Some(j) => format!("{}, after {}", step.op, named(j)),
            None => step.op.clone(),
        },
    }
}

fn seconds(ms: i64) -> String {
    if ms % 60_000 == 0 {
        format!("{} min", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// The process groups of the case processes running now, so that a signal
/// or a closed pipe that ends notify ends them too. A slot holds a group's
/// id, or 0; a signal handler can read it.
#[cfg(unix)]
static GROUPS: [std::sync::atomic::AtomicI32; 64] =
    [const { std::sync::atomic::AtomicI32::new(0) }; 64];

#[cfg(unix)]
fn remember_group(child: &Child) {
    let pid = child.id() as i32;
    for slot in &GROUPS {
        if slot
            .compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

#[cfg(unix)]
fn forget_group(child: &Child) {
    let pid = child.id() as i32;
    for slot in &GROUPS {
        let _ = slot.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Stops every case process still running, with what it started. Safe in
/// a signal handler.
#[cfg(unix)]
pub fn stop_all() {
    for slot in &GROUPS {
        let pid = slot.load(Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: kill(2) on a process group this process started.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
}

/// Kills `child`'s process group: the process and whatever it started.
/// How often a wait on a case's processes looks at the time when none has
/// ended: for the timeout and the status line.
#[cfg(unix)]
const LOOK_EVERY: Duration = Duration::from_millis(50);
/// Without a blocking wait for a child, the wait polls.
#[cfg(not(unix))]
const LOOK_EVERY: Duration = Duration::from_millis(1);

/// Sends on `wake` once `child` has ended, from a thread that blocks until
/// then without reaping it, so its group can still be stopped safely.
#[cfg(unix)]
fn watch_exit(child: &Child, wake: std::sync::mpsc::Sender<()>) {
    let pid = child.id() as libc::id_t;
    std::thread::spawn(move || {
        loop {
            // SAFETY: waitid(2) with WNOWAIT only waits for the child's
            // state; the parent reaps it.
            let found = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT)
            };
            let interrupted = found != 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
            if !interrupted {
                break;
            }
        }
        // The wait may be over already: nobody listens then.
        let _ = wake.send(());
    });
}
#[cfg(not(unix))]
fn watch_exit(_child: &Child, _wake: std::sync::mpsc::Sender<()>) {}

/// Called while the child is not reaped yet, so its id (the group's) cannot
/// have been reused.
#[cfg(unix)]
fn stop_group(child: &mut Child) {
    // SAFETY: kill(2) on the group of a child not yet reaped.
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGKILL);
    }
}

/// True when `child` has ended, without reaping it (so its group can still
/// be stopped safely).
#[cfg(unix)]
fn exited(child: &mut Child) -> bool {
    // SAFETY: waitid(2) with WNOWAIT only looks at the child's state.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let found = libc::waitid(
            libc::P_PID,
            child.id() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        if found != 0 {
            // Not our child any more, or an error: let try_wait say.
            return child.try_wait().map(|s| s.is_some()).unwrap_or(true);
        }
        pid_of(&info) != 0
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
unsafe fn pid_of(info: &libc::siginfo_t) -> libc::pid_t {
    info.si_pid()
}

#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
unsafe fn pid_of(info: &libc::siginfo_t) -> libc::pid_t {
    info.si_pid
}

#[cfg(not(unix))]
fn remember_group(_child: &Child) {}
#[cfg(not(unix))]
fn forget_group(_child: &Child) {}
#[cfg(not(unix))]
pub fn stop_all() {}
#[cfg(not(unix))]
fn stop_group(child: &mut Child) {
    let _ = child.kill();
}
#[cfg(not(unix))]
fn exited(child: &mut Child) -> bool {
    child.try_wait().map(|s| s.is_some()).unwrap_or(true)
}

/// Where process `plan.process` of a scenario writes its standard error.
fn stderr_file(plan: &Plan) -> PathBuf {
    plan.dir.join(format!("{}.{}", STDERR_FILE, plan.process))
}

fn classify(status: ExitStatus, plan: &Plan) -> Exit {
    let dir = &plan.dir;
    let stderr = std::fs::read_to_string(stderr_file(plan)).unwrap_or_default();
    let lab_said = last_lines(&stderr, 6);
    // The lab's own words first; else what the process printed last (a
    // panic's report, say).
    let tail = if lab_said.is_empty() {
        Output::read(dir, plan.process)
            .map(|o| {
                let text: Vec<&str> = o.lines.iter().map(|l| l.text.as_str()).collect();
                last_lines(&text.join("\n"), 6)
            })
            .unwrap_or_default()
    } else {
        lab_said.clone()
    };
    if aborted(&status) {
        return Exit::Aborted;
    }
    let done = dir.join(format!("{DONE_FILE}.{}", plan.process)).exists();
    match status.code() {
        Some(0) if done => Exit::Finished,
        Some(code @ 0) => Exit::EndedEarly {
            code,
            doing: doing(plan, last_step(plan)),
        },
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
        Some(code) if lab_said.is_empty() => Exit::EndedEarly {
            code,
            doing: doing(plan, last_step(plan)),
        },
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

/// The first process of a scenario that did not finish, said as "the
/// dispatcher panicked: ..." or "the restarted dispatcher ...": `process`
/// names what the first process is (e.g. "dispatcher"), and every later one
/// is its restart. When `planned_crash`, the first process was meant to
/// abort, and its abort is no trouble.
pub fn first_trouble(exits: &[Exit], process: &str, planned_crash: bool) -> Option<String> {
    exits.iter().enumerate().find_map(|(i, exit)| match exit {
        Exit::Finished => None,
        Exit::Aborted if planned_crash && i == 0 => None,
        other => {
            let which = if i == 0 { "the" } else { "the restarted" };
            Some(format!("{which} {process} {}", other.describe()))
        }
    })
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

/// How this run's folder of scenario folders is named: the prefix, then
/// the process id, so a later run can tell whether its owner is gone.
const RUN_PREFIX: &str = "notify-run-";

/// This run's folder of scenario folders, made on first use.
static RUN_DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// The folder every scenario folder of this run goes in, made on first
/// use. Folders left by runs that are gone (killed with SIGKILL, say) are
/// removed then.
fn run_dir() -> Result<PathBuf> {
    let made = RUN_DIR.get_or_init(|| {
        let base = scenario_base();
        remove_abandoned(&base);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{RUN_PREFIX}{}-", std::process::id()))
            .tempdir_in(&base)
            .ok()?
            .keep();
        Some(dir)
    });
    match made {
        Some(dir) => Ok(dir.clone()),
        None => {
            let base = scenario_base();
            anyhow::bail!(
                "could not create a scenario folder in {}: make it writable, or point TMPDIR at a folder that is",
                base.display()
            )
        }
    }
}

/// Removes the run folders in `base` whose process has ended.
fn remove_abandoned(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(RUN_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(unix)]
fn alive(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only asks whether the process exists.
    let said = unsafe { libc::kill(pid as libc::pid_t, 0) };
    said == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn alive(_pid: u32) -> bool {
    true
}

/// Removes this run's folder of scenario folders, at the end of a run.
pub fn remove_run_dir() {
    if let Some(Some(dir)) = RUN_DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Removes this run's folder while other threads may still be playing
/// scenarios in it (a signal ended the run): the folder is first moved
/// aside, so that they can make no new folder in it, then removed.
pub fn remove_run_dir_while_playing() {
    let Some(Some(dir)) = RUN_DIR.get() else {
        return;
    };
    let mut gone = dir.clone().into_os_string();
    gone.push(".gone");
    let gone = PathBuf::from(gone);
    let removed = if std::fs::rename(dir, &gone).is_ok() {
        &gone
    } else {
        dir
    };
    let _ = std::fs::remove_dir_all(removed);
}

/// A fresh, empty folder for one scenario, removed when dropped.
pub fn scenario_dir() -> Result<TempDir> {
    let base = run_dir()?;
    tempfile::Builder::new()
        .prefix("scenario-")
        .tempdir_in(&base)
        .with_context(|| {
            format!(
                "could not create a scenario folder in {}: make it writable, or point TMPDIR at a folder that is",
                base.display()
            )
        })
}

thread_local! {
    /// Where the running play stands in the check's own order: the index of
    /// its item in each [`in_parallel`] it runs in, outermost first. Plays
    /// side by side end in any order; this order is the same every run.
    static PLAY: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Maps `f` over `items` on every core, keeping the order of the results.
pub fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    side_by_side(items, 1, f)
}

/// Maps `f` over `items` with `per_core` items at a time on every core,
/// keeping the order of the results: for scenarios that spend most of their
/// time waiting for the disk to confirm commits.
pub fn side_by_side<T: Sync, R: Send>(
    items: &[T],
    per_core: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let outer = PLAY.with(|p| p.borrow().clone());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = (cores * per_core).min(items.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                PLAY.with(|p| {
                    let mut path = outer.clone();
                    path.push(i);
                    *p.borrow_mut() = path;
                });
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
