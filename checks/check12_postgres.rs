//! Check 12: many relays, one outbox on PostgreSQL.
//!
//! The case runs as real relay processes against a real PostgreSQL server
//! (`DATABASE_URL`), each play in schemas of its own. Two kinds of play:
//! - speed: an outbox of 400 rows drained by 1, then 2, then 4 relays, with
//!   nothing killed. Rows a second come from the provider's own clock;
//!   only their ratio is judged, never a time.
//! - kills: 2,000 rows, 4 relays, and a provider that is sometimes slow,
//!   is down for 2 s, then fails about half the sends for 1.5 s;
//!   relays are killed with SIGKILL at moments drawn from the seed, and
//!   started again a moment later. Each relay also runs the case's sweep.
//!
//! The check judges what the world saw: every request the provider got
//! (recipient, key, relay, time, and what PostgreSQL said the relay's
//! connection was doing at that moment), the relays' lives and deaths, and
//! the outbox at the end.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;

use lab::chapter::{Chapter, CheckOptions, Checked};
use lab::fleet::{RelayPlan, Request};
use lab::fleet_runner::{play, Hang, Kill, Play, Played};
use lab::report::{counted, Verdict};
use lab::rng::Rng;
use lab::runner::Case;

pub const CHAPTER: Chapter = Chapter {
    number: 12,
    title: "many machines: PostgreSQL",
    case_file: "cases/case12_postgres.rs",
    text_file: "chapters/12-many-machines.md",
    bin: "case12",
    shipped_hash: SHIPPED_HASH,
    run,
    check,
    coverage: lab::chapter::no_coverage,
    bands: lab::picture::no_bands,
};

/// FNV-1a of cases/case12_postgres.rs as shipped.
const SHIPPED_HASH: u64 = 0x061e_3d12_04d0_3a70;

const TOLD_ONCE: &str = "nobody is told twice";
const NOTHING_LOST: &str =
    "nothing is lost: every row is delivered and ends SENT, unless it is dead-lettered (FAILED), and a hung relay's rows go on without it";
const ONE_CLAIM: &str = "no row is sent by two live relays";
const FASTER: &str = "4 relays deliver at least 1.8× as fast as one";
const SHORT_CLAIM: &str = "no transaction is open during a send";
const BREAKER: &str =
    "chapter 7's breaker: once more than half of at least 5 recent sends failed, and only then, a relay sends about one probe per 300 ms";
const RETRIES: &str = "chapter 5's retries: a failed send is tried again after its backoff, a refused one never, and the 4th failure is dead-lettered with its error";

/// How much faster 4 relays must be than one.
const SPEED_UP: f64 = 1.8;
/// The relays the speed plays compare, in order.
const FLEETS: [u32; 3] = [1, 2, 4];
/// Rows of a speed play, per relay: one claim's batch each.
const SPEED_ROWS: u32 = 50;
/// Rows of a kill play.
const KILL_ROWS: u32 = 2000;
/// Relays of a kill play.
const KILL_RELAYS: u32 = 4;
/// Kills in a kill play's first 1.2 s (a long outage has one more).
const KILLS: usize = 4;
/// Hung sends in a kill play, each in a relay of its own: the provider
/// holds the send until another relay sends to the same recipient (so,
/// past the sweep's threshold), or for `HANG_MAX_MS`. Every relay hangs
/// once, so no relay is the one that always goes on: the first three
/// together, the last one later (`LATE_HANG_AFTER_OUTAGE_MS`).
const HANGS: usize = KILL_RELAYS as usize;
/// The rows of a hung relay went on 0.1 to 0.9 s after the threshold in
/// the runs measured on an idle machine; with three checks side by side on
/// two cores, a breaker that opened too readily once held them 2.4 s past
/// it. This leaves 4.5 s.
const HANG_MAX_MS: u64 = STALE_AFTER_MS + 4500;
/// A hung send the provider answered this close to `HANG_MAX_MS` was never
/// released by another relay's send: its row was not handed on.
const HANG_MAX_SLACK_MS: u64 = 100;
/// The first hung relay wakes with its link to the provider still down:
/// its next sends fail too (a 503), enough with the hung one to fill its
/// breaker's minimum. Its breaker opens in the middle of a batch whose rows
/// the sweep has handed on, and it hands the rest of that batch back.
const FAILS_AFTER_HANG: u32 = MIN_CALLS as u32 - 1;
/// When a hung send may begin, in ms after the outage ends: while rows
/// still wait, so that the rows it held are taken over by relays the
/// provider answers.
const HANG_AFTER_OUTAGE_MS: (u64, u64) = (500, 1300);
/// When the last relay's hung send may begin, in ms after the outage
/// ends: once the first three have been taken for dead and their rows
/// handed on (a threshold and a sweep after the last of them may begin),
/// so that three relays go on, while rows still wait (an idle machine
/// sends for about 6 s after the outage).
const LATE_HANG_AFTER_OUTAGE_MS: (u64, u64) = (
    HANG_AFTER_OUTAGE_MS.1 + STALE_AFTER_MS + 1000,
    HANG_AFTER_OUTAGE_MS.1 + STALE_AFTER_MS + 1600,
);

/// How far the clocks of a kill play's four machines are off, in ms:
/// never read by a relay that times its claims, retries and sweeps by the
/// database's clock. The fastest and the slowest differ by more than the
/// sweep's threshold, so a relay that compares its own clock with the
/// claim times another relay wrote takes that relay's rows while it is
/// still sending them.
const CLOCK_SKEWS_MS: [i64; KILL_RELAYS as usize] = [-1500, -500, 500, 1500];

/// Real time a send takes in the speed plays, in ms: far more than the
/// relay's own work on a row, as a real provider's hundreds of ms are.
const SEND_MS: u64 = 20;
/// Real time a send takes in the kill plays, in ms.
const KILL_SEND_MS: u64 = 4;
/// The sweep's threshold: about ten times a batch of 50 sends in the kill
/// plays (4 ms each), more than twice one in the speed plays (20 ms each).
const STALE_AFTER_MS: u64 = 2500;

