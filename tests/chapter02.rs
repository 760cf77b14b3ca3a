//! Chapter 2 end to end: the story `run` tells, and the grading matrix of
//! `check` over the shipped case, the reference and the catalogued wrong fixes.

use crate::common;

use std::sync::OnceLock;

use serde_json::Value;

use common::{notify, pattern, stdout};

const STORY: &str = "\
sending 5 invitations; the process crashes once, right after the provider accepts an email
  dana@example.com   ws_acme   added, emailed once
  eli@example.com    ws_acme   added, emailed twice
    ✖ the provider accepts eli's email, then the process crashes before the relay hears back
    ↻ five minutes later the service restarts, runs the relay, and carries on
  fay@example.com    ws_orbit  added, emailed once
  gus@example.com    ws_acme   added, emailed once
  dana@example.com   ws_orbit  added, emailed once

emails delivered: 6
people told more than once: 1
  eli@example.com got 2 emails about ws_acme.
";

const SOLVED_STORY: &str = "\
sending 5 invitations; the process crashes once, right after the provider accepts an email
  dana@example.com   ws_acme   added, emailed once
  eli@example.com    ws_acme   added, emailed once
    ✖ the provider accepts eli's email, then the process crashes before the relay hears back
    ↻ five minutes later the service restarts, runs the relay, and carries on
  fay@example.com    ws_orbit  added, emailed once
  gus@example.com    ws_acme   added, emailed once
  dana@example.com   ws_orbit  added, emailed once

emails delivered: 5
repeats the provider recognised by their key: 1
  eli@example.com (key outbox/2): nothing new delivered.
people told more than once: 0
";

#[test]
fn run_shows_the_email_sent_again_after_a_crash() {
    let out = notify(&["run", "2"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), STORY);
}

#[test]
fn run_after_the_fix_shows_the_provider_dropping_the_repeat() {
    let out = notify(&["run", "2", "--solution"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), SOLVED_STORY);
}

/// The properties the explorer adds after the chapter's four, in order.
const AGREES: usize = 4;
const SURVIVES: usize = 5;
const TOLD_ONCE: usize = 6;
const SETTLED: usize = 7;

/// `check 2` as shipped, played once for every test that judges it.
fn shipped() -> &'static (i32, Value) {
    static REPORT: OnceLock<(i32, Value)> = OnceLock::new();
    REPORT.get_or_init(|| common::checked_json(&["2"]))
}

/// `check 2 --variant process-key`, played once for every test that judges it.
fn process_key() -> &'static (i32, Value) {
    static REPORT: OnceLock<(i32, Value)> = OnceLock::new();
    REPORT.get_or_init(|| common::checked_json(&["2", "--no-shrink", "--variant", "process-key"]))
}

/// The pattern of `check 2 --variant NAME`, and its report.
fn variant(name: &str) -> (String, Value) {
    let (code, report) = common::checked_json(&["2", "--no-shrink", "--variant", name]);
    assert_eq!(code, 1, "{name} fails");
    (pattern(&report), report)
}

