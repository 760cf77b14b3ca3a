//! SQLite's "now" is the scenario's clock.
//!
//! `date('now')`, `datetime('now')`, `julianday('now')`, `unixepoch()`,
//! `strftime(..., 'now')` and `CURRENT_TIMESTAMP` ask SQLite's VFS what time
//! it is. Left alone, that is the machine's clock, which a scenario neither
//! moves nor replays: a key or a window built from it would never be judged.
//! A case process therefore makes a VFS of its own the default, a copy of
//! the platform's whose current-time methods read the world's simulated
//! clock, before it opens the service's database.
//!
//! The copy keeps every other method (files, locks, shared memory) and the
//! platform's private data, so the database behaves as before. Within one
//! statement SQLite asks the VFS once and keeps the answer, as it does with
//! the real clock.

use std::ffi::{c_int, CStr};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use anyhow::{bail, Result};
use rusqlite::ffi;

use crate::db::lock;
use crate::world::SharedClock;

/// The name the lab's VFS is registered under.
const NAME: &CStr = c"notify-simulated-now";

/// Milliseconds from the start of the Julian calendar (SQLite's time unit
/// for `xCurrentTimeInt64`) to the UNIX epoch: 2440587.5 days.
const UNIX_EPOCH_JULIAN_MS: i64 = 210_866_760_000_000;

/// Where "now" comes from: the world's clock and the UTC instant of its 0.
struct Source {
    clock: SharedClock,
    start: i64,
}

/// The clock SQLite reads in this process, once [`follow`] has set it.
static SOURCE: Mutex<Option<Source>> = Mutex::new(None);
/// The platform's VFS, whose clock answers while no scenario is set.
static PLATFORM: OnceLock<usize> = OnceLock::new();

/// From now on, every database this process opens reads "now" from the
/// world in `dir`, whose simulated 0 is `start` (UTC, ms since the UNIX
/// epoch).
pub fn follow(dir: &Path, start: i64) -> Result<()> {
    register()?;
    let clock = SharedClock::open(dir)?;
    *lock(&SOURCE) = Some(Source { clock, start });
    Ok(())
}

/// The simulated instant now, in ms since the UNIX epoch, or `None` when no
/// scenario is set.
fn simulated_unix_ms() -> Option<Result<i64>> {
    let source = lock(&SOURCE);
    let source = source.as_ref()?;
    Some(Ok(source.start + source.clock.now()))
}

/// Registers the lab's VFS as the default, once per process.
fn register() -> Result<()> {
    if PLATFORM.get().is_some() {
        return Ok(());
    }
    // SAFETY: sqlite3_initialize may be called any number of times; the
    // default VFS it returns lives as long as the process. The copy is leaked
    // on purpose: SQLite keeps a pointer to a registered VFS forever.
    unsafe {
        if ffi::sqlite3_initialize() != ffi::SQLITE_OK {
            bail!("SQLite could not be initialised");
        }
        let platform = ffi::sqlite3_vfs_find(std::ptr::null());
        if platform.is_null() {
            bail!("SQLite has no default VFS");
        }
        let mut vfs = *platform;
        vfs.zName = NAME.as_ptr();
        vfs.pNext = std::ptr::null_mut();
        vfs.xCurrentTime = Some(current_time);
        if vfs.iVersion >= 2 {
            vfs.xCurrentTimeInt64 = Some(current_time_int64);
        }
        let vfs = Box::leak(Box::new(vfs));
        if ffi::sqlite3_vfs_register(vfs, 1) != ffi::SQLITE_OK {
            bail!("SQLite would not take the lab's clock");
        }
        PLATFORM
            .set(platform as usize)
            .map_err(|_| anyhow::anyhow!("the lab's clock was registered twice"))?;
    }
    Ok(())
}