/// Chapter 5's backoff gaps, scaled as every time here (5 s, 30 s, 5 min
/// become 50 ms, 300 ms, 3 s), in ms: after the first failure, the second,
/// the third.
const BACKOFF_MS: [f64; 3] = [50.0, 300.0, 3000.0];
/// Failures that dead-letter a row: the first attempt's and each retry's.
const ATTEMPTS: usize = BACKOFF_MS.len() + 1;
/// How much of a backoff gap must have passed before a retry: the relays
/// poll, and clocks are read at slightly different moments.
const GAP_SLACK: f64 = 0.8;
/// In a kill play, one send in this many fails for a moment (a 503).
const FAIL_ONE_IN: u32 = 20;
/// In a kill play, the addresses readerN with N a multiple of a number
/// drawn from the seed in this range are refused for good: a list with a
/// bad import in it, where refusals are common enough to sway a count of
/// failures that wrongly took them in.
const REFUSE_EVERY: (u64, u64) = (4, 12);
/// In a kill play, a bad import also sits in one piece in the list: this
/// many addresses in a row, drawn from the seed, all refused. With four
/// relays taking 50 rows at a time, each sends two batches or more of
/// them in a row, more than a breaker's window holds ...
const REFUSE_RUN: (u64, u64) = (150, 300);
/// ... from an address drawn in this share of the list, sent before the
/// outage: a relay's recent sends are then mostly refusals, while the
/// provider answers every send it can.
const REFUSE_RUN_FROM: (f64, f64) = (0.08, 0.2);
/// In a kill play, the addresses readerN with N a multiple of this fail
/// at every send: their mail server is down.
const DOWN_EVERY: u32 = 61;

/// In a kill play, the provider is down for everyone from this many ms
/// after the relays start ...
const OUTAGE_FROM_MS: u64 = 1300;
/// ... for this long on even seeds: shorter than the sweep's threshold ...
const OUTAGE_MS: u64 = 2000;
/// ... and this long on odd ones, the quick check's among them: past the
/// threshold, so that a relay that keeps its batch through an open
/// breaker, alive but not sending, has its claim taken over.
const LONG_OUTAGE_MS: u64 = STALE_AFTER_MS + 1000;
/// In a kill play, the provider is partly down from this many ms after
/// the outage ends, once the kills are done (a relay killed while its
/// breaker is open holds no claim to orphan; the long outage's kill is
/// there to start a relay that sweeps, not to orphan a claim) ...
const BROWNOUT_AFTER_OUTAGE_MS: u64 = 100;
/// ... for this long ...
const BROWNOUT_MS: u64 = 1500;
/// ... failing each send with a chance drawn from the seed, in 100: a
/// relay's recent sends then hold every share of failures around a half,
/// on both sides of its breaker's rule.
const BROWNOUT_PCT: (u64, u64) = (45, 65);
/// Chapter 7's breaker, scaled as every time here: it judges the sends of
/// the last 600 ms (a minute), and stays open 300 ms (30 s) before a probe.
const BREAKER_WINDOW_MS: u64 = 600;
const OPEN_FOR_MS: u64 = 300;
/// Sends a breaker needs in its window before it judges: a relay that had
/// sent nothing lately makes this many in an outage before it opens.
const MIN_CALLS: u64 = 5;

/// How long a kill play's outage lasts.
fn outage_ms(seed: u64) -> u64 {
    if seed % 2 == 1 {
        LONG_OUTAGE_MS
    } else {
        OUTAGE_MS
    }
}

/// When a kill play's outage ends, in ms after the relays start.
fn outage_end_ms(seed: u64) -> u64 {
    OUTAGE_FROM_MS + outage_ms(seed)
}

/// Every relay's plan but its name.
fn relay_plan(seed: u64, slow: bool) -> RelayPlan {
    RelayPlan {
        me: String::new(),
        send_ms: if slow { KILL_SEND_MS } else { SEND_MS },
        slow_one_in: if slow { 25 } else { 0 },
        slow_ms: 15,
        seed,
        sweep_every_ms: 250,
        stale_after_ms: STALE_AFTER_MS,
        give_up_ms: STALE_AFTER_MS + 3000,
        start_at_ms: 0,
        fail_one_in: if slow { FAIL_ONE_IN } else { 0 },
        refuse_every: if slow {
            Rng::new(seed ^ 0x422).between(REFUSE_EVERY.0, REFUSE_EVERY.1) as u32
        } else {
            0
        },
        refuse_from: 0,
        refuse_run: 0,
        down_every: if slow { DOWN_EVERY } else { 0 },
        outage_from_ms: if slow { OUTAGE_FROM_MS } else { 0 },
        outage_ms: if slow { outage_ms(seed) } else { 0 },
        brownout_from_ms: if slow {
            outage_end_ms(seed) + BROWNOUT_AFTER_OUTAGE_MS
        } else {
            0
        },
        brownout_ms: if slow { BROWNOUT_MS } else { 0 },
        brownout_pct: if slow {
            Rng::new(seed ^ 0xb20).between(BROWNOUT_PCT.0, BROWNOUT_PCT.1) as u32
        } else {
            0
        },
        play_start_ms: 0,
        hang_from_ms: 0,
        hang_max_ms: HANG_MAX_MS,
        hang_fails_after: 0,
        crash_at_ms: 0,
        clock_skew_ms: 0,
    }
}

fn speed_play(relays: u32) -> Play {
    Play {
        rows: SPEED_ROWS * relays,
        relays,
        kills: Vec::new(),
        hangs: Vec::new(),
        relay: relay_plan(u64::from(relays), false),
        clock_skews_ms: Vec::new(),
        limit: Duration::from_secs(60),
    }
}

