//! `notify try backoff`: what the gaps between retries do to a provider outage.
//!
//! Chapter 5 retries a failed send after 5 s, 30 s and 5 min, then
//! dead-letters it. This experiment plays one stretch of simulated time four
//! times, with four retry policies: no backoff (the next wake-up), a fixed
//! 5 s, the chapter's 5 s / 30 s / 5 min, and the same with up to 10%
//! jitter. The email provider is down for three minutes; a notice arrives
//! every few seconds, and a burst lands in the middle of the outage (an
//! event cancelled: every member told at once). Every 30 s it counts the
//! attempts the provider had to answer, and draws them as bars. The
//! dispatcher is modelled in memory with the workshop's numbers (a wake-up
//! every 2 s, a batch of 50, four attempts at most), so the run is instant
//! and the same on every machine.

use std::io::Write;

use anyhow::{Context, Result};
use colored::Colorize;
use serde::Serialize;

use super::chart::{bar, clock};
use crate::clock::{MINUTE, SECOND};
use crate::rng::Rng;

/// The dispatcher wakes this often.
const TICK: i64 = 2 * SECOND;
/// Rows one wake-up claims at most.
const BATCH: usize = 50;
/// The provider is down from `DOWN.0` to `DOWN.1`.
const DOWN: (i64, i64) = (MINUTE, 4 * MINUTE);
/// One notice this often, until `ARRIVALS_UNTIL`.
const ARRIVE_EVERY: i64 = 4 * SECOND;
const ARRIVALS_UNTIL: i64 = 8 * MINUTE;
/// A burst of notices at once, in the middle of the outage.
const BURST: (i64, usize) = (90 * SECOND, 100);
/// The run ends here.
const END: i64 = 10 * MINUTE;
/// Attempts are counted in buckets this long.
const BUCKET: i64 = 30 * SECOND;
/// Jitter adds up to this fraction of a gap, in percent.
const JITTER_PERCENT: u64 = 10;
/// Seeds the jitter, so every run draws the same.
const SEED: u64 = 5;
/// The longest bar, in characters.
const BAR_WIDTH: usize = 10;

/// One retry policy: the gaps after the first, second and third failure.
/// After the fourth attempt fails, the row is dead-lettered.
#[derive(Clone, Copy, Debug)]
struct Policy {
    name: &'static str,
    gaps: [i64; 3],
    jitter: bool,
}

const POLICIES: [Policy; 4] = [
    Policy {
        name: "no backoff",
        gaps: [0, 0, 0],
        jitter: false,
    },
    Policy {
        name: "fixed 5 s",
        gaps: [5 * SECOND, 5 * SECOND, 5 * SECOND],
        jitter: false,
    },
    Policy {
        name: "5 s, 30 s, 5 min",
        gaps: [5 * SECOND, 30 * SECOND, 5 * MINUTE],
        jitter: false,
    },
    Policy {
        name: "+ 10% jitter",
        gaps: [5 * SECOND, 30 * SECOND, 5 * MINUTE],
        jitter: true,
    },
];

/// What one policy did over the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub policy: String,
    /// The gaps after each failure, in ms.
    pub gaps_ms: [i64; 3],
    pub jitter: bool,
    /// Attempts the provider answered in each 30 s bucket.
    pub attempts: Vec<usize>,
    pub total: usize,
    /// Attempts that hit the outage.
    pub failed: usize,
    pub delivered: usize,
    pub dead: usize,
    /// The most attempts one wake-up made after the provider came back.
    pub busiest_after: usize,
}

/// The experiment's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub down_from_ms: i64,
    pub down_to_ms: i64,
    pub notices: usize,
    pub bucket_ms: i64,
    pub runs: Vec<Run>,
}

struct Row {
    due: i64,
    failures: usize,
    done: bool,
}

fn is_down(at: i64) -> bool {
    (DOWN.0..DOWN.1).contains(&at)
}

/// When each notice of the run is queued.
fn arrivals() -> Vec<i64> {
    let mut at: Vec<i64> = (0..)
        .map(|i| i * ARRIVE_EVERY)
        .take_while(|&t| t < ARRIVALS_UNTIL)
        .collect();
    at.extend(std::iter::repeat_n(BURST.0, BURST.1));
    at.sort_unstable();
    at
}

/// Plays the run under one policy.
fn simulate(policy: &Policy) -> Run {
    let arrivals = arrivals();
    let mut rng = Rng::new(SEED);
    let mut rows: Vec<Row> = Vec::new();
    let mut run = Run {
        policy: policy.name.to_string(),
        gaps_ms: policy.gaps,
        jitter: policy.jitter,
        attempts: vec![0; (END / BUCKET) as usize],
        total: 0,
        failed: 0,
        delivered: 0,
        dead: 0,
        busiest_after: 0,
    };
    let mut now = 0;
    while now < END {
        while rows.len() < arrivals.len() && arrivals[rows.len()] <= now {
            rows.push(Row {
                due: arrivals[rows.len()],
                failures: 0,
                done: false,
            });
        }
        let mut due: Vec<usize> = (0..rows.len())
            .filter(|&i| !rows[i].done && rows[i].due <= now)
            .collect();
        due.sort_by_key(|&i| (rows[i].due, i));
        due.truncate(BATCH);
        if now >= DOWN.1 {
            run.busiest_after = run.busiest_after.max(due.len());
        }
        for i in due {
            run.attempts[(now / BUCKET) as usize] += 1;
            run.total += 1;
            let row = &mut rows[i];
            if !is_down(now) {
                row.done = true;
                run.delivered += 1;
                continue;
            }
            run.failed += 1;
            row.failures += 1;
            match policy.gaps.get(row.failures - 1) {
                Some(&gap) => {
                    let extra = if policy.jitter {
                        let most = (gap as u64) * JITTER_PERCENT / 100;
                        rng.between(0, most) as i64
                    } else {
                        0
                    };
                    row.due = now + gap + extra;
                }
                None => {
                    row.done = true;
                    run.dead += 1;
                }
            }
        }
        now += TICK;
    }
    run
}

