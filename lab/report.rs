//! Verdicts: what a check decided, with its evidence, for people and for JSON.

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

impl CheckReport {
    /// The report as the terminal shows it.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{}\n",
            format!("case {:02}: {} ({})", self.chapter, self.title, self.file).bold()
        );
        for v in &self.verdicts {
            let mark = if v.pass {
                "PASS".green().bold()
            } else {
                "FAIL".red().bold()
            };
            out.push_str(&format!("  {mark}  {} ({})\n", v.property, v.evidence));
            if let Some(scenario) = &v.scenario {
                out.push_str(&format!("        {}\n", scenario.yellow()));
            }
            for line in &v.details {
                out.push_str(&format!("        {line}\n"));
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
                out.push_str(&timeline::render(&events).dimmed().to_string());
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
