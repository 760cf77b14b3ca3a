//! What the learner reads around the verdicts, through the real binary: a
//! check that fits an 80-column terminal and keeps its evidence bright, the
//! compiler's warnings and signature errors, the line under a pass, reset's
//! memory and --restore, a chapter past the last, watch on a real terminal, and the
//! README's commands.

use crate::common;
use crate::workshop;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{stderr, stdout};
use workshop::{building, Workshop};

const CASE: &str = "cases/case01_outbox.rs";
const SOLUTION: &str = "checks/case01/solution.rs";
/// The copies' cargo target folder, shared with the other test files' copies.
const TARGET: &str = "copies";

/// `notify check 2` at the workshop's root (its shipped case fails, with a
/// timeout in its timeline), with `env` set.
fn check_2(env: &[(&str, &str)]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_notify"));
    command
        .args(["check", "2"])
        .current_dir(common::root())
        .env_remove("COLUMNS")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE");
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn a_failing_check_fits_80_columns_and_keeps_its_evidence_whole_and_bright() {
    let text = check_2(&[("COLUMNS", "80"), ("NO_COLOR", "1")]);
    let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 79).collect();
    assert!(wide.is_empty(), "lines wider than 79 columns: {wide:#?}");
    assert!(
        text.lines()
            .any(|l| l.contains("(the message may have gone out)")),
        "the timeout's key words stay together on a line:\n{text}"
    );
    assert!(text.contains("service"), "{text}");
    assert!(!text.contains('…'), "nothing is cut off:\n{text}");

    // Piped with no width: the timeline keeps its 104-column layout, and
    // an error runs on into the empty lanes instead of being cut.
    let piped = check_2(&[("NO_COLOR", "1")]);
    assert!(
        piped.contains(
            "\n        error: no answer in time: the email provider did not answer (the message may have gone out)\n"
        ),
        "{piped}"
    );
    assert!(piped.contains(
        "        service                         database                    provider\n"
    ));

    // In colour, only the lanes' header is dim: the events are the evidence.
    let colour = check_2(&[("CLICOLOR_FORCE", "1"), ("COLUMNS", "100")]);
    let dim = "\x1b[2m";
    let header = colour
        .lines()
        .find(|l| l.contains("service") && l.contains("provider"))
        .unwrap_or_else(|| panic!("a timeline: {colour}"));
    assert!(header.contains(dim), "{header:?}");
    let sends: Vec<&str> = colour.lines().filter(|l| l.contains('✉')).collect();
    assert!(!sends.is_empty(), "{colour}");
    for line in sends {
        assert!(!line.contains(dim), "an event is not dim: {line:?}");
    }
}

