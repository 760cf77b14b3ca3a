//! The `notify` command line: parsing, and the pieces every command shares
//! (finding a chapter, building its case). Each command lives in its own
//! module below `lab/grade/cli/`.

mod ask;
mod check;
mod compiler;
mod hint;
mod keys;
mod list;
mod read;
mod reset;
mod solution;
mod terminal;
mod watch;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
use colored::Colorize;

use crate::catalogue;
use crate::chapter::{fingerprint, Chapter, Planned};
use crate::compile::{build_verified, build_version, find_root, fingerprint_of, Built};
use crate::experiments::{run_try, Journal};
use crate::runner::Case;

const ABOUT: &str =
    "A workshop lab: notification systems that never lose a message and never send one twice.

Each chapter has a case you run, fix and check:
  notify read 1     read the chapter
  notify run 1      watch the bug happen
  (edit cases/case01_outbox.rs)
  notify watch 1    re-check the case every time you save it
  notify check 1    grade the fix under real crashes and failing commits
  notify try outbox measure what the fix costs

Stuck? `notify hint 1`. Done? `notify solution 1`. `notify list` shows where you stand.";

/// Exit code when every property holds.
pub const EXIT_PASS: i32 = 0;
/// Exit code when a property failed.
pub const EXIT_FAIL: i32 = 1;
/// Exit code when the case could not be built or run, or the input was wrong.
pub const EXIT_ERROR: i32 = 2;

#[derive(Parser)]
#[command(name = "notify", version, about = ABOUT, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Plays a chapter's batch and tells what happened
    Run {
        /// The chapter's number, e.g. 1
        chapter: String,
        #[command(flatten)]
        which: Which,
        /// Seconds one case process may run before it counts as hung
        #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
        timeout: f64,
        /// Show every line the case printed, not only the last ones
        #[arg(long)]
        show_output: bool,
    },
    /// Grades a chapter's case under faults: one PASS/FAIL line per property
    Check {
        /// The chapter's number, e.g. 1
        #[arg(required_unless_present = "all")]
        chapter: Option<String>,
        /// Check every chapter in order and print a summary table
        #[arg(long, conflicts_with_all = ["chapter", "variant"])]
        all: bool,
        #[command(flatten)]
        which: Which,
        /// Replay only this random batch (as printed by a failing check)
        #[arg(long, value_name = "N")]
        seed: Option<u64>,
        /// Explore many more generated scenarios, each under every fault
        /// point, or 60 of them when it has more (for CI and instructors;
        /// default 50 scenarios)
        #[arg(long, value_name = "SCENARIOS", num_args = 0..=1, default_missing_value = "50", conflicts_with = "seed")]
        thorough: Option<u64>,
        /// Report each generated failure as first found, without looking
        /// for a smaller scenario that fails too (faster: for graders that
        /// keep only the verdicts)
        #[arg(long)]
        no_shrink: bool,
        /// Seconds one case process may run before it counts as hung
        #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
        timeout: f64,
        /// Print the verdicts as JSON
        #[arg(long)]
        json: bool,
        /// Also write the verdicts as JSON to FILE, while the report is
        /// printed as usual (for graders that keep both)
        #[arg(long, value_name = "FILE", conflicts_with_all = ["all", "json"])]
        json_to: Option<std::path::PathBuf>,
        /// Also write the verdicts as JUnit XML to FILE: one testsuite per
        /// chapter, one testcase per property (for CI and class graders)
        #[arg(long, value_name = "FILE")]
        junit: Option<std::path::PathBuf>,
        /// Also write the verdicts as Gradescope's results.json to FILE: one
        /// test per property, a point each
        #[arg(long, value_name = "FILE")]
        gradescope: Option<std::path::PathBuf>,
        /// Also write a page to FILE that draws each failing scenario on a
        /// time axis, beside the reference's run of the same scenario
        /// (one HTML file, nothing fetched from the network)
        #[arg(long, value_name = "FILE", conflicts_with = "all")]
        html: Option<std::path::PathBuf>,
        /// Show every line the case printed in a reported scenario, not
        /// only the last ones
        #[arg(long)]
        show_output: bool,
        /// Also count, for each situation the chapter's rules turn on, the
        /// generated worlds of this budget that reach it
        #[arg(long)]
        coverage: bool,
        /// Grade nothing: print the --variant's patch (or the --solution), or
        /// with neither, list the chapter's variants (for instructors)
        #[arg(long, conflicts_with_all = ["all", "json", "seed", "junit", "gradescope", "html"])]
        show: bool,
    },
    /// Re-checks a case every time you save it (keys: h hint, r run, f full report, n next, q quit)
    Watch {
        /// The chapter's number (default: the first one that does not pass)
        chapter: Option<String>,
        /// Re-check when you press Enter instead of watching the file
        /// (for file systems where watching does not work)
        #[arg(long)]
        manual: bool,
        /// Seconds one case process may run before it counts as hung
        #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
        timeout: f64,
        /// After each check that fails, write a page to FILE that draws the
        /// failing scenarios beside the reference's runs of them
        #[arg(long, value_name = "FILE")]
        html: Option<std::path::PathBuf>,
    },
    /// Lists the chapters and where you stand on each
    List,
    /// Prints a hint for a chapter's case
    Hint {
        /// The chapter's number, e.g. 1
        chapter: String,
        /// Also print the second, more detailed hint
        #[arg(long)]
        more: bool,
    },
    /// Shows the reference solution as a diff against your case file
    Solution {
        /// The chapter's number, e.g. 1
        chapter: String,
        /// Show it without asking, even if your case does not pass yet
        #[arg(long, short)]
        yes: bool,
    },
    /// Puts a case back as shipped, after saving your version in .notify/backups/
    Reset {
        /// The chapter's number, e.g. 1
        #[arg(required_unless_present = "all")]
        chapter: Option<String>,
        /// Reset every case
        #[arg(long, conflicts_with = "chapter")]
        all: bool,
        /// Reset without asking
        #[arg(long, short)]
        yes: bool,
        /// Bring back your latest version saved in .notify/backups/ instead
        #[arg(long, conflicts_with = "all", requires = "chapter")]
        restore: bool,
    },
    /// Prints a chapter's text (paged when the output is a terminal)
    Read {
        /// The chapter's number, e.g. 1
        chapter: String,
    },
    /// Runs an experiment that measures what a fix costs, e.g. `notify try outbox`
    Try {
        /// The experiment's name
        name: String,
        /// How many rounds to measure (default: as many as fit in a few seconds)
        #[arg(long, value_name = "N")]
        iterations: Option<usize>,
        /// SQLite journal: wal (the lab's setting) or delete (rollback journal)
        #[arg(long, value_enum, default_value = "wal")]
        journal: Journal,
        /// Print the figures as JSON
        #[arg(long)]
        json: bool,
    },
    /// One relay of `notify try relays`, which starts it (not for typing)
    #[cfg(feature = "postgres")]
    #[command(hide = true)]
    RelayProcess {
        /// How the relay claims its rows
        #[arg(long, value_enum)]
        claim: crate::experiments::relays::Claim,
        /// The relay's name, written into the rows it claims
        #[arg(long)]
        name: String,
    },
    /// Prints the script that completes notify's commands in your shell
    Completions {
        /// The shell, e.g. bash: `notify completions bash > ~/.local/share/bash-completion/completions/notify`
        shell: clap_complete::Shell,
    },
}

