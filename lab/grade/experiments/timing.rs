//! How the measured experiments (`try outbox`, `claim`, `locks`) time their
//! runs: the options, a warm-up and interleaved rounds within a time budget,
//! percentiles of the samples, and the progress line on stderr.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use super::Journal;

/// Warm-up stops early after this long, so a slow disk (a rollback journal
/// can take milliseconds a commit) leaves most of the budget for measuring.
pub const WARM_UP_BUDGET: Duration = Duration::from_secs(1);

/// How to run a measured experiment.
#[derive(Clone, Debug)]
pub struct Options {
    /// Iterations to run; what one iteration is depends on the experiment.
    pub iterations: usize,
    /// The SQLite journal to use.
    pub journal: Journal,
    /// Stop measuring early once the run has taken this long.
    pub time_budget: Option<Duration>,
    /// Show a progress line on stderr.
    pub progress: bool,
}

impl Options {
    /// The options `notify try` uses: an explicit iteration count runs in
    /// full; otherwise `default` iterations within `budget`. Progress shows
    /// when stderr is a terminal.
    pub fn new(
        iterations: Option<usize>,
        journal: Journal,
        default: usize,
        budget: Duration,
    ) -> Options {
        Options {
            iterations: iterations.unwrap_or(default),
            journal,
            time_budget: iterations.is_none().then_some(budget),
            progress: std::io::stderr().is_terminal(),
        }
    }

    /// Whether a run that began at `started` has used up its time budget.
    pub fn out_of_time(&self, started: Instant) -> bool {
        self.time_budget
            .is_some_and(|budget| started.elapsed() >= budget)
    }
}

/// What [`time_rounds`] measured.
#[derive(Clone, Debug)]
pub struct Rounds {
    /// The timings of each thing measured, in the order the things were given.
    pub samples: Vec<Vec<Duration>>,
    /// Rounds measured.
    pub done: usize,
    /// Whether the time budget ended the run early.
    pub stopped_on_time_budget: bool,
    /// Rounds run and thrown away before measuring.
    pub warm_up_rounds: usize,
}

/// Warms up with up to `warm_up` rounds (fewer if they take longer than
/// [`WARM_UP_BUDGET`]), then measures up to `opts.iterations` rounds until
/// the time budget, counted from `started`, runs out. A round calls `time`
/// once for each of `things`, which returns how long its timed part took.
pub fn time_rounds<T: Copy>(
    opts: &Options,
    started: Instant,
    warm_up: usize,
    things: &[T],
    mut time: impl FnMut(T) -> Result<Duration>,
) -> Result<Rounds> {
    let mut progress = Progress::new(opts.progress);
    progress.show("warming up");
    let warm_up_started = Instant::now();
    let mut warm_up_rounds = 0;
    while warm_up_rounds < warm_up && warm_up_started.elapsed() < WARM_UP_BUDGET {
        for &thing in things {
            time(thing)?;
        }
        warm_up_rounds += 1;
    }

    let mut samples: Vec<Vec<Duration>> = (0..things.len())
        .map(|_| Vec::with_capacity(opts.iterations))
        .collect();
    let mut done = 0;
    let mut stopped_on_time_budget = false;
    while done < opts.iterations {
        if opts.out_of_time(started) {
            stopped_on_time_budget = true;
            break;
        }
        // Every round times all the things back to back, so slow moments
        // of the machine (and the WAL's growth and checkpoints) land on all
        // of them alike. The first one rotates so none of them always
        // follows the same neighbour.
        for k in 0..things.len() {
            let index = (done + k) % things.len();
            samples[index].push(time(things[index])?);
        }
        done += 1;
        progress.tick(done, opts.iterations);
    }
    progress.clear();
    Ok(Rounds {
        samples,
        done,
        stopped_on_time_budget,
        warm_up_rounds,
    })
}

/// How much of a run was measured, counted in `unit`: "200 iterations", or
/// "777 of 2000 iterations (stopped at the 8 s time budget)".
pub fn how_much(
    done: usize,
    requested: usize,
    stopped_on_time_budget: bool,
    budget: Duration,
    unit: &str,
) -> String {
    if stopped_on_time_budget {
        format!(
            "{done} of {requested} {unit} (stopped at the {} s time budget)",
            budget.as_secs()
        )
    } else {
        format!("{done} {unit}")
    }
}

