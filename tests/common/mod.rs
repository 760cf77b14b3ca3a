//! What the integration tests share: running the real `notify` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workshop's root: this repository.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
