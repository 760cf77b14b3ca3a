//! Chapter 6 end to end: the story `run` tells, and the grading matrix of
//! `check` over the shipped case, the reference and the catalogued wrong
//! fixes. Each check is played once for the whole file (the repeat test
//! plays its own a second time).

use crate::common;

use common::{notify, stdout};

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

what the case printed:
  process 2, sweep:
    warning: 4 outbox rows have been PROCESSING for over 5 minutes (2 times)
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

/// The chapter's own properties, then exploring's, in the order of a report.
const EVENTUALLY: usize = 0;
const LIVE: usize = 1;
const LATE: usize = 2;
const AGREES: usize = 3;
const SURVIVES: usize = 4;
const TOLD_ONCE: usize = 5;
const SETTLED: usize = 6;

/// The verdicts of `check 6` with `args`, and the report, played once for
/// every test that reads them.
fn check(args: &[&str]) -> (i32, String, serde_json::Value) {
    common::verdicts("6", args)
}

/// The details of verdict `i`, as one string.
fn details(report: &serde_json::Value, i: usize) -> String {
    report["verdicts"][i]["details"].to_string()
}

fn scenario(report: &serde_json::Value, i: usize) -> String {
    report["verdicts"][i]["scenario"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_shipped_case_leaves_orphans_processing_forever() {
    let (code, pattern, report) = check(&[]);
    assert_eq!(pattern, "FAIL PASS FAIL FAIL FAIL PASS FAIL PASS PASS PASS");
    assert_eq!(code, 1);
    let eventually = &report["verdicts"][EVENTUALLY];
    assert_eq!(eventually["evidence"], "0 of 4 delivered");
    let kinds: Vec<&str> = eventually["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"crash"), "{kinds:?}");
    // Generated scenarios: a row held by a dispatcher lost mid-send is never
    // handed back, and neither is one lost to a crash in `dispatch`.
    assert!(
        scenario(&report, AGREES).contains("held by a dispatcher lost mid-send"),
        "{report}"
    );
    assert!(
        details(&report, SETTLED)
            .contains("neither delivered nor dead-lettered once the service was idle"),
        "{report}"
    );
    assert!(
        scenario(&report, SURVIVES).contains("crash after dispatch commit"),
        "{report}"
    );
    assert!(report["verdicts"][SURVIVES]["seed"].is_u64());
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn the_reference_solution_passes_everything() {
    let (code, pattern, report) = check(&["--solution"]);
    assert_eq!(pattern, "PASS PASS PASS PASS PASS PASS PASS PASS PASS PASS");
    assert_eq!(code, 0);
    assert_eq!(
        report["verdicts"][LATE]["evidence"],
        "13 of 14 rows handed on and 1 dead-lettered at their last attempt, none changed by the late answer; 12 rows of 12 long batches handed on, none sent again"
    );
    // The reference is not compared with itself (its agreement line says
    // so); exploring judges survival and the invariants over the generated
    // scenarios a case is checked on.
    assert_eq!(report["verdicts"].as_array().unwrap().len(), 10);
    assert_eq!(
        report["verdicts"][3]["evidence"],
        "this is the reference solution"
    );
    let explored = report["verdicts"][4]["evidence"].as_str().unwrap();
    assert!(explored.starts_with("7 scenarios, "), "{explored}");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn without_a_fence_the_late_answer_undoes_the_delivery() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "no-fence"]);
    assert_eq!(pattern, "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS");
    // The row is left owed, whatever its columns say: the service sends it
    // again the next day, once the provider has forgotten its key.
    assert_eq!(
        report["verdicts"][LATE]["evidence"],
        "delivered, then attempted again"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_fence_on_the_status_alone_lets_the_late_answer_in_mid_resend() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "status-fence"]);
    assert_eq!(pattern, "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS");
    assert!(
        scenario(&report, LATE).contains("while dispatcher 2 resends it"),
        "{report}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_fence_on_the_name_alone_lets_a_restarted_namesake_in() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "name-fence"]);
    assert_eq!(pattern, "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS");
    assert!(
        scenario(&report, LATE).contains("restarted under its host name"),
        "{report}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_claim_time_kept_for_the_whole_batch_sweeps_its_last_send() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "batch-claim-time"]);
    // The rows after the swept one were handed on too, and the batch then
    // sends them again: the late-finisher property sees that.
    assert_eq!(pattern, "PASS FAIL FAIL PASS PASS PASS PASS PASS PASS PASS");
    assert_eq!(report["verdicts"][LIVE]["evidence"], "1 live send swept");
    // The first scenario to show it: a slow send after other rows of its
    // claim, or the long batch.
    let live = scenario(&report, LIVE);
    assert!(
        live.contains("sends them one by one") || live.contains("runs while dispatcher 2 does"),
        "{report}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_threshold_shorter_than_a_send_sweeps_a_live_send() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "short-threshold"]);
    assert_eq!(pattern, "PASS FAIL PASS PASS PASS PASS PASS PASS FAIL PASS");
    assert_eq!(report["verdicts"][LIVE]["evidence"], "1 live send swept");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_sweep_that_resets_attempts_loops_on_a_poison_row() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "sweep-resets-attempts"]);
    assert_eq!(pattern, "FAIL PASS FAIL FAIL PASS PASS PASS FAIL PASS PASS");
    assert_eq!(
        report["verdicts"][EVENTUALLY]["evidence"],
        "8 dispatchers lost, still waiting"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_sweep_that_forgets_the_lost_attempt_loops_too() {
    let (_, pattern, _) = check(&["--no-shrink", "--variant", "sweep-forgets-attempt"]);
    assert_eq!(pattern, "FAIL PASS FAIL FAIL PASS PASS PASS FAIL PASS PASS");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_threshold_of_three_minutes_sweeps_the_slow_send_near_five() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "threshold-3min"]);
    assert_eq!(pattern, "PASS FAIL PASS FAIL PASS PASS PASS PASS FAIL PASS");
    assert_eq!(report["verdicts"][LIVE]["evidence"], "1 live send swept");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_threshold_of_four_minutes_sweeps_it_too() {
    // The chapter's slow send takes 4 min 50 s, and dispatcher 2's sweep
    // runs 10 s before it ends: any threshold under 4 min 40 s meets it.
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "threshold-4min"]);
    assert_eq!(pattern, "PASS FAIL PASS FAIL PASS PASS PASS PASS FAIL PASS");
    assert!(
        scenario(&report, LIVE).contains("takes 4 min 50 s"),
        "{report}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_sweep_of_every_row_not_sent_resends_a_dead_letter() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "sweep-not-sent"]);
    // Its dead letter, sent again and refused again, still says its
    // dispatcher was lost.
    assert_eq!(pattern, "FAIL PASS PASS FAIL PASS PASS FAIL PASS PASS PASS");
    assert_eq!(
        report["verdicts"][EVENTUALLY]["evidence"],
        "a dead letter sent again"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn counting_the_attempt_at_the_claim_breaks_chapter_5s_count() {
    // The chapter's own batch passes. The generated scenarios, compared
    // with the reference, show an address that always fails, held by a
    // dispatcher lost mid-send, getting 2 attempts after the lost one
    // instead of 3; random batches show a row dead-lettered after three
    // 503s, before its slow fourth attempt or its poison one.
    let (code, pattern, report) = check(&["--no-shrink", "--variant", "count-at-claim"]);
    assert_eq!(pattern, "FAIL FAIL FAIL FAIL FAIL PASS PASS PASS PASS PASS");
    assert_eq!(code, 1);
    let agrees = details(&report, AGREES);
    assert!(
        agrees.contains("2 attempts: failed, failed (dead letter: 503) (the reference: 3 attempts"),
        "{agrees}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_fence_on_the_time_of_the_result_never_matches_a_slow_send() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "fence-on-record-time"]);
    assert_eq!(&pattern[..19], "PASS PASS FAIL FAIL", "{pattern}");
    assert!(scenario(&report, AGREES).contains("send takes"), "{report}");
    assert!(
        details(&report, AGREES).contains("(the reference: FAILED"),
        "{report}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_sweep_that_skips_its_own_claims_strands_a_failed_wake_up() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "sweep-skips-own"]);
    assert_eq!(pattern, "PASS PASS PASS PASS FAIL PASS FAIL PASS PASS PASS");
    let fault = scenario(&report, SETTLED);
    assert!(
        fault.contains("dispatch commit") && fault.contains("fails"),
        "{fault}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_sweep_that_sends_without_the_key_tells_someone_twice() {
    let (_, pattern, report) = check(&["--no-shrink", "--variant", "sweep-sends-unkeyed"]);
    assert_eq!(pattern, "PASS PASS PASS PASS FAIL FAIL PASS PASS PASS FAIL");
    assert!(details(&report, TOLD_ONCE).contains("2 times"), "{report}");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn verdicts_are_the_same_on_every_run() {
    // The racing scenarios wait on what the world records, never on real
    // time, so even the process count stays the same: no race is replayed.
    // The generated scenarios, their faults and their shrinking follow
    // from their seeds.
    common::assert_replays_the_same(&["6"]);
    common::assert_replays_the_same(&["6", "--variant", "sweep-skips-own"]);
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_retry_timed_from_the_start_of_a_slow_send_comes_early() {
    // Only a world whose failing row is on a channel whose sends take
    // simulated seconds shows it.
    let (code, pattern, report) = check(&["--no-shrink", "--variant", "backoff-from-send-start"]);
    assert_eq!(code, 1);
    assert_eq!(pattern, "PASS PASS PASS PASS PASS PASS PASS FAIL PASS PASS");
    assert!(details(&report, 7).contains("came"), "{report}");
}

/// Wrong fixes that only a wider world shows: a long batch with rows past
/// the threshold (and its first dispatcher going on while a second one
/// under the same host name sends them), a late answer of every kind under a shared host name,
/// after the resend too, a slow send or a hung one on a row's last attempt, and a poison
/// row that meets the provider's 503s before it kills.
#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn wrong_fixes_the_wider_batches_show_fail_their_property() {
    for (variant, want, index, evidence) in [
        (
            "renewal-name-fence",
            "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS",
            LATE,
            "delivered, then attempted again",
        ),
        (
            "renewal-miss-ignored",
            "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS",
            LATE,
            "delivered, then attempted again",
        ),
        (
            "renew-when-half-old",
            "PASS FAIL PASS PASS PASS PASS PASS PASS PASS PASS",
            LIVE,
            "1 live send swept",
        ),
        (
            "sweep-three-commits",
            "PASS PASS PASS PASS FAIL PASS PASS PASS PASS PASS",
            SURVIVES,
            "2 of 84 plays",
        ),
        (
            "fence-skips-status",
            "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS",
            LATE,
            "dead letter keeps no answer, not its lost dispatcher",
        ),
        (
            "dead-letter-unfenced",
            "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS",
            LATE,
            "delivered, then left FAILED",
        ),
        (
            "sweep-backs-off",
            "FAIL PASS PASS PASS PASS PASS PASS PASS PASS PASS",
            EVENTUALLY,
            "orphans sent after 6:02",
        ),
        (
            "fence-at-or-after",
            "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS",
            LATE,
            "delivered, then attempted again",
        ),
        (
            "dead-letter-fence-no-time",
            "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS",
            LATE,
            "delivered, then left FAILED",
        ),
        (
            "sweep-dead-letters-live",
            "PASS FAIL PASS PASS PASS PASS PASS PASS PASS PASS",
            LIVE,
            "1 live send dead-lettered",
        ),
        (
            "sweep-at-threshold",
            "PASS FAIL PASS PASS PASS PASS PASS PASS PASS PASS",
            LIVE,
            "1 live send dead-lettered",
        ),
        (
            "sweep-keeps-stale-error",
            "FAIL PASS FAIL PASS PASS PASS PASS PASS PASS PASS",
            EVENTUALLY,
            "dead letter keeps 503, not its lost dispatcher",
        ),
    ] {
        let (_, pattern, report) = check(&["--no-shrink", "--variant", variant]);
        assert_eq!(pattern, want, "{variant}");
        let got = report["verdicts"][index]["evidence"]
            .as_str()
            .unwrap_or_default();
        assert!(got.ends_with(evidence), "{variant}: {got}");
    }
}
