//! `notify check N` and `notify check --all`: grade cases and remember the
//! verdicts of the learner's files.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use colored::Colorize;
use serde::Serialize;

use super::{
    does_not_compile, file_of, prepare, prepare_warned, Prepared, Which, EXIT_ERROR, EXIT_FAIL,
    EXIT_PASS,
};
use crate::catalogue;
use crate::chapter::{fingerprint, Chapter, CheckOptions, DEFAULT_SEEDS};
use crate::explore::Budget;
use crate::grades;
use crate::progress::Progress;
use crate::report::CheckReport;

/// How `check` was asked to run.
pub(super) struct Options {
    pub which: Which,
    pub seed: Option<u64>,
    /// `--thorough`: how many generated scenarios, each under every fault.
    pub thorough: Option<u64>,
    /// `--no-shrink` turns this off: failures reported as first found.
    pub shrink: bool,
    pub timeout: Duration,
    pub json: bool,
    /// `--json-to FILE`: the verdicts as JSON, written to FILE besides the
    /// report printed as usual.
    pub json_to: Option<std::path::PathBuf>,
    /// `--junit FILE`: the verdicts as JUnit XML.
    pub junit: Option<std::path::PathBuf>,
    /// `--gradescope FILE`: the verdicts as Gradescope's results.json.
    pub gradescope: Option<std::path::PathBuf>,
    /// `--html FILE`: each failing scenario drawn, beside the reference's
    /// run of it.
    pub html: Option<std::path::PathBuf>,
    /// Show every line the case printed in a reported scenario.
    pub show_output: bool,
    /// `--coverage`: count the worlds of the budget that reach each
    /// situation the chapter's rules turn on.
    pub coverage: bool,
}

impl Options {
    /// Only a full check of the learner's own file counts as progress.
    fn records_progress(&self) -> bool {
        self.which.is_learners() && self.seed.is_none()
    }

    /// Writes the grade files asked for (`--junit`, `--gradescope`).
    fn write_grades(&self, graded: &[grades::Graded]) -> Result<()> {
        grades::write(graded, self.junit.as_deref(), self.gradescope.as_deref())
    }
}

/// What came of grading one chapter.
pub(super) enum Graded {
    Report(CheckReport),
    /// The case does not compile: the compiler's errors.
    DoesNotCompile(String),
}

/// Builds and grades `chapter`'s case, and records the verdict of the
/// learner's file in the progress file.
pub(super) fn grade(root: &Path, chapter: &Chapter, options: &Options) -> Result<Graded> {
    let started = Instant::now();
    let (prepared, warnings) = prepare_warned(root, chapter, &options.which, options.timeout)?;
    let case = match prepared {
        Prepared::Ready(case) => case,
        Prepared::DoesNotCompile(errors) => {
            if options.records_progress() {
                let version = std::fs::read(root.join(chapter.case_file))
                    .map(|bytes| fingerprint(&bytes))
                    .ok();
                remember(root, chapter, version, false);
            }
            return Ok(Graded::DoesNotCompile(errors));
        }
    };
    let reference = if options.which.is_solution() {
        None
    } else {
        let solution = Which {
            solution: true,
            variant: None,
        };
        match prepare(root, chapter, &solution, options.timeout)? {
            Prepared::Ready(reference) => Some(reference),
            Prepared::DoesNotCompile(errors) => anyhow::bail!(
                "the reference solution of case {} does not compile, so nothing can be compared with it:\n{errors}",
                chapter.number
            ),
        }
    };
    let budget = match (options.seed, options.thorough) {
        (Some(seed), _) => Budget::seed(seed),
        (None, Some(seeds)) => Budget::thorough(seeds),
        (None, None) => Budget::QUICK,
    };
    let budget = if options.shrink {
        budget
    } else {
        budget.unshrunk()
    };
    let check_options = CheckOptions {
        seeds: options
            .seed
            .map(|s| vec![s])
            .unwrap_or_else(|| DEFAULT_SEEDS.to_vec()),
        budget,
        reference,
    };
    if options.html.is_some() {
        case.keep_tape();
    }
    crate::status::label(&format!("checking case {}", chapter.number));
    let checked = (chapter.check)(&case, &check_options)?;
    crate::status::clear();
    // A hang or an early end is reported once, before the properties it
    // kept from being judged: the first one, in the same order every run.
    // Failing that, the first panic, which every property it broke would
    // otherwise repeat.
    let incidents = case.incidents();
    let stopped = incidents
        .iter()
        .find(|i| i.stops_the_plan())
        .or_else(|| {
            incidents
                .iter()
                .find(|i| matches!(i.exit, crate::runner::Exit::Panicked(_)))
        })
        .cloned()
        .map(Box::new);
    let report = CheckReport {
        chapter: chapter.number,
        title: chapter.title.to_string(),
        case: case.name.clone(),
        file: file_of(chapter, &options.which),
        version_flags: options.which.flags(),
        passed: checked.verdicts.iter().all(|v| v.pass),
        verdicts: checked.verdicts,
        processes: checked.processes,
        seconds: started.elapsed().as_secs_f64(),
        warnings,
        stopped,
        show_output: options.show_output,
        coverage: options.coverage.then(|| (chapter.coverage)(budget)),
    };
    if let Some(file) = &options.html {
        crate::status::label("drawing the failing scenarios, and the reference's runs of them");
        let page =
            crate::picture::render(chapter, &report, &case, check_options.reference.as_ref());
        crate::status::clear();
        std::fs::write(file, page)
            .with_context(|| format!("could not write the page to {}", file.display()))?;
    }
    // The verdict is for the bytes the binary was built from, which
    // `prepare` found equal to the file; a save made since is not it.
    if options.records_progress() {
        remember(root, chapter, Some(case.source), report.passed);
    }
    Ok(Graded::Report(report))
}

