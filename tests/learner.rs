//! A learner's own copy of the workshop: progress, and cases that do not
//! compile, panic or hang. Runs in a copy so the repository's files and
//! binaries are never touched.

use crate::common;
use crate::workshop;

use std::fs;
use std::path::PathBuf;

use common::{stderr, stdout};
use workshop::Workshop;

const CASE: &str = "cases/case01_outbox.rs";

/// The copies' cargo target folder, under `target/`: the same as the other
/// test files' copies, so the dependencies are compiled once. Copies that
/// share it are safe because notify checks every binary it runs against the
/// file it grades.
const TARGET: &str = "copies";

fn copy() -> Workshop {
    Workshop::new(TARGET)
}

fn case(shop: &Workshop) -> PathBuf {
    shop.path(CASE)
}

fn edit(shop: &Workshop, from: &str, to: &str) -> String {
    let text = shop.read(CASE);
    assert!(text.contains(from), "the case has {from:?}");
    let edited = text.replacen(from, to, 1);
    shop.write(CASE, &edited);
    edited
}

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
fn a_learners_workshop_from_first_run_to_passing() {
    let _turn = workshop::building();
    let shop = copy();
    let shipped = fs::read_to_string(case(&shop)).unwrap();

    // Fresh: nothing started, and a corrupt progress file changes nothing.
    assert_eq!(status(&shop), "not started");
    fs::create_dir_all(shop.path(".notify")).unwrap();
    fs::write(shop.path(".notify/state.json"), "{ not json").unwrap();
    assert_eq!(status(&shop), "not started");
    assert!(stdout(&shop.notify(&["list"])).contains("next: notify run 1"));

    // A case that does not compile: cargo's errors, one line naming the case, exit 2.
    let broken = edit(
        &shop,
        "let tx = db.transaction()?;",
        "let tx = db.transaction()?",
    );
    let out = shop.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("error"), "{err}");
    assert!(err.contains("case 1 does not compile"), "{err}");
    assert_eq!(
        fs::read_to_string(case(&shop)).unwrap(),
        broken,
        "the edit is kept"
    );
    assert_eq!(status(&shop), "in progress");
    fs::write(case(&shop), &shipped).unwrap();

    // A case that panics: one finding that quotes the panic.
    edit(
        &shop,
        "    tx.commit()?;",
        "    panic!(\"the invite gave up\");",
    );
    let out = shop.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("panicked during invite"), "{text}");
    assert!(text.contains(": the invite gave up"), "{text}");
    assert!(
        !stderr(&out).contains("notify' panicked"),
        "{}",
        stderr(&out)
    );
    fs::write(case(&shop), &shipped).unwrap();

    // A case that hangs: every scenario has a timeout, and the hang is named.
    edit(&shop,
        "    let tx = db.transaction()?;",
        "    loop {\n        std::thread::sleep(std::time::Duration::from_millis(20));\n    }\n    #[allow(unreachable_code)]\n    let tx = db.transaction()?;",
    );
    let out = shop.notify(&["check", "1", "--timeout", "0.5"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("did not finish within 0.5 s"), "{text}");
    assert!(
        !text.contains("PASS"),
        "a case that hangs passes nothing: {text}"
    );

    // The reference fix passes, and progress remembers it.
    let solution = fs::read_to_string(shop.path("checks/case01/solution.rs")).unwrap();
    fs::write(case(&shop), &solution).unwrap();
    let out = shop.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(status(&shop), "passing");
    let list = stdout(&shop.notify(&["list"]));
    assert!(!list.contains("next: notify run 1"), "{list}");

    // Editing a passing case puts it back in progress until it is checked again.
    fs::write(case(&shop), format!("{solution}\n// a note\n")).unwrap();
    assert_eq!(status(&shop), "in progress");
}
