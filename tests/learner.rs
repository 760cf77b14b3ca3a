//! A learner's own copy of the workshop: progress, and cases that do not
//! compile, panic or hang. Runs in a copy so the repository's files and
//! binaries are never touched.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{stderr, stdout};

const CASE: &str = "cases/case01_outbox.rs";

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A copy of the workshop with its own target folder (under this one's, so
/// the compiled dependencies survive between test runs).
struct Workshop {
    dir: tempfile::TempDir,
    target: PathBuf,
}

impl Workshop {
    fn new() -> Workshop {
        let root = common::root();
        let dir = tempfile::tempdir().unwrap();
        for name in ["Cargo.toml", "Cargo.lock"] {
            fs::copy(root.join(name), dir.path().join(name)).unwrap();
        }
        for name in [".cargo", "lab", "cases", "checks", "benches"] {
            copy_tree(&root.join(name), &dir.path().join(name));
        }
        Workshop {
            dir,
            target: root.join("target").join("learner-copy"),
        }
    }

    fn notify(&self, args: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_notify"))
            .args(args)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env("CARGO_TARGET_DIR", &self.target)
            .output()
            .unwrap()
    }

    fn case(&self) -> PathBuf {
        self.dir.path().join(CASE)
    }

    fn edit(&self, from: &str, to: &str) -> String {
        let text = fs::read_to_string(self.case()).unwrap();
        assert!(text.contains(from), "the case has {from:?}");
        let edited = text.replacen(from, to, 1);
        fs::write(self.case(), &edited).unwrap();
        edited
    }

    fn status(&self) -> String {
        let out = self.notify(&["list"]);
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
}

#[test]
fn a_learners_workshop_from_first_run_to_passing() {
    let shop = Workshop::new();
    let shipped = fs::read_to_string(shop.case()).unwrap();

    // Fresh: nothing started, and a corrupt progress file changes nothing.
    assert_eq!(shop.status(), "not started");
    fs::create_dir_all(shop.dir.path().join(".notify")).unwrap();
    fs::write(shop.dir.path().join(".notify/state.json"), "{ not json").unwrap();
    assert_eq!(shop.status(), "not started");
    assert!(stdout(&shop.notify(&["list"])).contains("next: notify run 1"));

    // A case that does not compile: cargo's errors, one line naming the case, exit 2.
    let broken = shop.edit("let tx = db.transaction()?;", "let tx = db.transaction()?");
    let out = shop.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("error"), "{err}");
    assert!(err.contains("case 1 does not compile"), "{err}");
    assert_eq!(
        fs::read_to_string(shop.case()).unwrap(),
        broken,
        "the edit is kept"
    );
    assert_eq!(shop.status(), "in progress");
    fs::write(shop.case(), &shipped).unwrap();

    // A case that panics: a FAIL that quotes the panic.
    shop.edit("    tx.commit()?;", "    panic!(\"the invite gave up\");");
    let out = shop.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("panicked: the invite gave up"), "{text}");
    assert!(
        !stderr(&out).contains("notify' panicked"),
        "{}",
        stderr(&out)
    );
    fs::write(shop.case(), &shipped).unwrap();

    // A case that hangs: every scenario has a timeout, and the hang is named.
    shop.edit(
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
    let solution = fs::read_to_string(shop.dir.path().join("checks/case01/solution.rs")).unwrap();
    fs::write(shop.case(), &solution).unwrap();
    let out = shop.notify(&["check", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(shop.status(), "passing");
    let list = stdout(&shop.notify(&["list"]));
    assert!(!list.contains("next: notify run 1"), "{list}");

    // Editing a passing case puts it back in progress until it is checked again.
    fs::write(shop.case(), format!("{solution}\n// a note\n")).unwrap();
    assert_eq!(shop.status(), "in progress");
}