/// Checks that run at once take turns at the progress file.
static PROGRESS_FILE: Mutex<()> = Mutex::new(());

fn remember(root: &Path, chapter: &Chapter, version: Option<u64>, passed: bool) {
    let Some(version) = version else { return };
    let _turn = PROGRESS_FILE.lock().unwrap_or_else(|e| e.into_inner());
    let mut progress = Progress::load(root);
    if let Err(err) = progress.record_version(chapter, version, passed) {
        eprintln!("note: progress not saved: {err:#}");
    }
}

/// What to do after `chapter` passes: read the next chapter, or, after the
/// last one written, see where you stand.
pub(super) fn next_step(chapters: &[Chapter], chapter: &Chapter) -> String {
    match chapters.iter().find(|c| c.number > chapter.number) {
        Some(next) => format!("Next: `notify read {}`.", next.number),
        None => {
            let planned = super::PLANNED.get().copied().unwrap_or_default();
            match (planned.first(), planned.last()) {
                (Some(first), Some(last)) => format!(
                    "That is the last chapter written (chapters {}–{} are planned); `notify list` shows where you stand.",
                    first.number, last.number
                ),
                _ => "That is the last chapter; `notify list` shows where you stand.".to_string(),
            }
        }
    }
}

/// The line under a check of the learner's case where every property held:
/// what was proven, and what comes next.
pub(super) fn passed_line(chapters: &[Chapter], chapter: &Chapter, report: &CheckReport) -> String {
    let Some(proven) = report.proven() else {
        return String::new();
    };
    let head = format!("case {} passes:", chapter.number);
    let text = format!("{head} {proven}. {}", next_step(chapters, chapter));
    let line = crate::report::lines("", 0, &text, 2, crate::report::columns(), |t| t.to_string());
    line.replacen(&head, &head.green().bold().to_string(), 1)
}

/// The line under a failing check of the learner's case: where to turn.
fn stuck_line(chapter: &Chapter) -> String {
    let n = chapter.number;
    format!("stuck? `notify hint {n}` (then `notify hint {n} --more`)")
        .dimmed()
        .to_string()
}

/// `notify check N`.
pub(super) fn one(
    root: &Path,
    chapters: &[Chapter],
    chapter: &Chapter,
    options: &Options,
) -> Result<i32> {
    crate::status::enable(!options.json);
    let graded = grade(root, chapter, options);
    crate::status::finish();
    match graded? {
        Graded::DoesNotCompile(errors) => {
            eprint!("{errors}");
            let said = does_not_compile(chapter, &options.which);
            eprintln!("{said}");
            let file = file_of(chapter, &options.which);
            options.write_grades(&[grades::Graded {
                chapter: chapter.number,
                title: chapter.title,
                file: &file,
                outcome: grades::Outcome::Error(&said),
            }])?;
            Ok(EXIT_ERROR)
        }
        Graded::Report(report) => {
            eprint!("{}", report.warnings);
            options.write_grades(&[grades::Graded {
                chapter: chapter.number,
                title: chapter.title,
                file: &report.file,
                outcome: grades::Outcome::Checked(&report),
            }])?;
            if let Some(file) = &options.json_to {
                std::fs::write(file, serde_json::to_string_pretty(&report)?).with_context(
                    || format!("could not write the verdicts to {}", file.display()),
                )?;
            }
            if options.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.render());
                if options.records_progress() {
                    print!("{}", passed_line(chapters, chapter, &report));
                }
                if let Some(file) = &options.html {
                    println!("the picture: {}", file.display());
                }
                if !report.passed && options.which.is_learners() {
                    println!("{}", stuck_line(chapter));
                }
            }
            Ok(if report.passed { EXIT_PASS } else { EXIT_FAIL })
        }
    }
}

