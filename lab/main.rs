//! `notify`: run, check and measure the workshop's cases.

#[path = "../checks/mod.rs"]
mod checks;

fn main() {
    std::process::exit(lab::cli::main(checks::CHAPTERS, checks::PLANNED));
}