fn kill_play(seed: u64) -> Play {
    let mut rng = Rng::new(seed ^ 0x12_12_12);
    let mut kills: Vec<Kill> = (0..KILLS)
        .map(|_| Kill {
            relay: rng.between(1, u64::from(KILL_RELAYS)) as u32,
            at_ms: rng.between(100, 1200),
            down_ms: rng.between(50, 300),
        })
        .collect();
    // In a long outage, one more, once the threshold has passed since it
    // began: the relay started again sweeps at once, while the others
    // wait on their breakers.
    if outage_ms(seed) > STALE_AFTER_MS {
        let from = OUTAGE_FROM_MS + STALE_AFTER_MS + 200;
        kills.push(Kill {
            relay: rng.between(1, u64::from(KILL_RELAYS)) as u32,
            at_ms: rng.between(from, from + 400),
            down_ms: rng.between(50, 300),
        });
    }
    kills.sort_by_key(|k| k.at_ms);
    let mut hangs: Vec<Hang> = Vec::new();
    while hangs.len() < HANGS {
        let relay = rng.between(1, u64::from(KILL_RELAYS)) as u32;
        if hangs.iter().all(|h| h.relay != relay) {
            let (from, to) = if hangs.len() + 1 < HANGS {
                HANG_AFTER_OUTAGE_MS
            } else {
                LATE_HANG_AFTER_OUTAGE_MS
            };
            let from_ms = outage_end_ms(seed) + rng.between(from, to);
            // The first wakes with its link to the provider still down.
            let fails_after = if hangs.is_empty() {
                FAILS_AFTER_HANG
            } else {
                0
            };
            hangs.push(Hang {
                relay,
                from_ms,
                fails_after,
            });
        }
    }
    let mut relay = relay_plan(seed, true);
    let mut import = Rng::new(seed ^ 0x4e1);
    let (low, high) = REFUSE_RUN_FROM;
    relay.refuse_from = import.between(
        (f64::from(KILL_ROWS) * low) as u64,
        (f64::from(KILL_ROWS) * high) as u64,
    ) as u32;
    relay.refuse_run = import.between(REFUSE_RUN.0, REFUSE_RUN.1) as u32;
    // Each relay's machine keeps its own clock, shuffled among the relays
    // by a stream of its own, so the rest is drawn as before.
    let mut clock_skews_ms = CLOCK_SKEWS_MS.to_vec();
    Rng::new(seed ^ 0xc10c).shuffle(&mut clock_skews_ms);
    Play {
        rows: KILL_ROWS,
        relays: KILL_RELAYS,
        kills,
        hangs,
        relay,
        clock_skews_ms,
        limit: Duration::from_secs(90),
    }
}

/// "4 relays, 2000 rows; relay-2 crashes right after a delivered send from
/// 0.31 s, down 0.12 s; ...".
fn describe(play: &Play) -> String {
    let mut text = format!(
        "{} relay{}, {} rows",
        play.relays,
        if play.relays == 1 { "" } else { "s" },
        play.rows
    );
    if !play.clock_skews_ms.is_empty() {
        let clocks: Vec<String> = play
            .clock_skews_ms
            .iter()
            .zip(1..)
            .map(|(ms, relay)| format!("relay-{relay}'s {:+.1} s", *ms as f64 / 1000.0))
            .collect();
        text.push_str(&format!(
            "; each machine's clock is off: {}",
            clocks.join(", ")
        ));
    }
    for kill in &play.kills {
        text.push_str(&format!(
            "; relay-{} crashes right after a delivered send from {:.2} s, down {:.2} s",
            kill.relay,
            kill.at_ms as f64 / 1000.0,
            kill.down_ms as f64 / 1000.0
        ));
    }
    for hang in &play.hangs {
        text.push_str(&format!(
            "; relay-{}'s first send after {:.2} s of a row never sent before, that would be delivered, hangs until another relay sends to the same person (at most {:.1} s), then fails (503)",
            hang.relay,
            hang.from_ms as f64 / 1000.0,
            play.relay.hang_max_ms as f64 / 1000.0
        ));
        if hang.fails_after > 0 {
            text.push_str(&format!(
                ", and so do its next {} sends: its link to the provider is still down",
                hang.fails_after
            ));
        }
    }
    if play.relay.slow_one_in > 0 {
        text.push_str(&format!(
            "; one send in {} takes {} ms",
            play.relay.slow_one_in, play.relay.slow_ms
        ));
    }
    if play.relay.fail_one_in > 0 {
        text.push_str(&format!(
            "; one send in {} fails (503), every {} address is refused, every {} always fails",
            play.relay.fail_one_in,
            ordinal(play.relay.refuse_every),
            ordinal(play.relay.down_every)
        ));
    }
    if play.relay.refuse_run > 0 {
        text.push_str(&format!(
            "; reader{} to reader{} are refused too, a bad import",
            play.relay.refuse_from,
            play.relay.refuse_from + play.relay.refuse_run - 1
        ));
    }
    if play.relay.brownout_ms > 0 {
        text.push_str(&format!(
            "; from {:.2} s for {:.2} s the provider fails {} sends in 100 (a 503)",
            play.relay.brownout_from_ms as f64 / 1000.0,
            play.relay.brownout_ms as f64 / 1000.0,
            play.relay.brownout_pct
        ));
    }
    if play.relay.outage_ms > 0 {
        text.push_str(&format!(
            "; the provider is down from {:.2} s for {:.2} s",
            play.relay.outage_from_ms as f64 / 1000.0,
            play.relay.outage_ms as f64 / 1000.0
        ));
    }
    text
}

/// "11th", "21st", "62nd", "93rd".
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Rows a second: rows delivered over the time from the relays' start to
/// the provider's last request.
fn rate(played: &Played) -> f64 {
    let last = played
        .seen
        .requests
        .iter()
        .map(|r| r.at_us)
        .max()
        .unwrap_or(played.began_us);
    let delivered = played.seen.requests.iter().filter(|r| r.delivered).count();
    let seconds = ((last - played.began_us) as f64 / 1e6).max(1e-3);
    delivered as f64 / seconds
}

fn idle_in_transaction(request: &Request) -> bool {
    request.connection.starts_with("idle in transaction")
}

/// People told more than once: (recipient, deliveries).
fn told_twice(played: &Played) -> Vec<(String, usize)> {
    let mut told: HashMap<&str, usize> = HashMap::new();
    for r in played.seen.requests.iter().filter(|r| r.delivered) {
        *told.entry(&r.recipient).or_default() += 1;
    }
    let mut twice: Vec<(String, usize)> = told
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(who, n)| (who.to_string(), n))
        .collect();
    twice.sort();
    twice
}

