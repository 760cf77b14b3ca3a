//! `notify try breaker`: what a circuit breaker does to a provider outage.
//!
//! Chapter 7 puts a breaker per channel in front of the dispatcher. This
//! experiment plays the same stretch of simulated time twice, without and
//! with the breaker: the email provider goes down for ten minutes just as a
//! backlog lands, while new emails keep coming. Minute by minute it counts
//! the sends the provider had to answer, the rows waiting, and the rows
//! dead-lettered, and draws the sends as a bar chart. The dispatcher is
//! modelled in memory with the workshop's numbers (a wake-up every 2 s, a
//! batch of 50, retries after 5 s, 30 s and 5 min; a breaker that opens when
//! over half of at least 5 sends in the last minute failed, stays open 30 s,
//! then lets one probe through), so the run is instant and the same on every
//! machine.

use std::collections::VecDeque;

use anyhow::Result;
use colored::Colorize;
use serde::Serialize;

use super::chart::{bar, clock};
use crate::clock::{MINUTE, SECOND};

/// The dispatcher wakes this often.
const TICK: i64 = 2 * SECOND;
/// Rows one wake-up claims at most.
const BATCH: usize = 50;
/// The waits after each failed send; after the last, the row is dead-lettered.
const RETRY_AFTER: [i64; 3] = [5 * SECOND, 30 * SECOND, 5 * MINUTE];
/// How far back the breaker looks.
const WINDOW: i64 = MINUTE;
/// Sends the breaker needs in its window before it judges the provider.
const MIN_CALLS: usize = 5;
/// How long the breaker stays open before one probe.
const OPEN_FOR: i64 = 30 * SECOND;

/// The stretch of time played: the provider is down from `DOWN.0` to `DOWN.1`.
const DOWN: (i64, i64) = (MINUTE, 11 * MINUTE);
/// Emails queued at once as the outage begins.
const BACKLOG: usize = 40;
/// One new email this often, from 0:00 until `ARRIVALS_UNTIL`.
const ARRIVE_EVERY: i64 = 20 * SECOND;
const ARRIVALS_UNTIL: i64 = 16 * MINUTE;
/// The run ends here.
const END: i64 = 18 * MINUTE;

/// The longest bar, in characters.
const BAR_WIDTH: usize = 16;

/// What happened in one minute of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Minute {
    /// Sends the provider answered (or failed to) during the minute.
    pub sends: usize,
    /// Rows not yet sent nor dead-lettered at the minute's end.
    pub waiting: usize,
    /// Rows dead-lettered so far, at the minute's end.
    pub dead: usize,
}

/// One minute of both runs.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Minutes since the start.
    pub minute: i64,
    /// Whether the provider was down for any of the minute.
    pub down: bool,
    pub without: Minute,
    pub with: Minute,
}

/// One run's totals.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Totals {
    pub sends: usize,
    pub sends_while_down: usize,
    pub delivered: usize,
    pub dead: usize,
}

/// The experiment's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub down_from_ms: i64,
    pub down_to_ms: i64,
    pub emails: usize,
    pub minutes: Vec<Row>,
    pub without: Totals,
    pub with: Totals,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Waiting,
    Sent,
    Dead,
}

struct Email {
    due: i64,
    failures: usize,
    state: State,
}

/// The breaker, as chapter 7's reference solution has it.
#[derive(Default)]
struct Breaker {
    recent: VecDeque<(i64, bool)>,
    open_until: Option<i64>,
}

impl Breaker {
    /// How many rows it lets through now: a batch, one probe, or none.
    fn allows(&self, now: i64) -> usize {
        match self.open_until {
            None => BATCH,
            Some(until) if now < until => 0,
            Some(_) => 1,
        }
    }

    /// Counts a send; returns true if it was a probe.
    fn record(&mut self, now: i64, failed: bool) -> bool {
        if self.open_until.is_some() {
            self.open_until = failed.then_some(now + OPEN_FOR);
            self.recent.clear();
            return true;
        }
        self.recent.push_back((now, failed));
        while self
            .recent
            .front()
            .is_some_and(|&(at, _)| at <= now - WINDOW)
        {
            self.recent.pop_front();
        }
        let failures = self.recent.iter().filter(|&&(_, f)| f).count();
        if self.recent.len() >= MIN_CALLS && failures * 2 > self.recent.len() {
            self.open_until = Some(now + OPEN_FOR);
            self.recent.clear();
        }
        false
    }
}

fn is_down(at: i64) -> bool {
    (DOWN.0..DOWN.1).contains(&at)
}

/// When each email of the run is queued.
fn arrivals() -> Vec<i64> {
    let mut at: Vec<i64> = (0..)
        .map(|i| i * ARRIVE_EVERY)
        .take_while(|&t| t < ARRIVALS_UNTIL)
        .collect();
    at.extend(std::iter::repeat_n(DOWN.0, BACKLOG));
    at.sort_unstable();
    at
}

