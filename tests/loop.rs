//! The learner's loop: watch, hint, reset, solution, progress, check --all,
//! read and completions, each through the real binary. Tests that edit a
//! case file or the progress file run in a copy of the workshop.

use crate::checks;
use crate::common;
use crate::workshop;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use common::{notify, stderr, stdout};
use lab::catalogue;
use lab::chapter::fingerprint;
use workshop::{building, Workshop};

const CASE: &str = "cases/case01_outbox.rs";
const SOLUTION: &str = "checks/case01/solution.rs";
/// The copies' cargo target folder, under `target/`, shared with the other
/// test files' copies so the dependencies are compiled once.
const TARGET: &str = "copies";

fn copy() -> Workshop {
    Workshop::new(TARGET)
}

/// Where `notify list` says chapter 1 stands.
fn status(shop: &Workshop) -> String {
    let out = shop.notify(&["list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.contains(CASE))
        .unwrap_or_else(|| panic!("list names {CASE}: {text}"))
        .to_string();
    ["not started", "in progress", "passing"]
        .into_iter()
        .find(|s| line.ends_with(s))
        .unwrap_or_else(|| panic!("a status on {line:?}"))
        .to_string()
}

#[test]
fn every_registered_chapter_keeps_a_shipped_patch_that_matches_its_fingerprint() {
    let root = common::root();
    let mut wrong = Vec::new();
    for chapter in checks::CHAPTERS {
        let file = catalogue::patch_file(chapter, catalogue::SHIPPED);
        match catalogue::source(&root, chapter, catalogue::SHIPPED) {
            Err(err) => wrong.push(format!(
                "chapter {}: {file} gives no shipped case (`notify reset {}` restores from it): {err:#}",
                chapter.number, chapter.number
            )),
            Ok(text) if fingerprint(text.as_bytes()) != chapter.shipped_hash => wrong.push(format!(
                "chapter {}: {file} does not give the case the registry fingerprints as shipped ({:#x}, registered {:#x})",
                chapter.number,
                fingerprint(text.as_bytes()),
                chapter.shipped_hash
            )),
            Ok(_) => {}
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// Two clones with one cargo target folder (many people set
/// `CARGO_TARGET_DIR` once for every project): cargo judges freshness by file
/// times, so it would hand the second clone the binary the first one built.
/// Each clone must be graded on its own file.
#[test]
fn two_clones_sharing_a_target_folder_are_each_graded_on_their_own_file() {
    let _turn = building();
    let a = copy();
    let b = copy();
    // B's case is as shipped and older than anything A builds, as after a
    // clone or a checkout that keeps file times.
    let long_ago = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(b.path(CASE))
        .and_then(|f| f.set_modified(long_ago))
        .unwrap();

    a.write(CASE, &a.read(SOLUTION));
    let out = a.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    let out = b.notify(&["check", "1", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("built from another version of its file"),
        "cargo handed over A's binary, and notify built B's again: {}",
        stderr(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        common::pattern(&report),
        "FAIL PASS PASS FAIL FAIL FAIL PASS PASS"
    );

    let out = b.notify(&["run", "1"]);
    assert!(
        stdout(&out).contains("emails for memberships that do not exist: 2"),
        "{}",
        stdout(&out)
    );
    assert_eq!(status(&a), "passing");
    assert_eq!(status(&b), "not started");
    // And back: A is graded on its own file again.
    let out = a.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn every_command_that_takes_a_chapter_rejects_an_unknown_one() {
    for command in ["run", "check", "watch", "hint", "solution", "reset", "read"] {
        let out = notify(&[command, "99"]);
        assert_eq!(out.status.code(), Some(2), "{command} 99");
        let err = stderr(&out);
        assert!(
            err.contains("there is no chapter \"99\""),
            "{command}: {err}"
        );
        assert!(err.contains("send after commit"), "{command}: {err}");
    }
}

#[test]
fn help_names_the_learners_commands() {
    let text = stdout(&notify(&["--help"]));
    for command in ["watch", "hint", "solution", "reset", "read", "completions"] {
        assert!(text.contains(command), "{command}: {text}");
    }
}

#[test]
fn hint_gives_one_hint_then_another_on_request() {
    let out = notify(&["hint", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = stdout(&out);
    assert!(first.starts_with("hint for case 1"), "{first}");
    assert!(first.contains("notify hint 1 --more"), "{first}");

    let out = notify(&["hint", "1", "--more"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let both = stdout(&out);
    assert!(both.contains("another hint:"), "{both}");
    assert!(
        both.len() > first.len(),
        "--more adds the second hint: {both}"
    );
}

#[test]
fn every_chapter_has_a_hint_and_a_second_one() {
    let out = notify(&["list"]);
    let chapters = stdout(&out)
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse::<u32>().ok())
        .collect::<Vec<_>>();
    assert!(chapters.len() >= 8, "{}", stdout(&out));
    for n in chapters {
        let n = n.to_string();
        let out = notify(&["hint", &n, "--more"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.starts_with(&format!("hint for case {n}")), "{text}");
        assert!(text.contains("another hint:"), "{text}");
    }
}

#[test]
fn a_chapter_without_hints_says_so() {
    let shop = copy();
    std::fs::remove_file(shop.path("checks/case01/hints.md")).unwrap();
    let out = shop.notify(&["hint", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("case 1 has no hints yet"), "{text}");
    assert!(text.contains("checks/case01/hints.md"), "{text}");
}

#[test]
fn read_prints_the_chapters_text_as_it_is_when_not_on_a_terminal() {
    let out = notify(&["read", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text =
        std::fs::read_to_string(common::root().join("chapters/01-send-after-commit.md")).unwrap();
    assert_eq!(stdout(&out), text);
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = notify(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.contains("notify"), "{shell}: {script}");
        assert!(script.contains("watch"), "{shell}: {script}");
    }
    assert_eq!(notify(&["completions", "cmd.exe"]).status.code(), Some(2));
}

#[test]
fn reset_saves_the_learners_file_then_puts_back_the_shipped_case() {
    let shop = copy();
    let shipped = shop.read(CASE);
    let edited = format!("{shipped}\n// my first attempt\n");
    shop.write(CASE, &edited);

    // No terminal to ask on, and no --yes: refused, nothing touched.
    let out = shop.notify(&["reset", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert_eq!(shop.read(CASE), edited);
    assert!(!shop.path(".notify/backups").exists());

    let out = shop.notify(&["reset", "1", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let saved = text
        .lines()
        .find_map(|l| l.split(" saved your cases/case01_outbox.rs in ").nth(1))
        .unwrap_or_else(|| panic!("reset says where it saved the file: {text}"));
    assert!(saved.starts_with(".notify/backups/"), "{saved}");
    assert!(saved.ends_with(CASE), "{saved}");
    assert_eq!(
        shop.read(saved),
        edited,
        "the backup holds the learner's file"
    );
    assert_eq!(shop.read(CASE), shipped, "the case is back as shipped");
    assert_eq!(status(&shop), "not started");

    // Nothing to reset: nothing saved, nothing asked.
    let out = shop.notify(&["reset", "--all"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("as shipped already"),
        "{}",
        stdout(&out)
    );
    let backups = std::fs::read_dir(shop.path(".notify/backups")).unwrap();
    assert_eq!(backups.count(), 1);

    // A second reset keeps the first backup: nothing is ever lost.
    shop.write(CASE, "// started over\n");
    let out = shop.notify(&["reset", "--all", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(shop.read(saved), edited);
    assert_eq!(shop.read(CASE), shipped);
    let backups = std::fs::read_dir(shop.path(".notify/backups")).unwrap();
    assert_eq!(backups.count(), 2);
}

#[test]
fn reset_restores_a_deleted_case_and_refuses_a_shipped_copy_that_drifted() {
    let shop = copy();
    let shipped = shop.read(CASE);
    std::fs::remove_file(shop.path(CASE)).unwrap();
    let out = shop.notify(&["reset", "1", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(shop.read(CASE), shipped);

    shop.write(CASE, "// mine\n");
    let solution = shop.read(SOLUTION);
    shop.write(SOLUTION, &format!("{solution}// changed\n"));
    let out = shop.notify(&["reset", "1", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("does not give the version"),
        "{}",
        stderr(&out)
    );
    assert_eq!(shop.read(CASE), "// mine\n", "the learner's file is kept");
}

#[test]
fn solution_asks_first_then_shows_a_diff_against_the_learners_file() {
    let _turn = building();
    let shop = copy();
    let out = shop.notify(&["solution", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("does not pass yet"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "nothing shown: {}", stdout(&out));

    let out = shop.notify(&["solution", "1", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let diff = stdout(&out);
    assert!(
        diff.starts_with(&format!("--- {CASE} (yours)\n+++ {SOLUTION}")),
        "{diff}"
    );
    assert!(diff.contains("\n@@ "), "{diff}");
    assert!(
        diff.lines()
            .any(|l| l.starts_with('-') && l.contains("email.send(")),
        "{diff}"
    );
    assert!(
        diff.lines()
            .any(|l| l.starts_with('+') && l.contains("INSERT INTO outbox")),
        "{diff}"
    );

    // Once the case passes, no question is asked.
    shop.write(CASE, &shop.read(SOLUTION));
    let out = shop.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = shop.notify(&["solution", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("is the reference solution, line for line"),
        "{}",
        stdout(&out)
    );

    // Nor once it has gained a `println!` since it passed.
    let printing = shop.read(SOLUTION).replacen(
        "pub fn relay(db: &mut Db, email: &Email) -> Result<()> {\n",
        "pub fn relay(db: &mut Db, email: &Email) -> Result<()> {\n    println!(\"relay\");\n",
        1,
    );
    assert!(
        printing.contains("println!(\"relay\")"),
        "the relay is there"
    );
    shop.write(CASE, &printing);
    let out = shop.notify(&["solution", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("-    println!(\"relay\");"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_deleted_or_corrupted_progress_file_is_rebuilt_by_checking_again() {
    let _turn = building();
    let shop = copy();
    let state = shop.path(".notify/state.json");
    shop.write(CASE, &shop.read(SOLUTION));
    assert_eq!(status(&shop), "in progress");
    assert_eq!(shop.notify(&["check", "1"]).status.code(), Some(0));
    assert_eq!(status(&shop), "passing");

    std::fs::write(&state, "{\"passed\": {\"1\": tru").unwrap();
    assert_eq!(status(&shop), "in progress");
    let list = stdout(&shop.notify(&["list"]));
    assert!(list.contains("could not be read"), "{list}");
    assert!(list.contains("next: notify watch 1"), "{list}");
    assert_eq!(shop.notify(&["check", "1"]).status.code(), Some(0));
    assert_eq!(status(&shop), "passing");
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(&text).is_ok(),
        "{text}"
    );

    std::fs::remove_dir_all(shop.path(".notify")).unwrap();
    assert_eq!(status(&shop), "in progress");
    assert_eq!(shop.notify(&["check", "1"]).status.code(), Some(0));
    assert_eq!(status(&shop), "passing");
}

#[test]
fn check_all_grades_every_chapter_in_order_and_records_progress() {
    let _turn = building();
    let shop = copy();
    let registered: Vec<u64> = checks::CHAPTERS
        .iter()
        .map(|c| u64::from(c.number))
        .collect();

    // Every other chapter's case is left not compiling, so that each of
    // their rows is an error that costs a failed build, not a full check:
    // what this test judges is the table, the order and the exit code.
    for chapter in &checks::CHAPTERS[1..] {
        let case = shop.read(chapter.case_file);
        shop.write(
            chapter.case_file,
            &format!("{case}\ncompile_error!(\"left broken by the test\");\n"),
        );
    }

    // Chapter 1 as shipped fails its check; the others do not compile: the
    // exit code is 2.
    let junit = shop.path("grades/junit.xml");
    let results = shop.path("grades/results.json");
    std::fs::create_dir_all(junit.parent().unwrap()).unwrap();
    let out = shop.notify(&[
        "check",
        "--all",
        "--junit",
        junit.to_str().unwrap(),
        "--gradescope",
        results.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}{}", stderr(&out));
    grade_files_tell_the_same(&junit, &results, registered.len());
    assert!(text.starts_with("  #  chapter"), "{text}");
    let numbers: Vec<u64> = text
        .lines()
        .skip(1)
        .map_while(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(numbers, registered, "one row per chapter, in order: {text}");
    let row = text.lines().nth(1).unwrap();
    assert!(row.contains("FAIL"), "{row}");
    let row = text.lines().nth(2).unwrap();
    assert!(row.contains("ERROR"), "{row}");
    assert!(text.contains("case 2 does not compile"), "{text}");
    if std::env::var_os("DATABASE_URL").is_none_or(|u| u.is_empty()) {
        let row = text.lines().find(|l| l.starts_with(" 12 ")).unwrap();
        assert!(row.contains("SKIP"), "{row}");
        assert!(
            text.contains("skipped: case 12 was not checked. Chapter 12 runs its relays on a real PostgreSQL server"),
            "{text}"
        );
        assert!(text.contains(" chapters pass (1 skipped); "), "{text}");
    }
    assert!(
        stderr(&out).contains("error"),
        "the compiler's errors are shown"
    );

    // With the reference fix, chapter 1 passes and progress remembers it.
    shop.write(CASE, &shop.read(SOLUTION));
    let out = shop.notify(&["check", "--all", "--json"]);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("JSON ({e}): {}{}", stdout(&out), stderr(&out)));
    let rows = summary["chapters"].as_array().unwrap();
    let numbers: Vec<u64> = rows
        .iter()
        .map(|r| r["chapter"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, registered, "one row per chapter, in order");
    assert_eq!(rows[0]["verdict"], "pass", "{:#}", rows[0]);
    assert_eq!(rows[0]["held"], 8);
    // Chapter 12 needs a PostgreSQL server: without one it is skipped, which
    // is neither a pass nor an error.
    let server = std::env::var_os("DATABASE_URL").is_some_and(|u| !u.is_empty());
    for row in &rows[1..] {
        let wanted = if row["chapter"] == 12 && !server {
            "skipped"
        } else {
            "error"
        };
        assert_eq!(row["verdict"], wanted, "{row:#}");
    }
    assert_eq!(out.status.code(), Some(2), "{summary:#}");
    assert_eq!(summary["passed"], false);
    assert_eq!(status(&shop), "passing");
}

/// The JUnit file, read by Python's XML parser, and the Gradescope file,
/// read against the fields Gradescope documents, agree: chapter 1 failing
/// some of its 8 properties, every other chapter an error or skipped.
fn grade_files_tell_the_same(junit: &Path, results: &Path, chapters: usize) {
    let read = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, json, xml.etree.ElementTree as E\n\
             root = E.parse(sys.argv[1]).getroot()\n\
             print(json.dumps([{'name': s.get('name'), 'tests': int(s.get('tests')),\n\
               'failures': len(s.findall('testcase/failure')),\n\
               'errors': len(s.findall('testcase/error')),\n\
               'skipped': len(s.findall('testcase/skipped')),\n\
               'cases': len(s.findall('testcase'))} for s in root.iter('testsuite')]))",
        )
        .arg(junit)
        .output()
        .expect("python3 runs");
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let suites: serde_json::Value = serde_json::from_slice(&read.stdout).expect("JSON");
    let suites = suites.as_array().unwrap();
    assert_eq!(suites.len(), chapters, "one testsuite per chapter");
    let first = &suites[0];
    assert!(
        first["name"].as_str().unwrap().starts_with("case 01: "),
        "{first}"
    );
    assert_eq!(first["cases"], 8, "{first}");
    assert_eq!(first["tests"], 8, "{first}");
    let failed = first["failures"].as_u64().unwrap();
    assert!((1..8).contains(&failed), "{first}");
    for suite in &suites[1..] {
        assert_eq!(suite["cases"], 1, "{suite}");
        assert_eq!(
            suite["errors"].as_u64().unwrap() + suite["skipped"].as_u64().unwrap(),
            1,
            "{suite}"
        );
    }

    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results).unwrap()).expect("JSON");
    let tests = results["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 8 + chapters - 1, "{results:#}");
    for test in tests {
        assert!(test["name"].is_string(), "{test}");
        assert!(test["output"].is_string(), "{test}");
        assert_eq!(test["max_score"], 1.0, "{test}");
        let score = test["score"].as_f64().unwrap();
        let passed = test["status"] == "passed";
        assert_eq!(score, if passed { 1.0 } else { 0.0 }, "{test}");
    }
    let held = 8 - failed as usize;
    assert_eq!(results["score"].as_f64(), Some(held as f64), "{results:#}");
    let replay = tests
        .iter()
        .filter(|t| t["status"] == "failed")
        .filter_map(|t| t["output"].as_str())
        .any(|o| o.contains("replay it: notify check 1 --seed"));
    assert!(replay, "a failed generated property says how to replay it");
}

/// A running `notify watch`, its output read line by line.
struct Watch {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Watch {
    fn start(shop: &Workshop, args: &[&str]) -> Watch {
        let mut child = shop
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, lines) = mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Watch {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits, within a generous bound, for a line that `wanted` accepts.
    fn wait_for(&mut self, what: &str, within: Duration, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "no {what} within {within:?}. The watch printed:\n{}",
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Waits for the next verdict line ("N of M properties hold").
    fn verdict(&mut self, within: Duration) -> String {
        self.wait_for("verdict", within, |l| l.contains("properties hold"))
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn quit(mut self) {
        self.send("q");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert_eq!(status.code(), Some(0));
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("watch did not quit on q");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The first build of a copy compiles the lab: give it all the time it needs.
const FIRST_BUILD: Duration = Duration::from_secs(900);
const A_CHECK: Duration = Duration::from_secs(300);

#[test]
fn watch_checks_again_on_every_save_even_by_rename() {
    let _turn = building();
    let shop = copy();
    let shipped = shop.read(CASE);
    let mut watch = Watch::start(&shop, &["watch", "1"]);
    let first = watch.verdict(FIRST_BUILD);
    assert!(first.starts_with("4 of 8"), "{first}");

    // A save the way many editors do it: a new file renamed over the old one.
    let fresh: PathBuf = shop.path("cases/.case01_outbox.rs.swp");
    std::fs::write(&fresh, shop.read(SOLUTION)).unwrap();
    std::fs::rename(&fresh, shop.path(CASE)).unwrap();
    let second = watch.verdict(A_CHECK);
    assert!(second.starts_with("8 of 8"), "{second}");
    watch.wait_for("the next step", A_CHECK, |l| l.contains("case 1 passes"));

    // A plain write in place.
    shop.write(CASE, &shipped);
    let third = watch.verdict(A_CHECK);
    assert!(third.starts_with("4 of 8"), "{third}");

    // Keys arrive as lines when standard input is not a terminal.
    watch.send("h");
    watch.wait_for("the hint", A_CHECK, |l| l.starts_with("hint for case 1"));
    watch.send("r");
    watch.wait_for("the run", A_CHECK, |l| l.starts_with("emails sent: 5"));
    watch.quit();
    assert_eq!(status(&shop), "not started");
}

#[test]
fn watch_manual_checks_again_on_enter_and_picks_the_first_chapter_to_do() {
    let _turn = building();
    let shop = copy();
    let page = shop.path("picture.html");
    let mut watch = Watch::start(
        &shop,
        &["watch", "--manual", "--html", page.to_str().unwrap()],
    );
    let header = watch.wait_for("the header", FIRST_BUILD, |l| l.starts_with("case "));
    assert!(header.starts_with("case 1: "), "{header}");
    assert!(header.contains(CASE), "{header}");
    let first = watch.verdict(FIRST_BUILD);
    assert!(first.starts_with("4 of 8"), "{first}");
    // With --html, a failing check says where its picture is.
    let said = format!("the picture: {}", page.display());
    watch.wait_for("the picture's path", A_CHECK, |l| l.contains(&said));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("The reference, on the same scenario"),
        "{html}"
    );
    let keys = watch.wait_for("the keys", A_CHECK, |l| {
        l.contains("press Enter to check again")
    });
    // The screen shows the first failure in full and the others on a line
    // each; f shows them all.
    assert!(keys.contains("f full report"), "{keys}");
    let generated = |l: &String| l.starts_with("        generated scenario (seed");
    assert!(!watch.seen.iter().any(generated), "{:#?}", watch.seen);
    watch.send("f");
    watch.wait_for("the full report", A_CHECK, |l| {
        l.starts_with("        generated scenario (seed")
    });
    let full = watch.verdict(A_CHECK);
    assert!(full.starts_with("4 of 8"), "{full}");

    shop.write(CASE, &shop.read(SOLUTION));
    watch.send("");
    let second = watch.verdict(A_CHECK);
    assert!(second.starts_with("8 of 8"), "{second}");
    watch.wait_for("what was proven", A_CHECK, |l| {
        l.starts_with("case 1 passes: all 8 properties hold")
    });
    watch.wait_for("the offer to move on", A_CHECK, |l| {
        l.contains("press n to move on to case 2")
    });

    // n moves on to the next chapter and checks it.
    watch.send("n");
    let header = watch.wait_for("the next header", FIRST_BUILD, |l| l.starts_with("case "));
    assert!(header.starts_with("case 2: "), "{header}");
    watch.verdict(FIRST_BUILD);
    watch.quit();
    assert_eq!(status(&shop), "passing");
}
