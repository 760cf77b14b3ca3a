//! Asking the learner before doing something they may regret.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{Context, Result};

/// What the learner said.
#[derive(PartialEq, Eq)]
pub(super) enum Answer {
    Yes,
    No,
    /// Standard input is not a terminal, so nobody could be asked.
    NobodyToAsk,
}

/// Asks `question` (which should end in "[y/N]") on the terminal; only an
/// explicit yes counts as yes.
pub(super) fn confirm(question: &str) -> Result<Answer> {
    if !std::io::stdin().is_terminal() {
        return Ok(Answer::NobodyToAsk);
    }
    print!("{question} ");
    std::io::stdout()
        .flush()
        .context("could not write to the terminal")?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("could not read the answer from the terminal")?;
    let answer = line.trim().to_lowercase();
    Ok(if answer == "y" || answer == "yes" {
        Answer::Yes
    } else {
        Answer::No
    })
}
