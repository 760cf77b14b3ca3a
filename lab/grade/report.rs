//! Verdicts: what a check decided, with its evidence, for people and for JSON.

use std::io::IsTerminal;

use colored::Colorize;
use serde::Serialize;

use crate::explore::Reached;
use crate::output::Output;
use crate::runner::{Exit, Incident, ENDED_EARLY, HUNG};
use crate::timeline;
use crate::world::{Event, Kind};

/// How many lines of the case's output a report shows under a timeline,
/// unless asked for all of them.
pub const OUTPUT_LINES: usize = 30;

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
    /// For a failure: every event of its scenario, for `--html`'s picture,
    /// when the timeline does not hold them all (a failure the terminal
    /// tells without a timeline).
    #[serde(skip)]
    pub story: Vec<Event>,
    /// For a property judged over generated scenarios: what they covered,
    /// e.g. "4 generated scenarios, under 18 crash points and 3 failing
    /// commits", for the line under a check that passes.
    #[serde(skip)]
    pub explored: Option<String>,
}

/// The first failure of a property among a chapter's own scenarios, in
/// the order they were played: what its verdict says.
#[derive(Clone, Debug, Default)]
pub struct Finding {
    pub evidence: String,
    /// The scenario it happened in, as the report names it.
    pub scenario: String,
    pub details: Vec<String>,
    /// The seed of a generated scenario, for `--seed`.
    pub seed: Option<u64>,
    /// The scenario's events, for the timeline (empty when none).
    pub timeline: Vec<Event>,
    /// Whose events the timeline follows.
    pub focus: Option<String>,
    /// Every event of the scenario, when `timeline` is empty or cut down.
    pub story: Vec<Event>,
}

impl Finding {
    /// A scenario the case did not finish (it hung, panicked, or stopped
    /// where no fault was planned): `scenario` names it and says what
    /// happened.
    pub fn unfinished(scenario: String, seed: Option<u64>) -> Finding {
        Finding {
            evidence: "the case did not finish".to_string(),
            scenario,
            seed,
            ..Default::default()
        }
    }
}

/// The first of `played` whose `judge` finds something, with how many
/// things it found over all of them (`"{total} {what}"`), and that total;
/// a scenario the case did not finish (`trouble` says how) is the finding
/// as soon as it comes. `named` gives a scenario's name and seed.
pub fn first_found<P>(
    played: &[P],
    trouble: impl Fn(&P) -> Option<String>,
    named: impl Fn(&P) -> (String, Option<u64>),
    story: impl Fn(&P) -> &[Event],
    judge: impl Fn(&P) -> Vec<String>,
    what: &str,
) -> (usize, Option<Finding>) {
    let mut total = 0;
    let mut found = None;
    // Where the others were found, so the total is accounted for.
    let mut elsewhere: Vec<(String, usize)> = Vec::new();
    for p in played {
        if let Some(trouble) = trouble(p) {
            let (name, seed) = named(p);
            let mut finding = Finding::unfinished(format!("{name}: {trouble}"), seed);
            finding.story = story(p).to_vec();
            return (total, Some(finding));
        }
        let lines = judge(p);
        total += lines.len();
        if found.is_none() && !lines.is_empty() {
            found = Some((p, lines));
        } else if !lines.is_empty() {
            elsewhere.push((named(p).0, lines.len()));
        }
    }
    let finding = found.map(|(p, lines)| {
        let (name, seed) = named(p);
        let here = lines.len();
        let mut details: Vec<String> = lines.into_iter().take(SHOWN).collect();
        if here > SHOWN {
            details.push(format!("and {} more in this scenario.", here - SHOWN));
        }
        if !elsewhere.is_empty() {
            let places: Vec<String> = elsewhere
                .iter()
                .map(|(name, n)| format!("{name} ({n})"))
                .collect();
            details.push(format!(
                "{} more elsewhere: {}.",
                total - here,
                places.join("; ")
            ));
        }
        Finding {
            evidence: format!("{total} {what}"),
            scenario: format!("{name}:"),
            details,
            seed,
            story: story(p).to_vec(),
            ..Default::default()
        }
    });
    (total, finding)
}

/// How many of one scenario's findings a report lists.
const SHOWN: usize = 6;