/// Plays the run with or without the breaker, minute by minute.
fn simulate(with_breaker: bool) -> (Vec<Minute>, Totals) {
    let arrivals = arrivals();
    let mut emails: Vec<Email> = Vec::new();
    let mut breaker = Breaker::default();
    let mut minutes = Vec::new();
    let mut current = Minute::default();
    let mut totals = Totals {
        sends: 0,
        sends_while_down: 0,
        delivered: 0,
        dead: 0,
    };
    let mut now = 0;
    while now < END {
        while emails.len() < arrivals.len() && arrivals[emails.len()] <= now {
            emails.push(Email {
                due: arrivals[emails.len()],
                failures: 0,
                state: State::Waiting,
            });
        }
        let limit = if with_breaker {
            breaker.allows(now)
        } else {
            BATCH
        };
        let mut due: Vec<usize> = (0..emails.len())
            .filter(|&i| emails[i].state == State::Waiting && emails[i].due <= now)
            .collect();
        due.sort_by_key(|&i| (emails[i].due, i));
        due.truncate(limit);
        for i in due {
            if with_breaker && breaker.allows(now) == 0 {
                // Opened during this batch: the rest wait, untouched.
                break;
            }
            let failed = is_down(now);
            current.sends += 1;
            totals.sends += 1;
            if failed {
                totals.sends_while_down += 1;
            }
            let probe = with_breaker && breaker.record(now, failed);
            let email = &mut emails[i];
            if !failed {
                email.state = State::Sent;
                totals.delivered += 1;
            } else if !probe {
                email.failures += 1;
                match RETRY_AFTER.get(email.failures - 1) {
                    Some(wait) => email.due = now + wait,
                    None => {
                        email.state = State::Dead;
                        totals.dead += 1;
                    }
                }
            }
        }
        now += TICK;
        if now % MINUTE == 0 {
            current.waiting = emails.iter().filter(|e| e.state == State::Waiting).count();
            current.dead = totals.dead;
            minutes.push(current);
            current = Minute::default();
        }
    }
    (minutes, totals)
}

/// Plays both runs.
pub fn measure() -> Report {
    let (without, without_totals) = simulate(false);
    let (with, with_totals) = simulate(true);
    let minutes = without
        .into_iter()
        .zip(with)
        .enumerate()
        .map(|(m, (without, with))| {
            let m = m as i64;
            Row {
                minute: m,
                down: DOWN.0 < (m + 1) * MINUTE && m * MINUTE < DOWN.1,
                without,
                with,
            }
        })
        .collect();
    Report {
        down_from_ms: DOWN.0,
        down_to_ms: DOWN.1,
        emails: arrivals().len(),
        minutes,
        without: without_totals,
        with: with_totals,
    }
}

/// The chart `notify try breaker` prints, ending in a newline.
pub fn render(report: &Report) -> String {
    let max = report
        .minutes
        .iter()
        .map(|r| r.without.sends.max(r.with.sends))
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    out.push_str(&format!(
        "\n  {}\n",
        "What a circuit breaker does to a provider outage".bold()
    ));
    out.push_str(&format!(
        "  {}\n\n",
        format!(
            "the email provider is down from {} to {}; {BACKLOG} emails land as it goes down, and one more every {} s until {}",
            clock(DOWN.0),
            clock(DOWN.1),
            ARRIVE_EVERY / SECOND,
            clock(ARRIVALS_UNTIL)
        )
        .dimmed()
    ));
    let cell = |m: &Minute| {
        format!(
            "{:<w$} {:>4} {:>8} {:>5}",
            bar(m.sends, max, BAR_WIDTH),
            m.sends,
            m.waiting,
            m.dead,
            w = BAR_WIDTH + 1
        )
    };
    let head = format!(
        "{:<w$} {:>4} {:>8} {:>5}",
        "sends",
        "",
        "waiting",
        "dead",
        w = BAR_WIDTH + 1
    );
    out.push_str(&format!(
        "  {:<12}{:<40}  {}\n",
        "", "without the breaker", "with the breaker"
    ));
    out.push_str(&format!("  {:<12}{head}  {head}\n", "minute"));
    for row in &report.minutes {
        let when = format!(
            "{:>5} {}",
            clock(row.minute * MINUTE),
            if row.down { "down" } else { "" }
        );
        out.push_str(&format!(
            "  {when:<12}{}  {}\n",
            cell(&row.without),
            cell(&row.with)
        ));
    }
    let totals = |t: &Totals| {
        format!(
            "{} sends, {} while down; {} delivered, {} dead-lettered",
            t.sends, t.sends_while_down, t.delivered, t.dead
        )
    };
    out.push_str(&format!(
        "\n  without: {}\n  with:    {}\n",
        totals(&report.without),
        totals(&report.with)
    ));
    out.push_str(&format!(
        "\n  {}\n",
        format!(
            "Simulated time, the same on every machine: a wake-up every 2 s, retries after 5 s, 30 s and 5 min; the breaker opens when over half of at least {MIN_CALLS} sends in the last minute failed, waits 30 s, then sends one probe."
        )
        .dimmed()
    ));
    out.push_str(&format!(
        "  Read it: without the breaker the dead provider takes {} sends and {} emails are dead-lettered; with it, about one probe per 30 s, and the backlog waits, then drains as soon as a probe gets through.\n",
        report.without.sends_while_down, report.without.dead
    ));
    out
}

/// `notify try breaker`: plays both runs, then prints the chart (or JSON).
/// The run is simulated, so `--iterations` and `--journal` change nothing.
pub fn run(json: bool) -> Result<i32> {
    super::print(&measure(), json, render)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_breaker_saves_the_backlog_and_spares_the_provider() {
        let report = measure();
        assert!(report.without.dead > 0);
        assert_eq!(report.with.dead, 0);
        assert_eq!(report.with.delivered, report.emails);
        let probes = ((DOWN.1 - DOWN.0) / OPEN_FOR) as usize;
        assert!(report.with.sends_while_down <= probes + MIN_CALLS + 1);
        assert!(report.without.sends_while_down > 3 * report.with.sends_while_down);
    }

    #[test]
    fn the_runs_are_the_same_every_time() {
        assert_eq!(render(&measure()), render(&measure()));
    }
}