/// One chapter's line in `notify check --all`.
#[derive(Serialize)]
struct Row {
    chapter: u32,
    title: String,
    file: String,
    /// "pass", "fail", "error" (the case could not be built or checked), or
    /// "skipped" (it needs a server this machine has not got, e.g. chapter
    /// 12's PostgreSQL).
    verdict: &'static str,
    /// Properties that held, of `properties`.
    held: usize,
    properties: usize,
    seconds: f64,
    /// The full report, when the case could be checked.
    report: Option<CheckReport>,
    /// Why the case could not be checked.
    error: Option<String>,
}

/// What `notify check --all --json` prints.
#[derive(Serialize)]
struct Summary {
    passed: bool,
    seconds: f64,
    chapters: Vec<Row>,
}

/// How many checks run at once. A check already plays its scenarios on
/// every core, and some chapters judge real elapsed time, so checks run one
/// after another unless the machine has cores to spare: one check per four
/// cores (on a 2-core machine, one at a time).
fn jobs(chapters: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 4).clamp(1, chapters.max(1))
}

/// `notify check --all`: every chapter in order, a summary table, exit 1 if
/// any fails and 2 if any could not be built or checked.
pub(super) fn all(root: &Path, chapters: &[Chapter], options: &Options) -> Result<i32> {
    let started = Instant::now();
    let jobs = jobs(chapters.len());
    crate::status::enable(!options.json);
    if !options.json {
        println!(
            "{}",
            format!(
                "  #  {:<40} {:>5}  {:<7} {:>7}",
                "chapter", "held", "verdict", "seconds"
            )
            .bold()
        );
    }
    let mut rows: Vec<Option<Row>> = chapters.iter().map(|_| None).collect();
    let next = Mutex::new(0usize);
    let (tx, rx) = mpsc::channel::<(usize, Row)>();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || loop {
                let i = {
                    let mut next = next.lock().expect("no check panics while holding it");
                    let i = *next;
                    *next += 1;
                    i
                };
                let Some(chapter) = chapters.get(i) else {
                    break;
                };
                // A check that panics is that chapter's error, not the end
                // of the others' checks.
                let row =
                    std::panic::catch_unwind(AssertUnwindSafe(|| row(root, chapter, options)))
                        .unwrap_or_else(|_| panicked(chapter, options));
                if tx.send((i, row)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        // Print each row as soon as every row above it is in.
        let mut shown = 0;
        for (i, row) in rx {
            rows[i] = Some(row);
            while let Some(Some(row)) = rows.get(shown) {
                if !options.json {
                    crate::status::clear();
                    print_row(row);
                }
                shown += 1;
            }
        }
    });
    crate::status::finish();
    let rows: Vec<Row> = rows.into_iter().flatten().collect();
    let summary = Summary {
        passed: rows
            .iter()
            .all(|r| r.verdict == "pass" || r.verdict == "skipped"),
        seconds: started.elapsed().as_secs_f64(),
        chapters: rows,
    };
    let graded: Vec<grades::Graded> = summary
        .chapters
        .iter()
        .map(|row| grades::Graded {
            chapter: row.chapter,
            title: &row.title,
            file: &row.file,
            outcome: match (&row.report, row.error.as_deref(), row.verdict) {
                (Some(report), _, _) => grades::Outcome::Checked(report),
                (None, Some(why), "skipped") => grades::Outcome::Skipped(why),
                (None, why, _) => grades::Outcome::Error(why.unwrap_or("not checked")),
            },
        })
        .collect();
    options.write_grades(&graded)?;
    if options.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_tail(&summary);
    }
    Ok(if summary.chapters.iter().any(|r| r.verdict == "error") {
        EXIT_ERROR
    } else if summary.passed {
        EXIT_PASS
    } else {
        EXIT_FAIL
    })
}

fn panicked(chapter: &Chapter, options: &Options) -> Row {
    Row {
        error: Some(format!(
            "the check of case {} stopped on an internal error (above)",
            chapter.number
        )),
        ..empty_row(chapter, options)
    }
}

fn empty_row(chapter: &Chapter, options: &Options) -> Row {
    Row {
        chapter: chapter.number,
        title: chapter.title.to_string(),
        file: file_of(chapter, &options.which),
        verdict: "error",
        held: 0,
        properties: 0,
        seconds: 0.0,
        report: None,
        error: None,
    }
}

