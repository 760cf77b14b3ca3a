//! What the integration tests share: running the real `notify` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workshop's root: this repository.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The correct alternatives catalogued for chapter `chapter` (`alt-*`),
/// by name, sorted, each checked to say what it is on its first line.
pub fn alternatives(chapter: u32) -> Vec<String> {
    let folder = root().join(format!("checks/case{chapter:02}"));
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("alt-") && name.ends_with(".diff"))
        .map(|name| name.trim_end_matches(".diff").to_string())
        .collect();
    names.sort();
    for name in &names {
        let patch = std::fs::read_to_string(folder.join(format!("{name}.diff"))).unwrap();
        assert!(
            patch.starts_with("a correct alternative: "),
            "{name} says what it is on its first line"
        );
    }
    names
}

/// Runs `notify` with `args` in `dir`, without colour.
pub fn notify_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_notify"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        // Piped output as the chapters show it, whatever the shell exports.
        .env_remove("COLUMNS")
        .output()
        .expect("the notify binary runs")
}

/// Runs `notify` with `args` at the workshop's root.
pub fn notify(args: &[&str]) -> Output {
    notify_in(&root(), args)
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The PASS/FAIL pattern of a `check --json` run, e.g. "FAIL PASS PASS FAIL".
pub fn pattern(report: &serde_json::Value) -> String {
    report["verdicts"]
        .as_array()
        .expect("a report has verdicts")
        .iter()
        .map(|v| {
            if v["pass"].as_bool().unwrap() {
                "PASS"
            } else {
                "FAIL"
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `notify check` with `args` plus `--json` and parses the report.
pub fn check_json(args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = notify(&all);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "check {args:?} did not print JSON ({err}).\nstdout: {}\nstderr: {}",
            stdout(&out),
            stderr(&out)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

/// One `notify check ARGS` run, as printed and as JSON.
pub struct Checked {
    pub code: i32,
    /// The report as printed (what a chapter's console block shows).
    pub text: String,
    pub report: serde_json::Value,
}

/// `notify check ARGS`, played once however many tests read it: the text
/// report for the chapters' console blocks and the JSON for the grading
/// matrices come from the same run (`--json-to`). A test that means to play
/// a check again, to see that it repeats, calls [`check_json`].
pub fn checked(args: &[&str]) -> std::sync::Arc<Checked> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    type Slot = Arc<OnceLock<Arc<Checked>>>;
    static PLAYED: OnceLock<Mutex<HashMap<Vec<String>, Slot>>> = OnceLock::new();
    let key = as_shown(args);
    let slot = PLAYED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(key.clone())
        .or_default()
        .clone();
    slot.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.json");
        let mut all = vec!["check"];
        all.extend(key.iter().map(String::as_str));
        let file_arg = file.to_string_lossy().into_owned();
        all.extend_from_slice(&["--json-to", &file_arg]);
        let out = notify(&all);
        let json = std::fs::read(&file).unwrap_or_default();
        let report = serde_json::from_slice(&json).unwrap_or_else(|err| {
            panic!(
                "check {key:?} wrote no JSON report ({err}).\nstdout: {}\nstderr: {}",
                stdout(&out),
                stderr(&out)
            )
        });
        Arc::new(Checked {
            code: out.status.code().unwrap_or(-1),
            text: stdout(&out),
            report,
        })
    })
    .clone()
}

/// `args` as the chapters' console blocks run them: `--no-shrink` (asked by
/// tests that read only verdicts, to save the plays shrinking takes) is
/// dropped when a chapter shows `notify check N --variant NAME`, so that
/// run is played once, as shown, for the block and the tests alike.
fn as_shown(args: &[&str]) -> Vec<String> {
    use std::sync::OnceLock;
    static SHOWN: OnceLock<String> = OnceLock::new();
    let shown = SHOWN.get_or_init(|| {
        let mut text = String::new();
        for entry in std::fs::read_dir(root().join("chapters")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                text.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
        text
    });
    let rest: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a != "--no-shrink")
        .collect();
    let in_a_block = match rest.as_slice() {
        [chapter, "--variant", name] => shown
            .lines()
            .any(|l| l.trim_end() == format!("$ notify check {chapter} --variant {name}")),
        _ => false,
    };
    let kept = if in_a_block { &rest[..] } else { args };
    kept.iter().map(|a| a.to_string()).collect()
}

/// [`checked`]'s exit code and JSON report.
pub fn checked_json(args: &[&str]) -> (i32, serde_json::Value) {
    let played = checked(args);
    (played.code, played.report.clone())
}

/// The verdicts of `notify check CHAPTER ARGS` (played once, as
/// [`checked`]): the exit code, the PASS/FAIL pattern, and the report.
pub fn verdicts(chapter: &str, args: &[&str]) -> (i32, String, serde_json::Value) {
    let mut all = vec![chapter];
    all.extend_from_slice(args);
    let (code, report) = checked_json(&all);
    (code, pattern(&report), report)
}

/// Replaces every decimal number (a timing) with `#`; whole numbers (counts)
/// stay: "43 case processes in 0.6 s" reads "43 case processes in # s".
pub fn mask_decimals(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() {
            out.push(c);
            continue;
        }
        let mut number = c.to_string();
        while let Some(&d) = chars.peek() {
            if d.is_ascii_digit() || d == '.' {
                number.push(d);
                chars.next();
            } else {
                break;
            }
        }
        if number.trim_end_matches('.').contains('.') {
            out.push('#');
            if number.ends_with('.') {
                out.push('.');
            }
        } else {
            out.push_str(&number);
        }
    }
    out
}

/// A report without its timings, which no verdict depends on.
pub fn without_timings(value: serde_json::Value) -> serde_json::Value {
    strip_timings(value, false)
}

/// A report without its timings, and with every decimal in its texts
/// masked: for chapters that judge real elapsed time.
pub fn without_timings_or_decimals(value: serde_json::Value) -> serde_json::Value {
    strip_timings(value, true)
}

fn strip_timings(value: serde_json::Value, decimals: bool) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => map
            .into_iter()
            .filter(|(k, _)| k != "seconds" && k != "elapsed_us")
            .map(|(k, v)| (k, strip_timings(v, decimals)))
            .collect(),
        Value::Array(items) => items
            .into_iter()
            .map(|v| strip_timings(v, decimals))
            .collect(),
        Value::String(text) if decimals => Value::String(mask_decimals(&text)),
        other => other,
    }
}

