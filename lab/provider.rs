//! The outside world's providers, as the case sees them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Result};

use crate::db::lock;
use crate::rng::Rng;
use crate::scenario::{Fault, ProviderScript};
use crate::world::{Kind, Recorder};

/// The email provider. What it accepts reaches a person at once and is
/// recorded in the world, outside the service's database: no rollback can
/// recall it.
///
/// Like real email APIs, it honours an idempotency key: a second send with a
/// key it accepted within the last 24 hours (of the lab's clock) returns `Ok`
/// and delivers nothing new.
pub struct Email {
    recorder: Arc<Mutex<Recorder>>,
    script: ProviderScript,
    fault: Option<Fault>,
    sends: Mutex<HashMap<String, u32>>,
    rng: Mutex<Rng>,
}

impl Email {
    pub(crate) fn new(
        recorder: Arc<Mutex<Recorder>>,
        script: ProviderScript,
        fault: Option<Fault>,
        seed: u64,
    ) -> Email {
        Email {
            recorder,
            script,
            fault,
            sends: Mutex::new(HashMap::new()),
            rng: Mutex::new(Rng::new(seed)),
        }
    }

    /// Sends `body` to `to`. When this returns `Ok`, the email is out.
    pub fn send(&self, to: &str, body: &str) -> Result<()> {
        self.deliver(to, body, None)
    }

    /// Sends `body` to `to` under an idempotency key: repeating a send with
    /// the same key within 24 hours delivers it only once.
    pub fn send_with_key(&self, key: &str, to: &str, body: &str) -> Result<()> {
        self.deliver(to, body, Some(key))
    }

    fn deliver(&self, to: &str, body: &str, key: Option<&str>) -> Result<()> {
        // The provider's latency is real time, spent outside every lock.
        let jitter = match self.script.jitter_ms {
            0 => 0,
            max => lock(&self.rng).between(0, max),
        };
        let wait = self.script.latency_ms + jitter;
        if wait > 0 {
            std::thread::sleep(Duration::from_millis(wait));
        }

        let mut rec = lock(&self.recorder);
        let op = rec.op().unwrap_or("start-up").to_string();
        let nth = {
            let mut sends = lock(&self.sends);
            let n = sends.entry(op.clone()).or_insert(0);
            *n += 1;
            *n
        };
        rec.delivery("email", to, body, key)?;
        match &self.fault {
            Some(Fault::CrashAfterSend { op: o, nth: n }) if *o == op && *n == nth => {
                let _ = rec.event(Kind::Crash, None, "process aborted");
                std::process::abort();
            }
            Some(Fault::TimeoutAfterSend { op: o, nth: n }) if *o == op && *n == nth => {
                let _ = rec.event(Kind::Timeout, Some(nth), "the answer is lost");
                Err(anyhow!(
                    "the email provider did not answer in time (the email may have gone out)"
                ))
            }
            _ => Ok(()),
        }
    }
}
