//! The lab's simulated clock. It lives in the world, so it survives a crash
//! and a restart, and it only moves when the harness (or a slow provider)
//! moves it: backoffs of minutes and sweeps every minute play out in
//! milliseconds of real time. Case code reads time only from here.
//!
//! The simulated clock also stands for a real instant: its 0 is a UTC
//! instant the scenario chooses ([`crate::scenario::Plan::starts_at`]), so a
//! case can ask what time it is in someone's time zone ([`Clock::utc`]),
//! e.g. across the night a country changes its clocks.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use jiff::{SignedDuration, Timestamp};

use crate::db::lock;
use crate::world::Recorder;

/// One second of simulated time, in the clock's unit (milliseconds).
pub const SECOND: i64 = 1000;
/// One minute of simulated time, in milliseconds.
pub const MINUTE: i64 = 60 * SECOND;

/// The UTC instant a scenario's clock starts at unless its plan says
/// otherwise: 2026-03-28 18:00 UTC, in milliseconds since the UNIX epoch.
pub const DEFAULT_START: i64 = 1_774_720_800_000;

/// The simulated clock, read in milliseconds since the scenario began.
pub struct Clock {
    recorder: Arc<Mutex<Recorder>>,
    /// The UTC instant of the scenario's 0, in ms since the UNIX epoch.
    start: i64,
}

impl Clock {
    pub(crate) fn new(recorder: Arc<Mutex<Recorder>>, start: i64) -> Clock {
        Clock { recorder, start }
    }

    /// The time now, in milliseconds since the scenario began.
    pub fn now(&self) -> Result<i64> {
        lock(&self.recorder).now_ms()
    }

    /// The time now as a real instant: the scenario's start plus the
    /// simulated time gone by. `clock.utc()?.in_tz("Asia/Tokyo")?` is the
    /// time on a clock in Tokyo.
    pub fn utc(&self) -> Result<Timestamp> {
        instant(self.start, self.now()?)
    }

    /// The simulated time, in ms since the scenario began, of a real
    /// instant: what to store in a column that the clock's `now()` is
    /// compared with, e.g. `next_attempt_at`.
    pub fn ms_at(&self, at: Timestamp) -> i64 {
        at.as_millisecond() - self.start
    }
}

/// The real instant of simulated time `ms` in a scenario whose clock starts
/// at `start` (UTC, ms since the UNIX epoch).
pub fn instant(start: i64, ms: i64) -> Result<Timestamp> {
    Timestamp::from_millisecond(start)
        .and_then(|t| t.checked_add(SignedDuration::from_millis(ms)))
        .context("the simulated clock left the range of real time")
}