/// Plays `notify check ARGS` afresh and asserts that its report, timings
/// aside, is the one [`checked`] played: verdicts repeat.
pub fn assert_replays_the_same(args: &[&str]) {
    let (_, first) = checked_json(args);
    let (_, second) = check_json(args);
    assert_eq!(
        without_timings(first),
        without_timings(second),
        "check {args:?} changed its mind"
    );
}

/// Asserts that each of `variants` of chapter `chapter` fails the
/// properties `expected` names (a PASS/FAIL pattern), among them "once
/// idle, every message is delivered...", with a row marked sent that never
/// reached the provider.
pub fn assert_marked_sent_and_lost(chapter: &str, variants: &[&str], expected: &str) {
    for variant in variants {
        let (code, report) = checked_json(&[chapter, "--variant", variant]);
        assert_eq!(code, 1, "{variant}");
        assert_eq!(pattern(&report), expected, "{variant}");
        let settled = report["verdicts"]
            .as_array()
            .expect("a report has verdicts")
            .iter()
            .find(|v| {
                v["property"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("once idle, every message is delivered"))
            })
            .expect("the check judges what is delivered once idle");
        let details = settled["details"].to_string();
        assert!(
            details.contains("is marked sent, but never reached the provider"),
            "{variant}: {details}"
        );
    }
}