fn row(root: &Path, chapter: &Chapter, options: &Options) -> Row {
    let started = Instant::now();
    let mut row = empty_row(chapter, options);
    // A chapter that needs a server nobody started is left out of the
    // verdict, not counted as broken: every other chapter runs without one.
    if let Err(err) = super::server_check(root, chapter) {
        row.verdict = "skipped";
        let why = format!("{err:#}");
        let first = why.lines().next().unwrap_or_default().to_string();
        row.error = Some(format!(
            "case {} was not checked. {first} `notify check {}` says how to start one.",
            chapter.number, chapter.number
        ));
        return row;
    }
    match grade(root, chapter, options) {
        Ok(Graded::Report(report)) => {
            eprint!("{}", report.warnings);
            row.verdict = if report.passed { "pass" } else { "fail" };
            row.held = report.verdicts.iter().filter(|v| v.pass).count();
            row.properties = report.verdicts.len();
            row.report = Some(report);
        }
        Ok(Graded::DoesNotCompile(errors)) => {
            crate::status::clear();
            eprint!("{errors}");
            row.error = Some(format!(
                "case {} does not compile: fix the errors in {}",
                chapter.number, row.file
            ));
        }
        Err(err) => row.error = Some(format!("{err:#}")),
    }
    row.seconds = started.elapsed().as_secs_f64();
    row
}

fn print_row(row: &Row) {
    // Pad before colouring: escape codes would count as width.
    let (held, verdict) = match row.verdict {
        "pass" => (
            format!("{}/{}", row.held, row.properties),
            format!("{:<7}", "PASS").green().bold(),
        ),
        "fail" => (
            format!("{}/{}", row.held, row.properties),
            format!("{:<7}", "FAIL").red().bold(),
        ),
        "skipped" => ("-".to_string(), format!("{:<7}", "SKIP").yellow().bold()),
        _ => ("-".to_string(), format!("{:<7}", "ERROR").red().bold()),
    };
    println!(
        "{:>3}  {:<40} {held:>5}  {verdict} {:>7.1}",
        row.chapter, row.title, row.seconds
    );
}

fn print_tail(summary: &Summary) {
    println!();
    for row in &summary.chapters {
        match (&row.error, row.verdict) {
            (Some(why), "skipped") => println!("{} {why}", "skipped:".yellow().bold()),
            (Some(error), _) => println!("{} {error}", "error:".red().bold()),
            _ => {}
        }
        let Some(report) = &row.report else { continue };
        if report.passed {
            continue;
        }
        println!(
            "{} (details: notify check {}):",
            format!("case {} fails", row.chapter).red(),
            row.chapter
        );
        for v in report.verdicts.iter().filter(|v| !v.pass) {
            println!("  {}  {} ({})", "FAIL".red().bold(), v.property, v.evidence);
        }
    }
    let passing = summary
        .chapters
        .iter()
        .filter(|r| r.verdict == "pass")
        .count();
    let skipped = summary
        .chapters
        .iter()
        .filter(|r| r.verdict == "skipped")
        .count();
    let skipped = match skipped {
        0 => String::new(),
        n => format!(" ({n} skipped)"),
    };
    println!(
        "{passing} of {} chapters pass{skipped}; {:.1} s",
        summary.chapters.len(),
        summary.seconds
    );
}

/// `notify check N --show`: the chapter's versions, or one of them.
pub(super) fn show(root: &Path, chapter: &Chapter, which: &Which) -> Result<i32> {
    let version = match (which.solution, &which.variant) {
        (true, _) => catalogue::SOLUTION,
        (false, Some(name)) => name.as_str(),
        (false, None) => {
            println!(
                "{}",
                format!(
                    "Case {}'s versions under {}:",
                    chapter.number,
                    catalogue::folder(chapter)
                )
                .bold()
            );
            println!(
                "  {:<24} the reference solution (solution.rs)",
                catalogue::SOLUTION
            );
            for version in catalogue::patched(root, chapter)? {
                println!("  {:<24} {}", version.name, version.about);
            }
            println!(
                "\nGrade one with `notify check {n} --variant NAME`; see its patch with `notify check {n} --variant NAME --show`.",
                n = chapter.number
            );
            return Ok(EXIT_PASS);
        }
    };
    if version == catalogue::SOLUTION {
        print!("{}", catalogue::solution(root, chapter)?);
        return Ok(EXIT_PASS);
    }
    let patched = catalogue::find(root, chapter, version)?;
    println!("{}", patched.about.bold());
    let why = patched.why();
    if !why.is_empty() {
        println!("\n{why}");
    }
    println!();
    for line in patched.diff().lines() {
        let line = if line.starts_with("+++") || line.starts_with("---") {
            line.bold()
        } else if line.starts_with('+') {
            line.green()
        } else if line.starts_with('-') {
            line.red()
        } else if line.starts_with("@@") {
            line.cyan()
        } else {
            line.normal()
        };
        println!("{line}");
    }
    Ok(EXIT_PASS)
}
