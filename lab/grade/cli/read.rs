//! `notify read N`: a chapter's text in the terminal.
//!
//! On a terminal the Markdown is rendered (headings, emphasis, code blocks,
//! tables) and paged through `$PAGER`, or `less -R`. Anywhere else (a pipe,
//! a file) the Markdown is printed as it is, which reads fine as plain text.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use termimad::MadSkin;

use super::EXIT_PASS;
use crate::chapter::Chapter;

/// Prints `chapter`'s text.
pub(super) fn read(root: &Path, chapter: &Chapter) -> Result<i32> {
    let path = root.join(chapter.text_file);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("could not read the chapter's text {}", path.display()))?;
    if !std::io::stdout().is_terminal() {
        print!("{text}");
        return Ok(EXIT_PASS);
    }
    let rendered = render(&text);
    if page(&rendered).is_err() {
        // No pager to be had: the terminal's own scrollback will do.
        print!("{rendered}");
    }
    Ok(EXIT_PASS)
}

/// The Markdown `text` rendered for a terminal as wide as this one (capped
/// so lines stay readable), in colour unless NO_COLOR is set.
fn render(text: &str) -> String {
    let skin = if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
        MadSkin::no_style()
    } else {
        MadSkin::default()
    };
    let width = crossterm::terminal::size().map_or(80, |(w, _)| usize::from(w));
    skin.text(text, Some(width.clamp(40, 100))).to_string()
}

/// Shows `text` through the learner's pager.
fn page(text: &str) -> Result<()> {
    let pager = std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "less -R".to_string());
    let mut words = pager.split_whitespace();
    let program = words.next().context("PAGER is empty")?;
    let mut command = Command::new(program);
    command.args(words).stdin(Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        // Like git: keep colours, and quit at once when the text fits a screen.
        command.env("LESS", "FRX");
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("could not start the pager {pager:?}"))?;
    let mut stdin = child.stdin.take().context("the pager has no input")?;
    // A pager quit early closes its input: that is not an error.
    let _ = stdin.write_all(text.as_bytes());
    drop(stdin);
    child.wait().context("could not wait for the pager")?;
    Ok(())
}