/// Rows not delivered or not SENT at the end, as detail lines.
fn lost(played: &Played) -> Vec<String> {
    // A send the provider held for as long as it ever holds one: no other
    // relay sent to that person meanwhile, so the sweep never returned the
    // row, PROCESSING under a relay that hung far past the threshold. A
    // sweep may rightly dead-letter such a row instead, when the attempts
    // it counts for relays taken for dead leave it none: then it is
    // settled, and nobody sends it again.
    let dead: std::collections::HashSet<&str> = played
        .seen
        .rows
        .iter()
        .filter(|row| row.status == "FAILED")
        .map(|row| row.recipient.as_str())
        .collect();
    let kept = hung_spells(played)
        .into_iter()
        .filter(|h| h.hung_us >= (HANG_MAX_MS - HANG_MAX_SLACK_MS) as i64 * 1000)
        .filter(|h| !dead.contains(h.recipient.as_str()))
        .map(|h| {
            format!(
                "{}: {} hung on it for {:.1} s and no other relay took it over, though the sweep's threshold is {:.1} s",
                h.recipient,
                h.relay,
                h.hung_us as f64 / 1e6,
                STALE_AFTER_MS as f64 / 1000.0
            )
        });
    let delivered: std::collections::HashSet<&str> = played
        .seen
        .requests
        .iter()
        .filter(|r| r.delivered)
        .map(|r| r.recipient.as_str())
        .collect();
    played
        .seen
        .rows
        .iter()
        .filter(|row| {
            row.status != "FAILED"
                && (row.status != "SENT" || !delivered.contains(row.recipient.as_str()))
        })
        .map(|row| {
            let told = if delivered.contains(row.recipient.as_str()) {
                "delivered"
            } else {
                "never delivered"
            };
            format!("{}: ends {}, {told}", row.recipient, row.status)
        })
        .chain(kept)
        .collect()
}

/// The hung sends of a play: in each, a relay was taken for dead though
/// it still ran.
fn hung_spells(played: &Played) -> Vec<&Request> {
    played
        .seen
        .requests
        .iter()
        .filter(|r| r.hung_us > 0)
        .collect()
}

/// A send a relay made after a hung send of its own, in the same call of
/// the case's relay: the rest of the batch it was taken for dead with,
/// which the sweep gave to others. The rules let it go out again (the key
/// keeps it one message); its result must change nothing.
fn late(spells: &[&Request], request: &Request) -> bool {
    spells.iter().any(|hung| {
        hung.relay == request.relay && hung.call == request.call && request.at_us > hung.at_us
    })
}