/// Plays every policy.
pub fn measure() -> Report {
    Report {
        down_from_ms: DOWN.0,
        down_to_ms: DOWN.1,
        notices: arrivals().len(),
        bucket_ms: BUCKET,
        runs: POLICIES.iter().map(simulate).collect(),
    }
}

/// The chart `notify try backoff` prints, ending in a newline.
pub fn render(report: &Report) -> String {
    let max = report
        .runs
        .iter()
        .flat_map(|r| r.attempts.iter().copied())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    out.push_str(&format!(
        "\n  {}\n",
        "What the gaps between retries do to a provider outage".bold()
    ));
    out.push_str(&format!(
        "  {}\n\n",
        format!(
            "the email provider is down from {} to {}; a notice every {} s, and {} at once at {}; 4 attempts at most",
            clock(DOWN.0),
            clock(DOWN.1),
            ARRIVE_EVERY / SECOND,
            BURST.1,
            clock(BURST.0)
        )
        .dimmed()
    ));
    let column = BAR_WIDTH + 8;
    let mut head = format!("  {:<12}", "attempts");
    for run in &report.runs {
        head.push_str(&format!("{:<column$}", run.policy));
    }
    out.push_str(head.trim_end());
    out.push('\n');
    for (b, _) in report.runs[0].attempts.iter().enumerate() {
        let from = b as i64 * BUCKET;
        let down = from < DOWN.1 && DOWN.0 < from + BUCKET;
        let when = format!("{:>5} {}", clock(from), if down { "down" } else { "" });
        let mut line = format!("  {when:<12}");
        for run in &report.runs {
            let n = run.attempts[b];
            line.push_str(&format!(
                "{:<w$}{:>5}   ",
                bar(n, max, BAR_WIDTH),
                if n == 0 { String::new() } else { n.to_string() },
                w = BAR_WIDTH
            ));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str(&format!(
        "\n  {:<18}{:>9}{:>12}{:>11}{:>6}{:>17}\n",
        "", "attempts", "while down", "delivered", "dead", "busiest wake-up"
    ));
    for run in &report.runs {
        out.push_str(&format!(
            "  {:<18}{:>9}{:>12}{:>11}{:>6}{:>17}\n",
            run.policy, run.total, run.failed, run.delivered, run.dead, run.busiest_after
        ));
    }
    out.push_str(&format!(
        "\n  {}\n",
        format!(
            "Simulated time, the same on every machine: {} notices, a wake-up every 2 s, a batch of {BATCH}; busiest wake-up counts attempts after {}.",
            report.notices,
            clock(DOWN.1)
        )
        .dimmed()
    ));
    let by = |name: &str| report.runs.iter().find(|r| r.policy == name);
    if let (Some(none), Some(chapter), Some(jitter)) =
        (by("no backoff"), by("5 s, 30 s, 5 min"), by("+ 10% jitter"))
    {
        out.push_str(&format!(
            "  Read it: without backoff the outage takes {} attempts and dead-letters {} notices; \
             with 5 s, 30 s and 5 min it takes {} and dead-letters {}. \
             Jitter spreads the returning retries: at most {} in one wake-up instead of {}.\n",
            none.failed,
            none.dead,
            chapter.failed,
            chapter.dead,
            jitter.busiest_after,
            chapter.busiest_after
        ));
    }
    out
}

/// `notify try backoff`: plays every policy, then prints the chart (or
/// JSON). The run is simulated, so `--iterations` and `--journal` change
/// nothing.
pub fn run(json: bool) -> Result<i32> {
    let report = measure();
    let text = if json {
        let mut text = super::to_json(&report)?;
        text.push('\n');
        text
    } else {
        render(&report)
    };
    // A reader that stops early (`| head`) is not an error.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(err).context("could not print the experiment's figures")
        }
        _ => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_rides_out_the_outage_and_spares_the_provider() {
        let report = measure();
        let [none, fixed, chapter, jitter] = &report.runs[..] else {
            panic!("four policies");
        };
        assert!(none.dead > 0 && fixed.dead > 0);
        assert_eq!(chapter.dead, 0);
        assert_eq!(chapter.delivered, report.notices);
        assert!(chapter.failed < none.failed);
        assert!(jitter.busiest_after < chapter.busiest_after);
    }

    #[test]
    fn the_runs_are_the_same_every_time() {
        assert_eq!(render(&measure()), render(&measure()));
    }
}
