//! A learner's own copy of the workshop, for tests that edit case files or
//! progress: the repository's files are never touched, and the copy builds
//! in a target folder of its own (under this one's, so compiled
//! dependencies survive between test runs).
//!
//! Include it with `#[path = "common/workshop.rs"] mod workshop;`.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Copies the files under `from` to `to`, but those `skip` names. With
/// `keep_times`, each copy keeps its file's modification time (cargo
/// compares them); otherwise it is new, as an edit would make it.
fn copy_tree(from: &Path, to: &Path, skip: fn(&str) -> bool, keep_times: bool) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target, skip, keep_times);
        } else if !skip(&name.to_string_lossy()) {
            fs::copy(entry.path(), &target).unwrap();
            if keep_times {
                let modified = entry.metadata().and_then(|m| m.modified()).unwrap();
                fs::File::options()
                    .write(true)
                    .open(&target)
                    .and_then(|f| f.set_modified(modified))
                    .unwrap();
            }
        }
    }
}

/// Gives a copies' target folder the dependencies that this test run's own
/// build has just compiled, once: a fresh folder would compile every one of
/// them again (SQLite included), a minute or two of CPU on a clean clone.
/// Cargo finds the copied ones fresh and compiles only the workshop's own
/// crate. File times are kept, as cargo compares them. The workshop's own
/// binaries (the cases, notify, the test suite) are left behind: each copy
/// builds its own.
fn seed(target: &Path) {
    static SEEDED: std::sync::Once = std::sync::Once::new();
    SEEDED.call_once(|| {
        let seeded = target.join("debug");
        if seeded.join(".fingerprint").is_dir() {
            return;
        }
        // `target/debug/notify`: its folder is this run's build.
        let built = Path::new(env!("CARGO_BIN_EXE_notify")).parent().unwrap();
        let staged = target.join(format!("debug.seeding-{}", std::process::id()));
        let _ = fs::remove_dir_all(&staged);
        for folder in ["build", ".fingerprint", "deps"] {
            if built.join(folder).is_dir() {
                copy_tree(&built.join(folder), &staged.join(folder), ours, true);
            }
        }
        if fs::rename(&staged, &seeded).is_err() {
            // Another run seeded it first.
            let _ = fs::remove_dir_all(&staged);
        }
    });
}

/// Whether a file in `deps/` is one of the workshop's own binaries or its
/// library, which a copy builds from its own sources.
fn ours(name: &str) -> bool {
    let own = [
        "case0", "case1", "suite-", "outbox-", "claim-", "lab-", "liblab-",
    ];
    own.iter().any(|prefix| name.starts_with(prefix))
        || (name.starts_with("notify-") && !name.contains('.'))
}

/// Copies share one target folder, where the lab's library and each case's
/// binary have one path whichever copy built them: cargo names a path
/// crate by its place in its workspace, the same in every copy. One copy's
/// build would replace files another copy is linking against, so the
/// tests that run `notify` in a copy take turns, whichever file they are in.
pub fn building() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A temporary copy of the workshop.
pub struct Workshop {
    pub dir: tempfile::TempDir,
    target: PathBuf,
}

impl Workshop {
    /// Copies the workshop; `target` names its cargo target folder under
    /// `target/`, shared by the tests of one file.
    pub fn new(target: &str) -> Workshop {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let dir = tempfile::tempdir().unwrap();
        for name in ["Cargo.toml", "Cargo.lock"] {
            fs::copy(root.join(name), dir.path().join(name)).unwrap();
        }
        // The learner's files are new, as an edit makes them: cargo must
        // not take another copy's build of a case for this one's. The rest
        // keeps its times, so the lab library that one copy built is fresh
        // for the next instead of being compiled again for each.
        copy_tree(
            &root.join("cases"),
            &dir.path().join("cases"),
            |_| false,
            false,
        );
        for name in [".cargo", "lab", "checks", "benches", "chapters"] {
            copy_tree(&root.join(name), &dir.path().join(name), |_| false, true);
        }
        let target = root.join("target").join(target);
        seed(&target);
        Workshop { dir, target }
    }

    /// The copy's root folder.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A file of the copy, from a path relative to its root.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    pub fn read(&self, file: &str) -> String {
        fs::read_to_string(self.path(file)).unwrap()
    }

    pub fn write(&self, file: &str, text: &str) {
        fs::write(self.path(file), text).unwrap();
    }

    /// `notify` with `args`, in the copy, without colour, with no input.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_notify"));
        command
            .args(args)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("COLUMNS")
            .env("CARGO_TARGET_DIR", &self.target)
            .stdin(Stdio::null());
        command
    }

    /// Runs `notify` with `args` in the copy.
    pub fn notify(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
}
