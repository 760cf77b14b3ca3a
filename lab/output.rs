//! What a case process prints: the learner's own `println!`, `eprintln!`
//! and `dbg!`, kept so `run` and `check` can show it.
//!
//! The case process sends its standard output and standard error into one
//! file of the scenario's folder, `output.N` for process N, in the order
//! they were written, as a terminal would show them. Before each operation
//! the lab writes a marker naming it, so the parent can tell which
//! operation printed what. The lab's own messages go to the process's
//! original standard error, apart from the learner's.
//!
//! This module is the file's format, which both sides share; the case
//! process's side, that writes it, is [`crate::capture`].
//!
//! What is kept is capped: once a process has printed [`KEEP_BYTES`], its
//! output goes to the null device and the file says it was cut, so a print
//! loop can neither fill the temp folder nor cost more than printing to
//! nowhere does.

use std::path::Path;

use serde::Serialize;

/// The file, inside a scenario's folder, that holds process N's output: `output.N`.
pub const OUTPUT_FILE: &str = "output";
/// How many bytes of a process's output are kept at most.
pub const KEEP_BYTES: u64 = 32 * 1024;
/// How many lines of a process's output are kept at most: the last ones.
pub const KEEP_LINES: usize = 400;
/// How long a kept line may be, in characters.
const LINE_CHARS: usize = 240;

/// Starts a marker; a marker is `\0op\tsubject\0`, or [`CUT`].
pub(crate) const MARK: char = '\0';
/// The marker that says the output was cut.
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) const CUT: &str = "\0\u{1}cut\0";

/// One line a case process printed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Printed {
    /// The operation that printed it (`None` before the first one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Who that operation was about, if anyone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub text: String,
    /// Which call of the operation printed it, counting the process's
    /// calls from 1 (0 before the first one).
    #[serde(skip)]
    pub call: usize,
}

/// What one case process printed, as kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Output {
    /// The process, as numbered in its scenario.
    pub process: u32,
    /// The last [`KEEP_LINES`] lines it printed, in order.
    pub lines: Vec<Printed>,
    /// Lines before those, not kept.
    pub dropped: usize,
    /// True when the process printed more than [`KEEP_BYTES`]: what came
    /// after was not kept.
    pub cut: bool,
}

impl Output {
    /// Reads what process `process` of the scenario in `dir` printed;
    /// `None` when it printed nothing.
    pub fn read(dir: &Path, process: u32) -> Option<Output> {
        let bytes = std::fs::read(file(dir, process)).ok()?;
        let output = parse(&String::from_utf8_lossy(&bytes), process);
        (!output.lines.is_empty() || output.cut).then_some(output)
    }

    /// How much was left out, in words, e.g. "output cut after 32 KB".
    pub fn cut_note(&self) -> Option<String> {
        self.cut.then(|| {
            format!(
                "output cut after {} KB: the rest was not kept",
                KEEP_BYTES / 1024
            )
        })
    }
}

/// The output file of process `process` in `dir`.
pub fn file(dir: &Path, process: u32) -> std::path::PathBuf {
    dir.join(format!("{OUTPUT_FILE}.{process}"))
}

fn parse(text: &str, process: u32) -> Output {
    let mut out = Output {
        process,
        ..Output::default()
    };
    let (mut op, mut subject): (Option<String>, Option<String>) = (None, None);
    let mut line = String::new();
    // Lines printed since the last marker, which an end marker may claim.
    let mut pending = 0;
    let mut call = 0;
    let keep = |out: &mut Output,
                line: &mut String,
                op: &Option<String>,
                subject: &Option<String>,
                call: usize| {
        let text: String = if line.chars().count() > LINE_CHARS {
            let mut cut: String = line.chars().take(LINE_CHARS).collect();
            cut.push('…');
            cut
        } else {
            line.clone()
        };
        out.lines.push(Printed {
            op: op.clone(),
            subject: subject.clone(),
            text: text.trim_end_matches('\r').to_string(),
            call,
        });
        line.clear();
    };
    let mut in_mark = false;
    for part in text.split(MARK) {
        if in_mark {
            in_mark = false;
            if part == "\u{1}cut" {
                out.cut = true;
                continue;
            }
            // A partial line ends where an operation begins or ends.
            if !line.is_empty() {
                keep(&mut out, &mut line, &op, &subject, call);
            }
            let (ended, part) = match part.strip_prefix('/') {
                Some(rest) => (true, rest),
                None => (false, part),
            };
            let (o, s) = part.split_once('\t').unwrap_or((part, ""));
            let o = (!o.is_empty()).then(|| o.to_string());
            let s = (!s.is_empty()).then(|| s.to_string());
            call += 1;
            if ended {
                // What was printed since the last marker came from `o`.
                for printed in &mut out.lines[pending..] {
                    printed.op = o.clone();
                    printed.subject = s.clone();
                    printed.call = call;
                }
                call += 1;
            } else {
                op = o;
                subject = s;
            }
            pending = out.lines.len();
            continue;
        }
        let mut rest = part;
        while let Some((head, tail)) = rest.split_once('\n') {
            line.push_str(head);
            keep(&mut out, &mut line, &op, &subject, call);
            rest = tail;
        }
        line.push_str(rest);
        in_mark = true;
    }
    if !line.is_empty() {
        keep(&mut out, &mut line, &op, &subject, call);
    }
    if out.lines.len() > KEEP_LINES {
        out.dropped = out.lines.len() - KEEP_LINES;
        out.lines.drain(..out.dropped);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_name_the_operation_of_each_line() {
        let text = "boot\n\0invite\tdana@example.com\0one\ntw\0relay\t\0o\nthree\n\0@run\t\0tick\n\0/sweep\t\0late\n\0\u{1}cut\0";
        let out = parse(text, 1);
        let lines: Vec<(Option<&str>, &str)> = out
            .lines
            .iter()
            .map(|l| (l.op.as_deref(), l.text.as_str()))
            .collect();
        assert_eq!(
            lines,
            vec![
                (None, "boot"),
                (Some("invite"), "one"),
                (Some("invite"), "tw"),
                (Some("relay"), "o"),
                (Some("relay"), "three"),
                (Some("sweep"), "tick"),
                (Some("@run"), "late"),
            ]
        );
        assert!(out.cut);
    }
}
