//! A learner debugs a case like a real program: their prints are shown, a
//! hang or an early exit is one finding that names the operation, nothing
//! the case started outlives it, a terminal shows progress, and a reader
//! that closes early ends `notify` quietly. Edited cases run in a copy of
//! the workshop, so the repository's files are never touched.

use crate::common;
use crate::workshop;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{stderr, stdout};
use workshop::Workshop;

const CASE: &str = "cases/case01_outbox.rs";
/// The same target folder as the other tests' copies.
const TARGET: &str = "copies";

fn edit(shop: &Workshop, edits: &[(&str, &str)]) {
    let mut text = shop.read(CASE);
    for (from, to) in edits {
        assert!(text.contains(from), "the case has {from:?}");
        text = text.replacen(from, to, 1);
    }
    shop.write(CASE, &text);
}

/// Case processes still running whose command line has `marker`.
fn running(marker: &str) -> usize {
    // Read from /proc, so that no tool (pgrep) is needed to see them.
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| {
            String::from_utf8_lossy(c)
                .replace('\0', " ")
                .contains(marker)
        })
        .count()
}

/// `script` runs a command on a terminal of its own, where there is one.
fn has_script() -> bool {
    Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_case_that_prints_spawns_hangs_or_exits_early_is_explained_once() {
    let _turn = workshop::building();
    let shop = Workshop::new(TARGET);
    let shipped = shop.read(CASE);
    // The children's `sleep` carries a number of this run's own, so that
    // another test run on the machine cannot be counted as ours.
    let sleep = format!("41{}", std::process::id());
    let spawns = format!(
        "    println!(\"inviting {{}}\", invite.email);\n    eprintln!(\"to {{}}\", invite.workspace);\n    std::process::Command::new(\"sleep\").arg(\"{sleep}\").spawn()?;\n    let tx = db.transaction()?;"
    );
    edit(
        &shop,
        &[
            ("    let tx = db.transaction()?;", spawns.as_str()),
            (
                "    let unsent: Vec<(i64, String, String)> = db",
                "    let members: i64 = db.query_row(\"SELECT count(*) FROM memberships\", [], |r| r.get(0))?;\n    if members >= 2 {\n        dbg!(members);\n        loop {\n            std::thread::sleep(std::time::Duration::from_millis(20));\n        }\n    }\n    let unsent: Vec<(i64, String, String)> = db",
            ),
        ],
    );

    // run: the story, what the case printed under each operation, no
    // untried invite called "not added", and exit 2.
    let out = shop.notify(&["run", "1", "--timeout", "1.5"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}{}", stderr(&out));
    assert!(text.contains("what the case printed:"), "{text}");
    assert!(text.contains("process 1, invite dana:"), "{text}");
    assert!(text.contains("inviting dana@example.com"), "{text}");
    assert!(text.contains("to ws_acme"), "{text}");
    assert!(text.contains("members = 2"), "dbg! is shown: {text}");
    assert!(!text.contains("not added"), "{text}");
    assert!(text.contains("never tried"), "{text}");
    assert!(text.contains("relay, after invite eli"), "{text}");
    assert!(stderr(&out).contains("did not play its story to the end"));

    // check: one finding naming the operation, with the timeline up to it
    // and the output, instead of a timeout on every property.
    let out = shop.notify(&["check", "1", "--timeout", "1.5"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert_eq!(text.matches("HANG").count(), 1, "{text}");
    assert!(
        text.contains("HANG  relay, after invite eli did not finish within 1.5 s"),
        "{text}"
    );
    assert!(text.contains("COMMIT (invite commit 2)"), "{text}");
    assert!(text.contains("inviting eli@example.com"), "{text}");
    assert!(!text.contains("PASS"), "{text}");
    assert!(text.contains("NOT JUDGED"), "{text}");
    assert!(!text.contains("did not finish within 1.5 s;"), "{text}");

    // --json stays JSON, with the hang as a field of its own.
    let out = shop.notify(&["check", "1", "--timeout", "1.5", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["stopped"]["exit"]["exit"], "timed_out");
    assert_eq!(report["stopped"]["doing"], "relay, after invite eli");

    // Nothing the case started outlives it.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        running(&format!("sleep {sleep}")),
        0,
        "the case's children were stopped"
    );

    // On a terminal, a hung case says what it waits on.
    if has_script() {
        let notify = env!("CARGO_BIN_EXE_notify");
        let out = Command::new("script")
            .args(["-qec", &format!("{notify} run 1 --timeout 2"), "/dev/null"])
            .current_dir(shop.root())
            .env(
                "CARGO_TARGET_DIR",
                common::root().join("target").join(TARGET),
            )
            .env("NO_COLOR", "1")
            .env("TERM", "xterm")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = stdout(&out);
        assert!(
            text.contains("waiting on relay, after invite eli"),
            "{text}"
        );
    }

    a_case_that_exits_early_and_prints_in_a_loop(&shop, &shipped);
    a_case_that_panics_is_one_finding(&shop, &shipped);
    a_hang_in_plays_side_by_side_is_named_the_same_every_run(&shop);
}

/// A panic that breaks every property is shown once, with where it
/// happened, and the check ends with where to turn.
fn a_case_that_panics_is_one_finding(shop: &Workshop, shipped: &str) {
    shop.write(CASE, shipped);
    edit(
        shop,
        &[(
            "    let tx = db.transaction()?;",
            "    let tx = db.transaction()?;\n    if invite.email.starts_with(\"dana\") {\n        panic!(\"no seat map for {}\", invite.email);\n    }",
        )],
    );
    let out = shop.notify(&["check", "1"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert_eq!(text.matches("PANIC").count(), 1, "{text}");
    assert!(
        text.contains("the case panicked during invite dana: no seat map for dana@example.com"),
        "{text}"
    );
    assert!(text.contains("case01_outbox.rs:"), "{text}");
    assert_eq!(
        text.matches("panicked: no seat map").count(),
        0,
        "no property repeats it: {text}"
    );
    assert!(text.contains("each met the panic above"), "{text}");
    assert!(text.contains("1 case process in"), "{text}");
    assert!(text.contains("stuck? `notify hint 1`"), "{text}");
    let report: serde_json::Value =
        serde_json::from_slice(&shop.notify(&["check", "1", "--json"]).stdout).expect("JSON");
    assert_eq!(report["stopped"]["exit"]["exit"], "panicked");
}

/// The second half of the test above, in the same copy: one copy of the
/// workshop compiles the lab once.
fn a_case_that_exits_early_and_prints_in_a_loop(shop: &Workshop, shipped: &str) {
    shop.write(CASE, shipped);
    edit(
        shop,
        &[
            (
                "    let tx = db.transaction()?;",
                "    for i in 0..20_000 {\n        println!(\"line {i} for {}\", invite.email);\n    }\n    let tx = db.transaction()?;",
            ),
            (
                "    let unsent: Vec<(i64, String, String)> = db",
                "    let members: i64 = db.query_row(\"SELECT count(*) FROM memberships\", [], |r| r.get(0))?;\n    if members >= 3 {\n        std::process::exit(0);\n    }\n    let unsent: Vec<(i64, String, String)> = db",
            ),
        ],
    );
    let out = shop.notify(&["check", "1"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert_eq!(text.matches("EXIT").count(), 1, "{text}");
    assert!(
        text.contains("exited (code 0) during relay, after invite"),
        "{text}"
    );
    assert!(text.contains("output cut after 32 KB"), "{text}");
    assert!(text.contains("earlier lines not shown"), "{text}");
    assert!(text.contains("--show-output"), "{text}");
    assert!(!text.contains("PASS"), "{text}");
    // Shown lines are few; --show-output shows every kept line.
    let shown = text.lines().filter(|l| l.contains("line ")).count();
    assert!(shown <= 30, "{shown} lines shown");
    let all = stdout(&shop.notify(&["check", "1", "--show-output"]));
    let kept = all.lines().filter(|l| l.contains("line ")).count();
    assert!(kept > shown, "{kept} lines with --show-output");

    let out = shop.notify(&["run", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("never tried"), "{text}");
    assert!(text.contains("output cut after 32 KB"), "{text}");
}

/// Check 2 plays its batches side by side, and they hang in whatever
/// order; the hang it reports is the chapter's batch's, every run.
fn a_hang_in_plays_side_by_side_is_named_the_same_every_run(shop: &Workshop) {
    let case = "cases/case02_idempotency.rs";
    let shipped = shop.read(case);
    let send = "        db.execute(\"UPDATE outbox SET sent = 1 WHERE id = ?1\", [id])?;\n";
    assert!(shipped.contains(send), "case 2 marks each row sent");
    shop.write(
        case,
        &shipped.replacen(
            send,
            &format!("{send}        while id >= 2 {{\n            std::thread::sleep(std::time::Duration::from_millis(20));\n        }}\n"),
            1,
        ),
    );
    for _ in 0..2 {
        let out = shop.notify(&["check", "2", "--timeout", "1"]);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
        assert_eq!(text.matches("HANG").count(), 1, "{text}");
        assert!(
            text.contains("HANG  relay, after invite eli did not finish within 1.0 s"),
            "the chapter's batch, the first the check lists: {text}"
        );
    }
    shop.write(case, &shipped);
}

#[test]
fn a_terminal_shows_progress_and_a_pipe_stays_clean() {
    // Piped: no status line, no escape codes on stderr.
    let out = common::notify(&["check", "1"]);
    assert!(!stderr(&out).contains('\r'), "{}", stderr(&out));
    let out = common::notify(&["check", "1", "--json"]);
    assert!(!stderr(&out).contains('\r'), "{}", stderr(&out));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("JSON");
    // The first build of notify itself shows cargo's progress.
    let config = std::fs::read_to_string(common::root().join(".cargo/config.toml")).unwrap();
    assert!(config.contains("term.progress.when"), "{config}");
    if !has_script() {
        return;
    }
    let notify = env!("CARGO_BIN_EXE_notify");
    let out = Command::new("script")
        .args(["-qec", &format!("{notify} check 1"), "/dev/null"])
        .current_dir(common::root())
        .env("NO_COLOR", "1")
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(text.contains("case processes played"), "{text}");
    assert!(
        text.contains("\x1b[2K"),
        "the status line is cleared: {text}"
    );
    assert!(text.contains("properties hold"), "{text}");
}

/// Runs `notify args` with a reader that takes one line and goes away.
fn read_one_line(args: &[&str]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_notify"))
        .args(args)
        .current_dir(common::root())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    {
        let stdout = child.stdout.take().unwrap();
        BufReader::new(stdout).read_line(&mut first).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(!first.is_empty(), "{args:?} printed a line");
    out
}

#[test]
fn a_reader_that_closes_early_ends_notify_quietly() {
    for args in [
        &["list"][..],
        &["solution", "1", "--yes"],
        &["completions", "bash"],
        &["check", "--all"],
    ] {
        let out = read_one_line(args);
        assert_ne!(out.status.code(), Some(101), "{args:?}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// The run folders of scenario folders in `dir`.
fn run_folders(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("notify-run-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[cfg(unix)]
fn an_interrupted_check_leaves_no_scenario_folders_behind() {
    let scratch = tempfile::tempdir().unwrap();
    // A folder left by a run that was killed outright: its process is gone.
    let abandoned = scratch.path().join("notify-run-4000000-left");
    std::fs::create_dir_all(abandoned.join("scenario-x")).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_notify"))
        .args(["check", "7", "--solution"])
        .current_dir(common::root())
        .env("NO_COLOR", "1")
        .env("TMPDIR", scratch.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let ours = format!("notify-run-{pid}-");
    let started = std::time::Instant::now();
    // Interrupted once its scenarios are under way.
    loop {
        let busy = run_folders(scratch.path()).iter().any(|n| {
            n.starts_with(&ours)
                && std::fs::read_dir(scratch.path().join(n)).is_ok_and(|mut d| d.next().is_some())
        });
        if busy {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no scenario folder: {:?}",
            run_folders(scratch.path())
        );
        assert!(child.try_wait().unwrap().is_none(), "the check ended first");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGINT);
    }
    // Ended within a minute, or stopped here with a clear failure: a wait
    // without an end would hold the whole test run.
    let interrupted = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if interrupted.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("notify did not end within 60 s of SIGINT");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(!status.success(), "{status:?}");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGINT),
        "notify ends by the signal it was sent"
    );
    assert_eq!(
        run_folders(scratch.path()),
        Vec::<String>::new(),
        "neither this run's folder nor the abandoned one is left"
    );
}
