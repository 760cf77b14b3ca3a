//! `notify list`: every chapter, where the learner stands, and what is next.

use std::path::Path;

use colored::Colorize;

use crate::chapter::Chapter;
use crate::progress::{Progress, Status};

/// Prints the chapters with their status and the next thing to do.
pub(super) fn list(root: &Path, chapters: &[Chapter]) {
    let progress = Progress::load(root);
    if progress.unreadable() {
        println!(
            "note: the progress file .notify/state.json could not be read, so passing chapters show as in progress.\n      `notify check --all` checks them again and rebuilds it.\n"
        );
    }
    // Columns as wide as their longest entry, so a long title never runs
    // into the case file.
    let title_width = chapters.iter().map(|c| c.title.len()).max().unwrap_or(0);
    let file_width = chapters
        .iter()
        .map(|c| c.case_file.len())
        .max()
        .unwrap_or(0);
    println!(
        "{}",
        format!(
            "  #  {:<title_width$}  {:<file_width$}  status",
            "chapter", "case file"
        )
        .bold()
    );
    for chapter in chapters {
        let status = progress.status(root, chapter);
        let label = match status {
            Status::NotStarted => status.label().normal(),
            Status::InProgress => status.label().yellow(),
            Status::Passing => status.label().green(),
        };
        // A chapter done once and reset is not a chapter never done.
        let label = if status != Status::Passing && progress.passed_once(chapter) {
            format!("{} · {label}", "passed before".green())
        } else {
            label.to_string()
        };
        println!(
            "{:>3}  {:<title_width$}  {:<file_width$}  {label}",
            chapter.number, chapter.title, chapter.case_file
        );
    }
    match progress.next(root, chapters) {
        Some(next) => match progress.status(root, next) {
            Status::NotStarted => println!("\nnext: notify run {}", next.number),
            _ => println!(
                "\nnext: notify watch {} (re-checks {} on every save)",
                next.number, next.case_file
            ),
        },
        None => println!("\nevery chapter passes."),
    }
}