/// The kinds of a verdict's timeline events, in order.
fn kinds(verdict: &serde_json::Value) -> Vec<String> {
    verdict["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_shipped_case_sends_twice_after_a_crash_and_after_a_timeout() {
    let (code, report) = shipped();
    assert_eq!(
        pattern(report),
        "PASS FAIL PASS FAIL PASS FAIL FAIL PASS FAIL"
    );
    assert_eq!(*code, 1);
    let v = &report["verdicts"];
    assert_eq!(v[0]["evidence"], "5 joined");
    assert_eq!(v[1]["evidence"], "5 of 10 crash points send an email twice");
    assert_eq!(v[2]["evidence"], "10 crash points");
    assert_eq!(v[3]["evidence"], "5 of 10 timeouts send an email twice");

    let crash = &v[1];
    let scenario = crash["scenario"].as_str().unwrap();
    assert!(
        scenario.contains("crash after the provider accepts relay send 1"),
        "{scenario}"
    );
    assert!(
        scenario.contains("dana@example.com → ws_acme"),
        "{scenario}"
    );
    assert_eq!(
        crash["details"][0],
        "dana@example.com joined ws_acme and got 2 emails."
    );
    // The timeline: the email, the crash, the restart, the same email again.
    let events = kinds(crash);
    let sends: Vec<usize> = (0..events.len()).filter(|&i| events[i] == "send").collect();
    let crashed = events.iter().position(|k| k == "crash").expect("the crash");
    assert_eq!(sends.len(), 2, "{events:?}");
    assert!(sends[0] < crashed && crashed < sends[1], "{events:?}");

    let timeout = &v[3];
    assert!(timeout["scenario"]
        .as_str()
        .unwrap()
        .contains("relay send 1 is accepted but times out"));
    assert!(kinds(timeout).contains(&"timeout".to_string()));
}

#[test]
fn the_shipped_case_sends_again_when_the_relay_cannot_mark_a_row() {
    let (_, report) = shipped();
    let v = &report["verdicts"];
    // Fault-free, a generated scenario ends as with the reference.
    assert_eq!(v[AGREES]["pass"], true);
    // A failing relay commit: the row stays unsent and goes again, unkeyed.
    let survives = &v[SURVIVES];
    let scenario = survives["scenario"].as_str().unwrap();
    assert!(
        scenario.starts_with("generated scenario (seed "),
        "{scenario}"
    );
    assert!(scenario.contains("relay commit 1 fails"), "{scenario}");
    let detail = survives["details"][0].as_str().unwrap();
    assert!(
        detail.ends_with("told 2 times, member (without the fault: told once)"),
        "{detail}"
    );
    let events = kinds(survives);
    let sends = events.iter().filter(|k| *k == "send").count();
    assert_eq!(sends, 2, "{events:?}");
    assert!(events.contains(&"commit_failed".to_string()), "{events:?}");
    let told = v[TOLD_ONCE]["details"][0].as_str().unwrap();
    assert!(told.contains("got the same email 2 times"), "{told}");
    assert_eq!(v[SETTLED]["pass"], true);
}

#[test]
fn the_reference_solution_passes_everything() {
    let (code, report) = common::checked_json(&["2", "--solution"]);
    // The reference is not compared with itself: its agreement line says so.
    assert_eq!(
        pattern(&report),
        "PASS PASS PASS PASS PASS PASS PASS PASS PASS"
    );
    assert_eq!(code, 0);
    let v = &report["verdicts"];
    assert_eq!(v[1]["evidence"], "10 crash points");
    assert_eq!(v[3]["evidence"], "10 timeouts");
    assert_eq!(v[4]["evidence"], "this is the reference solution");
    for explored in 5..8 {
        let evidence = v[explored]["evidence"].as_str().unwrap();
        assert!(evidence.starts_with("6 scenarios, "), "{evidence}");
    }
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_fresh_key_per_attempt_never_matches_a_repeat() {
    let (pattern, _) = variant("fresh-key");
    assert_eq!(pattern, "PASS FAIL PASS FAIL PASS FAIL FAIL PASS FAIL");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn marking_before_sending_loses_the_email_in_a_crash() {
    let (pattern, report) = variant("mark-before-send");
    assert_eq!(pattern, "PASS PASS FAIL FAIL PASS FAIL PASS FAIL FAIL");
    let lost = &report["verdicts"][2];
    assert!(lost["scenario"]
        .as_str()
        .unwrap()
        .contains("crash after relay commit 1"));
    assert_eq!(
        lost["details"][0],
        "dana@example.com joined ws_acme and got no email."
    );
    // The row was marked, the process died, and the provider never heard of dana.
    assert!(!kinds(lost).contains(&"send".to_string()));
    let timeout = report["verdicts"][3]["scenario"].as_str().unwrap();
    assert!(
        timeout.contains("times out before the provider gets it"),
        "{timeout}"
    );
}

#[test]
fn a_key_that_changes_with_the_process_fails_only_after_a_restart() {
    let (_, report) = process_key();
    assert_eq!(
        pattern(report),
        "PASS FAIL PASS PASS PASS FAIL FAIL PASS FAIL"
    );
    let scenario = report["verdicts"][SURVIVES]["scenario"].as_str().unwrap();
    // The key changes when a deploy or a restart starts a new process: any
    // relay fault that makes the new process send the row again shows it.
    assert!(
        scenario.contains("a deploy") || scenario.contains("a restart"),
        "{scenario}"
    );
    assert!(scenario.contains("relay"), "{scenario}");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn one_key_for_every_row_swallows_the_other_invitations() {
    let (pattern, _) = variant("shared-key");
    assert_eq!(pattern, "FAIL PASS FAIL FAIL FAIL FAIL PASS FAIL FAIL");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_key_per_recipient_drops_the_second_workspace() {
    let (pattern, report) = variant("recipient-key");
    assert_eq!(pattern, "FAIL PASS FAIL FAIL FAIL FAIL PASS FAIL FAIL");
    assert_eq!(
        report["verdicts"][0]["details"][0],
        "dana@example.com joined ws_orbit and got no email."
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_transaction_around_the_send_cannot_hold_it_back() {
    let (pattern, _) = variant("send-in-transaction");
    assert_eq!(pattern, "PASS FAIL PASS FAIL PASS FAIL FAIL PASS FAIL");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_row_id_that_comes_back_reuses_a_delivered_key() {
    let (pattern, _) = variant("reused-row-id");
    assert_eq!(pattern, "FAIL PASS FAIL FAIL FAIL FAIL PASS PASS FAIL");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_relay_that_never_marks_sends_everything_again_the_next_day() {
    let (pattern, report) = variant("never-marks");
    assert_eq!(pattern, "FAIL FAIL PASS FAIL PASS FAIL FAIL PASS PASS");
    let details = report["verdicts"][0]["details"].as_array().unwrap();
    assert_eq!(details.len(), 5, "{details:?}");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn taking_a_timeout_for_a_delivery_loses_a_lost_request() {
    // The explorer plays no timeouts: the chapter's own batches do.
    let (pattern, report) = variant("timeout-means-sent");
    assert_eq!(pattern, "PASS PASS PASS FAIL PASS FAIL PASS FAIL PASS");
    assert_eq!(
        report["verdicts"][3]["evidence"],
        "5 of 10 timeouts lose an email"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn marking_a_round_up_to_its_last_send_loses_a_lost_request_behind_it() {
    // Only a send lost while other rows wait behind it shows it: the
    // generated scenarios lose a send at any point of a round.
    let (pattern, report) = variant("mark-up-to-last-sent");
    assert_eq!(pattern, "PASS PASS PASS PASS PASS FAIL PASS FAIL PASS");
    let scenario = report["verdicts"][SURVIVES]["scenario"].as_str().unwrap();
    assert!(
        scenario.contains("times out before the provider gets it"),
        "{scenario}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn setting_a_row_aside_once_it_has_failed_for_half_an_hour_loses_its_email() {
    // The last send before a deploy loses its request, and the deploy
    // keeps the service down for hours: the row still owes its email, and
    // its key is still within the provider's window.
    let (pattern, report) = variant("set-aside-after-key-window");
    assert_eq!(pattern, "PASS PASS PASS PASS PASS FAIL PASS FAIL PASS");
    let scenario = report["verdicts"][SURVIVES]["scenario"].as_str().unwrap();
    assert!(
        scenario.contains("the service down for 180 min"),
        "{scenario}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_key_scoped_by_the_day_changes_at_midnight() {
    // Some generated worlds start a minute before midnight, so a retry of
    // a send whose answer was lost may come on the next day.
    let (pattern, report) = variant("day-scoped-key");
    assert_eq!(pattern, "PASS PASS PASS PASS PASS FAIL FAIL PASS FAIL");
    let keyed = report["verdicts"][8]["scenario"].as_str().unwrap();
    assert!(keyed.contains("it starts at 23:59:30 UTC"), "{keyed}");
}

#[test]
fn a_random_batch_replays_from_its_seed() {
    // A fix must hold beyond the chapter's batch: --seed plays one random
    // batch beside it, with someone invited to two workspaces, and the
    // generated scenario of that seed under every fault.
    let (_, report) = common::checked_json(&["2", "--solution", "--seed", "7"]);
    assert_eq!(
        pattern(&report),
        "PASS PASS PASS PASS PASS PASS PASS PASS PASS"
    );
    let (_, report) = common::checked_json(&["2", "--seed", "7"]);
    assert_eq!(
        pattern(&report),
        "PASS FAIL PASS FAIL PASS FAIL FAIL PASS FAIL"
    );
    assert_eq!(report["verdicts"][SURVIVES]["seed"].as_u64(), Some(7));
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn sending_from_the_invite_is_chapter_ones_bug_again() {
    let (pattern, report) = variant("eager-send");
    assert_eq!(pattern, "FAIL PASS FAIL FAIL FAIL FAIL PASS FAIL FAIL");
    // A generated invite to a full plan: told all the same.
    let agrees = &report["verdicts"][AGREES];
    let detail = agrees["details"][0].as_str().unwrap();
    assert!(
        detail.ends_with("told once, not a member (the reference: never told)"),
        "{detail}"
    );
    let scenario = agrees["scenario"].as_str().unwrap();
    assert!(scenario.contains("no seat"), "{scenario}");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_key_on_retries_only_gives_the_first_retry_nothing_to_match() {
    let (pattern, report) = variant("key-on-retry-only");
    assert_eq!(pattern, "PASS FAIL PASS FAIL PASS FAIL FAIL PASS FAIL");
    assert_eq!(
        report["verdicts"][1]["details"][0],
        "dana@example.com joined ws_acme and got 2 emails."
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_key_written_with_the_mark_is_lost_with_it() {
    let (pattern, report) = variant("key-saved-with-mark");
    assert_eq!(pattern, "PASS FAIL PASS FAIL PASS FAIL FAIL PASS FAIL");
    let told = report["verdicts"][TOLD_ONCE]["details"].to_string();
    assert!(told.contains("got the same email 2 times"), "{told}");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_relay_that_sends_one_row_per_run_leaves_rows_behind() {
    // The chapter's batch runs the relay after every invite: one row per
    // run keeps up. Invites queued while no relay runs, as the race before
    // a round has them, do not, nor does a generated relay that runs every
    // few invites.
    let (pattern, report) = variant("relay-one-row");
    assert_eq!(pattern, "FAIL PASS PASS PASS FAIL FAIL PASS FAIL PASS");
    let settled = &report["verdicts"][SETTLED];
    let scenario = settled["scenario"].as_str().unwrap();
    assert!(
        scenario.contains("the relay runs after every "),
        "{scenario}"
    );
    let details = settled["details"].to_string();
    assert!(
        details.contains("neither delivered nor dead-lettered once the service was idle"),
        "{details}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn verdicts_are_the_same_on_every_run() {
    common::assert_replays_the_same(&["2"]);
    common::assert_replays_the_same(&["2", "--variant", "process-key"]);
}

/// `--no-shrink` changes how a failure is shown, never whether it fails:
/// the same verdicts, in fewer plays, the generated world reported as its
/// seed drew it.
#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn without_shrinking_the_verdicts_are_the_same_in_fewer_plays() {
    let (_, shrunk) = common::checked_json(&["2", "--variant", "process-key"]);
    let (_, found) = process_key();
    assert_eq!(pattern(&shrunk), pattern(found));
    let plays = |r: &Value| r["processes"].as_u64().unwrap();
    assert!(plays(found) < plays(&shrunk), "{found}\n{shrunk}");
    // The crash's world: as seed 1 drew it, and shrunk to one invite.
    let scenario = |r: &Value| {
        r["verdicts"][SURVIVES]["scenario"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(scenario(&shrunk).len() < scenario(found).len(), "{shrunk}");
}

#[test]
fn the_text_report_has_one_line_per_property_and_a_summary() {
    let out = notify(&["check", "2"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  PASS  ") || l.starts_with("  FAIL  "))
        .collect();
    assert_eq!(
        lines[..4],
        [
            "  PASS  every new member gets exactly one email (5 joined)",
            "  FAIL  a crash and restart send no email twice (5 of 10 crash points send an email twice)",
            "  PASS  a crash and restart lose no email (10 crash points)",
            "  FAIL  a send that times out is delivered exactly once (5 of 10 timeouts send an email twice)",
        ]
    );
    assert_eq!(lines.len(), 9, "{text}");
    assert!(text.contains("4 of 9 properties hold"), "{text}");
    assert!(text.contains("replay it: notify check 2 --seed "), "{text}");
    assert!(text.contains("✉ dana: You joined ws_acme"), "{text}");
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_round_that_returns_before_marking_what_it_sent_is_caught() {
    // The rows a round sent are marked in one commit at its end: a lost
    // answer returns before it, and the rows the provider took stay
    // unsent, to go out again once the key window has passed.
    let (pattern, report) = variant("mark-at-end-of-round");
    assert_eq!(pattern, "PASS PASS PASS PASS PASS FAIL PASS PASS PASS");
    let details = report["verdicts"][5]["details"].to_string();
    assert!(
        details.contains("relay returned with no commit after it to record that"),
        "{details}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn marking_the_whole_round_at_its_end_loses_an_invite_made_during_it() {
    // An invite can commit while a relay round is sending: a relay that
    // marks every unsent row at the end marks that one too, unsent.
    let (pattern, report) = variant("mark-all-at-end");
    assert_eq!(pattern, "FAIL PASS PASS PASS PASS FAIL PASS PASS PASS");
    let scenario = report["verdicts"][0]["scenario"].as_str().unwrap();
    assert!(
        scenario.contains("during which another process invites"),
        "{scenario}"
    );
}