/// Which version of a case to use: the learner's file by default.
#[derive(clap::Args, Clone, Default)]
struct Which {
    /// Use the reference solution instead of your file (for instructors)
    #[arg(long, conflicts_with = "variant")]
    solution: bool,
    /// Use a catalogued wrong fix from checks/ instead of your file
    /// (`notify check N --show` lists them)
    #[arg(long, value_name = "NAME")]
    variant: Option<String>,
}

impl Which {
    /// True for the learner's own case file.
    fn is_learners(&self) -> bool {
        !self.solution && self.variant.is_none()
    }

    /// The flags that pick this version again, e.g. " --variant no-key".
    fn flags(&self) -> String {
        match (&self.variant, self.solution) {
            (Some(name), _) => format!(" --variant {name}"),
            (None, true) => " --solution".to_string(),
            (None, false) => String::new(),
        }
    }

    /// True for the reference solution.
    fn is_solution(&self) -> bool {
        self.solution || self.variant.as_deref() == Some(catalogue::SOLUTION)
    }
}

/// The chapters planned after the registered ones, set once by [`main`].
static PLANNED: std::sync::OnceLock<&'static [Planned]> = std::sync::OnceLock::new();

/// Runs `notify` with `chapters` (and the `planned` ones after them) and
/// returns the exit code.
pub fn main(chapters: &[Chapter], planned: &'static [Planned]) -> i32 {
    let _ = PLANNED.set(planned);
    quiet_on_closed_pipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() {
                EXIT_ERROR
            } else {
                EXIT_PASS
            };
        }
    };
    let code = match dispatch(cli.command, chapters) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("{} {err:#}", "error:".red().bold());
            EXIT_ERROR
        }
    };
    crate::runner::remove_run_dir();
    code
}

