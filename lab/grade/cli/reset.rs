//! `notify reset N` and `notify reset --all`: put cases back as shipped.
//!
//! Nothing is ever lost: the learner's file is first copied to
//! `.notify/backups/<time>/<case file>`. The shipped version comes from the
//! workshop itself (`checks/caseNN/shipped.diff` applied to the reference
//! solution), not from git, and is only used when its fingerprint is the one
//! the chapter registers.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use super::ask::go_ahead;
use super::{EXIT_ERROR, EXIT_PASS};
use crate::catalogue;
use crate::chapter::{fingerprint, Chapter};

/// The shipped case of `chapter`, checked against its registered fingerprint.
pub(super) fn shipped(root: &Path, chapter: &Chapter) -> Result<Vec<u8>> {
    let file = catalogue::patch_file(chapter, catalogue::SHIPPED);
    let text = catalogue::source(root, chapter, catalogue::SHIPPED).with_context(|| {
        format!(
            "could not rebuild the shipped version of case {}",
            chapter.number
        )
    })?;
    if fingerprint(text.as_bytes()) != chapter.shipped_hash {
        bail!(
            "{file} does not give the version of {} that case {} was shipped with, so it is not used",
            chapter.case_file,
            chapter.number
        );
    }
    Ok(text.into_bytes())
}

/// Resets `chapters` (one, or all of them), asking first unless `yes`.
pub(super) fn reset(root: &Path, chapters: &[&Chapter], yes: bool) -> Result<i32> {
    // Read every shipped copy before touching anything.
    let mut todo = Vec::new();
    for chapter in chapters {
        let shipped = shipped(root, chapter)?;
        let current = std::fs::read(root.join(chapter.case_file)).ok();
        if current.as_deref() == Some(&shipped[..]) {
            println!(
                "case {}: {} is as shipped already.",
                chapter.number, chapter.case_file
            );
        } else {
            todo.push((*chapter, shipped, current));
        }
    }
    if todo.is_empty() {
        return Ok(EXIT_PASS);
    }
    if !yes {
        let files: Vec<&str> = todo.iter().map(|(c, _, _)| c.case_file).collect();
        let question = format!(
            "This puts back the shipped {}. Your version is saved in .notify/backups/ first. Reset? [y/N]",
            files.join(", ")
        );
        let no_terminal = format!(
            "error: reset asks before replacing {}, and there is no terminal to ask on.\nAdd --yes to reset without asking (your version is saved in .notify/backups/ first).",
            files.join(", ")
        );
        if let Some(code) = go_ahead(&question, Some("nothing was reset."), &no_terminal)? {
            return Ok(code);
        }
    }
    let backups = backup_folder(root)?;
    for (chapter, shipped, current) in todo {
        let target = root.join(chapter.case_file);
        let saved = current.is_some();
        if let Some(current) = current {
            save(root, &backups, chapter, &current)?;
        }
        std::fs::write(&target, shipped)
            .with_context(|| format!("could not write {}", target.display()))?;
        println!(
            "case {}: {} is back as shipped.",
            chapter.number, chapter.case_file
        );
        if saved {
            println!(
                "case {}: `notify reset {} --restore` brings your version back.",
                chapter.number, chapter.number
            );
        }
    }
    Ok(EXIT_PASS)
}

/// Saves `bytes`, the learner's `chapter` case, in the backup folder `backups`.
fn save(root: &Path, backups: &Path, chapter: &Chapter, bytes: &[u8]) -> Result<()> {
    let saved = backups.join(chapter.case_file);
    let folder = saved.parent().expect("a case file is in a folder");
    std::fs::create_dir_all(folder)
        .with_context(|| format!("could not create the backup folder {}", folder.display()))?;
    std::fs::write(&saved, bytes)
        .with_context(|| format!("could not save your case in {}", saved.display()))?;
    println!(
        "case {}: saved your {} in {}",
        chapter.number,
        chapter.case_file,
        relative(root, &saved)
    );
    Ok(())
}

