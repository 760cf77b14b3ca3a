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
mod check10_render;
mod check11_webhooks;
mod check12_postgres;
mod dispatch_world;
mod invite_world;
mod invited;

use lab::chapter::{Chapter, Planned};

/// Every chapter written, in order (chapter 12 runs on PostgreSQL).
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
    check10_render::CHAPTER,
    check11_webhooks::CHAPTER,
    check12_postgres::CHAPTER,
];

/// The chapters planned after these, not written yet (`notify read N` says
/// so): none now, every chapter of the workshop is written.
pub const PLANNED: &[Planned] = &[];

#[cfg(test)]
mod tests {
    use super::CHAPTERS;
    use lab::explore::Budget;

    /// Every situation a chapter's rules turn on is reached by at least one
    /// world of the quick budget: the learner's loop exercises every rule.
    #[test]
    fn the_quick_budget_reaches_every_situation_the_rules_turn_on() {
        for chapter in CHAPTERS {
            for reached in (chapter.coverage)(Budget::QUICK) {
                assert!(
                    reached.worlds > 0,
                    "chapter {}: no world of the quick budget reaches \"{}\"",
                    chapter.number,
                    reached.rule
                );
            }
        }
    }
}
