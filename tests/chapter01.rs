//! Chapter 1 end to end: the story `run` tells, and the grading matrix of
//! `check` over the shipped case, the reference and the catalogued wrong fixes.

mod common;

use common::{check_json, notify, pattern, stdout};

const SEED_STORY: &str = "\
sending 5 invitations
  dana@example.com   ws_acme   added
  eli@example.com    ws_acme   added
  fay@example.com    ws_orbit  no free seat, rolled back
  gus@example.com    ws_acme   added
  hal@example.com    ws_orbit  no free seat, rolled back

emails sent: 5
emails for memberships that do not exist: 2
  fay@example.com was told they joined ws_orbit. They did not.
  hal@example.com was told they joined ws_orbit. They did not.
";

#[test]
fn run_shows_the_emails_a_rollback_could_not_recall() {
    let out = notify(&["run", "1"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), SEED_STORY);
}

#[test]
fn run_after_the_fix_shows_three_emails_and_nothing_wrong() {
    let out = notify(&["run", "1", "--solution"]);
    let text = stdout(&out);
    assert!(text.contains("emails sent: 3\n"), "{text}");
    assert!(
        text.contains("emails for memberships that do not exist: 0\n"),
        "{text}"
    );
    assert!(!text.contains("They did not"), "{text}");
}

#[test]
fn the_shipped_case_fails_the_rollback_and_failing_commit_properties() {
    let (code, report) = check_json(&["1"]);
    assert_eq!(pattern(&report), "FAIL PASS PASS FAIL");
    assert_eq!(code, 1);
    let v = &report["verdicts"];
    assert_eq!(v[0]["evidence"], "2 sent");
    assert_eq!(v[1]["evidence"], "3 joined");
    assert_eq!(v[3]["evidence"], "3 sent");
    // The failing commit's verdict names its scenario and draws its timeline.
    let scenario = v[3]["scenario"].as_str().unwrap();
    assert!(scenario.contains("invite commit 1 fails"), "{scenario}");
    assert!(scenario.contains("dana@example.com"), "{scenario}");
    let kinds: Vec<&str> = v[3]["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    let send = kinds.iter().position(|k| *k == "send").expect("the email");
    let failed = kinds
        .iter()
        .position(|k| *k == "commit_failed")
        .expect("the failed commit");
    assert!(
        send < failed,
        "the email went out before the commit failed: {kinds:?}"
    );
}

#[test]
fn the_reference_solution_passes_everything() {
    let (code, report) = check_json(&["1", "--solution"]);
    assert_eq!(pattern(&report), "PASS PASS PASS PASS");
    assert_eq!(code, 0);
    assert_eq!(report["verdicts"][2]["evidence"], "3 crash points");
}

#[test]
fn sending_after_commit_loses_the_email_in_a_crash() {
    let (code, report) = check_json(&["1", "--variant", "send-after-commit"]);
    assert_eq!(pattern(&report), "PASS PASS FAIL PASS");
    assert_eq!(code, 1);
    let crash = &report["verdicts"][2];
    assert!(crash["scenario"]
        .as_str()
        .unwrap()
        .contains("crash after invite commit 1"));
    let kinds: Vec<&str> = crash["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"crash"), "{kinds:?}");
    assert!(!kinds.contains(&"send"), "no email reached dana: {kinds:?}");
}

#[test]
fn an_outbox_row_in_a_second_transaction_fails_the_crash_property() {
    let (_, report) = check_json(&["1", "--variant", "second-transaction"]);
    assert!(!report["verdicts"][2]["pass"].as_bool().unwrap());
}

#[test]
fn sending_inside_the_transaction_fails_when_the_commit_fails() {
    let (_, report) = check_json(&["1", "--variant", "check-seats-first"]);
    assert_eq!(pattern(&report), "PASS PASS PASS FAIL");
}

#[test]
fn a_fix_tuned_to_the_chapter_batch_fails_on_a_random_batch() {
    let (code, report) = check_json(&["1", "--variant", "only-acme"]);
    assert_eq!(code, 1);
    let failed: Vec<&serde_json::Value> = report["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| !v["pass"].as_bool().unwrap())
        .collect();
    assert!(!failed.is_empty());
    // It passes the chapter's own batch: the failure names a seed to replay.
    let seed = failed[0]["seed"].as_u64().expect("a random batch's seed");
    let (_, replay) = check_json(&["1", "--variant", "only-acme", "--seed", &seed.to_string()]);
    assert_eq!(replay["verdicts"][1]["pass"], false);
    assert_eq!(replay["verdicts"][1]["seed"].as_u64(), Some(seed));
}

/// A report without its timings, which no verdict depends on.
fn without_timings(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => map
            .into_iter()
            .filter(|(k, _)| k != "seconds" && k != "elapsed_us")
            .map(|(k, v)| (k, without_timings(v)))
            .collect(),
        serde_json::Value::Array(items) => items.into_iter().map(without_timings).collect(),
        other => other,
    }
}

#[test]
fn verdicts_are_the_same_on_every_run() {
    for args in [&["1"][..], &["1", "--variant", "send-after-commit"]] {
        let (_, first) = check_json(args);
        let (_, second) = check_json(args);
        assert_eq!(
            without_timings(first),
            without_timings(second),
            "check {args:?} changed its mind"
        );
    }
}

#[test]
fn the_text_report_has_one_line_per_property_and_a_summary() {
    let out = notify(&["check", "1"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  PASS  ") || l.starts_with("  FAIL  "))
        .collect();
    assert_eq!(
        lines,
        [
            "  FAIL  no email for an invite that rolled back (2 sent)",
            "  PASS  every new member gets exactly one email (3 joined)",
            "  PASS  a crash straight after the commit still sends the email, once (3 crash points)",
            "  FAIL  no email when the commit itself fails (3 sent)",
        ]
    );
    assert!(text.contains("2 of 4 properties hold"), "{text}");
    assert!(text.contains("fay@example.com was told they joined ws_orbit. They did not."));
    assert!(text.contains("service") && text.contains("database") && text.contains("provider"));
}
