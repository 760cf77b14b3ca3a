//! Bad input gets a clear message and exit code 2, and `notify` never panics.

use crate::common;

use common::{notify, notify_in, stderr, stdout};

#[test]
fn an_unknown_case_lists_the_cases_that_exist() {
    for bad in ["0", "99", "abc", "-1"] {
        for command in ["run", "check"] {
            let out = notify(&[command, "--", bad]);
            assert_eq!(out.status.code(), Some(2), "{command} {bad}");
            let err = stderr(&out);
            assert!(
                err.contains("there is no chapter"),
                "{command} {bad}: {err}"
            );
            assert!(err.contains("send after commit"), "{command} {bad}: {err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
}

#[test]
fn outside_the_workshop_it_says_where_to_go() {
    let away = tempfile::tempdir().unwrap();
    let out = notify_in(away.path(), &["run", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("inside the workshop's folder"), "{err}");
    assert!(err.contains(&away.path().display().to_string()), "{err}");
}

#[test]
fn it_finds_the_workshop_from_a_folder_inside_it() {
    let out = notify_in(&common::root().join("cases"), &["run", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("sending 5 invitations"));
}

#[test]
fn an_unknown_variant_lists_the_variants() {
    let out = notify(&["check", "1", "--variant", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no variant \"nope\""), "{err}");
    assert!(err.contains("send-after-commit"), "{err}");
}

#[test]
fn a_timeout_must_be_a_positive_number_of_seconds() {
    for bad in ["0", "-3", "abc", "inf"] {
        let out = notify(&["check", "1", &format!("--timeout={bad}")]);
        assert_eq!(out.status.code(), Some(2), "--timeout {bad}");
        assert!(!stderr(&out).is_empty());
    }
}

#[test]
fn an_unknown_experiment_lists_the_experiments() {
    let out = notify(&["try", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("outbox"), "{}", stderr(&out));
}

#[test]
fn try_relays_without_a_server_says_how_to_get_one() {
    // Outside the workshop: inside it, a build without the feature has
    // cargo build one with it and runs that (a minute's build, and this
    // binary replaced under the other tests' feet).
    let outside = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_notify"))
        .args(["try", "relays"])
        .current_dir(outside.path())
        .env("NO_COLOR", "1")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    let err = stderr(&out);
    // Without the feature the build cannot talk to PostgreSQL at all; with
    // it, what is missing is a server.
    let hint = if cfg!(feature = "postgres") {
        "lab/scripts/postgres-up"
    } else {
        "--features postgres"
    };
    assert!(err.contains(hint), "{err}");
}

#[test]
fn help_names_every_command() {
    let out = notify(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    for command in ["run", "check", "list", "try"] {
        assert!(text.contains(command), "{text}");
    }
    let out = notify(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_case_binary_run_by_hand_says_how_to_use_it() {
    let exe = env!("CARGO_BIN_EXE_case01");
    let out = std::process::Command::new(exe).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("notify run 1"));
}

#[test]
fn an_unusable_temp_folder_is_named() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_notify"))
        .args(["run", "1"])
        .current_dir(common::root())
        .env("NO_COLOR", "1")
        .env("TMPDIR", "/nonexistent/notify-tmp")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("/nonexistent/notify-tmp"), "{err}");
    assert!(err.contains("TMPDIR"), "{err}");
}

#[test]
fn json_to_writes_the_verdicts_the_printed_report_shows() {
    let played = common::checked(&["1", "--solution"]);
    assert_eq!(played.code, 0, "{}", played.text);
    assert_eq!(played.report["passed"], true);
    let verdicts = played.report["verdicts"].as_array().unwrap();
    assert!(!verdicts.is_empty());
    for verdict in verdicts {
        let property = verdict["property"].as_str().unwrap();
        assert!(
            played.text.contains(&format!("PASS  {property}")),
            "{property} is printed too: {}",
            played.text
        );
    }

    let away = tempfile::tempdir().unwrap();
    let nowhere = away.path().join("no such folder").join("report.json");
    let out = notify(&[
        "check",
        "1",
        "--solution",
        "--json-to",
        nowhere.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("could not write the verdicts"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));

    let out = notify(&["check", "--all", "--json-to", "x.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn coverage_counts_the_worlds_that_reach_each_situation() {
    let out = notify(&["check", "1", "--solution", "--coverage", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["coverage"].as_array().expect("a coverage array");
    assert!(!rows.is_empty());
    for row in rows {
        assert!(row["worlds"].as_u64().unwrap() > 0, "{row}");
    }
    assert!(
        rows.iter()
            .any(|r| r["rule"] == "one person with two invites waiting for the same relay pass"),
        "{report}"
    );
    // Without the flag, the report carries no coverage.
    let plain = notify(&["check", "1", "--solution", "--json"]);
    let plain: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(plain.get("coverage").is_none());
    let text = stdout(&notify(&["check", "1", "--solution", "--coverage"]));
    assert!(
        text.contains("coverage: generated worlds that reach each situation the rules turn on"),
        "{text}"
    );
}
