//! The case process's side of the scenario protocol: `lab::serve!`.
//!
//! A case file ends with `lab::serve!(schema: SCHEMA, ops: [invite, relay]);`,
//! which becomes the binary's `main`. Given a plan, it opens the service's
//! database, runs the schema (and the scenario's fixture on a new database),
//! arms the plan's fault, and calls the named operations in order, recording
//! each call and its outcome in the world.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::any::{Any, TypeId};
use std::collections::HashMap;

use anyhow::{anyhow, bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::capture;
use crate::clock::Clock;
use crate::db::{lock, Db};
use crate::provider::{Email, Provider, Providers};
use crate::scenario::{Plan, ProviderScript, Step, APP_DB, DONE_FILE};
use crate::world::{Kind, Recorder};

/// Exit code of a case process whose plan could not be carried out (the lab's
/// fault or a broken schema, not the case's behaviour).
pub const EXIT_LAB_ERROR: i32 = 3;
/// Exit code of a case process that panicked (Rust's own).
pub const EXIT_PANIC: i32 = 101;
/// A step the lab runs itself: moves the simulated clock by its input, in ms.
pub const ADVANCE: &str = "@advance";
/// A step the lab runs itself: waits its input in real milliseconds, e.g. to
/// start an invite while another process's relay is mid-send.
pub const SLEEP: &str = "@sleep";
/// A step the lab runs itself: a [`Schedule`] of operations over simulated time.
pub const RUN: &str = "@run";
/// A step the lab runs itself: waits until the wall clock reaches its input,
/// in milliseconds since the UNIX epoch, so that processes started together
/// (e.g. racing relays) begin their next step at the same instant.
pub const AT: &str = "@at";

/// What a case's operations get to work with, for the life of one process.
pub struct Services {
    /// The service's database.
    pub db: Db,
    /// The email and push providers.
    pub providers: Providers,
    /// The simulated clock.
    pub clock: Clock,
    /// State an operation keeps between calls (e.g. a circuit breaker), by type.
    state: HashMap<TypeId, Box<dyn Any>>,
}

/// One operation a case exports, callable with a JSON input.
pub trait Op {
    /// Calls the operation. The outer error is the lab's (bad input), the
    /// inner one is what the case returned.
    fn call(&self, services: &mut Services, input: &Value) -> Result<Result<()>>;
}

/// A plain function the lab can call as an operation; `A` tells the
/// accepted signatures apart. A function with any other signature is a
/// compile error at the `lab::serve!` line, which lists the signatures.
#[diagnostic::on_unimplemented(
    message = "`lab::serve!` cannot call this operation: the lab does not accept its signature",
    label = "an operation here has parameters or a return type the lab cannot call",
    note = "the operation is `{Self}`",
    note = "the lab calls an operation with one of these signatures:
    fn(&mut Db, &Email) -> Result<()>
    fn(&mut Db, &Email, &Input) -> Result<()>
    fn(&mut Db, &Providers, &Clock) -> Result<()>
    fn(&mut Db, &Providers, &Clock, &Input) -> Result<()>
    fn(&mut Db, &Providers, &Clock, &mut State) -> Result<()>
    fn(&mut Db, &Clock, &Request) -> Result<Response>
keep the parameters the case was shipped with; one you no longer use stays, renamed with a leading underscore (`_email`)"
)]
pub trait Operation<A> {
    /// Calls the function with what the signature asks for.
    fn call_with(&self, services: &mut Services, input: &Value) -> Result<Result<()>>;
}

/// Marks `fn(&mut Db, &Email, &T)`: an operation with an input.
pub struct WithInput<T>(PhantomData<T>);
/// Marks `fn(&mut Db, &Providers, &Clock)`: a dispatcher's tick.
pub struct Tick;
/// Marks `fn(&mut Db, &Providers, &Clock, &mut S)`: a tick that keeps state.
pub struct Keeping<S>(PhantomData<S>);
/// Marks `fn(&mut Db, &Providers, &Clock, &T)`: a tick with an input, e.g.
/// which relay process runs it.
pub struct TickWith<T>(PhantomData<T>);

fn input<T: DeserializeOwned>(input: &Value) -> Result<T> {
    serde_json::from_value(input.clone())
        .context("the step's input does not fit the operation's argument")
}

impl<F> Operation<()> for F
where
    F: Fn(&mut Db, &Email) -> Result<()>,
{
    fn call_with(&self, s: &mut Services, _input: &Value) -> Result<Result<()>> {
        Ok(self(&mut s.db, &s.providers.email))
    }
}