/// The time now in ms since the start of the Julian calendar: the
/// scenario's, or the platform's while no scenario is set. `None` if the
/// world could not be read: SQLite then answers NULL for "now".
fn julian_ms() -> Option<i64> {
    match std::panic::catch_unwind(simulated_unix_ms) {
        Ok(Some(Ok(unix_ms))) => Some(unix_ms + UNIX_EPOCH_JULIAN_MS),
        Ok(None) => platform_julian_ms(),
        Ok(Some(Err(_))) | Err(_) => None,
    }
}

fn platform_julian_ms() -> Option<i64> {
    let platform = *PLATFORM.get()? as *mut ffi::sqlite3_vfs;
    let mut out: ffi::sqlite3_int64 = 0;
    // SAFETY: `platform` is SQLite's own default VFS, alive for the process.
    unsafe {
        if (*platform).iVersion >= 2 {
            let now = (*platform).xCurrentTimeInt64?;
            (now(platform, &mut out) == ffi::SQLITE_OK).then_some(out)
        } else {
            let now = (*platform).xCurrentTime?;
            let mut days = 0.0;
            (now(platform, &mut days) == ffi::SQLITE_OK).then_some((days * 86_400_000.0) as i64)
        }
    }
}

unsafe extern "C" fn current_time_int64(
    _vfs: *mut ffi::sqlite3_vfs,
    out: *mut ffi::sqlite3_int64,
) -> c_int {
    match julian_ms() {
        Some(ms) => {
            *out = ms;
            ffi::SQLITE_OK
        }
        None => ffi::SQLITE_ERROR,
    }
}

unsafe extern "C" fn current_time(_vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    match julian_ms() {
        Some(ms) => {
            *out = ms as f64 / 86_400_000.0;
            ffi::SQLITE_OK
        }
        None => ffi::SQLITE_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::Recorder;
    use rusqlite::Connection;

    /// Every way SQL can ask for "now" answers the scenario's clock, and
    /// follows it when it moves.
    #[test]
    fn sqlite_now_is_the_scenarios_clock() {
        let dir = tempfile::tempdir().unwrap();
        let mut recorder = Recorder::open(dir.path(), 1).unwrap();
        // 2026-03-28 18:00:00 UTC, the lab's usual start.
        follow(dir.path(), crate::clock::DEFAULT_START).unwrap();
        let db = Connection::open(dir.path().join("app.db")).unwrap();
        let ask = |db: &Connection| -> (String, String, f64, i64, String, String) {
            db.query_row(
                "SELECT date('now'), datetime('now'), julianday('now'), unixepoch(),
                        CURRENT_TIMESTAMP, strftime('%H:%M:%f', 'now')",
                [],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                },
            )
            .unwrap()
        };
        let (date, datetime, julian, unix, current, fine) = ask(&db);
        assert_eq!(date, "2026-03-28");
        assert_eq!(datetime, "2026-03-28 18:00:00");
        assert!((julian - 2_461_128.25).abs() < 1e-6, "julianday {julian}");
        assert_eq!(unix, crate::clock::DEFAULT_START / 1000);
        assert_eq!(current, "2026-03-28 18:00:00");
        assert_eq!(fine, "18:00:00.000");

        // Six and a half hours and 250 ms later, past midnight UTC.
        recorder.advance(6 * 3_600_000 + 30 * 60_000 + 250).unwrap();
        let (date, datetime, _, unix, current, fine) = ask(&db);
        assert_eq!(date, "2026-03-29");
        assert_eq!(datetime, "2026-03-29 00:30:00");
        assert_eq!(
            unix,
            crate::clock::DEFAULT_START / 1000 + 6 * 3600 + 30 * 60
        );
        assert_eq!(current, "2026-03-29 00:30:00");
        assert_eq!(fine, "00:30:00.250");

        // A column's DEFAULT CURRENT_TIMESTAMP is the scenario's too.
        db.execute_batch(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, at TEXT DEFAULT CURRENT_TIMESTAMP);
             INSERT INTO t (id) VALUES (1);",
        )
        .unwrap();
        let at: String = db.query_row("SELECT at FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(at, "2026-03-29 00:30:00");
    }
}