/// `notify try NAME` for a measured experiment: refuses zero iterations,
/// measures, then prints the table `render` draws (or JSON); returns the
/// exit code.
pub fn run<R: Serialize>(
    opts: &Options,
    json: bool,
    measure: fn(&Options) -> Result<R>,
    render: fn(&R) -> String,
) -> Result<i32> {
    if opts.iterations == 0 {
        eprintln!("--iterations must be at least 1.");
        return Ok(2);
    }
    let report = measure(opts)?;
    super::print(&report, json, render)?;
    Ok(0)
}

/// The `p` quantile of `samples` in microseconds (nearest rank; the median
/// averages the two middle samples when their number is even).
pub fn percentile_us(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort_unstable();
    let us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    let n = us.len();
    if n == 0 || p == 0.5 {
        return median(&us);
    }
    // The small nudge keeps float error (0.99 * 100 = 99.000…01) from
    // pushing the rank one sample too high.
    let rank = ((p * n as f64 - 1e-9).ceil() as usize).clamp(1, n);
    us[rank - 1]
}

/// The median of sorted `values` (the mean of the middle two when even).
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// `value` rounded to `decimals` places, for the figures a report keeps.
pub fn round(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// A one-line progress indicator on stderr, drawn between timed calls,
/// never inside one; [`Progress::tick`] redraws it at most ten times a second.
pub struct Progress {
    enabled: bool,
    last_drawn: Option<Instant>,
}

impl Progress {
    /// A progress line that draws only if `enabled`.
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            last_drawn: None,
        }
    }

    /// Replaces the line with "measuring: `message`".
    pub fn show(&mut self, message: &str) {
        if self.enabled {
            // A progress line that fails to draw is not worth stopping for.
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[2K  measuring: {message}");
            let _ = err.flush();
            self.last_drawn = Some(Instant::now());
        }
    }

    /// Shows `done` of `total` iterations, unless the line was drawn less
    /// than 100 ms ago.
    pub fn tick(&mut self, done: usize, total: usize) {
        let due = self
            .last_drawn
            .is_none_or(|at| at.elapsed() >= Duration::from_millis(100));
        if self.enabled && due {
            self.show(&format!("{done}/{total} iterations"));
        }
    }

    /// Erases the line, so the report starts on a clean one.
    pub fn clear(&mut self) {
        if self.enabled {
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 9.0]), 3.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        assert_eq!(percentile_us(&mut samples, 0.99), 99.0);
        assert_eq!(percentile_us(&mut samples, 0.5), 50.5);
        let mut three = vec![
            Duration::from_micros(3),
            Duration::from_micros(1),
            Duration::from_micros(2),
        ];
        assert_eq!(percentile_us(&mut three, 0.5), 2.0);
        assert_eq!(percentile_us(&mut three, 0.99), 3.0);
    }

    #[test]
    fn rounds_time_every_thing_once_each_starting_in_turn() {
        let opts = Options {
            iterations: 3,
            journal: Journal::Wal,
            time_budget: None,
            progress: false,
        };
        let mut order = Vec::new();
        let rounds = time_rounds(&opts, Instant::now(), 1, &[0u64, 1], |thing| {
            order.push(thing);
            Ok(Duration::from_micros(thing + 1))
        })
        .unwrap();
        assert_eq!(rounds.warm_up_rounds, 1);
        assert_eq!(rounds.done, 3);
        assert!(!rounds.stopped_on_time_budget);
        assert_eq!(order, [0, 1, 0, 1, 1, 0, 0, 1]);
        assert_eq!(rounds.samples[0], [Duration::from_micros(1); 3]);
        assert_eq!(rounds.samples[1], [Duration::from_micros(2); 3]);
    }

    #[test]
    fn how_much_names_the_budget_only_when_it_ended_the_run() {
        let budget = Duration::from_secs(8);
        assert_eq!(how_much(3, 3, false, budget, "iterations"), "3 iterations");
        assert_eq!(
            how_much(2, 300, true, budget, "invites a row"),
            "2 of 300 invites a row (stopped at the 8 s time budget)"
        );
    }
}
