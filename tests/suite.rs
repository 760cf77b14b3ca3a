//! The workshop's integration tests, in one binary: `cargo test` runs test
//! binaries one after another, so one binary lets every test share the
//! cores (a chapter's checks run while a copy of the workshop builds), and
//! the chapters' checks are compiled once instead of once per file.
//!
//! Each file below is one area; filter by its name, e.g.
//! `cargo test chapter05::` or `cargo test docs::`.

#[path = "../checks/mod.rs"]
#[allow(dead_code)]
mod checks;
mod common;
#[path = "common/workshop.rs"]
mod workshop;

mod book;
mod chapter01;
mod chapter02;
mod chapter03;
mod chapter04;
mod chapter05;
mod chapter06;
mod chapter07;
mod chapter08;
mod chapter09;
mod chapter10;
mod chapter11;
mod chapter12;
mod cli;
mod debugging;
mod docs;
mod learner;
#[path = "loop.rs"]
mod learners_loop;
mod picture;
mod registry;
mod terminal;