impl<F, T> Operation<WithInput<T>> for F
where
    F: Fn(&mut Db, &Email, &T) -> Result<()>,
    T: DeserializeOwned,
{
    fn call_with(&self, s: &mut Services, value: &Value) -> Result<Result<()>> {
        let input: T = input(value)?;
        Ok(self(&mut s.db, &s.providers.email, &input))
    }
}

impl<F> Operation<Tick> for F
where
    F: Fn(&mut Db, &Providers, &Clock) -> Result<()>,
{
    fn call_with(&self, s: &mut Services, _input: &Value) -> Result<Result<()>> {
        Ok(self(&mut s.db, &s.providers, &s.clock))
    }
}

impl<F, S> Operation<Keeping<S>> for F
where
    F: Fn(&mut Db, &Providers, &Clock, &mut S) -> Result<()>,
    S: Default + 'static,
{
    fn call_with(&self, s: &mut Services, _input: &Value) -> Result<Result<()>> {
        let mut state = s
            .state
            .remove(&TypeId::of::<S>())
            .and_then(|b| b.downcast::<S>().ok())
            .unwrap_or_default();
        let outcome = self(&mut s.db, &s.providers, &s.clock, &mut state);
        s.state.insert(TypeId::of::<S>(), state);
        Ok(outcome)
    }
}

impl<F, T> Operation<TickWith<T>> for F
where
    F: Fn(&mut Db, &Providers, &Clock, &T) -> Result<()>,
    T: DeserializeOwned,
{
    fn call_with(&self, s: &mut Services, value: &Value) -> Result<Result<()>> {
        let input: T = input(value)?;
        Ok(self(&mut s.db, &s.providers, &s.clock, &input))
    }
}

/// Adapts a plain function to [`Op`].
pub struct Adapter<F, A>(F, PhantomData<A>);

impl<F: Operation<A>, A> Op for Adapter<F, A> {
    fn call(&self, s: &mut Services, input: &Value) -> Result<Result<()>> {
        self.0.call_with(s, input)
    }
}

/// Wraps a plain function as an operation. The signatures it takes:
/// `fn(&mut Db, &Email)`, `fn(&mut Db, &Email, &Input)`,
/// `fn(&mut Db, &Providers, &Clock)`,
/// `fn(&mut Db, &Providers, &Clock, &Input)` and
/// `fn(&mut Db, &Providers, &Clock, &mut State)` where `State: Default`
/// lives as long as the process; each returns `lab::Result<()>`. A webhook
/// endpoint, `fn(&mut Db, &Clock, &Request) -> Result<Response>`, answers
/// requests (see [`crate::webhook`]).
pub fn op<F, A>(f: F) -> Box<dyn Op>
where
    F: Operation<A> + 'static,
    A: 'static,
{
    Box::new(Adapter(f, PhantomData))
}

/// The input of the built-in step [`RUN`]: call operations on a schedule of
/// simulated time, as a long-running service would, until a time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Schedule {
    /// Stop when the clock reaches this time, in ms since the scenario began.
    pub until_ms: i64,
    /// The operations and how often each runs.
    pub jobs: Vec<Job>,
}

/// One operation of a [`Schedule`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    pub op: String,
    /// Runs every this many simulated milliseconds, first at once.
    pub every_ms: i64,
}

impl Schedule {
    /// The step that runs `jobs`, each an operation and how often it runs
    /// in simulated ms, until `until_ms`.
    pub fn of(until_ms: i64, jobs: &[(&str, i64)]) -> Step {
        Schedule {
            until_ms,
            jobs: jobs
                .iter()
                .map(|&(op, every_ms)| Job {
                    op: op.to_string(),
                    every_ms,
                })
                .collect(),
        }
        .step()
    }

    /// A step that runs this schedule.
    pub fn step(&self) -> Step {
        Step {
            op: RUN.to_string(),
            input: serde_json::to_value(self).expect("a schedule is plain data"),
            subject: None,
        }
    }
}

/// Makes a case file's `main`: the lab's entry point, scenario in, history out.
///
/// ```ignore
/// lab::serve!(schema: SCHEMA, ops: [invite, relay]);
/// ```
///
/// The binary also carries the fingerprint of the very bytes it was compiled
/// from, and prints it when asked with [`FINGERPRINT`]: `notify` compares it
/// with the file it grades before playing anything.
#[macro_export]
macro_rules! serve {
    (schema: $schema:expr, ops: [$($op:ident),* $(,)?]) => {
        fn main() {
            const SOURCE: u64 = $crate::chapter::fingerprint(include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/",
                file!()
            )));
            $crate::serve::main(SOURCE, $schema, vec![$((stringify!($op), $crate::serve::op($op))),*])
        }
    };
}

