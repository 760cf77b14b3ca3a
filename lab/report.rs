//! Verdicts: what a check decided, with its evidence, for people and for JSON.

use std::io::IsTerminal;

use colored::Colorize;
use serde::Serialize;

use crate::timeline;
use crate::world::Event;

/// One property of a chapter, judged over every scenario the check played.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// The property, in the chapter's words.
    pub property: String,
    pub pass: bool,
    /// The figure behind the verdict, e.g. "2 sent".
    pub evidence: String,
    /// For a failure: the smallest scenario that shows it, and what the world saw.
    pub scenario: Option<String>,
    /// For a failure: one line per person the failure touched.
    pub details: Vec<String>,
    /// For a failure in a random batch: the seed that replays it.
    pub seed: Option<u64>,
    /// For a failure caused by a fault: the scenario's events, for the timeline.
    pub timeline: Vec<Event>,
    /// Whose events the timeline follows.
    #[serde(skip)]
    pub focus: Option<String>,
    /// For a property judged over generated scenarios: what they covered,
    /// e.g. "4 generated scenarios, under 18 crash points and 3 failing
    /// commits", for the line under a check that passes.
    #[serde(skip)]
    pub explored: Option<String>,
}

impl Verdict {
    /// A property that held.
    pub fn pass(property: &str, evidence: String) -> Verdict {
        Verdict {
            property: property.to_string(),
            pass: true,
            evidence,
            scenario: None,
            details: Vec::new(),
            seed: None,
            timeline: Vec::new(),
            focus: None,
            explored: None,
        }
    }

    /// A property that failed in `scenario`.
    pub fn fail(
        property: &str,
        evidence: String,
        scenario: String,
        details: Vec<String>,
    ) -> Verdict {
        Verdict {
            pass: false,
            scenario: Some(scenario),
            details,
            ..Verdict::pass(property, evidence)
        }
    }
}

/// The result of `notify check N`.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    pub chapter: u32,
    pub title: String,
    /// The binary that was graded, e.g. `case01` or `case01-solution`.
    pub case: String,
    /// The source file that was graded.
    pub file: String,
    pub passed: bool,
    pub verdicts: Vec<Verdict>,
    /// How many case processes were started.
    pub processes: usize,
    pub seconds: f64,
    /// The compiler's warnings about the learner's case, as cargo renders
    /// them ("" when none): shown on standard error, beside the report.
    #[serde(skip)]
    pub warnings: String,
}

/// How wide the output is: `COLUMNS` when it is set, else the terminal's
/// width when standard output is one; `None` when piped (then a timeline
/// takes [`timeline::WIDEST`] columns and long lines are not wrapped).
pub fn columns() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
    {
        return Some(columns);
    }
    if std::io::stdout().is_terminal() {
        return crossterm::terminal::size()
            .ok()
            .map(|(w, _)| usize::from(w))
            .filter(|&w| w > 0);
    }
    None
}

/// `text` after `first` (the first line's indent, `head` columns wide
/// whatever colour codes it holds), wrapped to `columns` with later lines
/// indented by `later` spaces; as it is when the width is unknown. `paint`
/// colours each line's text.
pub fn lines(
    first: &str,
    head: usize,
    text: &str,
    later: usize,
    columns: Option<usize>,
    paint: impl Fn(&str) -> String,
) -> String {
    let Some(columns) = columns else {
        return format!("{first}{}\n", paint(text));
    };
    // A line never reaches the last column, where terminals wrap.
    let last = columns.max(timeline::NARROWEST) - 1;
    let mut out = String::new();
    for (i, line) in timeline::wrap_to(text, last - head, last - later)
        .iter()
        .enumerate()
    {
        let indent = if i == 0 {
            first.to_string()
        } else {
            " ".repeat(later)
        };
        out.push_str(&format!("{indent}{}\n", paint(line)));
    }
    out
}

impl CheckReport {
    /// For a check where every property held, what it proved, e.g. "all 8
    /// properties hold on the chapter's scenarios and on 4 generated
    /// scenarios, under 18 crash points and 3 failing commits"; `None`
    /// when a property failed.
    pub fn proven(&self) -> Option<String> {
        if !self.passed || self.verdicts.is_empty() {
            return None;
        }
        let count = self.verdicts.len();
        let all = if count == 1 {
            "its one property holds".to_string()
        } else {
            format!("all {count} properties hold")
        };
        Some(
            match self.verdicts.iter().find_map(|v| v.explored.as_deref()) {
                Some(explored) => {
                    format!("{all} on the chapter's own scenarios and on {explored}")
                }
                None => format!("{all} on the chapter's scenarios"),
            },
        )
    }

    /// The report as the terminal shows it, fitted to its width.
    pub fn render(&self) -> String {
        self.render_for(columns())
    }

    /// The report for output `columns` wide (`None`: as wide as it comes).
    pub fn render_for(&self, columns: Option<usize>) -> String {
        let mut out = format!(
            "{}\n",
            format!("case {:02}: {} ({})", self.chapter, self.title, self.file).bold()
        );
        let plain = |text: &str| text.to_string();
        for v in &self.verdicts {
            let mark = if v.pass {
                "PASS".green().bold()
            } else {
                "FAIL".red().bold()
            };
            let verdict = format!("{} ({})", v.property, v.evidence);
            out.push_str(&lines(
                &format!("  {mark}  "),
                8,
                &verdict,
                8,
                columns,
                plain,
            ));
            if let Some(scenario) = &v.scenario {
                out.push_str(&lines("        ", 8, scenario, 10, columns, |t| {
                    t.yellow().to_string()
                }));
            }
            for line in &v.details {
                out.push_str(&lines("        ", 8, line, 10, columns, plain));
            }
            if let Some(seed) = v.seed {
                out.push_str(&format!(
                    "        replay it: notify check {} --seed {seed}\n",
                    self.chapter
                ));
            }
            if !v.timeline.is_empty() {
                out.push('\n');
                let events = timeline::focus(&v.timeline, v.focus.as_deref());
                let width = columns.unwrap_or(timeline::WIDEST);
                out.push_str(&timeline::render(&events, width));
                out.push('\n');
            }
        }
        let held = self.verdicts.iter().filter(|v| v.pass).count();
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
        out.push_str(&format!(
            "{} of {} properties hold; {} case processes in {:.1} s\n",
            held,
            self.verdicts.len(),
            self.processes,
            self.seconds
        ));
        out
    }
}