/// `n` things, in the singular for one: "1 push", "3 pushes", "2 retries".
pub fn counted(n: usize, thing: &str) -> String {
    let consonant_y =
        thing.ends_with('y') && !thing[..thing.len() - 1].ends_with(['a', 'e', 'i', 'o', 'u']);
    match n {
        1 => format!("1 {thing}"),
        _ if consonant_y => format!("{n} {}ies", &thing[..thing.len() - 1]),
        _ if ["s", "sh", "ch", "x"]
            .iter()
            .any(|end| thing.ends_with(end)) =>
        {
            format!("{n} {thing}es")
        }
        _ => format!("{n} {thing}s"),
    }
}

/// The verdict on `property`: it held, with `pass_evidence`, unless a
/// scenario found it broken.
pub fn judge(property: &str, pass_evidence: String, finding: Option<Finding>) -> Verdict {
    let Some(f) = finding else {
        return Verdict::pass(property, pass_evidence);
    };
    let mut verdict = Verdict::fail(property, f.evidence, f.scenario, f.details);
    verdict.seed = f.seed;
    verdict.timeline = f.timeline;
    verdict.focus = f.focus;
    verdict.story = f.story;
    verdict
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
            story: Vec::new(),
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
    /// The flags that pick the graded version again (" --variant NAME"),
    /// for the lines that say how to replay a finding.
    #[serde(skip)]
    pub version_flags: String,
    pub passed: bool,
    pub verdicts: Vec<Verdict>,
    /// How many case processes were started.
    pub processes: usize,
    pub seconds: f64,
    /// The compiler's warnings about the learner's case, as cargo renders
    /// them ("" when none): shown on standard error, beside the report.
    #[serde(skip)]
    pub warnings: String,
    /// A process that hung or ended before its plan was done: the finding
    /// that comes before every property, since nothing after it could be
    /// judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Box<Incident>>,
    /// Show every line the case printed, not only the last ones.
    #[serde(skip)]
    pub show_output: bool,
    /// With `--coverage`: for each situation the chapter's rules turn on,
    /// how many generated worlds of the budget reached it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Vec<Reached>>,
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
        self.render_as(columns, false)
    }

    /// The report for a screen: the first failure in full, each other
    /// property on one line (`watch`, whose `f` key shows it all).
    pub fn render_brief(&self, columns: Option<usize>) -> String {
        self.render_as(columns, true)
    }

    /// How many failed properties a brief report shows on one line only.
    pub fn folded(&self) -> usize {
        let failed = self.verdicts.iter().filter(|v| !v.pass).count();
        match self.stopped {
            Some(_) => failed,
            None => failed.saturating_sub(1),
        }
    }

    fn render_as(&self, columns: Option<usize>, brief: bool) -> String {
        let mut out = format!(
            "{}\n",
            format!("case {:02}: {} ({})", self.chapter, self.title, self.file).bold()
        );
        let plain = |text: &str| text.to_string();
        if let Some(stopped) = &self.stopped {
            out.push_str(&self.render_stopped(stopped));
        }
        let mut unjudged = 0;
        // A brief report shows one failure in full: the first, unless a
        // stopped process was shown above.
        let mut shown_in_full = self.stopped.is_some();
        // Two properties failing in the same scenario share its timeline.
        let mut drawn: Vec<&str> = Vec::new();
        for v in &self.verdicts {
            if !v.pass && self.stopped.as_deref().is_some_and(|s| stopped_by_it(v, s)) {
                unjudged += 1;
                continue;
            }
            let mark = if v.pass {
                "PASS".green().bold()
            } else {
                "FAIL".red().bold()
            };
            let verdict = format!("{} ({})", v.property, v.evidence);
            if brief && (v.pass || shown_in_full) {
                out.push_str(&format!("  {mark}  {}\n", cut(&verdict, columns, 8)));
                continue;
            }
            shown_in_full |= !v.pass;
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
                    "        replay it: notify check {}{} --seed {seed}\n",
                    self.chapter, self.version_flags
                ));
            }
            let scenario = v.scenario.as_deref().unwrap_or_default();
            if !v.timeline.is_empty() && drawn.contains(&scenario) {
                out.push_str("        (its timeline is the one above)\n");
            } else if !v.timeline.is_empty() {
                drawn.push(scenario);
                out.push('\n');
                let events = timeline::focus(&v.timeline, v.focus.as_deref(), &v.details);
                let width = columns.unwrap_or(timeline::WIDEST);
                out.push_str(&timeline::render(&events, width));
                out.push_str(&self.printed(&v.timeline));
                out.push('\n');
            }
        }
        if unjudged > 0 {
            let why = match self.stopped.as_deref().map(|s| &s.exit) {
                Some(Exit::Panicked(_)) => "each met the panic above",
                _ => "each needs the case to play its plan to the end",
            };
            out.push_str(&format!(
                "  {}  {unjudged} of {} properties: {why}\n",
                "NOT JUDGED".red().bold(),
                self.verdicts.len()
            ));
        }
        let held = self.verdicts.iter().filter(|v| v.pass).count();
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
        out.push_str(&format!(
            "{} of {} properties hold; {} in {:.1} s\n",
            held,
            self.verdicts.len(),
            counted(self.processes, "case process"),
            self.seconds
        ));
        if let Some(coverage) = &self.coverage {
            out.push_str(&render_coverage(coverage));
        }
        out
    }

    /// The finding of a process that hung or ended early, with the timeline
    /// up to that point and what the process printed.
    fn render_stopped(&self, stopped: &Incident) -> String {
        let (mark, headline, last) = match &stopped.exit {
            Exit::TimedOut { ms, doing } => (
                "HANG",
                format!(
                    "{doing} did not finish within {:.1} s: the case hangs there",
                    *ms as f64 / 1000.0
                ),
                format!(
                    "⏳ {doing}: still running after {:.1} s; stopped",
                    *ms as f64 / 1000.0
                ),
            ),
            Exit::EndedEarly { code, doing } => (
                "EXIT",
                format!("the case exited (code {code}) during {doing}, before its plan was done"),
                format!("✖ exit({code}) during {doing}: the rest of the plan never ran"),
            ),
            Exit::Panicked(message) => (
                "PANIC",
                format!("the case panicked during {}: {message}", stopped.doing),
                // The timeline's last event already says it.
                String::new(),
            ),
            other => ("STOP", other.describe(), other.describe()),
        };
        let hint = match stopped.exit {
            Exit::TimedOut { .. } => "look for a loop that never ends, or a wait nothing ends; a longer --timeout helps only a slow machine",
            Exit::Panicked(_) => "where the lab can make a call fail (a commit, a send), return the error with `?` instead of unwrapping it; anything else that panics is a bug at that line",
            _ => "a case never ends its own process: return from the operation (an error is fine) and the lab carries on",
        };
        let mut out = format!("  {}  {headline}\n", mark.red().bold());
        out.push_str(&format!("        {hint}\n"));
        out.push_str(&format!(
            "        {}\n",
            format!(
                "process {} of the scenario, as it went until then:",
                stopped.process
            )
            .yellow()
        ));
        out.push('\n');
        let events = timeline::focus(&stopped.timeline, None, &[]);
        let width = columns().unwrap_or(timeline::WIDEST);
        out.push_str(&timeline::render(&events, width));
        if !last.is_empty() {
            out.push_str(&format!("        {last}\n"));
        }
        out.push_str(&self.printed(&stopped.timeline));
        out.push('\n');
        out
    }

    /// What the case printed in a reported scenario, under its timeline
    /// (each process's output rides on its start event): the last
    /// [`OUTPUT_LINES`] lines unless `show_output`.
    fn printed(&self, timeline: &[Event]) -> String {
        let outputs: Vec<&Output> = timeline
            .iter()
            .filter(|e| e.kind == Kind::Start)
            .filter_map(|e| e.output.as_ref())
            .collect();
        let limit = (!self.show_output).then_some(OUTPUT_LINES);
        let more = format!(
            "`notify check {}{} --show-output` shows all",
            self.chapter, self.version_flags
        );
        printed(&outputs, limit, &more, 8)
    }
}

