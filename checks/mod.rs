//! The chapters' checks, and the registry `notify` is built from.
//!
//! Each check plays its case's scenarios and judges what the world saw. Next
//! to each check, `checks/caseNN/` keeps the reference solution and the wrong
//! fixes the check must catch, as buildable variants of the case.

mod check01_outbox;
mod check02_idempotency;

use lab::chapter::Chapter;

/// Every chapter, in order.
pub const CHAPTERS: &[Chapter] = &[check01_outbox::CHAPTER, check02_idempotency::CHAPTER];