fn dispatch(command: Command, chapters: &[Chapter]) -> Result<i32> {
    match command {
        Command::Try {
            name,
            iterations,
            journal,
            json,
        } => return run_try(&name, iterations, journal, json),
        #[cfg(feature = "postgres")]
        Command::RelayProcess { claim, name } => {
            return crate::experiments::relays::relay_process(claim, &name);
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "notify", &mut std::io::stdout());
            return Ok(EXIT_PASS);
        }
        _ => {}
    }
    let cwd = std::env::current_dir().context("could not read the current folder")?;
    let root = find_root(&cwd)?;
    match command {
        Command::Run {
            chapter,
            which,
            timeout,
            show_output,
        } => {
            let chapter = find_chapter(chapters, &chapter)?;
            let timeout = timeout_of(timeout)?;
            let case = match prepare(&root, chapter, &which, timeout)? {
                Prepared::Ready(case) => case,
                Prepared::DoesNotCompile(errors) => {
                    eprint!("{errors}");
                    eprintln!("{}", does_not_compile(chapter, &which));
                    return Ok(EXIT_ERROR);
                }
            };
            run(chapter, &case, show_output)
        }
        Command::Check {
            chapter,
            all,
            which,
            seed,
            thorough,
            no_shrink,
            timeout,
            json,
            json_to,
            junit,
            gradescope,
            html,
            show_output,
            coverage,
            show,
        } => {
            if show {
                let raw = chapter.expect("clap asks for a chapter unless --all");
                return check::show(&root, find_chapter(chapters, &raw)?, &which);
            }
            let timeout = timeout_of(timeout)?;
            let options = check::Options {
                which,
                seed,
                thorough,
                shrink: !no_shrink,
                timeout,
                json,
                json_to,
                junit,
                gradescope,
                html,
                show_output,
                coverage,
            };
            if all {
                check::all(&root, chapters, &options)
            } else {
                let raw = chapter.expect("clap asks for a chapter unless --all");
                check::one(&root, chapters, find_chapter(chapters, &raw)?, &options)
            }
        }
        Command::Watch {
            chapter,
            manual,
            timeout,
            html,
        } => {
            let chapter = match chapter {
                Some(raw) => find_chapter(chapters, &raw)?,
                None => watch::first_to_do(&root, chapters)?,
            };
            let timeout = timeout_of(timeout)?;
            watch::watch(&root, chapters, chapter, manual, timeout, html)
        }
        Command::List => {
            list::list(&root, chapters);
            Ok(EXIT_PASS)
        }
        Command::Hint { chapter, more } => {
            hint::hint(&root, find_chapter(chapters, &chapter)?, more)
        }
        Command::Solution { chapter, yes } => {
            solution::solution(&root, find_chapter(chapters, &chapter)?, yes)
        }
        Command::Reset {
            chapter,
            all,
            yes,
            restore,
        } => {
            if let (true, Some(raw)) = (restore, &chapter) {
                return reset::restore(&root, find_chapter(chapters, raw)?, yes);
            }
            let picked: Vec<&Chapter> = match chapter {
                Some(raw) if !all => vec![find_chapter(chapters, &raw)?],
                _ => chapters.iter().collect(),
            };
            reset::reset(&root, &picked, yes)
        }
        Command::Read { chapter } => read::read(&root, find_chapter(chapters, &chapter)?),
        Command::Try { .. } | Command::Completions { .. } => unreachable!("handled above"),
        #[cfg(feature = "postgres")]
        Command::RelayProcess { .. } => unreachable!("handled above"),
    }
}

/// How many lines of the case's output `run` shows, unless asked for all.
const RUN_OUTPUT_LINES: usize = 60;

