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
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::db::{lock, Db};
use crate::provider::Email;
use crate::scenario::{Plan, APP_DB};
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

/// One operation a case exports, callable with a JSON input.
pub trait Op {
    /// Calls the operation. The outer error is the lab's (bad input), the
    /// inner one is what the case returned.
    fn call(&self, db: &mut Db, email: &Email, input: &Value) -> Result<Result<()>>;
}

/// Adapts a plain function to [`Op`]; `A` tells the signatures apart.
pub struct Adapter<F, A>(F, PhantomData<A>);

impl<F> Op for Adapter<F, ()>
where
    F: Fn(&mut Db, &Email) -> Result<()>,
{
    fn call(&self, db: &mut Db, email: &Email, _input: &Value) -> Result<Result<()>> {
        Ok((self.0)(db, email))
    }
}

impl<F, T> Op for Adapter<F, (T,)>
where
    F: Fn(&mut Db, &Email, &T) -> Result<()>,
    T: DeserializeOwned,
{
    fn call(&self, db: &mut Db, email: &Email, input: &Value) -> Result<Result<()>> {
        let input: T = serde_json::from_value(input.clone())
            .context("the step's input does not fit the operation's argument")?;
        Ok((self.0)(db, email, &input))
    }
}

/// Wraps a function `fn(&mut Db, &Email) -> Result<()>` or
/// `fn(&mut Db, &Email, &Input) -> Result<()>` as an operation.
pub fn op<F, A>(f: F) -> Box<dyn Op>
where
    Adapter<F, A>: Op + 'static,
{
    Box::new(Adapter(f, PhantomData))
}

/// Makes a case file's `main`: the lab's entry point, scenario in, history out.
///
/// ```ignore
/// lab::serve!(schema: SCHEMA, ops: [invite, relay]);
/// ```
#[macro_export]
macro_rules! serve {
    (schema: $schema:expr, ops: [$($op:ident),* $(,)?]) => {
        fn main() {
            $crate::serve::main($schema, vec![$((stringify!($op), $crate::serve::op($op))),*])
        }
    };
}

/// The body of a case binary's `main`. Never returns.
pub fn main(schema: &str, ops: Vec<(&'static str, Box<dyn Op>)>) -> ! {
    let Some(plan) = std::env::args_os().nth(1) else {
        eprintln!(
            "This is a case of the notify workshop: the service, without a scenario to run.\n\
             Run it through the lab instead, e.g. `notify run 1` or `notify check 1`."
        );
        std::process::exit(2);
    };
    match serve(schema, &ops, Path::new(&plan)) {
        Ok(()) => std::process::exit(0),
        Err(err) => {
            eprintln!("{err:#}");
            std::process::exit(EXIT_LAB_ERROR);
        }
    }
}

fn serve(schema: &str, ops: &[(&'static str, Box<dyn Op>)], plan: &Path) -> Result<()> {
    let plan = Plan::load(plan)?;
    let recorder = Arc::new(Mutex::new(Recorder::open(&plan.dir, plan.process)?));
    record_panics(recorder.clone());

    let start = if plan.process == 1 {
        "start"
    } else {
        "restart"
    };
    lock(&recorder).event(Kind::Start, None, start)?;

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
    db.watch(recorder.clone(), plan.fault.clone());
    let email = Email::new(
        recorder.clone(),
        plan.provider.clone(),
        plan.fault.clone(),
        plan.seed ^ u64::from(plan.process).rotate_left(32),
    );

    for step in &plan.steps {
        if step.op == ADVANCE {
            let ms = step.input.as_i64().context("@advance takes milliseconds")?;
            lock(&recorder).advance(ms)?;
            continue;
        }
        if step.op == SLEEP {
            let ms = step.input.as_u64().context("@sleep takes milliseconds")?;
            std::thread::sleep(std::time::Duration::from_millis(ms));
            continue;
        }
        let Some((name, op)) = ops.iter().find(|(name, _)| *name == step.op) else {
            let names: Vec<_> = ops.iter().map(|(name, _)| *name).collect();
            bail!(
                "the case exports no operation `{}` (it has: {}); keep the `lab::serve!` line as shipped",
                step.op,
                names.join(", ")
            );
        };
        {
            let mut rec = lock(&recorder);
            rec.enter(Some(name), step.subject.as_deref());
            rec.event(Kind::Call, None, name)?;
        }
        let started = Instant::now();
        let outcome = op.call(&mut db, &email, &step.input)?;
        let elapsed = Some(started.elapsed().as_micros() as u64);
        let mut rec = lock(&recorder);
        match outcome {
            Ok(()) => rec.timed_event(Kind::Return, None, "ok", elapsed)?,
            Err(err) => rec.timed_event(Kind::Error, None, &format!("{err:#}"), elapsed)?,
        }
        rec.enter(None, None);
    }
    Ok(())
}

/// Records a panic's message in the world before Rust's own report, so the
/// parent can name it.
fn record_panics(recorder: Arc<Mutex<Recorder>>) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with no message".to_string());
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