/// The argument that asks a case binary for the fingerprint of its source
/// instead of a plan to play. It prints `fnv1a64 <16 hex digits>`.
pub const FINGERPRINT: &str = "--fingerprint";

/// The body of a case binary's `main`; `source` is the fingerprint of the
/// file it was built from. Never returns.
pub fn main(source: u64, schema: &str, ops: Vec<(&'static str, Box<dyn Op>)>) -> ! {
    let plan = std::env::args_os().nth(1);
    if plan.as_deref() == Some(std::ffi::OsStr::new(FINGERPRINT)) {
        println!("fnv1a64 {source:016x}");
        std::process::exit(0);
    }
    let Some(plan) = plan else {
        eprintln!(
            "This is a case of the notify workshop: the service, without a scenario to run.\n\
             Run it through the lab instead, e.g. `notify run 1` or `notify check 1`."
        );
        std::process::exit(2);
    };
    match serve(schema, &ops, Path::new(&plan)) {
        Ok(()) => std::process::exit(0),
        Err(err) => {
            capture::lab_message(&format!("{err:#}"));
            std::process::exit(EXIT_LAB_ERROR);
        }
    }
}

fn serve(schema: &str, ops: &[(&'static str, Box<dyn Op>)], plan: &Path) -> Result<()> {
    let plan = Plan::load(plan)?;
    // The name a case may call itself by, as a container's HOSTNAME: set
    // before anything else runs in the process.
    let host = plan
        .host
        .clone()
        .unwrap_or_else(|| format!("host-{}", plan.process));
    std::env::set_var("HOSTNAME", host);
    capture::start(&plan.dir, plan.process);
    crate::webhook::serving_in(&plan.dir, plan.process);
    let recorder = Arc::new(Mutex::new(Recorder::open(&plan.dir, plan.process)?));
    record_panics(recorder.clone());

    let start = if plan.process == 1 {
        "start"
    } else {
        "restart"
    };
    lock(&recorder).event(Kind::Start, None, start)?;

    let start_utc = plan.starts_at.unwrap_or(crate::clock::DEFAULT_START);
    crate::sqlite_now::follow(&plan.dir, start_utc)?;
    let path = plan.dir.join(APP_DB);
    let fresh = !path.exists();
    let mut db = Db::open(&path)?;
    db.execute_batch(schema)
        .context("the case's SCHEMA does not run on SQLite")?;
    if fresh {
        for sql in &plan.fixture {
            db.execute_batch(sql)
                .with_context(|| format!("the scenario's data does not fit the schema: {sql}"))?;
        }
    }
    for sql in &plan.meanwhile {
        db.execute_batch(sql)
            .with_context(|| format!("the scenario's data does not fit the schema: {sql}"))?;
    }
    let busy_after =
        (plan.busy_after_commit_ms > 0).then(|| Duration::from_millis(plan.busy_after_commit_ms));
    db.watch(recorder.clone(), plan.fault.clone(), busy_after);
    let seed = plan.seed ^ u64::from(plan.process).rotate_left(32);
    let provider = |channel, script: &ProviderScript, seed| {
        Provider::new(
            channel,
            recorder.clone(),
            script.clone(),
            plan.fault.clone(),
            seed,
        )
    };
    let mut services = Services {
        db,
        providers: Providers {
            email: provider("email", &plan.provider, seed),
            push: provider("push", &plan.push, seed.rotate_left(16)),
        },
        clock: Clock::new(recorder.clone(), start_utc),
        state: HashMap::new(),
    };

    for (index, step) in plan.steps.iter().enumerate() {
        lock(&recorder).record_step(index)?;
        match step.op.as_str() {
            ADVANCE => {
                let ms = step.input.as_i64().context("@advance takes milliseconds")?;
                lock(&recorder).advance(ms)?;
            }
            SLEEP => {
                let ms = step.input.as_u64().context("@sleep takes milliseconds")?;
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
            AT => {
                let at = step
                    .input
                    .as_u64()
                    .context("@at takes milliseconds since the UNIX epoch")?;
                wait_until(std::time::UNIX_EPOCH + std::time::Duration::from_millis(at));
            }
            RUN => {
                capture::begin(Some(RUN), None);
                let schedule: Schedule = input(&step.input)?;
                run_schedule(ops, &mut services, &recorder, &schedule)?;
            }
            crate::webhook::REDELIVER => {
                let name = step
                    .input
                    .as_str()
                    .context("@redeliver takes the name of the webhook operation")?;
                let op = find(ops, name)?;
                for delivery in crate::webhook::owed(&plan.dir)? {
                    call(op, &mut services, &recorder, &delivery.step(name), true)?;
                }
            }
            _ => {
                let op = find(ops, &step.op)?;
                call(op, &mut services, &recorder, step, true)?;
            }
        }
    }
    // The plan is done: a process that ends without this file ended early.
    let done = plan.dir.join(format!("{DONE_FILE}.{}", plan.process));
    std::fs::write(&done, b"").with_context(|| format!("could not write {}", done.display()))?;
    Ok(())
}

fn find<'a>(
    ops: &'a [(&'static str, Box<dyn Op>)],
    name: &str,
) -> Result<&'a (&'static str, Box<dyn Op>)> {
    ops.iter().find(|(n, _)| *n == name).ok_or_else(|| {
        let names: Vec<_> = ops.iter().map(|(name, _)| *name).collect();
        anyhow!(
            "the case exports no operation `{name}` (it has: {}); keep the `lab::serve!` line as shipped",
            names.join(", ")
        )
    })
}

