//! `notify solution N`: the reference solution, as a diff against the
//! learner's file.

use std::path::Path;

use anyhow::Result;
use colored::Colorize;
use similar::{ChangeTag, TextDiff};

use super::ask::go_ahead;
use super::EXIT_PASS;
use crate::catalogue;
use crate::chapter::Chapter;
use crate::progress::{Progress, Status};

/// Prints how the reference solution differs from the learner's case file,
/// asking first (unless `yes`) when the case does not pass yet.
pub(super) fn solution(root: &Path, chapter: &Chapter, yes: bool) -> Result<i32> {
    let reference = catalogue::solution_file(chapter);
    // A case that passed once has earned its solution, whatever was
    // changed since (a `println!`, a reset).
    let progress = Progress::load(root);
    let earned = progress.status(root, chapter) == Status::Passing || progress.passed_once(chapter);
    if !earned && !yes {
        let question = format!(
            "Case {} does not pass yet, and `notify hint {}` may be all you need. Show the solution anyway? [y/N]",
            chapter.number, chapter.number
        );
        let no_terminal = format!(
            "error: case {} does not pass yet, and there is no terminal to ask whether to show its solution anyway.\nAdd --yes to see it.",
            chapter.number
        );
        if let Some(code) = go_ahead(&question, None, &no_terminal)? {
            return Ok(code);
        }
    }
    let theirs = catalogue::solution(root, chapter)?;
    // A missing case file diffs as empty: the whole solution is added.
    let yours = std::fs::read_to_string(root.join(chapter.case_file)).unwrap_or_default();
    if yours == theirs {
        println!(
            "{} is the reference solution, line for line.",
            chapter.case_file
        );
        return Ok(EXIT_PASS);
    }
    let diff = TextDiff::from_lines(&yours, &theirs);
    println!(
        "{}",
        format!("--- {} (yours)", chapter.case_file).red().bold()
    );
    println!(
        "{}",
        format!("+++ {reference} (the reference solution)")
            .green()
            .bold()
    );
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        println!("{}", hunk.header().to_string().cyan());
        for change in hunk.iter_changes() {
            let line = format!("{}{}", change.tag(), change.value());
            let line = line.strip_suffix('\n').unwrap_or(&line);
            match change.tag() {
                ChangeTag::Delete => println!("{}", line.red()),
                ChangeTag::Insert => println!("{}", line.green()),
                ChangeTag::Equal => println!("{line}"),
            }
            if change.missing_newline() {
                println!("\\ No newline at end of file");
            }
        }
    }
    println!(
        "\nThis is one way to make every property hold; any version `notify check {}` passes is right.",
        chapter.number
    );
    Ok(EXIT_PASS)
}
