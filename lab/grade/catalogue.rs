//! The catalogue of a chapter's versions of its case, kept under
//! `checks/caseNN/`: the reference solution as a full file, and every other
//! version (the case as shipped, and the wrong fixes the check must catch)
//! as a unified diff against it.
//!
//! A patch `checks/caseNN/NAME.diff` opens with a description: its first line
//! says what the version does in one line, the lines after it why that is
//! wrong. The diff itself follows, from `--- a/checks/caseNN/solution.rs`.
//! `git apply` and `patch -p1` read the same files.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::chapter::Chapter;

/// The name of the reference solution among a chapter's versions.
pub const SOLUTION: &str = "solution";
/// The name of the case as shipped among a chapter's versions.
pub const SHIPPED: &str = "shipped";

/// One patched version of a case.
#[derive(Clone, Debug)]
pub struct Patched {
    /// The file's name without `.diff`, e.g. `send-after-commit`.
    pub name: String,
    /// The first line of its description.
    pub about: String,
    /// The whole patch file: description, then the diff.
    pub patch: String,
}

impl Patched {
    /// The description above the diff, without its first line.
    pub fn why(&self) -> &str {
        let header = self.header();
        header
            .split_once('\n')
            .map_or("", |(_, rest)| rest)
            .trim_matches('\n')
    }

    /// Everything above the diff's `---` line.
    fn header(&self) -> &str {
        match self.patch.find("\n--- ") {
            Some(at) => &self.patch[..at],
            None => &self.patch,
        }
    }

    /// The diff alone, from its `---` line.
    pub fn diff(&self) -> &str {
        self.patch[self.header().len()..].trim_start_matches('\n')
    }

    /// The solution with this patch applied.
    pub fn apply(&self, solution: &str) -> Result<String> {
        let patch = diffy::Patch::from_str(self.diff())
            .map_err(|err| anyhow::anyhow!("{err}"))
            .with_context(|| format!("{}.diff is not a unified diff", self.name))?;
        diffy::apply(solution, &patch)
            .map_err(|err| anyhow::anyhow!("{err}"))
            .with_context(|| {
                format!(
                    "{}.diff no longer applies to the reference solution: make the patch again against it",
                    self.name
                )
            })
    }
}

/// The folder of `chapter`'s versions, relative to the workshop's root.
pub fn folder(chapter: &Chapter) -> String {
    format!("checks/case{:02}", chapter.number)
}

/// `chapter`'s reference solution, relative to the workshop's root.
pub fn solution_file(chapter: &Chapter) -> String {
    format!("{}/solution.rs", folder(chapter))
}

/// The patch of version `name`, relative to the workshop's root.
pub fn patch_file(chapter: &Chapter, name: &str) -> String {
    format!("{}/{name}.diff", folder(chapter))
}

/// The reference solution's text.
pub fn solution(root: &Path, chapter: &Chapter) -> Result<String> {
    let path = root.join(solution_file(chapter));
    std::fs::read_to_string(&path).with_context(|| {
        format!(
            "could not read the reference solution of case {}, {}",
            chapter.number,
            path.display()
        )
    })
}

/// Every patched version of `chapter`'s case, by name.
pub fn patched(root: &Path, chapter: &Chapter) -> Result<Vec<Patched>> {
    let dir = root.join(folder(chapter));
    let entries = std::fs::read_dir(&dir)
        .with_context(|| format!("could not list the versions in {}", dir.display()))?;
    let mut found = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "diff") {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .context("a patch's name is not UTF-8")?
                .to_string();
            found.push(read(&path, name)?);
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

fn read(path: &Path, name: String) -> Result<Patched> {
    let patch = std::fs::read_to_string(path)
        .with_context(|| format!("could not read the patch {}", path.display()))?;
    let about = patch.lines().next().unwrap_or_default().trim().to_string();
    Ok(Patched { name, about, patch })
}

/// The patched version `name` of `chapter`'s case, or an error that lists
/// the versions there are.
pub fn find(root: &Path, chapter: &Chapter, name: &str) -> Result<Patched> {
    let path = root.join(patch_file(chapter, name));
    if path.is_file() {
        return read(&path, name.to_string());
    }
    let known: Vec<String> = patched(root, chapter)?
        .iter()
        .map(|p| format!("  {:<24} {}", p.name, p.about))
        .collect();
    bail!(
        "case {} has no variant {name:?}. Its variants are:\n  {:<24} {}\n{}",
        chapter.number,
        SOLUTION,
        "the reference solution",
        known.join("\n")
    )
}

/// The text of version `name` of `chapter`'s case: the solution itself, or
/// the solution with the patch applied.
pub fn source(root: &Path, chapter: &Chapter, name: &str) -> Result<String> {
    let solution = solution(root, chapter)?;
    if name == SOLUTION {
        return Ok(solution);
    }
    find(root, chapter, name)?.apply(&solution)
}