/// What case processes printed, grouped by process and operation, indented
/// by `indent`: the last `limit` lines (all with `None`), with `more` saying
/// how to see the rest.
pub fn printed(outputs: &[&Output], limit: Option<usize>, more: &str, indent: usize) -> String {
    let total: usize = outputs.iter().map(|o| o.lines.len()).sum();
    if total == 0 && !outputs.iter().any(|o| o.cut) {
        return String::new();
    }
    let pad = " ".repeat(indent);
    let skip = limit.map_or(0, |n| total.saturating_sub(n));
    let mut out = format!("\n{pad}{}\n", "what the case printed:".bold());
    let dropped: usize = outputs.iter().map(|o| o.dropped).sum();
    if skip + dropped > 0 {
        let how = if skip > 0 {
            format!("; {more}")
        } else {
            String::new()
        };
        out.push_str(&format!(
            "{pad}  {}\n",
            format!("({} earlier lines not shown{how})", skip + dropped).dimmed()
        ));
    }
    let mut seen = 0;
    for output in outputs {
        let mut heading = None;
        // A line repeated straight after itself (a warning every tick) is
        // shown once, with how many times it came.
        let mut repeated: Option<(&str, usize)> = None;
        let flush = |out: &mut String, repeated: &mut Option<(&str, usize)>| {
            if let Some((text, n)) = repeated.take() {
                let times = if n > 1 {
                    format!(" {}", format!("({n} times)").dimmed())
                } else {
                    String::new()
                };
                out.push_str(&format!("{pad}    {text}{times}\n"));
            }
        };
        for line in &output.lines {
            seen += 1;
            if seen <= skip {
                continue;
            }
            let here = (line.op.as_deref(), line.subject.as_deref());
            if heading != Some(here) {
                flush(&mut out, &mut repeated);
                out.push_str(&format!(
                    "{pad}  {}\n",
                    format!("process {}, {}:", output.process, operation(here.0, here.1)).dimmed()
                ));
                heading = Some(here);
            }
            match &mut repeated {
                Some((text, n)) if *text == line.text => *n += 1,
                _ => {
                    flush(&mut out, &mut repeated);
                    repeated = Some((&line.text, 1));
                }
            }
        }
        flush(&mut out, &mut repeated);
        if let Some(note) = output.cut_note() {
            out.push_str(&format!(
                "{pad}  {}\n",
                format!("process {}: {note}", output.process).yellow()
            ));
        }
    }
    out
}

