//! Finding the workshop and building one case binary with cargo.
//!
//! Each case is its own binary, built alone (`cargo build --bin case03`), so a
//! half-edited case 3 never blocks case 4.

use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// The folder holding the workshop (its `Cargo.toml`, `cases/`, `checks/`),
/// found from `start` or any folder below it.
pub fn find_root(start: &Path) -> Result<PathBuf> {
    for dir in start.ancestors() {
        let manifest = dir.join("Cargo.toml");
        if dir.join("cases").is_dir() && manifest.is_file() {
            let text = std::fs::read_to_string(&manifest)
                .with_context(|| format!("could not read {}", manifest.display()))?;
            if text.lines().any(|l| l.trim() == "name = \"notify\"") {
                return Ok(dir.to_path_buf());
            }
        }
    }
    bail!(
        "notify works inside the workshop's folder, and {} is not in one.\n\
         Change to your clone of the workshop (the folder with cases/ and chapters/) and try again.",
        start.display()
    )
}

/// What came of building a case.
pub enum Built {
    /// The binary, ready to run.
    Ready(PathBuf),
    /// The compiler's errors, rendered as cargo would print them.
    DoesNotCompile(String),
}

/// Builds binary `bin` of the workshop at `root`, printing nothing on success.
pub fn build(root: &Path, bin: &str) -> Result<Built> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let format = if colored::control::SHOULD_COLORIZE.should_colorize() {
        "--message-format=json-diagnostic-rendered-ansi"
    } else {
        "--message-format=json"
    };
    let showing = std::io::stderr().is_terminal();
    if showing {
        eprint!("building {bin}...\r");
    }
    let mut child = Command::new(&cargo)
        .args(["build", "--quiet", "--bin", bin, format, "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| {
            format!(
                "could not run cargo ({}) to build {bin}: is the Rust toolchain installed?",
                Path::new(&cargo).display()
            )
        })?;

    // Read stderr on its own thread so neither pipe can fill up and stall cargo.
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut exe = None;
    let mut errors = Vec::new();
    let stdout = child.stdout.take().expect("stdout is piped");
    for line in BufReader::new(stdout).lines() {
        let line = line.context("could not read cargo's output")?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match msg["reason"].as_str() {
            Some("compiler-artifact") if msg["target"]["name"] == bin => {
                exe = msg["executable"].as_str().map(PathBuf::from);
            }
            Some("compiler-message") if msg["message"]["level"] == "error" => {
                if let Some(text) = msg["message"]["rendered"].as_str() {
                    errors.push(text.to_string());
                }
            }
            _ => {}
        }
    }
    let status = child.wait().context("could not wait for cargo")?;
    let cargo_said = stderr.join().unwrap_or_default();
    if showing {
        eprint!("{}\r", " ".repeat(bin.len() + 12));
    }
    match exe {
        Some(exe) if status.success() => Ok(Built::Ready(exe)),
        _ if !errors.is_empty() => Ok(Built::DoesNotCompile(errors.join(""))),
        _ => bail!("cargo could not build {bin}:\n{}", cargo_said.trim_end()),
    }
}
