//! Asking the learner before doing something they may regret.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{Context, Result};

use super::{EXIT_ERROR, EXIT_PASS};

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

/// Asks `question` before doing something: `None` to go ahead, else the
/// exit code to end with. A no prints `declined` (when there is one) and
/// ends with 0; with nobody to ask, `no_terminal` goes to standard error
/// and it ends with 2.
pub(super) fn go_ahead(
    question: &str,
    declined: Option<&str>,
    no_terminal: &str,
) -> Result<Option<i32>> {
    Ok(match confirm(question)? {
        Answer::Yes => None,
        Answer::No => {
            if let Some(declined) = declined {
                println!("{declined}");
            }
            Some(EXIT_PASS)
        }
        Answer::NobodyToAsk => {
            eprintln!("{no_terminal}");
            Some(EXIT_ERROR)
        }
    })
}