/// Calls one operation and records its outcome. A scheduled tick (`loud`
/// false) records only errors, so hours of idle ticks stay out of the story.
fn call(
    (name, op): &(&'static str, Box<dyn Op>),
    services: &mut Services,
    recorder: &Arc<Mutex<Recorder>>,
    step: &Step,
    loud: bool,
) -> Result<()> {
    {
        let mut rec = lock(recorder);
        rec.enter(Some(name), step.subject.as_deref());
        if loud {
            rec.event(Kind::Call, None, name)?;
        }
    }
    let printed = if loud {
        capture::begin(Some(name), step.subject.as_deref());
        0
    } else {
        capture::printed()
    };
    let started = Instant::now();
    let outcome = op.call(services, &step.input)?;
    if !loud {
        capture::end(Some(name), step.subject.as_deref(), printed);
    }
    let elapsed = Some(started.elapsed().as_micros() as u64);
    let mut rec = lock(recorder);
    match outcome {
        Ok(()) if loud => rec.timed_event(Kind::Return, None, "ok", elapsed)?,
        Ok(()) => {}
        Err(err) => rec.timed_event(Kind::Error, None, &format!("{err:#}"), elapsed)?,
    }
    rec.enter(None, None);
    Ok(())
}

/// Runs each job whenever it is due, moving the clock straight to the next
/// due time in between: hours of a service's life in milliseconds.
fn run_schedule(
    ops: &[(&'static str, Box<dyn Op>)],
    services: &mut Services,
    recorder: &Arc<Mutex<Recorder>>,
    schedule: &Schedule,
) -> Result<()> {
    let jobs: Vec<_> = schedule
        .jobs
        .iter()
        .map(|job| {
            if job.every_ms <= 0 {
                bail!("a scheduled job runs every so many milliseconds, more than 0");
            }
            Ok((find(ops, &job.op)?, Step::new(&job.op), job.every_ms))
        })
        .collect::<Result<_>>()?;
    let mut due: Vec<i64> = vec![lock(recorder).now_ms()?; jobs.len()];
    loop {
        let now = lock(recorder).now_ms()?;
        if now >= schedule.until_ms {
            return Ok(());
        }
        for (i, (op, step, every)) in jobs.iter().enumerate() {
            if due[i] <= now {
                call(op, services, recorder, step, false)?;
                // A slow provider may have moved the clock on meanwhile.
                due[i] = now + every;
            }
        }
        let now = lock(recorder).now_ms()?;
        let next = due.iter().copied().min().unwrap_or(schedule.until_ms);
        let next = next.min(schedule.until_ms);
        if next > now {
            lock(recorder).advance(next - now)?;
        }
    }
}

/// Waits until the wall clock reaches `at`: asleep for most of the wait,
/// then spinning for the last two milliseconds, because a sleeping thread
/// wakes up to a fraction of a millisecond late, differently in every
/// process, and processes lined up by [`AT`] should start together.
fn wait_until(at: std::time::SystemTime) {
    let spin = std::time::Duration::from_millis(2);
    if let Ok(wait) = at.duration_since(std::time::SystemTime::now()) {
        std::thread::sleep(wait.saturating_sub(spin));
    }
    while std::time::SystemTime::now() < at {
        std::hint::spin_loop();
    }
}

/// Records a panic's message in the world before Rust's own report, so the
/// parent can name it.
fn record_panics(recorder: Arc<Mutex<Recorder>>) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message =
            crate::panic_message(info).unwrap_or_else(|| "a panic with no message".to_string());
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut rec) = recorder.try_lock() {
            let _ = rec.event(Kind::Panic, None, &format!("{message}{place}"));
        }
        default(info);
    }));
}