/// `notify reset N --restore`: puts back the learner's latest version of
/// `chapter`'s case saved in `.notify/backups/`. The file it replaces is
/// saved first, unless it is as shipped or the very version restored; the
/// learner is asked first (unless `yes`) when it holds changes of theirs.
pub(super) fn restore(root: &Path, chapter: &Chapter, yes: bool) -> Result<i32> {
    let Some(backup) = latest_backup(root, chapter) else {
        eprintln!(
            "error: there is no saved version of {} in .notify/backups/ to restore: `notify reset {}` saves one before it resets.",
            chapter.case_file, chapter.number
        );
        return Ok(EXIT_ERROR);
    };
    let restored =
        std::fs::read(&backup).with_context(|| format!("could not read {}", backup.display()))?;
    let target = root.join(chapter.case_file);
    let current = std::fs::read(&target).ok();
    if current.as_deref() == Some(&restored[..]) {
        println!(
            "case {}: {} is the version saved in {} already.",
            chapter.number,
            chapter.case_file,
            relative(root, &backup)
        );
        return Ok(EXIT_PASS);
    }
    let changed = current
        .as_deref()
        .is_some_and(|bytes| fingerprint(bytes) != chapter.shipped_hash);
    if changed && !yes {
        let question = format!(
            "This replaces {} with your version saved in {}. The file as it is now is saved first. Restore? [y/N]",
            chapter.case_file,
            relative(root, &backup)
        );
        let no_terminal = format!(
            "error: restoring asks before replacing {}, which holds changes, and there is no terminal to ask on.\nAdd --yes to restore without asking (the file as it is now is saved in .notify/backups/ first).",
            chapter.case_file
        );
        if let Some(code) = go_ahead(&question, Some("nothing was restored."), &no_terminal)? {
            return Ok(code);
        }
    }
    if let (true, Some(current)) = (changed, current) {
        save(root, &backup_folder(root)?, chapter, &current)?;
    }
    std::fs::write(&target, restored)
        .with_context(|| format!("could not write {}", target.display()))?;
    println!(
        "case {}: restored your {} from {}",
        chapter.number,
        chapter.case_file,
        relative(root, &backup)
    );
    Ok(EXIT_PASS)
}

/// The latest saved copy of `chapter`'s case in `.notify/backups/`: the
/// backup folders are named by time, and two in one second by a number.
fn latest_backup(root: &Path, chapter: &Chapter) -> Option<PathBuf> {
    let base = root.join(".notify").join("backups");
    let mut found: Vec<((String, u64), PathBuf)> = std::fs::read_dir(&base)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let saved = entry.path().join(chapter.case_file);
            if !saved.is_file() {
                return None;
            }
            let key = match name.rsplit_once('-') {
                // `20260131-235959-2`: the second backup of that second.
                Some((stamp, n)) if stamp.contains('-') => {
                    (stamp.to_string(), n.parse().unwrap_or(0))
                }
                _ => (name, 1),
            };
            Some((key, saved))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, path)| path)
}

/// A new folder `.notify/backups/<UTC time>` (with a suffix when two resets
/// fall in the same second).
fn backup_folder(root: &Path) -> Result<PathBuf> {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = root.join(".notify").join("backups");
    let stamp = timestamp(seconds);
    let mut folder = base.join(&stamp);
    let mut n = 1;
    while folder.exists() {
        n += 1;
        folder = base.join(format!("{stamp}-{n}"));
    }
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("could not create the backup folder {}", folder.display()))?;
    Ok(folder)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `seconds` since 1970 as a UTC time that sorts by name: `20260131-235959`.
fn timestamp(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let secs = seconds % 86_400;
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::timestamp;

    #[test]
    fn timestamps_are_utc_civil_times() {
        assert_eq!(timestamp(0), "19700101-000000");
        assert_eq!(timestamp(951_782_400), "20000229-000000");
        assert_eq!(timestamp(1_767_225_599), "20251231-235959");
    }
}
