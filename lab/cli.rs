//! The `notify` command line.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use colored::Colorize;

use crate::chapter::{Chapter, CheckOptions, DEFAULT_SEEDS};
use crate::compile::{build, find_root, Built};
use crate::experiments::{run_try, Journal};
use crate::progress::{Progress, Status};
use crate::report::CheckReport;
use crate::runner::Case;

const ABOUT: &str =
    "A workshop lab: notification systems that never lose a message and never send one twice.

Each chapter has a case you run, fix and check:
  notify run 1      watch the bug happen
  (edit cases/case01_outbox.rs)
  notify check 1    grade the fix under real crashes and failing commits
  notify try outbox measure what the fix costs";

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
    },
    /// Grades a chapter's case under faults: one PASS/FAIL line per property
    Check {
        /// The chapter's number, e.g. 1
        chapter: String,
        #[command(flatten)]
        which: Which,
        /// Replay only this random batch (as printed by a failing check)
        #[arg(long, value_name = "N")]
        seed: Option<u64>,
        /// Seconds one case process may run before it counts as hung
        #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
        timeout: f64,
        /// Print the verdicts as JSON
        #[arg(long)]
        json: bool,
    },
    /// Lists the chapters and where you stand on each
    List,
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
}

/// Which version of a case to use: the learner's file by default.
#[derive(clap::Args)]
struct Which {
    /// Use the reference solution instead of your file (for instructors)
    #[arg(long, conflicts_with = "variant")]
    solution: bool,
    /// Use a catalogued wrong fix from checks/ instead of your file
    #[arg(long, value_name = "NAME")]
    variant: Option<String>,
}

/// Runs `notify` with `chapters` and returns the exit code.
pub fn main(chapters: &[Chapter]) -> i32 {
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
    match dispatch(cli.command, chapters) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("{} {err:#}", "error:".red().bold());
            EXIT_ERROR
        }
    }
}

fn dispatch(command: Command, chapters: &[Chapter]) -> Result<i32> {
    if let Command::Try {
        name,
        iterations,
        journal,
        json,
    } = &command
    {
        return run_try(name, *iterations, *journal, *json);
    }
    let cwd = std::env::current_dir().context("could not read the current folder")?;
    let root = find_root(&cwd)?;
    match command {
        Command::Run {
            chapter,
            which,
            timeout,
        } => {
            let chapter = find_chapter(chapters, &chapter)?;
            let Some(case) = prepare(&root, chapter, &which, timeout)? else {
                return Ok(EXIT_ERROR);
            };
            print!("{}", (chapter.run)(&case)?);
            Ok(EXIT_PASS)
        }
        Command::Check {
            chapter,
            which,
            seed,
            timeout,
            json,
        } => {
            let chapter = find_chapter(chapters, &chapter)?;
            let Some(case) = prepare(&root, chapter, &which, timeout)? else {
                return Ok(EXIT_ERROR);
            };
            let options = CheckOptions {
                seeds: seed
                    .map(|s| vec![s])
                    .unwrap_or_else(|| DEFAULT_SEEDS.to_vec()),
            };
            let started = Instant::now();
            let checked = (chapter.check)(&case, &options)?;
            let report = CheckReport {
                chapter: chapter.number,
                title: chapter.title.to_string(),
                case: case.name.clone(),
                file: file_of(chapter, &which)?.to_string(),
                passed: checked.verdicts.iter().all(|v| v.pass),
                verdicts: checked.verdicts,
                processes: checked.processes,
                seconds: started.elapsed().as_secs_f64(),
            };
            if !which.solution && which.variant.is_none() && seed.is_none() {
                let mut progress = Progress::load(&root);
                if let Err(err) = progress.record(&root, chapter, report.passed) {
                    eprintln!("note: progress not saved: {err:#}");
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.render());
            }
            Ok(if report.passed { EXIT_PASS } else { EXIT_FAIL })
        }
        Command::List => {
            list(&root, chapters);
            Ok(EXIT_PASS)
        }
        Command::Try { .. } => unreachable!("handled above"),
    }
}

fn find_chapter<'a>(chapters: &'a [Chapter], raw: &str) -> Result<&'a Chapter> {
    let wanted = raw.trim().parse::<u32>().ok();
    if let Some(chapter) = chapters.iter().find(|c| Some(c.number) == wanted) {
        return Ok(chapter);
    }
    let known: Vec<String> = chapters
        .iter()
        .map(|c| format!("  {:>2}  {}", c.number, c.title))
        .collect();
    bail!(
        "there is no case {raw:?}. The cases are:\n{}\nGive the chapter's number, e.g. `notify run 1`.",
        known.join("\n")
    )
}

fn file_of<'a>(chapter: &'a Chapter, which: &Which) -> Result<&'a str> {
    Ok(match (which.solution, &which.variant) {
        (true, _) => variant(chapter, "solution")?.file,
        (false, Some(name)) => variant(chapter, name)?.file,
        (false, None) => chapter.case_file,
    })
}

fn variant<'a>(chapter: &'a Chapter, name: &str) -> Result<&'a crate::chapter::Variant> {
    chapter
        .variants
        .iter()
        .find(|v| v.name == name)
        .ok_or_else(|| {
            let known: Vec<String> = chapter
                .variants
                .iter()
                .map(|v| format!("  {:<22} {}", v.name, v.about))
                .collect();
            anyhow::anyhow!(
                "case {} has no variant {name:?}. Its variants are:\n{}",
                chapter.number,
                known.join("\n")
            )
        })
}

/// Builds the case; `None` when it does not compile (the errors are printed).
fn prepare(root: &Path, chapter: &Chapter, which: &Which, timeout: f64) -> Result<Option<Case>> {
    if !(timeout > 0.0 && timeout.is_finite()) {
        bail!("--timeout takes a positive number of seconds, e.g. --timeout 5");
    }
    let file = file_of(chapter, which)?;
    let bin = match (which.solution, &which.variant) {
        (true, _) => variant(chapter, "solution")?.bin,
        (false, Some(name)) => variant(chapter, name)?.bin,
        (false, None) => chapter.bin,
    };
    let path: PathBuf = root.join(file);
    if !path.is_file() {
        bail!(
            "{} is missing. It is the file case {} is built from; restore it from git (`git checkout -- {file}`).",
            path.display(),
            chapter.number
        );
    }
    match build(root, bin)? {
        Built::Ready(exe) => Ok(Some(Case {
            exe,
            name: bin.to_string(),
            timeout: Duration::from_secs_f64(timeout),
        })),
        Built::DoesNotCompile(errors) => {
            eprint!("{errors}");
            eprintln!(
                "{} case {} does not compile: fix the errors above in {file}",
                "error:".red().bold(),
                chapter.number
            );
            Ok(None)
        }
    }
}

fn list(root: &Path, chapters: &[Chapter]) {
    let progress = Progress::load(root);
    println!(
        "{}",
        format!("  #  {:<38} {:<28} status", "chapter", "case file").bold()
    );
    let mut next = None;
    for chapter in chapters {
        let status = progress.status(root, chapter);
        if status != Status::Passing && next.is_none() {
            next = Some(chapter.number);
        }
        let label = match status {
            Status::NotStarted => status.label().normal(),
            Status::InProgress => status.label().yellow(),
            Status::Passing => status.label().green(),
        };
        println!(
            "{:>3}  {:<38} {:<28} {label}",
            chapter.number, chapter.title, chapter.case_file
        );
    }
    match next {
        Some(n) => println!("\nnext: notify run {n}"),
        None => println!("\nevery chapter passes."),
    }
}
