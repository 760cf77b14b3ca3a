//! Progress: which chapters pass, kept in `.notify/state.json` at the
//! workshop's root. The file is a cache of verdicts: when it is missing or
//! unreadable the lab starts afresh, and the next check rebuilds it
//! (`notify check --all` rebuilds it for every chapter at once).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::chapter::{fingerprint, Chapter};

/// Where a learner stands on one chapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The case file is as shipped.
    NotStarted,
    /// The file was changed, and this version has not passed a check.
    InProgress,
    /// This very version of the file passed `notify check`.
    Passing,
}

impl Status {
    /// The status in words.
    pub fn label(self) -> &'static str {
        match self {
            Status::NotStarted => "not started",
            Status::InProgress => "in progress",
            Status::Passing => "passing",
        }
    }
}

#[derive(Default, Serialize, Deserialize)]
struct State {
    /// Chapter number → fingerprint of the case file that last passed.
    passed: BTreeMap<u32, u64>,
    /// Chapters whose case passed a check once, whatever became of the
    /// file since (a reset, a new attempt): the learner has done them.
    #[serde(default)]
    passed_once: BTreeSet<u32>,
}

/// The progress file of the workshop at `root`.
pub struct Progress {
    path: PathBuf,
    state: State,
    unreadable: bool,
}

impl Progress {
    /// Reads the progress file; a missing or corrupt one reads as no progress.
    pub fn load(root: &Path) -> Progress {
        let path = root.join(".notify").join("state.json");
        let (state, unreadable) = match std::fs::read_to_string(&path) {
            Ok(text) => match serde_json::from_str::<State>(&text) {
                Ok(mut state) => {
                    // Files from before `passed_once` was kept.
                    let passing: Vec<u32> = state.passed.keys().copied().collect();
                    state.passed_once.extend(passing);
                    (state, false)
                }
                Err(_) => (State::default(), true),
            },
            Err(_) => (State::default(), false),
        };
        Progress {
            path,
            state,
            unreadable,
        }
    }

    /// True when the progress file exists but could not be read: the
    /// verdicts it held are forgotten until the chapters are checked again.
    pub fn unreadable(&self) -> bool {
        self.unreadable
    }

    /// Where `chapter` stands, from its case file as it is now.
    pub fn status(&self, root: &Path, chapter: &Chapter) -> Status {
        let Ok(bytes) = std::fs::read(root.join(chapter.case_file)) else {
            return Status::InProgress;
        };
        let hash = fingerprint(&bytes);
        if hash == chapter.shipped_hash {
            Status::NotStarted
        } else if self.state.passed.get(&chapter.number) == Some(&hash) {
            Status::Passing
        } else {
            Status::InProgress
        }
    }

    /// True when `chapter`'s case passed a check once, even if the file
    /// has changed since (e.g. `notify reset` put it back as shipped).
    pub fn passed_once(&self, chapter: &Chapter) -> bool {
        self.state.passed_once.contains(&chapter.number)
    }

    /// The first chapter to work on, in the workshop's order: the first
    /// that does not pass and never passed; else the first that does not
    /// pass now (a chapter done once, then reset).
    pub fn next<'a>(&self, root: &Path, chapters: &'a [Chapter]) -> Option<&'a Chapter> {
        let open = |c: &&Chapter| self.status(root, c) != Status::Passing;
        chapters
            .iter()
            .filter(open)
            .find(|c| !self.passed_once(c))
            .or_else(|| chapters.iter().find(open))
    }

    /// Remembers the verdict of a check of the learner's case file.
    pub fn record(&mut self, root: &Path, chapter: &Chapter, passed: bool) -> Result<()> {
        let file = root.join(chapter.case_file);
        let bytes =
            std::fs::read(&file).with_context(|| format!("could not read {}", file.display()))?;
        self.record_version(chapter, fingerprint(&bytes), passed)
    }

    /// Remembers the verdict of a check of the version of the case file
    /// whose fingerprint is `hash` (read before it was built, so an edit made
    /// during the check is not taken for the version that passed).
    pub fn record_version(&mut self, chapter: &Chapter, hash: u64, passed: bool) -> Result<()> {
        if passed {
            self.state.passed.insert(chapter.number, hash);
            self.state.passed_once.insert(chapter.number);
        } else {
            self.state.passed.remove(&chapter.number);
        }
        self.save()
    }

    fn save(&self) -> Result<()> {
        let dir = self.path.parent().expect("the state file is in a folder");
        std::fs::create_dir_all(dir)
            .with_context(|| format!("could not create the progress folder {}", dir.display()))?;
        // Write then rename, so an interrupted save never leaves half a file.
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(&self.state)?;
        std::fs::write(&tmp, text)
            .with_context(|| format!("could not write the progress file {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path)
            .with_context(|| format!("could not replace {}", self.path.display()))
    }
}
