//! The console blocks in README.md and chapters/ are the program's real
//! output: each ```console block whose command is `notify ...` is run, and
//! its output compared with the text, decimals (timings) masked. A block
//! marked ```console,timing shows processes racing on a real clock (chapters
//! 3 and 4), whose lines may come in another order from one run to the next:
//! it must hold the same lines, in any order. A block marked
//! ```console,postgres (chapter 12) runs in a test of its own, only when
//! DATABASE_URL names a PostgreSQL server; without one it is left out. Its relays run on a real
//! clock and are killed at moments of real time, so how many were killed
//! before their work was done depends on the machine's load: in these
//! blocks every number is masked, and the words must match.

use crate::common;

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Block {
    file: PathBuf,
    line: usize,
    args: Vec<String>,
    /// Marked `console,timing`: the same lines, in any order.
    any_order: bool,
    /// Marked `console,postgres`: every number masked, counts too.
    all_numbers: bool,
    expected: String,
}

fn blocks(file: PathBuf) -> Vec<Block> {
    let text = fs::read_to_string(&file).unwrap();
    let mut found = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        // `console` blocks, with flags: `timing` (any order), `postgres`
        // (needs the server in DATABASE_URL: chapter 12).
        let Some(flags) = line.trim().strip_prefix("```console") else {
            continue;
        };
        let flags: Vec<&str> = flags.split(',').filter(|f| !f.is_empty()).collect();
        if flags.iter().any(|f| !["timing", "postgres"].contains(f)) {
            continue;
        }
        let any_order = flags.contains(&"timing");
        let postgres = flags.contains(&"postgres");
        let body: Vec<&str> = lines
            .by_ref()
            .map(|(_, l)| l)
            .take_while(|l| l.trim() != "```")
            .collect();
        let Some(command) = body.first().and_then(|l| l.strip_prefix("$ ")) else {
            continue;
        };
        let command = command.strip_prefix("cargo ").unwrap_or(command);
        let Some(args) = command.strip_prefix("notify ") else {
            continue;
        };
        let mut expected = body[1..].join("\n");
        expected.push('\n');
        found.push(Block {
            file: file.clone(),
            line: n + 1,
            args: args.split_whitespace().map(String::from).collect(),
            expected,
            any_order,
            all_numbers: postgres,
        });
    }
    found
}

fn documents() -> Vec<PathBuf> {
    let root = common::root();
    let mut files = vec![root.join("README.md")];
    let mut chapters: Vec<PathBuf> = fs::read_dir(root.join("chapters"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    files.extend(chapters);
    files
}

#[test]
fn console_blocks_match_the_real_output() {
    let all: Vec<Block> = documents()
        .into_iter()
        .flat_map(blocks)
        .filter(|b| !b.all_numbers)
        .collect();
    assert!(
        all.iter()
            .any(|b| b.file.ends_with("01-send-after-commit.md")),
        "chapter 1 shows its console output"
    );
    all_match(&all);
}

/// Chapter 12's blocks, which need the PostgreSQL server DATABASE_URL
/// names: without one they are left out. CI runs this test alone once
/// its server is up, rather than every block a second time.
#[test]
fn postgres_console_blocks_match_the_real_output() {
    if std::env::var_os("DATABASE_URL").is_none_or(|u| u.is_empty()) {
        eprintln!("no DATABASE_URL: chapter 12's console blocks are left out");
        return;
    }
    let all: Vec<Block> = documents()
        .into_iter()
        .flat_map(blocks)
        .filter(|b| b.all_numbers)
        .collect();
    assert!(
        all.iter().any(|b| b.file.ends_with("12-many-machines.md")),
        "chapter 12 shows its console output"
    );
    all_match(&all);
}

/// Runs `all`, every block an independent run, on every core, in the order
/// of the files, and reports the wrong ones in that order.
fn all_match(all: &[Block]) {
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut wrong: Vec<(usize, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut wrong = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(block) = all.get(i) else {
                            return wrong;
                        };
                        if let Some(report) = compare(block) {
                            wrong.push((i, report));
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    wrong.sort();
    let wrong: Vec<String> = wrong.into_iter().map(|(_, report)| report).collect();
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// Runs a block's command; what differs from the text, if anything.
fn compare(block: &Block) -> Option<String> {
    let args: Vec<&str> = block.args.iter().map(String::as_str).collect();
    // A check's text comes from the same run as the grading matrix's JSON.
    let actual = match args.split_first() {
        Some((&"check", rest))
            if !args
                .iter()
                .any(|a| a.starts_with("--json") || *a == "--all") =>
        {
            common::checked(rest).text.clone()
        }
        _ => common::stdout(&common::notify(&args)),
    };
    let seen = |text: &str| {
        let masked = common::mask_decimals(text);
        let masked = if block.all_numbers {
            mask_numbers(&masked)
        } else {
            masked
        };
        let mut lines: Vec<String> = masked.lines().map(String::from).collect();
        if block.any_order {
            lines.sort();
        }
        lines
    };
    (seen(&actual) != seen(&block.expected)).then(|| {
        format!(
            "{}:{} `notify {}`\n--- the text says\n{}--- the program prints\n{}",
            block.file.display(),
            block.line,
            args.join(" "),
            block.expected,
            actual
        )
    })
}

/// Replaces every run of digits with `#`: "4 relays killed" reads "# relays
/// killed".
fn mask_numbers(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

#[test]
fn masking_hides_timings_and_keeps_counts() {
    assert_eq!(
        mask_numbers("4 relays killed, relay-2.1, #.# s"),
        "# relays killed, relay-#.#, #.# s"
    );
    assert_eq!(
        common::mask_decimals("43 case processes in 0.6 s; 535.1 µs, 1.99×"),
        "43 case processes in # s; # µs, #×"
    );
    assert_eq!(common::mask_decimals("emails sent: 5."), "emails sent: 5.");
}