#[test]
fn a_learners_case_from_a_signature_error_to_a_warned_pass_then_reset_and_restored() {
    let _turn = building();
    let shop = Workshop::new(TARGET);
    let shipped = shop.read(CASE);

    // An operation that lost a parameter: the accepted signatures, and the
    // one it was shipped with, instead of a riddle about adapters.
    shop.write(
        CASE,
        &shipped.replacen(
            "pub fn invite(db: &mut Db, email: &Email, invite: &Invite)",
            "pub fn invite(db: &mut Db, invite: &Invite)",
            1,
        ),
    );
    let out = shop.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    for wanted in [
        "`lab::serve!` cannot call this operation",
        "fn(&mut Db, &Email, &Input) -> Result<()>",
        "operation `invite` must keep the signature it was shipped with",
        "    pub fn invite(db: &mut Db, email: &Email, invite: &Invite) -> Result<()>",
        "case 1 does not compile",
    ] {
        assert!(err.contains(wanted), "{wanted:?} in:\n{err}");
    }
    assert!(!err.contains("Adapter<"), "{err}");

    // The reference fix with an unused parameter: it passes, the warning
    // chapter 1 mentions is shown, and the pass says what comes next.
    let solution = shop.read(SOLUTION);
    let warned = solution.replacen("_email: &Email, invite", "email: &Email, invite", 1);
    assert_ne!(warned, solution, "the solution's invite ignores its email");
    shop.write(CASE, &warned);
    let out = shop
        .command(&["check", "1"])
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("unused variable: `email`"), "{err}");
    assert!(
        err.contains("the warnings above are about cases/case01_outbox.rs"),
        "{err}"
    );
    assert!(!err.contains("lab/"), "only the case's warnings: {err}");
    let text = stdout(&out);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("case 1 passes: all 8 properties hold on the chapter's own scenarios and on 6 generated scenarios, under "),
        "{text}"
    );
    assert!(last.ends_with("Next: `notify read 2`."), "{last}");
    let json = shop.notify(&["check", "1", "--json"]);
    assert!(
        serde_json::from_slice::<serde_json::Value>(&json.stdout).is_ok(),
        "--json stays clean: {}",
        stdout(&json)
    );

    // Reset keeps the memory of the pass, and --restore brings the file back.
    let out = shop.notify(&["reset", "1", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("`notify reset 1 --restore` brings your version back"),
        "{}",
        stdout(&out)
    );
    assert_eq!(shop.read(CASE), shipped);
    let list = stdout(&shop.notify(&["list"]));
    let line = list.lines().find(|l| l.contains(CASE)).unwrap();
    assert!(line.ends_with("passed before · not started"), "{list}");
    assert!(list.contains("next: notify run 2"), "{list}");

    let out = shop.notify(&["reset", "1", "--restore"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("restored your cases/case01_outbox.rs from .notify/backups/"));
    assert_eq!(shop.read(CASE), warned);
    let list = stdout(&shop.notify(&["list"]));
    let line = list.lines().find(|l| l.contains(CASE)).unwrap();
    assert!(line.ends_with("passing"), "{list}");

    // Restoring over changes of the learner's asks first, or needs --yes.
    shop.write(CASE, "// another attempt\n");
    let out = shop.notify(&["reset", "1", "--restore"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert_eq!(shop.read(CASE), "// another attempt\n");
    let out = shop.notify(&["reset", "1", "--restore", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(shop.read(CASE), warned);
    assert!(stdout(&out).contains("saved your cases/case01_outbox.rs in .notify/backups/"));
}

#[test]
fn a_chapter_past_the_last_is_refused_with_the_list_of_cases() {
    // Every chapter of the workshop is written: nothing is left planned, and
    // a number past the last names every case there is.
    assert!(crate::checks::PLANNED.is_empty());
    let last = crate::checks::CHAPTERS.last().unwrap();
    let past = (last.number + 1).to_string();
    for command in ["read", "run", "check"] {
        let out = common::notify(&[command, &past]);
        assert_eq!(out.status.code(), Some(2), "{command} {past}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!("there is no chapter \"{past}\"")),
            "{command}: {err}"
        );
        for chapter in crate::checks::CHAPTERS {
            assert!(
                err.contains(&format!("{:>4}  {}", chapter.number, chapter.title)),
                "{command}: {err}"
            );
        }
    }
}

/// `notify watch 1 --manual` on a real terminal (through `script`), with
/// `term` as TERM: what it printed until it showed a verdict and took `q`.
fn watch_on_a_terminal(shop: &Workshop, term: &str) -> Option<String> {
    let script = Command::new("script").arg("--version").output();
    if !script.is_ok_and(|o| o.status.success()) {
        eprintln!("note: no `script` command to make a terminal with; skipped");
        return None;
    }
    let notify = env!("CARGO_BIN_EXE_notify");
    let mut child = shop
        .command(&[])
        .env("TERM", term)
        .env("COLUMNS", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_with_program(
            "script",
            &["-qec", &format!("{notify} watch 1 --manual"), "/dev/null"],
        );
    let mut output = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = output.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut quit_sent = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_secs(1))) {
            Ok(bytes) => seen.extend(bytes),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                panic!(
                    "watch showed no verdict: {}",
                    String::from_utf8_lossy(&seen)
                );
            }
        }
        let text = String::from_utf8_lossy(&seen);
        if !quit_sent && text.contains("press Enter") && !text.contains("properties hold") {
            // A check ended without a verdict: an error screen.
            let _ = child.kill();
            panic!("watch showed no verdict: {text}");
        }
        if !quit_sent && text.contains("properties hold") && text.contains("press Enter") {
            let stdin = child.stdin.as_mut().unwrap();
            stdin.write_all(b"q").unwrap();
            stdin.flush().unwrap();
            quit_sent = true;
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{}", String::from_utf8_lossy(&seen));
    Some(String::from_utf8_lossy(&seen).into_owned())
}

/// Starting `program` with the settings of a prepared `notify` command.
trait SpawnWith {
    fn spawn_with_program(&mut self, program: &str, args: &[&str]) -> std::process::Child;
}

impl SpawnWith for Command {
    fn spawn_with_program(&mut self, program: &str, args: &[&str]) -> std::process::Child {
        let mut command = Command::new(program);
        command.args(args);
        if let Some(dir) = self.get_current_dir() {
            command.current_dir(dir);
        }
        for (key, value) in self.get_envs() {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

#[test]
fn watch_on_a_terminal_keeps_the_scrollback_and_a_dumb_one_gets_no_escape_codes() {
    let _turn = building();
    let shop = Workshop::new(TARGET);
    let Some(smart) = watch_on_a_terminal(&shop, "xterm-256color") else {
        return;
    };
    assert!(
        smart.contains("\x1b[2J"),
        "the screen is cleared: {smart:?}"
    );
    assert!(
        !smart.contains("\x1b[3J"),
        "the scrollback stays: {smart:?}"
    );
    assert!(
        smart.contains("\x1b]8;;file://"),
        "the case file is a link: {smart:?}"
    );

    let dumb = watch_on_a_terminal(&shop, "dumb").expect("script ran before");
    assert!(dumb.contains("properties hold"), "{dumb:?}");
    for code in ["\x1b[2J", "\x1b[3J", "\x1b]8;;"] {
        assert!(!dumb.contains(code), "{code:?} under TERM=dumb: {dumb:?}");
    }
}

/// Every `notify ...` command the README shows, each with whether it is
/// in a code block (a command to type) or in the prose's inline code.
fn readme_commands(readme: &str) -> Vec<(Vec<String>, bool)> {
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut prose = String::new();
    let mut add = |text: &str, block: bool| {
        let text = text.trim();
        let text = text.strip_prefix("cargo ").unwrap_or(text);
        if let Some(args) = text.strip_prefix("notify ") {
            if !args.contains("...") {
                let args = args.split_whitespace().map(String::from).collect();
                commands.push((args, block));
            }
        }
    };
    for line in readme.lines() {
        if line.starts_with("```") {
            in_block = !in_block && (line.trim() == "```sh" || line.trim() == "```console");
            continue;
        }
        if in_block {
            let line = line.trim_start_matches("$ ");
            add(line.split('#').next().unwrap_or(""), true);
        } else {
            prose.push_str(line);
            prose.push(' ');
        }
    }
    let prose = prose.split_whitespace().collect::<Vec<_>>().join(" ");
    for code in prose.split('`').skip(1).step_by(2) {
        add(code, false);
    }
    commands
}

#[test]
fn the_readme_says_notify_means_cargo_notify_and_its_commands_are_real() {
    let readme = std::fs::read_to_string(common::root().join("README.md")).unwrap();
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let said = flat
        .find("`notify ...`: type `cargo notify ...` instead")
        .expect("the README says what `notify` means");
    assert_eq!(
        flat.find("`notify "),
        Some(said),
        "it says so before the first plain `notify`"
    );
    let test_line = readme
        .lines()
        .find(|l| l.starts_with("cargo test"))
        .expect("the README shows `cargo test`");
    assert!(
        test_line.contains("minutes"),
        "it says how long `cargo test` takes: {test_line}"
    );

    let commands = readme_commands(&readme);
    assert!(commands.len() >= 12, "{commands:?}");
    // Each parses as shown (clap stops at --help after checking every
    // argument before it).
    for (args, _) in &commands {
        let mut with_help: Vec<&str> = args.iter().map(String::as_str).collect();
        with_help.push("--help");
        let out = common::notify(&with_help);
        assert_eq!(
            out.status.code(),
            Some(0),
            "`notify {}` does not parse: {}",
            args.join(" "),
            stderr(&out)
        );
    }
    // And the quick ones of its code blocks run as shown, in order, on a
    // fresh copy.
    let _turn = building();
    let shop = Workshop::new(TARGET);
    let quick = ["run", "read", "hint", "reset", "list", "completions"];
    let typed = commands
        .iter()
        .filter(|(args, block)| *block && quick.contains(&args[0].as_str()));
    let mut ran = 0;
    for (args, _) in typed {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = shop.notify(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "`notify {}`: {}{}",
            args.join(" "),
            stdout(&out),
            stderr(&out)
        );
        ran += 1;
    }
    assert!(ran >= 5, "{commands:?}");
}