/// Rows sent again, by any relay, after the provider had taken them from a
/// relay that was still alive and not hung: (recipient, first relay,
/// second relay, gap in ms). A relay's own late sends after a hung one are
/// the rules' to allow.
fn double_claims(played: &Played) -> Vec<(String, String, String, f64)> {
    let spells = hung_spells(played);
    let mut by_row: HashMap<&str, Vec<&Request>> = HashMap::new();
    for r in &played.seen.requests {
        by_row.entry(&r.recipient).or_default().push(r);
    }
    let mut found = Vec::new();
    for (who, requests) in by_row {
        'row: for (i, a) in requests.iter().enumerate() {
            // A failed send hands the row back: another relay may retry it.
            if failed(a) || late(&spells, a) {
                continue;
            }
            for b in &requests[i + 1..] {
                if late(&spells, b) {
                    continue;
                }
                let hung = spells.iter().any(|h| {
                    h.relay == a.relay && h.at_us <= b.at_us && h.at_us + h.hung_us >= a.at_us
                });
                let alive = played
                    .life(&a.relay)
                    .is_some_and(|life| life.ended_us > b.at_us);
                if alive && !hung {
                    found.push((
                        who.to_string(),
                        a.relay.clone(),
                        b.relay.clone(),
                        (b.at_us - a.at_us) as f64 / 1000.0,
                    ));
                    break 'row;
                }
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// What went wrong with the relays themselves: crashes, give-ups, errors.
fn troubles(played: &Played) -> Vec<String> {
    let mut lines = Vec::new();
    for life in &played.lives {
        if let Some(trouble) = &life.trouble {
            lines.push(format!("{} ended badly: {trouble}", life.me));
        }
    }
    for note in &played.seen.notes {
        if note.what != "done" {
            lines.push(format!("{} {}: {}", note.relay, note.what, note.text));
        }
    }
    lines.truncate(6);
    lines
}

/// The speed plays and the kill plays a check plays.
struct Plays {
    speed: Vec<(Play, Played)>,
    kills: Vec<(u64, Play, Played)>,
}

impl Plays {
    fn all(&self) -> impl Iterator<Item = (&Play, &Played, Option<u64>)> {
        self.speed
            .iter()
            .map(|(p, d)| (p, d, None))
            .chain(self.kills.iter().map(|(s, p, d)| (p, d, Some(*s))))
    }

    fn processes(&self) -> usize {
        self.all().map(|(_, d, _)| d.processes).sum()
    }
}

fn play_speed(case: &Case) -> Result<Vec<(Play, Played)>> {
    FLEETS
        .iter()
        .map(|&n| {
            let p = speed_play(n);
            let d = play(case, &p)?;
            Ok((p, d))
        })
        .collect()
}

/// The kill plays' seeds: one for the learner's loop, more when asked.
fn kill_seeds(options: &CheckOptions) -> Vec<u64> {
    let count = (options.budget.scenarios / 4).clamp(1, 10);
    (options.budget.first_seed..options.budget.first_seed + count).collect()
}

fn check(case: &Case, options: &CheckOptions) -> Result<Checked> {
    let speed = play_speed(case)?;
    let mut kills = Vec::new();
    for seed in kill_seeds(options) {
        let p = kill_play(seed);
        let d = play(case, &p)?;
        kills.push((seed, p, d));
    }
    let plays = Plays { speed, kills };
    let verdicts = vec![
        judge_told_once(&plays),
        judge_nothing_lost(&plays),
        judge_one_claim(&plays),
        judge_faster(&plays),
        judge_short_claim(&plays),
        judge_retries(&plays),
        judge_breaker(&plays),
    ];
    Ok(Checked {
        verdicts,
        processes: plays.processes(),
    })
}

fn with_seed(mut verdict: Verdict, seed: Option<u64>) -> Verdict {
    verdict.seed = seed;
    verdict
}

fn killed(plays: &Plays) -> usize {
    plays
        .all()
        .map(|(_, d, _)| d.lives.iter().filter(|l| l.killed).count())
        .sum()
}

fn judge_told_once(plays: &Plays) -> Verdict {
    for (p, d, seed) in plays.all() {
        let twice = told_twice(d);
        if let Some((who, n)) = twice.first() {
            let mut details = vec![format!("{who} was told {n} times")];
            details.extend(
                twice
                    .iter()
                    .skip(1)
                    .take(4)
                    .map(|(w, n)| format!("{w} was told {n} times")),
            );
            return with_seed(
                Verdict::fail(
                    TOLD_ONCE,
                    format!("{} of {} people told more than once", twice.len(), p.rows),
                    describe(p),
                    details,
                ),
                seed,
            );
        }
    }
    let people: u32 = plays.all().map(|(p, _, _)| p.rows).sum();
    Verdict::pass(
        TOLD_ONCE,
        format!(
            "{people} people in {} plays, each told once, {} relays killed",
            plays.speed.len() + plays.kills.len(),
            killed(plays)
        ),
    )
}

fn judge_nothing_lost(plays: &Plays) -> Verdict {
    for (p, d, seed) in plays.all() {
        let lost = lost(d);
        if !lost.is_empty() {
            let mut details: Vec<String> = lost.iter().take(4).cloned().collect();
            details.extend(troubles(d));
            return with_seed(
                Verdict::fail(
                    NOTHING_LOST,
                    format!(
                        "{} of {} rows not delivered, not SENT, or kept by a hung relay",
                        lost.len(),
                        p.rows
                    ),
                    describe(p),
                    details,
                ),
                seed,
            );
        }
    }
    let rows: u32 = plays.all().map(|(p, _, _)| p.rows).sum();
    let held: Vec<f64> = plays
        .all()
        .flat_map(|(_, d, _)| hung_spells(d))
        .map(|h| h.hung_us as f64 / 1e6)
        .collect();
    let taken_over = match held.iter().copied().reduce(f64::max) {
        Some(longest) => format!(
            ", {} taken over from a hung relay within {longest:.1} s",
            counted(held.len(), "row")
        ),
        None => String::new(),
    };
    Verdict::pass(
        NOTHING_LOST,
        format!(
            "{rows} rows delivered and SENT or dead-lettered, {} relays killed and started again{taken_over}",
            killed(plays)
        ),
    )
}

fn judge_one_claim(plays: &Plays) -> Verdict {
    for (p, d, seed) in plays.all() {
        let doubles = double_claims(d);
        if let Some((who, a, b, gap)) = doubles.first() {
            let again = |a: &str, b: &str| {
                if a == b {
                    format!("again by {b}, in a later claim,")
                } else {
                    format!("by {b}")
                }
            };
            let mut details = vec![format!(
                "{who}: taken by the provider from {a}, then sent {} {gap:.1} ms later while {a} was still running",
                again(a, b)
            )];
            details.extend(doubles.iter().skip(1).take(3).map(|(w, a, b, gap)| {
                format!(
                    "{w}: taken from {a}, then sent {} {gap:.1} ms later",
                    again(a, b)
                )
            }));
            return with_seed(
                Verdict::fail(
                    ONE_CLAIM,
                    format!(
                        "{} of {} rows sent again while the relay the provider took them from still ran",
                        doubles.len(),
                        p.rows
                    ),
                    describe(p),
                    details,
                ),
                seed,
            );
        }
    }
    let sends = plays.all().count();
    Verdict::pass(
        ONE_CLAIM,
        format!(
            "in {sends} plays, a row was sent again only after the relay it was taken from was killed, or hung past the sweep's threshold ({} hung)",
            counted(
                plays.all().map(|(_, d, _)| hung_spells(d).len()).sum::<usize>(),
                "send"
            )
        ),
    )
}

/// The rates of the speed plays, in FLEETS order.
fn rates(plays: &Plays) -> Vec<(u32, f64)> {
    plays
        .speed
        .iter()
        .map(|(p, d)| (p.relays, rate(d)))
        .collect()
}

fn figures(rates: &[(u32, f64)]) -> String {
    rates
        .iter()
        .map(|(n, r)| format!("{n} relay{}: {r:.1} rows/s", if *n == 1 { "" } else { "s" }))
        .collect::<Vec<_>>()
        .join(", ")
}

fn judge_faster(plays: &Plays) -> Verdict {
    let rates = rates(plays);
    let one = rates.first().map_or(0.0, |r| r.1);
    let four = rates.last().map_or(0.0, |r| r.1);
    let ratio = four / one.max(1e-9);
    let evidence = format!("{}; {ratio:.2}×", figures(&rates));
    if ratio >= SPEED_UP {
        return Verdict::pass(FASTER, evidence);
    }
    let (p, _) = &plays.speed[plays.speed.len() - 1];
    Verdict::fail(
        FASTER,
        evidence,
        describe(p),
        vec![format!(
            "4 relays delivered {ratio:.2}× as many rows a second as one: they took turns instead of sending side by side"
        )],
    )
}

fn judge_short_claim(plays: &Plays) -> Verdict {
    for (p, d, seed) in plays.all() {
        let open: Vec<&Request> = d
            .seen
            .requests
            .iter()
            .filter(|r| idle_in_transaction(r))
            .collect();
        if let Some(first) = open.first() {
            return with_seed(
                Verdict::fail(
                    SHORT_CLAIM,
                    format!(
                        "{} of {} sends made while the relay's connection was idle in transaction",
                        open.len(),
                        d.seen.requests.len()
                    ),
                    describe(p),
                    vec![format!(
                        "{} sent to {} with a transaction open: its locks stayed held while the provider answered",
                        first.relay, first.recipient
                    )],
                ),
                seed,
            );
        }
    }
    Verdict::pass(
        SHORT_CLAIM,
        format!(
            "in {} plays, PostgreSQL saw every relay's connection idle, no transaction open, at each send",
            plays.speed.len() + plays.kills.len()
        ),
    )
}

fn run(case: &Case) -> Result<String> {
    let speed = play_speed(case)?;
    let mut out = format!(
        "an outbox of {SPEED_ROWS} emails per relay on PostgreSQL; the provider takes {SEND_MS} ms a send\n\n"
    );
    let one = rate(&speed[0].1);
    for (p, d) in &speed {
        let r = rate(d);
        let share = |me: &str| {
            let n = d.seen.requests.iter().filter(|q| q.relay == me).count();
            100.0 * n as f64 / d.seen.requests.len().max(1) as f64
        };
        let seconds = d
            .seen
            .requests
            .iter()
            .map(|q| q.at_us)
            .max()
            .map_or(0.0, |last| (last - d.began_us) as f64 / 1e6);
        out.push_str(&format!(
            "{} relay{}: all sent in {seconds:.2} s, {r:.1} rows/s, {:.2}× one relay\n",
            p.relays,
            if p.relays == 1 { " " } else { "s" },
            r / one.max(1e-9)
        ));
        if p.relays > 1 {
            let shares: Vec<String> = (1..=p.relays)
                .map(|i| {
                    let me = format!("relay-{i}");
                    format!("{me} {:.1}%", share(&me))
                })
                .collect();
            out.push_str(&format!("  sent: {}\n", shares.join(", ")));
        }
    }
    let requests: Vec<&Request> = speed.iter().flat_map(|(_, d)| &d.seen.requests).collect();
    let open = requests.iter().filter(|r| idle_in_transaction(r)).count();
    out.push_str(&format!(
        "\nsends made while the relay's connection was idle in transaction: {open} of {}\n",
        requests.len()
    ));
    let four = rate(&speed[speed.len() - 1].1) / one.max(1e-9);
    if open > 0 && four < SPEED_UP {
        out.push_str(
            "four relays are hardly faster than one: each relay holds its row locks while it sends,\n\
             so the others wait for its whole batch before they can take a row.\n",
        );
    } else if open > 0 {
        out.push_str(
            "every send was made with the claim's transaction still open: its locks and its\n\
             connection held while the provider answered.\n",
        );
    }
    Ok(out)
}

/// The provider answered a failure: nothing was delivered.
fn failed(request: &Request) -> bool {
    request.answer == "unavailable" || request.answer == "rejected"
}

/// What chapter 5's rules say of one play, row by row: the broken rules as
/// detail lines, and the figures of a pass (retries made, rows refused,
/// rows dead-lettered after their last failure).
fn retry_faults(played: &Played) -> (Vec<String>, [usize; 3]) {
    let kills: Vec<i64> = played
        .lives
        .iter()
        .filter(|l| l.killed)
        .map(|l| l.ended_us)
        .collect();
    let spells = hung_spells(played);
    let mut by_row: HashMap<&str, Vec<&Request>> = HashMap::new();
    for r in &played.seen.requests {
        by_row.entry(&r.recipient).or_default().push(r);
    }
    let mut faults = Vec::new();
    let mut figures = [0; 3];
    for row in &played.seen.rows {
        let requests = by_row
            .get(row.recipient.as_str())
            .cloned()
            .unwrap_or_default();
        let who = &row.recipient;
        let failures = requests
            .iter()
            .filter(|r| r.answer == "unavailable")
            .count();
        let refused = requests.iter().any(|r| r.answer == "rejected");
        // A relay killed or hung while it held the row lost an attempt
        // that chapter 6's sweep may count, though the provider never saw
        // it. The readings of the outbox show each such claim: the row
        // PROCESSING for about the threshold, until the sweep took it back.
        let lost = match &played.watched {
            Some(watched) => watched.held.get(&row.id).map_or(0, |stretches| {
                stretches
                    .iter()
                    .filter(|(from, to)| to - from >= SWEPT_SEEN_US)
                    .count()
            }),
            None => lost_claims(played, &kills, &spells, &requests),
        };
        // A kill between a row's first and last request may have lost a
        // result the provider had already given, and a hung relay's late
        // sends are tries whose results the rules drop: only the end is
        // judged.
        let disturbed = match (requests.first(), requests.last()) {
            (Some(first), Some(last)) => kills
                .iter()
                .any(|&k| k >= first.at_us && k <= last.at_us + 1000),
            _ => false,
        } || requests.iter().any(|r| r.hung_us > 0 || late(&spells, r));
        if !disturbed {
            let mut so_far = 0;
            for pair in requests.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                let gap = (b.at_us - a.at_us) as f64 / 1000.0;
                if a.answer == "rejected" {
                    faults.push(format!(
                        "{who}: refused for good by the provider, then sent again {gap:.0} ms later"
                    ));
                    break;
                }
                if a.answer != "unavailable" {
                    continue;
                }
                so_far += 1;
                if so_far >= ATTEMPTS {
                    faults.push(format!(
                        "{who}: sent again {gap:.0} ms after its {so_far}th failure, which should have dead-lettered it"
                    ));
                    break;
                }
                let wait = BACKOFF_MS[so_far - 1];
                if gap < wait * GAP_SLACK {
                    faults.push(format!(
                        "{who}: retried {gap:.0} ms after failure {so_far}; its backoff is {wait:.0} ms"
                    ));
                    break;
                }
                figures[0] += 1;
            }
        }
        // A kill after a delivery, before the row's next request, may have
        // lost the relay's record of it: the rules then let the row be
        // sent again, and dead-lettered if those sends fail. A late send
        // of a relay taken for dead is the same: its record is fenced out,
        // and a sweep that counts the lost attempt may have dead-lettered
        // the row meanwhile.
        let delivery_unrecorded = requests.iter().enumerate().any(|(i, r)| {
            let until = requests.get(i + 1).map_or(i64::MAX, |next| next.at_us);
            r.delivered && (late(&spells, r) || kills.iter().any(|&k| k >= r.at_us && k <= until))
        });
        if row.status == "FAILED" {
            if requests.iter().any(|r| r.delivered) && !delivery_unrecorded {
                faults.push(format!("{who}: delivered, yet ends FAILED"));
            } else if !refused && failures + lost < ATTEMPTS {
                faults.push(format!(
                    "{who}: dead-lettered after {failures} failed send{}, not {ATTEMPTS}",
                    if failures == 1 { "" } else { "s" }
                ));
            } else if row.last_error.as_deref().unwrap_or("").trim().is_empty() {
                faults.push(format!("{who}: dead-lettered with no last_error"));
            } else if refused {
                figures[1] += 1;
            } else {
                figures[2] += 1;
            }
        }
    }
    faults.sort();
    (faults, figures)
}

/// How long the readings of the outbox see a row `PROCESSING` at least,
/// in µs, when its claim lasted the sweep's threshold: they are
/// [`lab::fleet_runner::WATCH_EVERY_MS`] apart, more on a busy machine.
const SWEPT_SEEN_US: i64 = (STALE_AFTER_MS * 1000) as i64 * 4 / 5;

/// The claims of a row a relay may have lost, when no reading of the
/// outbox was taken: a relay killed while it held the row, or hung in a
/// send before it in its batch. Such a claim comes back only once it is
/// older than the threshold: a gap between two tries (or from the start
/// to the first) at least that long, with a kill or a hang's start inside
/// it, may hold one, and a late send of the hung relay shows one.
fn lost_claims(
    played: &Played,
    kills: &[i64],
    spells: &[&Request],
    requests: &[&Request],
) -> usize {
    let mut tries: Vec<i64> = vec![played.began_us];
    tries.extend(requests.iter().map(|r| r.at_us));
    tries
        .windows(2)
        .map(|w| {
            let lost_in = kills
                .iter()
                .chain(spells.iter().map(|h| &h.at_us))
                .filter(|&&k| k > w[0] && k < w[1])
                .count();
            lost_in.min(((w[1] - w[0]) / (STALE_AFTER_MS * 1000) as i64) as usize)
        })
        .sum::<usize>()
        + usize::from(requests.iter().any(|r| late(spells, r)))
}

fn judge_retries(plays: &Plays) -> Verdict {
    let mut totals = [0; 3];
    for (p, d, seed) in plays.all() {
        let (faults, figures) = retry_faults(d);
        if let Some(first) = faults.first() {
            let mut details = vec![first.clone()];
            details.extend(faults.iter().skip(1).take(3).cloned());
            return with_seed(
                Verdict::fail(
                    RETRIES,
                    format!(
                        "{} of {} rows broke chapter 5's rules",
                        faults.len(),
                        p.rows
                    ),
                    describe(p),
                    details,
                ),
                seed,
            );
        }
        for (t, f) in totals.iter_mut().zip(figures) {
            *t += f;
        }
    }
    Verdict::pass(
        RETRIES,
        format!(
            "in {} plays, every retry after its backoff, every refused row and every row out of attempts dead-lettered with its error",
            plays.speed.len() + plays.kills.len()
        ),
    )
}

/// How far a send's place in its breaker's window is uncertain, in µs:
/// the provider stamps a request as it arrives, the relay's breaker counts
/// it once the answer is back, 4 to 15 ms later.
const WINDOW_SLACK_US: i64 = 25_000;
/// A pause at least this long between two sends of one relay is its breaker
/// holding back (it waits 300 ms before its probe).
const HELD_MS: f64 = OPEN_FOR_MS as f64 * 0.8;
/// While more rows than this were still untried by every relay, a relay
/// that paused was not short of work: every live claim (4 × 50), every
/// claim a kill left behind (4 × 50) and every hung batch (2 × 50) hold
/// fewer, so some row was there for the claiming.
const BUSY_ROWS: usize = 600;
/// Pauses no rule explains that fail the property: a loaded machine may
/// stall one relay once, a breaker that opens too readily does it again.
const UNEXPLAINED_PAUSES: usize = 2;

/// What chapter 7's rule says of a relay's breaker right after one of its
/// sends, when the sends it counts may start at any of several sends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// More than half of at least five failed, whichever sends it counts.
    Opens,
    /// Fewer than five, or at most half failed, whichever it counts.
    StaysClosed,
    /// It depends on sends at the window's edge.
    Unsure,
}

/// A broken breaker rule seen on one relay's sends.
struct BreakerFault {
    relay: String,
    /// Seconds into the play of the send after which it happened.
    at: f64,
    /// The pause before the relay's next send, in ms.
    gap: f64,
    /// It paused though its rule said its breaker stays closed.
    held: bool,
    /// The send was a probe.
    probe: bool,
    /// The sends its breaker counted, how many of them failed, and how
    /// many were refused.
    counted: (usize, usize, usize),
}

/// Chapter 7's rule on a relay's own sends `sends[since..=i]`: the breaker
/// counts those of the last 600 ms (each answered when the provider stamped
/// it, plus however long it hung), and opens when more than half of at
/// least five failed for want of the provider. A refusal says nothing of
/// the provider's health. Also the sends surely counted, and their failures.
fn rule(sends: &[&Request], since: usize, i: usize) -> (Rule, (usize, usize, usize)) {
    let window = (BREAKER_WINDOW_MS * 1000) as i64;
    let answered = |k: usize| sends[k].answered_us();
    let now = answered(i);
    let maybe = (since..=i)
        .find(|&k| now - answered(k) < window + WINDOW_SLACK_US)
        .unwrap_or(i);
    let surely = (since..=i)
        .find(|&k| now - answered(k) < window - WINDOW_SLACK_US)
        .unwrap_or(i);
    let counts = |from: usize| {
        let counted = &sends[from..=i];
        let failures = counted.iter().filter(|r| r.answer == "unavailable").count();
        let refused = counted.iter().filter(|r| r.answer == "rejected").count();
        (counted.len(), failures, refused)
    };
    let opens =
        |(len, failures, _): (usize, usize, usize)| len >= MIN_CALLS as usize && failures * 2 > len;
    let verdicts: Vec<bool> = (maybe..=surely).map(|j| opens(counts(j))).collect();
    let said = match (verdicts.iter().all(|&o| o), verdicts.iter().any(|&o| o)) {
        (true, _) => Rule::Opens,
        (_, false) => Rule::StaysClosed,
        _ => Rule::Unsure,
    };
    (said, counts(surely))
}

/// Chapter 7's breaker judged both ways on each relay's own sends, while
/// rows wait untried: after a send that leaves more than half of at least
/// five counted sends failed, the relay's next send waits for the probe
/// (about 300 ms), whether it is the rest of a batch under way or the next
/// claim; a failed probe keeps it waiting, a good one closes it and its
/// count starts afresh. And while its rule keeps the breaker closed, a
/// relay does not pause that long. Each pause says which way the relay's
/// breaker went, so a broken rule is judged once and what follows is
/// judged from where the relay stood.
fn breaker_faults(play: &Play, played: &Played) -> Vec<BreakerFault> {
    let mut first_tries: Vec<i64> = Vec::new();
    let mut seen_recipients = std::collections::HashSet::new();
    for r in &played.seen.requests {
        if seen_recipients.insert(r.recipient.as_str()) {
            first_tries.push(r.at_us);
        }
    }
    first_tries.sort_unstable();
    let rows = (play.rows as usize).max(first_tries.len());
    let untried = |at_us: i64| rows - first_tries.partition_point(|&t| t < at_us);
    // Sends made inside a transaction: while one is open, its locks may
    // keep another relay waiting, as long as a breaker would.
    let in_transaction: Vec<&Request> = played
        .seen
        .requests
        .iter()
        .filter(|r| idle_in_transaction(r))
        .collect();
    let mut faults = Vec::new();
    for life in &played.lives {
        let sends: Vec<&Request> = played
            .seen
            .requests
            .iter()
            .filter(|r| r.relay == life.me)
            .collect();
        // The first send the breaker counts (it forgets at each opening).
        let mut since = 0;
        // The breaker is open after the send before: this one is a probe.
        let mut probe = false;
        for i in 0..sends.len().saturating_sub(1) {
            let (now, next) = (sends[i], sends[i + 1]);
            // With rows waiting untried, only its breaker pauses a relay;
            // with few, it may pause for want of work, and where its
            // breaker stands is no longer known.
            if untried(next.at_us) <= BUSY_ROWS {
                break;
            }
            let gap = (next.at_us - now.answered_us()) as f64 / 1000.0;
            let held = gap >= HELD_MS;
            let (said, counted) = match probe {
                true if now.answer == "unavailable" => (Rule::Opens, (1, 1, 0)),
                true => (Rule::StaysClosed, (0, 0, 0)),
                false => rule(&sends, since, i),
            };
            // Another relay's open transaction may have kept it waiting as
            // long as a breaker would: then the pause says nothing. A send
            // made in one holds its locks from when it went out until its
            // answer, a hung one's for seconds.
            let locked_out = held
                && in_transaction.iter().any(|r| {
                    r.relay != life.me && r.at_us < next.at_us && r.answered_us() > now.at_us
                });
            if said != Rule::Unsure && (said == Rule::Opens) != held && !locked_out {
                faults.push(BreakerFault {
                    relay: life.me.clone(),
                    at: (now.at_us - played.began_us) as f64 / 1e6,
                    gap,
                    held,
                    probe,
                    counted,
                });
            }
            // Its pause says which way its breaker went, by the rule or
            // not (where the rule depends on a send at the window's edge,
            // either way is right): what follows is judged from there.
            let was_probe = probe;
            probe = match (locked_out, said) {
                (false, _) => held,
                (true, Rule::Opens) => true,
                (true, Rule::StaysClosed) => false,
                (true, Rule::Unsure) => break,
            };
            // It counts afresh after each opening and each probe.
            if probe || was_probe {
                since = i + 1;
            }
        }
    }
    faults
}

fn judge_breaker(plays: &Plays) -> Verdict {
    let (mut outages, mut brownouts) = (0, 0);
    for (p, d, seed) in plays.all() {
        outages += usize::from(p.relay.outage_ms > 0);
        brownouts += usize::from(p.relay.brownout_ms > 0);
        let faults = breaker_faults(p, d);
        let early: Vec<&BreakerFault> = faults.iter().filter(|f| !f.held).collect();
        let paused: Vec<&BreakerFault> = faults.iter().filter(|f| f.held).collect();
        let said = |f: &BreakerFault| {
            let (len, failures, refused) = f.counted;
            let failures = match refused {
                0 => counted(failures, "failure"),
                _ => format!("{} (and {} refused)", counted(failures, "failure"), refused),
            };
            match (f.held, f.probe) {
                (false, true) => format!(
                    "{} sent again {:.0} ms after its probe at {:.2} s failed: its breaker did not hold",
                    f.relay, f.gap, f.at
                ),
                (false, false) => format!(
                    "{} sent again {:.0} ms after its send at {:.2} s, which left {} in the {} its breaker counted: its breaker did not open",
                    f.relay, f.gap, f.at, failures, counted(len, "send")
                ),
                (true, true) => format!(
                    "{} paused {:.0} ms after its probe at {:.2} s was answered, with rows waiting: its breaker did not close",
                    f.relay, f.gap, f.at
                ),
                (true, false) => format!(
                    "{} paused {:.0} ms after its send at {:.2} s, with rows waiting, though its breaker had counted {} in {}: the rule opens it on more than half of at least {MIN_CALLS}",
                    f.relay, f.gap, f.at, failures, counted(len, "send")
                ),
            }
        };
        let evidence = match (early.first(), paused.len() >= UNEXPLAINED_PAUSES) {
            (Some(f), _) => format!(
                "{} relay sends went out while a breaker should have been open; {} {:.0} ms after a failure",
                early.len(),
                f.relay,
                f.gap
            ),
            (None, true) => format!(
                "{} pauses of a relay whose breaker should have been closed; {} for {:.0} ms",
                paused.len(),
                paused[0].relay,
                paused[0].gap
            ),
            (None, false) => continue,
        };
        let shown: Vec<&BreakerFault> = match early.is_empty() {
            false => early,
            true => paused,
        };
        let details = shown.iter().take(4).map(|f| said(f)).collect();
        return with_seed(Verdict::fail(BREAKER, evidence, describe(p), details), seed);
    }
    Verdict::pass(
        BREAKER,
        format!(
            "in {outages} outage{} and {brownouts} stretch{} of failures, every relay held back to one probe per {OPEN_FOR_MS} ms once more than half of its recent sends had failed, and only then",
            if outages == 1 { "" } else { "s" },
            if brownouts == 1 { "" } else { "es" },
        ),
    )
}
