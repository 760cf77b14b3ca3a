//! The database a measured experiment runs on: a real SQLite file in a
//! fresh temporary folder, opened with the lab's durable settings, and
//! those settings as SQLite reports them back.

use std::path::Path;

use anyhow::{bail, Context, Result};
use rusqlite::Connection;
use serde::Serialize;
use tempfile::TempDir;

use super::Journal;

/// A fresh temporary folder for experiment `name`, e.g. `notify-try-outbox-…`.
pub fn folder(name: &str) -> Result<TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("notify-try-{name}-"))
        .tempdir()
        .with_context(|| {
            format!(
                "could not create a temporary folder for the experiment under {}",
                std::env::temp_dir().display()
            )
        })
}

/// Opens (or creates) the database at `path` with `journal`,
/// `synchronous=FULL` and `foreign_keys=ON`.
pub fn open(path: &Path, journal: Journal) -> Result<Connection> {
    let conn = Connection::open(path).with_context(|| {
        format!(
            "could not open the experiment database at {}",
            path.display()
        )
    })?;
    // journal_mode answers with the mode SQLite actually chose, which can
    // differ (some file systems cannot do WAL); measuring the wrong mode
    // would teach the wrong lesson, so refuse instead.
    let wanted = journal.pragma_value();
    let mode: String = conn
        .query_row(&format!("PRAGMA journal_mode={wanted}"), [], |row| {
            row.get(0)
        })
        .with_context(|| format!("could not set journal_mode={wanted} on {}", path.display()))?;
    if !mode.eq_ignore_ascii_case(wanted) {
        bail!(
            "SQLite kept journal_mode={mode} instead of {wanted} for {}; \
             try a folder on another disk by setting TMPDIR",
            path.display()
        );
    }
    // FULL: every commit waits for its fsync, so what is committed survives
    // a power cut. That wait is what the experiments measure.
    conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
        .with_context(|| {
            format!(
                "could not set synchronous=FULL and foreign_keys=ON on {}",
                path.display()
            )
        })?;
    Ok(conn)
}

/// The SQLite settings a run used.
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    /// The journal asked for.
    pub journal: Journal,
    /// `PRAGMA journal_mode` as SQLite reports it, e.g. `wal`.
    pub journal_mode: String,
    /// `PRAGMA synchronous` by name, e.g. `FULL`.
    pub synchronous: String,
    /// `PRAGMA foreign_keys`.
    pub foreign_keys: bool,
    /// The folder the fresh temporary folder was created in (its disk is the one measured).
    pub temp_root: String,
}

impl Settings {
    /// The settings `conn` (on `db_path`, asked for `journal`) really runs
    /// with, read back from SQLite; `folder` is the run's fresh temporary folder.
    pub fn read(
        conn: &Connection,
        db_path: &Path,
        journal: Journal,
        folder: &Path,
    ) -> Result<Settings> {
        let context = || format!("could not read the settings of {}", db_path.display());
        let journal_mode: String = conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .with_context(context)?;
        let synchronous: i64 = conn
            .query_row("PRAGMA synchronous", [], |row| row.get(0))
            .with_context(context)?;
        let foreign_keys: bool = conn
            .query_row("PRAGMA foreign_keys", [], |row| row.get(0))
            .with_context(context)?;
        let synchronous = match synchronous {
            0 => "OFF",
            1 => "NORMAL",
            2 => "FULL",
            3 => "EXTRA",
            _ => "unknown",
        };
        Ok(Settings {
            journal,
            journal_mode: journal_mode.to_lowercase(),
            synchronous: synchronous.to_string(),
            foreign_keys,
            temp_root: folder.parent().unwrap_or(folder).display().to_string(),
        })
    }

    /// The line under a report's title, e.g. "journal_mode=wal,
    /// synchronous=FULL, foreign_keys=ON, a fresh database under /tmp".
    pub fn describe(&self) -> String {
        format!(
            "journal_mode={}, synchronous={}, foreign_keys={}, a fresh database under {}",
            self.journal_mode,
            self.synchronous,
            if self.foreign_keys { "ON" } else { "OFF" },
            self.temp_root
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_back_what_open_set() {
        let dir = folder("test").unwrap();
        let path = dir.path().join("test.db");
        let conn = open(&path, Journal::Delete).unwrap();
        let settings = Settings::read(&conn, &path, Journal::Delete, dir.path()).unwrap();
        assert_eq!(settings.journal_mode, "delete");
        assert_eq!(settings.synchronous, "FULL");
        assert!(settings.foreign_keys);
        let root = dir.path().parent().unwrap().display().to_string();
        assert_eq!(settings.temp_root, root);
        assert!(settings.describe().ends_with(&format!("under {root}")));
    }
}
