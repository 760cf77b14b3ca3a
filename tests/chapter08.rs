//! Chapter 8 end to end: the story `run` tells and the grading matrix of
//! `check` over the shipped case, the reference and the catalogued wrong
//! fixes. Everything runs on simulated time, so every figure but the check's
//! wall time is exact; no test asserts a timing.

mod common;

use common::{check_json, notify, pattern, stdout};

const SHIPPED_STORY: &str = "\
four things happen, two minutes apart; each is told by push to five people

  0:00  event_cancelled  The picnic is cancelled              ada's phone is unreachable
  2:00  comment_added    Sam commented on board games night   finn's phone is unreachable
  4:00  date_chosen      The hiking trip is on Sunday         kai's phone fails 3 times, then works
  6:00  event_reopened   The pub quiz is back on              emma's phone is no longer registered

the troubled phones:
  ada   event_cancelled  push dead-lettered at 5:36     no email
  finn  comment_added    push dead-lettered at 7:36     no email
  kai   date_chosen      push delivered at 9:36         no email
  emma  event_reopened   push refused at 6:00           no email

never told about an important change: 2
  ada was never told: The picnic is cancelled.
  emma was never told: The pub quiz is back on.
";

#[test]
fn run_shows_who_is_never_told() {
    let out = notify(&["run", "8"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), SHIPPED_STORY);
}

#[test]
fn run_with_the_fallback_emails_ada_and_emma_only() {
    let text = stdout(&notify(&["run", "8", "--solution"]));
    assert!(
        text.contains("  ada   event_cancelled  push dead-lettered at 5:36     email at 5:38\n"),
        "{text}"
    );
    assert!(
        text.contains("  emma  event_reopened   push refused at 6:00           email at 6:02\n"),
        "{text}"
    );
    assert!(
        text.contains("  finn  comment_added    push dead-lettered at 7:36     no email\n"),
        "{text}"
    );
    assert!(
        text.contains("  kai   date_chosen      push delivered at 9:36         no email\n"),
        "{text}"
    );
    assert!(text.contains("everyone heard about every important change"));
}

#[test]
fn the_shipped_case_tells_nobody_whose_push_was_dead_lettered() {
    let (code, report) = check_json(&["8"]);
    assert_eq!(pattern(&report), "FAIL FAIL PASS PASS FAIL");
    assert_eq!(code, 1);
    let v = &report["verdicts"];
    assert_eq!(v[0]["evidence"], "13 of 15 told");
    assert_eq!(v[1]["evidence"], "0 emails for 2 dead-lettered pushes");
    assert_eq!(v[4]["evidence"], "1 lost");
}

#[test]
fn the_reference_solution_passes_everything() {
    let (code, report) = check_json(&["8", "--solution"]);
    assert_eq!(pattern(&report), "PASS PASS PASS PASS PASS");
    assert_eq!(code, 0);
    let v = &report["verdicts"];
    assert_eq!(v[1]["evidence"], "2 emails for 2 dead-lettered pushes");
    assert_eq!(v[4]["evidence"], "2 crash points");
}

#[test]
fn falling_back_on_the_first_error_tells_people_twice() {
    let (_, report) = check_json(&["8", "--variant", "first-error"]);
    assert_eq!(pattern(&report), "PASS PASS PASS FAIL PASS");
    let details = report["verdicts"][3]["details"].to_string();
    assert!(details.contains("kai's date_chosen"), "{details}");
}

#[test]
fn falling_back_for_every_kind_emails_about_comments() {
    let (_, report) = check_json(&["8", "--variant", "every-kind"]);
    assert_eq!(pattern(&report), "PASS PASS FAIL PASS PASS");
    let details = report["verdicts"][2]["details"].to_string();
    assert!(details.contains("finn's comment_added"), "{details}");
}

#[test]
fn a_fallback_outside_the_transaction_is_lost_in_a_crash() {
    let (code, report) = check_json(&["8", "--variant", "outside-transaction"]);
    assert_eq!(pattern(&report), "PASS PASS PASS PASS FAIL");
    assert_eq!(code, 1);
    let crash = &report["verdicts"][4];
    assert_eq!(crash["evidence"], "1 lost");
    let scenario = crash["scenario"].as_str().unwrap();
    assert!(
        scenario.contains("the one after ada-phone's last push"),
        "{scenario}"
    );
    let kinds: Vec<&str> = crash["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    let crashed = kinds.iter().position(|k| *k == "crash").expect("a crash");
    assert_eq!(kinds[crashed - 1], "commit", "{kinds:?}");
    assert!(
        !crash["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["subject"] == "ada@example.com" && e["kind"] == "send"),
        "no email reached ada: {kinds:?}"
    );
}

#[test]
fn no_fallback_for_a_refused_push_leaves_emma_untold() {
    let (_, report) = check_json(&["8", "--variant", "only-after-retries"]);
    assert_eq!(report["verdicts"][0]["pass"], false);
    let details = report["verdicts"][0]["details"].to_string();
    assert!(details.contains("emma was never told"), "{details}");
}

#[test]
fn falling_back_one_attempt_early_tells_kai_twice() {
    let (_, report) = check_json(&["8", "--variant", "one-attempt-early"]);
    assert_eq!(pattern(&report), "PASS PASS PASS FAIL PASS");
}

#[test]
fn a_fallback_email_to_the_device_token_reaches_nobody() {
    let (_, report) = check_json(&["8", "--variant", "fallback-to-device"]);
    assert_eq!(report["verdicts"][0]["pass"], false);
    assert_eq!(report["verdicts"][1]["pass"], false);
}

#[test]
fn a_sweep_without_the_fallback_leaves_ada_untold_when_her_dispatcher_is_lost() {
    let (code, report) = check_json(&["8", "--variant", "sweep-no-fallback"]);
    assert_eq!(pattern(&report), "FAIL FAIL PASS PASS PASS");
    assert_eq!(code, 1);
    let told = &report["verdicts"][0];
    assert_eq!(told["evidence"], "14 of 15 told");
    let scenario = told["scenario"].as_str().unwrap();
    assert!(
        scenario.contains("its dispatcher lost during ada-phone's last push"),
        "{scenario}"
    );
    let details = told["details"].to_string();
    assert!(details.contains("ada was never told"), "{details}");
    assert_eq!(
        report["verdicts"][1]["evidence"],
        "1 email for 2 dead-lettered pushes"
    );
}

#[test]
fn an_unfenced_fallback_emails_ada_again_on_a_late_answer() {
    let (code, report) = check_json(&["8", "--variant", "fallback-unfenced"]);
    assert_eq!(pattern(&report), "PASS FAIL PASS PASS PASS");
    assert_eq!(code, 1);
    let one_each = &report["verdicts"][1];
    assert_eq!(one_each["evidence"], "2 emails for 1 dead-lettered push");
    let scenario = one_each["scenario"].as_str().unwrap();
    assert!(scenario.contains("a late answer"), "{scenario}");
    let details = one_each["details"].to_string();
    assert!(
        details.contains("ada@example.com got 2 emails"),
        "{details}"
    );
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
    for args in [
        &["8"][..],
        &["8", "--variant", "outside-transaction"],
        &["8", "--variant", "fallback-unfenced"],
    ] {
        let (_, first) = check_json(args);
        let (_, second) = check_json(args);
        assert_eq!(
            without_timings(first),
            without_timings(second),
            "check {args:?} changed its mind"
        );
    }
}
