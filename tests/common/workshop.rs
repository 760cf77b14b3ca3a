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
        for name in [".cargo", "lab", "cases", "checks", "benches", "chapters"] {
            copy_tree(&root.join(name), &dir.path().join(name));
        }
        Workshop {
            dir,
            target: root.join("target").join(target),
        }
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
