//! The chapters' checks, and the registry `notify` is built from.
//!
//! Each check plays its case's scenarios and judges what the world saw. Next
//! to each check, `checks/caseNN/` keeps the reference solution and the wrong
//! fixes the check must catch, as buildable variants of the case.

mod check01_outbox;
mod check02_idempotency;
mod check03_claim;
mod check04_locks;
mod check05_retries;
mod check06_orphans;
mod check07_breaker;
mod check08_fallback;
mod check09_decide;
mod check11_webhooks;
mod invite_world;

use lab::chapter::{Chapter, Planned};

/// Every chapter, in order.
pub const CHAPTERS: &[Chapter] = &[
    check01_outbox::CHAPTER,
    check02_idempotency::CHAPTER,
    check03_claim::CHAPTER,
    check04_locks::CHAPTER,
    check05_retries::CHAPTER,
    check06_orphans::CHAPTER,
    check07_breaker::CHAPTER,
    check08_fallback::CHAPTER,
    check09_decide::CHAPTER,
    check11_webhooks::CHAPTER,
];

/// The chapters planned after these, not written yet (`notify read 9` says so).
pub const PLANNED: &[Planned] = &[
    Planned {
        number: 10,
        title: "render: templates that fail closed",
    },
    Planned {
        number: 12,
        title: "many machines: PostgreSQL",
    },
];