/// `notify run N`: the chapter's story, what the case printed, and exit 2
/// when a process of the case hung, crashed or ended before its plan was done.
fn run(chapter: &Chapter, case: &Case, show_output: bool) -> Result<i32> {
    case.keep_outputs();
    crate::status::enable(true);
    crate::status::label(&format!("playing case {}", chapter.number));
    let story = (chapter.run)(case);
    crate::status::finish();
    print!("{}", story?);
    let outputs = case.outputs();
    let outputs: Vec<&crate::output::Output> = outputs.iter().collect();
    let limit = (!show_output).then_some(RUN_OUTPUT_LINES);
    let more = format!("`notify run {} --show-output` shows all", chapter.number);
    print!("{}", crate::report::printed(&outputs, limit, &more, 0));
    let incidents = case.incidents();
    let Some(first) = incidents.first() else {
        return Ok(EXIT_PASS);
    };
    eprintln!(
        "{} case {} did not play its story to the end: process {} {}",
        "error:".red().bold(),
        chapter.number,
        first.process,
        first.exit.describe()
    );
    Ok(EXIT_ERROR)
}

/// Makes a closed standard output end `notify` quietly, as it ends other
/// Unix tools (`notify list | head -1`), and makes a signal that ends
/// `notify` end the case processes it started too.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = crate::panic_message(info).unwrap_or_default();
        if message.contains("Broken pipe") || message.contains("os error 32") {
            crate::runner::stop_all();
            end_by_broken_pipe();
        }
        default(info);
    }));
    stop_children_on_signals();
}

#[cfg(unix)]
fn end_by_broken_pipe() -> ! {
    crate::runner::stop_all();
    crate::runner::remove_run_dir();
    // SAFETY: restores the default action of SIGPIPE and raises it, so the
    // shell sees what it sees of any tool whose reader went away.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(141)
}

#[cfg(not(unix))]
fn end_by_broken_pipe() -> ! {
    std::process::exit(EXIT_PASS)
}

/// Makes SIGINT, SIGTERM and SIGHUP stop the case processes and remove
/// the scenario folders before `notify` ends by the signal. The signals are
/// blocked in every thread (threads started later inherit the mask, and
/// `std::process` gives each child a clean one) and taken by one thread
/// that waits for them, so the clean-up runs as ordinary code. A handler
/// could only make async-signal-safe calls, and one that started `rm` with
/// fork(2) hung when the signal came while its thread held an allocator
/// lock that fork takes.
#[cfg(unix)]
fn stop_children_on_signals() {
    const ENDING: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    // SAFETY: sigemptyset, sigaddset and pthread_sigmask on a set owned
    // here; called first thing in `main`, before any thread is started.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in ENDING {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    std::thread::spawn(move || loop {
        let mut signal: libc::c_int = 0;
        // SAFETY: sigwait on the set made above, into a local.
        if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
            continue;
        }
        crate::runner::stop_all();
        crate::runner::remove_run_dir_while_playing();
        // SAFETY: restores the signal's default action, unblocks it in this
        // thread only and raises it there: `notify` ends by the signal, as
        // the shell expects of a tool it interrupted.
        unsafe {
            let mut one: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut one);
            libc::sigaddset(&mut one, signal);
            libc::signal(signal, libc::SIG_DFL);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
            libc::raise(signal);
        }
    });
}

#[cfg(not(unix))]
fn stop_children_on_signals() {}

/// The chapter numbered `raw`, or an error listing the chapters that exist.
fn find_chapter<'a>(chapters: &'a [Chapter], raw: &str) -> Result<&'a Chapter> {
    let wanted = raw.trim().parse::<u32>().ok();
    if let Some(chapter) = chapters.iter().find(|c| Some(c.number) == wanted) {
        return Ok(chapter);
    }
    let known: Vec<String> = chapters
        .iter()
        .map(|c| format!("  {:>2}  {}", c.number, c.title))
        .collect();
    if let Some(planned) = planned(wanted) {
        bail!(
            "chapter {} ({}) is planned: its text and its case are not written yet. The chapters ready are:\n{}",
            planned.number,
            planned.title,
            known.join("\n")
        )
    }
    bail!(
        "there is no chapter {raw:?}. The chapters are:\n{}\nGive a chapter's number from this list, e.g. 1.",
        known.join("\n")
    )
}

/// The planned chapter numbered `number`, if there is one.
fn planned(number: Option<u32>) -> Option<&'static Planned> {
    PLANNED
        .get()
        .and_then(|planned| planned.iter().find(|p| Some(p.number) == number))
}

fn timeout_of(seconds: f64) -> Result<Duration> {
    if !(seconds > 0.0 && seconds.is_finite()) {
        bail!("--timeout takes a positive number of seconds, e.g. --timeout 5");
    }
    Duration::try_from_secs_f64(seconds)
        .context("--timeout takes a number of seconds a clock can count, e.g. --timeout 5")
}

