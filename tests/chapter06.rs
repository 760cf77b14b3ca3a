//! Chapter 6 end to end: the story `run` tells, and the grading matrix of
//! `check` over the shipped case, the reference and the catalogued wrong fixes.

mod common;

use common::{check_json, notify, pattern, stdout};

const SHIPPED_STORY: &str = "\
4 people are told \"Board games: Friday 20:00 it is\"
the dispatcher claims their 4 rows at 0:00, and is killed before it sends any
a new dispatcher starts at once and runs for 8 minutes, with the sweep every minute

  channel  recipient         attempts  row at 8:00
  email    dana@example.com  none      PROCESSING
  email    eli@example.com   none      PROCESSING
  push     fay-phone         none      PROCESSING
  email    gus@example.com   none      PROCESSING

delivered: 0 of 4
still PROCESSING, claimed at 0:00 by a dispatcher that no longer exists: 4
nothing will ever send them
";

#[test]
fn run_shows_rows_stuck_with_a_dead_dispatcher() {
    let out = notify(&["run", "6"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), SHIPPED_STORY);
}

#[test]
fn run_after_the_fix_shows_the_orphans_delivered_after_the_sweep() {
    let text = stdout(&notify(&["run", "6", "--solution"]));
    assert!(text.contains("delivered: 4 of 4\n"), "{text}");
    assert_eq!(text.matches("6:02 sent  SENT").count(), 4, "{text}");
}

/// The verdicts of `check 6` with `args`, and the report.
fn check(args: &[&str]) -> (i32, String, serde_json::Value) {
    let mut all = vec!["6"];
    all.extend_from_slice(args);
    let (code, report) = check_json(&all);
    (code, pattern(&report), report)
}

#[test]
fn the_shipped_case_leaves_orphans_processing_forever() {
    let (code, pattern, report) = check(&[]);
    assert_eq!(pattern, "FAIL PASS PASS");
    assert_eq!(code, 1);
    let eventually = &report["verdicts"][0];
    assert_eq!(eventually["evidence"], "0 of 4 delivered");
    let kinds: Vec<&str> = eventually["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"crash"), "{kinds:?}");
}

#[test]
fn the_reference_solution_passes_everything() {
    let (code, pattern, report) = check(&["--solution"]);
    assert_eq!(pattern, "PASS PASS PASS");
    assert_eq!(code, 0);
    // Two processes for each of the 9 races, 2 for each of the 4 crashes,
    // and the poison row's 5: four lost on it, then one whose sweep fails it.
    assert_eq!(report["processes"], 31);
    assert_eq!(
        report["verdicts"][2]["evidence"],
        "5 of 5 rows handed on, none changed by the late answer"
    );
}

#[test]
fn without_a_fence_the_late_answer_undoes_the_delivery() {
    let (_, pattern, report) = check(&["--variant", "no-fence"]);
    assert_eq!(pattern, "PASS PASS FAIL");
    assert_eq!(
        report["verdicts"][2]["evidence"],
        "delivered, then left PENDING"
    );
}

#[test]
fn a_fence_on_the_status_alone_lets_the_late_answer_in_mid_resend() {
    let (_, pattern, report) = check(&["--variant", "status-fence"]);
    assert_eq!(pattern, "PASS PASS FAIL");
    let scenario = report["verdicts"][2]["scenario"].as_str().unwrap();
    assert!(
        scenario.contains("while dispatcher 2 resends it"),
        "{scenario}"
    );
}

#[test]
fn a_threshold_shorter_than_a_send_sweeps_a_live_send() {
    let (_, pattern, report) = check(&["--variant", "short-threshold"]);
    assert_eq!(pattern, "PASS FAIL PASS");
    assert_eq!(report["verdicts"][1]["evidence"], "1 live send swept");
}

#[test]
fn a_sweep_that_resets_attempts_loops_on_a_poison_row() {
    let (_, pattern, report) = check(&["--variant", "sweep-resets-attempts"]);
    assert_eq!(pattern, "FAIL PASS PASS");
    assert_eq!(
        report["verdicts"][0]["evidence"],
        "8 dispatchers lost, still PROCESSING"
    );
}

#[test]
fn a_sweep_that_forgets_the_lost_attempt_loops_too() {
    let (_, pattern, _) = check(&["--variant", "sweep-forgets-attempt"]);
    assert_eq!(pattern, "FAIL PASS PASS");
}

#[test]
fn a_threshold_of_three_minutes_sweeps_the_slow_send_near_five() {
    let (_, pattern, report) = check(&["--variant", "threshold-3min"]);
    assert_eq!(pattern, "PASS FAIL PASS");
    assert_eq!(report["verdicts"][1]["evidence"], "1 live send swept");
}

#[test]
fn a_threshold_of_four_minutes_sweeps_it_too() {
    // The chapter's slow send takes 4 min 50 s, and dispatcher 2's sweep
    // runs 10 s before it ends: any threshold under 4 min 40 s meets it.
    let (_, pattern, report) = check(&["--variant", "threshold-4min"]);
    assert_eq!(pattern, "PASS FAIL PASS");
    let scenario = report["verdicts"][1]["scenario"].as_str().unwrap();
    assert!(scenario.contains("takes 4 min 50 s"), "{scenario}");
}

#[test]
fn a_sweep_of_every_row_not_sent_resends_a_dead_letter() {
    let (_, pattern, report) = check(&["--variant", "sweep-not-sent"]);
    assert_eq!(pattern, "FAIL PASS PASS");
    assert_eq!(
        report["verdicts"][0]["evidence"],
        "a dead letter sent again"
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
    // The racing scenarios wait on what the world records, never on real
    // time, so even the process count stays the same: no race is replayed.
    for args in [&[][..], &["--solution"], &["--variant", "no-fence"]] {
        let (_, _, first) = check(args);
        let (_, _, second) = check(args);
        assert_eq!(
            without_timings(first),
            without_timings(second),
            "check 6 {args:?} changed its mind"
        );
    }
}
