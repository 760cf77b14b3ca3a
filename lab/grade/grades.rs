//! Grades a class can use: a check's verdicts as JUnit XML (one
//! `testsuite` per chapter, one `testcase` per property) and as
//! Gradescope's `results.json` (one test per property, a point each).

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::report::{CheckReport, Verdict};

/// One chapter as graded: its report, or why there is none.
pub struct Graded<'a> {
    pub chapter: u32,
    pub title: &'a str,
    pub file: &'a str,
    pub outcome: Outcome<'a>,
}

pub enum Outcome<'a> {
    Checked(&'a CheckReport),
    /// The case could not be built or checked: the reason.
    Error(&'a str),
    /// The chapter was left out (it needs a server nobody started).
    Skipped(&'a str),
}

impl Graded<'_> {
    fn suite(&self) -> String {
        format!("case {:02}: {}", self.chapter, self.title)
    }
}

/// What a failed property says beyond its evidence: the scenario, what
/// the world saw, and how to replay it, as the terminal report has them.
fn story(chapter: u32, flags: &str, v: &Verdict) -> String {
    let mut lines: Vec<String> = v.scenario.iter().cloned().collect();
    lines.extend(v.details.iter().cloned());
    if let Some(seed) = v.seed {
        lines.push(format!(
            "replay it: notify check {chapter}{flags} --seed {seed}"
        ));
    }
    lines.join("\n")
}

/// The verdicts as JUnit XML.
pub fn junit(graded: &[Graded]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let count = |f: &dyn Fn(&Graded) -> usize| graded.iter().map(f).sum::<usize>();
    let tests = count(&|g| match g.outcome {
        Outcome::Checked(r) => r.verdicts.len(),
        _ => 1,
    });
    let failures = count(&|g| match g.outcome {
        Outcome::Checked(r) => r.verdicts.iter().filter(|v| !v.pass).count(),
        _ => 0,
    });
    let errors = count(&|g| usize::from(matches!(g.outcome, Outcome::Error(_))));
    out.push_str(&format!(
        "<testsuites name=\"notify\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n"
    ));
    for g in graded {
        let class = format!("chapter{:02}", g.chapter);
        match &g.outcome {
            Outcome::Checked(report) => {
                let failed = report.verdicts.iter().filter(|v| !v.pass).count();
                out.push_str(&format!(
                    "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"0\" time=\"{:.3}\">\n",
                    xml(&g.suite()),
                    report.verdicts.len(),
                    report.seconds
                ));
                out.push_str(&format!(
                    "    <properties><property name=\"file\" value=\"{}\"/></properties>\n",
                    xml(g.file)
                ));
                for v in &report.verdicts {
                    out.push_str(&format!(
                        "    <testcase classname=\"{class}\" name=\"{}\"",
                        xml(&v.property)
                    ));
                    if v.pass {
                        out.push_str(&format!(
                            "><system-out>{}</system-out></testcase>\n",
                            body(&v.evidence)
                        ));
                    } else {
                        out.push_str(&format!(
                            ">\n      <failure message=\"{}\" type=\"property\">{}</failure>\n    </testcase>\n",
                            xml(&v.evidence),
                            body(&story(g.chapter, &report.version_flags, v))
                        ));
                    }
                }
            }
            Outcome::Error(why) | Outcome::Skipped(why) => {
                let skipped = matches!(g.outcome, Outcome::Skipped(_));
                out.push_str(&format!(
                    "  <testsuite name=\"{}\" tests=\"1\" failures=\"0\" errors=\"{}\" skipped=\"{}\" time=\"0\">\n",
                    xml(&g.suite()),
                    usize::from(!skipped),
                    usize::from(skipped)
                ));
                let inner = match skipped {
                    true => format!("<skipped message=\"{}\"/>", xml(why)),
                    false => format!("<error message=\"{}\" type=\"build\"/>", xml(why)),
                };
                out.push_str(&format!(
                    "    <testcase classname=\"{class}\" name=\"the case builds and runs\">{inner}</testcase>\n"
                ));
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// `text` safe inside an XML attribute: the five special characters and
/// line ends escaped, and control characters XML 1.0 cannot hold dropped.
fn xml(text: &str) -> String {
    body(text).replace('\n', "&#10;")
}

/// `text` safe inside an XML element (and HTML's text and attributes), its
/// lines kept as they are.
pub(crate) fn body(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

/// Gradescope's `results.json`.
#[derive(Serialize)]
pub struct Results {
    pub score: f64,
    pub execution_time: f64,
    pub output: String,
    pub visibility: &'static str,
    pub tests: Vec<Test>,
}

#[derive(Serialize)]
pub struct Test {
    pub name: String,
    pub number: String,
    pub score: f64,
    pub max_score: f64,
    pub status: &'static str,
    pub output: String,
    pub visibility: &'static str,
}

/// The verdicts as Gradescope's results: a point per property, and one
/// test worth a point for a chapter that could not be checked.
pub fn gradescope(graded: &[Graded]) -> Results {
    let mut tests = Vec::new();
    let mut seconds = 0.0;
    for g in graded {
        match &g.outcome {
            Outcome::Checked(report) => {
                seconds += report.seconds;
                for (i, v) in report.verdicts.iter().enumerate() {
                    let story = story(g.chapter, &report.version_flags, v);
                    tests.push(Test {
                        name: format!("{}: {}", g.suite(), v.property),
                        number: format!("{}.{}", g.chapter, i + 1),
                        score: if v.pass { 1.0 } else { 0.0 },
                        max_score: 1.0,
                        status: if v.pass { "passed" } else { "failed" },
                        output: match story.is_empty() {
                            true => v.evidence.clone(),
                            false => format!("{}\n{story}", v.evidence),
                        },
                        visibility: "visible",
                    });
                }
            }
            Outcome::Error(why) | Outcome::Skipped(why) => tests.push(Test {
                name: format!("{}: the case builds and runs", g.suite()),
                number: format!("{}.0", g.chapter),
                score: 0.0,
                max_score: 1.0,
                status: "failed",
                output: why.to_string(),
                visibility: "visible",
            }),
        }
    }
    let score = tests.iter().map(|t| t.score).sum();
    let max: f64 = tests.iter().map(|t| t.max_score).sum();
    Results {
        score,
        execution_time: (seconds * 1000.0).round() / 1000.0,
        output: format!("{score} of {max} properties hold"),
        visibility: "visible",
        tests,
    }
}

/// Writes whichever of the two files were asked for.
pub fn write(
    graded: &[Graded],
    junit_to: Option<&Path>,
    gradescope_to: Option<&Path>,
) -> Result<()> {
    if let Some(file) = junit_to {
        std::fs::write(file, junit(graded))
            .with_context(|| format!("could not write the JUnit results to {}", file.display()))?;
    }
    if let Some(file) = gradescope_to {
        let text = serde_json::to_string_pretty(&gradescope(graded))?;
        std::fs::write(file, text).with_context(|| {
            format!(
                "could not write the Gradescope results to {}",
                file.display()
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{body, xml};

    #[test]
    fn text_is_escaped_for_xml() {
        assert_eq!(xml("a<b & \"c\"\n"), "a&lt;b &amp; &quot;c&quot;&#10;");
        assert_eq!(body("a<b\nc"), "a&lt;b\nc");
        assert_eq!(xml("bell\u{7}"), "bell");
    }
}