/// The file the version `which` of `chapter`'s case comes from, relative to
/// the workshop's root: the learner's case, the reference solution, or a
/// wrong fix's patch.
fn file_of(chapter: &Chapter, which: &Which) -> String {
    match (which.solution, &which.variant) {
        (true, _) => catalogue::solution_file(chapter),
        (false, Some(name)) if name == catalogue::SOLUTION => catalogue::solution_file(chapter),
        (false, Some(name)) => catalogue::patch_file(chapter, name),
        (false, None) => chapter.case_file.to_string(),
    }
}

/// What came of building a case.
enum Prepared {
    Ready(Case),
    /// The compiler's errors, to print above [`does_not_compile`].
    DoesNotCompile(String),
}

/// Builds the version `which` of `chapter`'s case, and only that binary,
/// and makes sure the binary was built from the bytes on disk. The
/// compiler's warnings about the learner's case go to standard error.
fn prepare(root: &Path, chapter: &Chapter, which: &Which, timeout: Duration) -> Result<Prepared> {
    let (prepared, warnings) = prepare_warned(root, chapter, which, timeout)?;
    eprint!("{warnings}");
    Ok(prepared)
}

/// Whether `chapter` can run here: an error that says how to get a server
/// when its case runs on PostgreSQL (it requires the `postgres` feature)
/// and none answers; Ok for every other chapter.
fn server_check(root: &Path, chapter: &Chapter) -> Result<()> {
    let needs_postgres = crate::compile::required_features(root, chapter.bin)
        .iter()
        .any(|f| f == "postgres");
    if needs_postgres {
        crate::fleet_runner::server_check()?;
    }
    Ok(())
}

/// [`prepare`], with the compiler's warnings about the learner's case
/// returned ("" when there are none) instead of printed.
fn prepare_warned(
    root: &Path,
    chapter: &Chapter,
    which: &Which,
    timeout: Duration,
) -> Result<(Prepared, String)> {
    // A case that runs on PostgreSQL needs a server before anything is built.
    server_check(root, chapter)?;
    let mut warnings = String::new();
    let (name, built, source) = match (which.solution, &which.variant) {
        (false, None) => {
            let path: PathBuf = root.join(chapter.case_file);
            let source = std::fs::read(&path).map_err(|err| {
                if err.kind() == std::io::ErrorKind::NotFound {
                    anyhow::anyhow!(
                        "{} is missing. It is the file case {} is built from; `notify reset {}` puts back the shipped version.",
                        path.display(),
                        chapter.number,
                        chapter.number
                    )
                } else {
                    anyhow::Error::new(err).context(format!("could not read {}", path.display()))
                }
            })?;
            let (built, warned) = build_verified(root, chapter.bin, &source)?;
            warnings = compiler::warnings(chapter, &warned);
            (chapter.bin.to_string(), built, source)
        }
        (solution, variant) => {
            let version = if solution {
                catalogue::SOLUTION
            } else {
                variant.as_deref().expect("a variant when not the solution")
            };
            let source = catalogue::source(root, chapter, version)?;
            let name = format!("{}-{version}", chapter.bin);
            let built = build_version(root, &name, &source)?;
            (name, built, source.into_bytes())
        }
    };
    let exe = match built {
        Built::Ready(exe) => exe,
        Built::DoesNotCompile(mut errors) => {
            if which.is_learners() {
                errors.push_str(&compiler::signature_note(root, chapter, &errors));
            }
            return Ok((Prepared::DoesNotCompile(errors), warnings));
        }
    };
    let source = fingerprint(&source);
    if fingerprint_of(&exe)? != source {
        bail!(
            "{} was not built from {}, so it cannot be graded.\n\
             Run `cargo clean` (or delete this workshop's target folder) and try again.",
            exe.display(),
            file_of(chapter, which)
        );
    }
    let case = Prepared::Ready(Case {
        exe,
        name,
        timeout,
        source,
        log: Default::default(),
    });
    Ok((case, warnings))
}

/// The line under a case's compiler errors.
fn does_not_compile(chapter: &Chapter, which: &Which) -> String {
    format!(
        "{} case {} does not compile: fix the errors above in {}",
        "error:".red().bold(),
        chapter.number,
        file_of(chapter, which)
    )
}

/// A file kept with `chapter`'s check data, e.g. `checks/case01/hints.md`,
/// relative to the workshop's root.
fn data_file(chapter: &Chapter, name: &str) -> String {
    format!("{}/{name}", catalogue::folder(chapter))
}
