//! The lab: the machinery behind `notify`.
pub mod experiments;
