//! Chapter 10 end to end: the story `run` tells, and the grading matrix of
//! `check` over the shipped case, the reference and the catalogued wrong fixes.

use crate::common;

use common::{notify, stdout};

const SHIPPED_STORY: &str = "\
three comments, one each for ada, cleo and finn: the dispatcher wakes every minute
#1 is on an event titled `Picnic <img src=x onerror=alert(1)> (#1)`;
cleo never gave her name; #3's comment is 4335 bytes of Japanese and emoji

  #  who   channel  row     what reached them
  1  ada   email    SENT    <p>Ben commented on <b>Picnic <img src=x onerror=alert(1)> (#1)</b>:</p>  the title's markup, unescaped
  1  ada   push     SENT    Ben on Picnic <img src=x onerror=alert(1)> (#1): I'll bring the lemonade.
  2  cleo  email    SENT    Hello {name},  a placeholder
  2  cleo  push     SENT    Dev on Book club (#2): Chapter 3 for Thursday?
  3  finn  email    SENT    <p>Gia commented on <b>Tokyo trip (#3)</b>:</p>
  3  finn  push     FAILED  refused: 413 PayloadTooLarge (4359 bytes offered)

HTML bodies with unescaped markup in them: 1
messages with a placeholder in them: 1
pushes the provider refused as too large: 1
";

const SOLUTION_STORY: &str = "\
three comments, one each for ada, cleo and finn: the dispatcher wakes every minute
#1 is on an event titled `Picnic <img src=x onerror=alert(1)> (#1)`;
cleo never gave her name; #3's comment is 4335 bytes of Japanese and emoji

  #  who   channel  row     what reached them
  1  ada   email    SENT    <p>Ben commented on <b>Picnic &lt;img src=x onerror=alert(1)&gt; (#1)</b>:</p>
  1  ada   push     SENT    Ben on Picnic <img src=x onerror=alert(1)> (#1): I'll bring the lemonade.
  2  cleo  email    SENT    <p>Hello there,</p>
  2  cleo  push     SENT    Dev on Book club (#2): Chapter 3 for Thursday?
  3  finn  email    SENT    <p>Gia commented on <b>Tokyo trip (#3)</b>:</p>
  3  finn  push     SENT    Gia on Tokyo trip (#3): 写真、ありがとう！！楽しかったね… (4093 bytes)

HTML bodies with unescaped markup in them: 0
messages with a placeholder in them: 0
pushes the provider refused as too large: 0
";

#[test]
fn run_shows_markup_a_placeholder_and_a_push_refused_as_too_large() {
    let out = notify(&["run", "10"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), SHIPPED_STORY);
}

#[test]
fn run_after_the_fix_escapes_greets_the_nameless_by_default_and_cuts_the_push() {
    let out = notify(&["run", "10", "--solution"]);
    assert_eq!(stdout(&out), SOLUTION_STORY);
}

/// The verdicts of `check 10` with `args`, and the report.
fn check(args: &[&str]) -> (i32, String, serde_json::Value) {
    common::verdicts("10", args)
}

#[test]
fn the_shipped_case_fails_every_rule_of_rendering() {
    let (code, pattern, report) = check(&[]);
    assert_eq!(pattern, "FAIL FAIL FAIL FAIL FAIL PASS PASS PASS PASS PASS");
    assert_eq!(code, 1);
    let v = &report["verdicts"];
    let escaped = v[0]["details"].to_string();
    assert!(
        escaped.contains("is unescaped in the HTML body: <p>Ben commented on <b>Picnic <img src=x onerror=alert(1)> (#1)</b>"),
        "{escaped}"
    );
    let placeholders = v[1]["details"].to_string();
    assert!(
        placeholders.contains("#2 cleo (email): Hello {name},"),
        "{placeholders}"
    );
    let fits = v[2]["details"].to_string();
    assert!(
        fits.contains(
            "#3 finn: a push of 4359 bytes offered at 0:00:00; the provider answered 413"
        ),
        "{fits}"
    );
    let closed = v[3]["details"].to_string();
    assert!(
        closed.contains("#7 hugo (email): no comment (a moderator removed it), sent anyway"),
        "{closed}"
    );
}

#[test]
fn the_reference_solution_passes_everything() {
    let (code, pattern, _) = check(&["--solution"]);
    assert_eq!(pattern, "PASS PASS PASS PASS PASS PASS PASS PASS PASS PASS");
    assert_eq!(code, 0);
}

/// Each wrong fix, and the verdicts it gets: the chapter's four properties,
/// then agreement, survival, told once, settled, backoff.
const WRONG_FIXES: &[(&str, &str)] = &[
    (
        "rendered-at-publish",
        "FAIL PASS PASS PASS PASS PASS PASS PASS PASS PASS",
    ),
    (
        "text-as-template",
        "PASS PASS FAIL FAIL FAIL PASS PASS PASS PASS PASS",
    ),
    (
        "byte-slice",
        "FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL",
    ),
    (
        "chars-not-bytes",
        "PASS PASS FAIL PASS FAIL PASS PASS PASS PASS PASS",
    ),
    (
        "email-cut-too",
        "FAIL PASS PASS PASS PASS PASS PASS PASS PASS PASS",
    ),
    (
        "escapes-twice",
        "FAIL PASS PASS PASS PASS PASS PASS PASS PASS PASS",
    ),
    (
        "lenient-undefined",
        "PASS FAIL PASS FAIL FAIL PASS PASS PASS PASS PASS",
    ),
    (
        "lossy-cut",
        "PASS PASS FAIL PASS FAIL PASS PASS PASS PASS PASS",
    ),
    (
        "no-room-for-ellipsis",
        "PASS PASS FAIL PASS FAIL PASS PASS PASS PASS PASS",
    ),
    (
        "not-named-html",
        "FAIL PASS PASS PASS PASS PASS PASS PASS PASS PASS",
    ),
    (
        "retries-render-errors",
        "PASS PASS PASS FAIL PASS PASS PASS PASS PASS PASS",
    ),
    (
        "title-escaped-only",
        "FAIL PASS PASS PASS PASS PASS PASS PASS PASS PASS",
    ),
    (
        "optional-fails-closed",
        "PASS PASS FAIL FAIL FAIL PASS PASS PASS PASS PASS",
    ),
    (
        "default-everywhere",
        "PASS FAIL PASS FAIL FAIL PASS PASS PASS PASS PASS",
    ),
    (
        "push-cut-at-a-word",
        "PASS PASS FAIL PASS PASS PASS PASS PASS PASS PASS",
    ),
    (
        "push-room-without-the-default",
        "PASS PASS FAIL PASS FAIL PASS PASS PASS PASS PASS",
    ),
];

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn every_wrong_fix_fails_its_property() {
    for (variant, expected) in WRONG_FIXES {
        let (code, pattern, _) = check(&["--no-shrink", "--variant", variant]);
        assert_eq!(code, 1, "{variant}");
        assert_eq!(pattern, *expected, "{variant}");
    }
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn escaping_twice_shows_the_reader_the_entities() {
    let (_, _, report) = check(&["--no-shrink", "--variant", "escapes-twice"]);
    let details = report["verdicts"][0]["details"].to_string();
    assert!(
        details.contains(
            "is escaped twice in the HTML body: <p>Ben commented on <b>Picnic &amp;lt;img"
        ),
        "{details}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_lossy_cut_delivers_a_replacement_character() {
    let (_, _, report) = check(&["--no-shrink", "--variant", "lossy-cut"]);
    let details = report["verdicts"][2]["details"].to_string();
    assert!(
        details.contains(
            "#3 finn: the push arrived with a broken character (U+FFFD) at byte 4090 of 4096"
        ),
        "{details}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_slice_inside_a_character_is_a_clear_verdict_not_a_crash_of_notify() {
    let (_, _, report) = check(&["--no-shrink", "--variant", "byte-slice"]);
    let first = &report["verdicts"][0];
    assert_eq!(first["evidence"], "the case did not finish");
    let scenario = first["scenario"].to_string();
    assert!(
        scenario.contains("panicked") && scenario.contains("is not a char boundary"),
        "{scenario}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn a_retried_render_error_is_rendered_four_times() {
    let (_, _, report) = check(&["--no-shrink", "--variant", "retries-render-errors"]);
    let details = report["verdicts"][3]["details"].to_string();
    assert!(
        details.contains(
            "#7 hugo (email): no comment (a moderator removed it), rendered 4 times before it FAILED"
        ),
        "{details}"
    );
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn verdicts_are_the_same_on_every_run() {
    common::assert_replays_the_same(&["10"]);
    common::assert_replays_the_same(&["10", "--variant", "lossy-cut"]);
}