/// An operation as a heading of its output: "invite dana", "start-up".
pub fn operation(op: Option<&str>, subject: Option<&str>) -> String {
    match (op, subject) {
        (None, _) => "start-up".to_string(),
        (Some(crate::serve::RUN), _) => "its schedule".to_string(),
        (Some(op), Some(who)) => format!("{op} {}", who.split('@').next().unwrap_or(who)),
        (Some(op), None) => op.to_string(),
    }
}

/// `text` on one line of output `columns` wide after an indent of
/// `indent`, cut with an ellipsis where it would wrap.
fn cut(text: &str, columns: Option<usize>, indent: usize) -> String {
    let Some(columns) = columns else {
        return text.to_string();
    };
    let room = columns.max(timeline::NARROWEST) - 1 - indent;
    match text.char_indices().nth(room) {
        Some(_) => {
            let end = text
                .char_indices()
                .nth(room - 1)
                .map_or(text.len(), |(i, _)| i);
            format!("{}…", &text[..end])
        }
        None => text.to_string(),
    }
}

/// True when a failed verdict says only that the case hung or ended early,
/// or met the panic `stopped` reports.
fn stopped_by_it(v: &Verdict, stopped: &Incident) -> bool {
    let said = |t: &str| match &stopped.exit {
        Exit::Panicked(_) => t.contains(&stopped.exit.describe()),
        _ => t.contains(HUNG) || t.contains(ENDED_EARLY),
    };
    said(&v.evidence)
        || v.scenario.as_deref().is_some_and(said)
        || v.details.iter().any(|d| said(d))
}

/// The `--coverage` table: one row per situation the chapter's rules turn
/// on, with the number of generated worlds that reached it.
fn render_coverage(coverage: &[Reached]) -> String {
    if coverage.is_empty() {
        return "\ncoverage: this chapter declares no situations for its generated worlds\n"
            .to_string();
    }
    let mut out =
        "\ncoverage: generated worlds that reach each situation the rules turn on\n".to_string();
    for reached in coverage {
        let worlds = match reached.worlds {
            0 => "none".red().bold().to_string(),
            n => n.to_string(),
        };
        out.push_str(&format!("  {worlds:>6}  {}\n", reached.rule));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn counts_read_in_the_singular_for_one_and_in_the_right_plural() {
        assert_eq!(counted(1, "scenario"), "1 scenario");
        assert_eq!(counted(0, "scenario"), "0 scenarios");
        assert_eq!(counted(1, "push"), "1 push");
        assert_eq!(counted(3, "push"), "3 pushes");
        assert_eq!(counted(2, "random batch"), "2 random batches");
        assert_eq!(counted(2, "retry"), "2 retries");
        assert_eq!(counted(2, "delay"), "2 delays");
        assert_eq!(counted(5, "case process"), "5 case processes");
    }
}
