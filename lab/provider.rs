//! The outside world's providers, as the case sees them.

use std::sync::{Arc, Mutex};

use anyhow::Result;

use crate::db::lock;
use crate::world::Recorder;

/// The email provider. What it accepts reaches a person at once and is
/// recorded in the world, outside the service's database: no rollback can
/// recall it.
pub struct Email {
    recorder: Arc<Mutex<Recorder>>,
}

impl Email {
    pub(crate) fn new(recorder: Arc<Mutex<Recorder>>) -> Email {
        Email { recorder }
    }

    /// Sends `body` to `to`. When this returns `Ok`, the email is out.
    pub fn send(&self, to: &str, body: &str) -> Result<()> {
        lock(&self.recorder).delivery("email", to, body)
    }
}
