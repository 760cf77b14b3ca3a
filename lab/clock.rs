//! The lab's simulated clock. It lives in the world, so it survives a crash
//! and a restart, and it only moves when the harness (or a slow provider)
//! moves it: backoffs of minutes and sweeps every minute play out in
//! milliseconds of real time. Case code reads time only from here.

use std::sync::{Arc, Mutex};

use anyhow::Result;

use crate::db::lock;
use crate::world::Recorder;

/// One second of simulated time, in the clock's unit (milliseconds).
pub const SECOND: i64 = 1000;
/// One minute of simulated time, in milliseconds.
pub const MINUTE: i64 = 60 * SECOND;

/// The simulated clock, read in milliseconds since the scenario began.
pub struct Clock {
    recorder: Arc<Mutex<Recorder>>,
}

impl Clock {
    pub(crate) fn new(recorder: Arc<Mutex<Recorder>>) -> Clock {
        Clock { recorder }
    }

    /// The time now, in milliseconds since the scenario began.
    pub fn now(&self) -> Result<i64> {
        lock(&self.recorder).now_ms()
    }
}
