//! The parent's side of chapter 12: sets up a play on the PostgreSQL
//! server, starts several relay processes of one case at once, kills some
//! of them at chosen moments (each dies by SIGKILL right after its next
//! delivered send, or from outside if it delivers none) and starts them
//! again, then collects what the world saw (see [`crate::fleet`] for the
//! protocol).
//! `notify` itself needs no PostgreSQL client: the case processes talk to
//! the server.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use crate::fleet::{now_us, Duty, Orders, RelayPlan, Seen, DATABASE_URL, NEEDS_SERVER};
use crate::runner::Case;

/// How long before their start the relays of a play are spawned, so that
/// every one has connected when they begin together.
const HEAD_START: Duration = Duration::from_millis(500);

/// How long after its moment a relay that has not crashed on a delivered
/// send is killed from outside.
const CRASH_WAIT: Duration = Duration::from_millis(150);

/// The relay a life belongs to: 2 for `relay-2` and `relay-2.1`.
fn slot_of(me: &str) -> u32 {
    me.trim_start_matches("relay-")
        .split('.')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The moment a relay's planned crash gave, from what it said last.
fn crashed(said: &str) -> Option<i64> {
    said.lines()
        .last()?
        .strip_prefix(crate::fleet::CRASHED)?
        .trim()
        .parse()
        .ok()
}

/// A relay killed during a play: it crashes at its first delivered send
/// from that moment on, or is killed with SIGKILL a little later.
#[derive(Clone, Debug)]
pub struct Kill {
    /// Which relay, from 1.
    pub relay: u32,
    /// When, in ms after the relays began.
    pub at_ms: u64,
    /// How long it stays down before it is started again.
    pub down_ms: u64,
}

/// A send that hangs, in each life of a relay (see
/// [`RelayPlan::hang_from_ms`]).
#[derive(Clone, Debug)]
pub struct Hang {
    /// Which relay, from 1.
    pub relay: u32,
    /// Its first send this many ms or more after the relays began.
    pub from_ms: u64,
    /// Sends after the hung one that fail too (a 503, nothing delivered):
    /// the relay's link to the provider is still down when it wakes.
    pub fails_after: u32,
}

/// One play: an outbox of `rows` rows, `relays` relay processes, the
/// kills and the hung sends.
#[derive(Clone, Debug)]
pub struct Play {
    pub rows: u32,
    pub relays: u32,
    pub kills: Vec<Kill>,
    pub hangs: Vec<Hang>,
    /// Every relay's plan but its name and start: the provider's speed,
    /// the sweep's settings.
    pub relay: RelayPlan,
    /// How far each relay's clock is off, in ms, relay-1's first; a relay
    /// past the end's is right.
    pub clock_skews_ms: Vec<i64>,
    /// The whole play is stopped after this long.
    pub limit: Duration,
}

/// One life of a relay process: from its start to its end.
#[derive(Clone, Debug)]
pub struct Life {
    /// `relay-2`, then `relay-2.1` after its first restart.
    pub me: String,
    pub started_us: i64,
    pub ended_us: i64,
    /// Ended by one of the play's kills (its planned crash, or SIGKILL
    /// from outside).
    pub killed: bool,
    /// How it ended otherwise, when not cleanly: its exit and what it said.
    pub trouble: Option<String>,
}

/// What a play left: what the world saw, and the relays' lives.
#[derive(Clone, Debug)]
pub struct Played {
    pub seen: Seen,
    pub lives: Vec<Life>,
    /// When the relays began, in µs since the UNIX epoch.
    pub began_us: i64,
    /// The play ran past its limit and was stopped.
    pub stopped: bool,
    /// Case processes started.
    pub processes: usize,
    /// What readings of the outbox during the play saw, if any reading
    /// was taken.
    pub watched: Option<Watched>,
}

/// What the readings of the outbox saw while the relays ran, every
/// [`WATCH_EVERY_MS`], in µs since the UNIX epoch.
#[derive(Clone, Debug, Default)]
pub struct Watched {
    /// Each row's stretches seen `PROCESSING`, by row id: from the first
    /// reading that saw it to the last.
    pub held: HashMap<i64, Vec<(i64, i64)>>,
}

impl Watched {
    /// The watcher's notes in `file`; none when it took no reading.
    fn read(file: &Path) -> Option<Watched> {
        let text = std::fs::read_to_string(file).ok()?;
        let mut watched = Watched::default();
        let mut read = false;
        for line in text.lines() {
            let words: Vec<i64> = line
                .split(' ')
                .skip(1)
                .filter_map(|w| w.parse().ok())
                .collect();
            match (line.split(' ').next(), words.as_slice()) {
                (Some("read"), []) => read = true,
                (Some("held"), [id, from, to]) => {
                    watched.held.entry(*id).or_default().push((*from, *to));
                }
                _ => {}
            }
        }
        read.then_some(watched)
    }
}

/// How often the outbox is read during a play, in ms.
pub const WATCH_EVERY_MS: u64 = 100;

impl Played {
    /// The life of `me`.
    pub fn life(&self, me: &str) -> Option<&Life> {
        self.lives.iter().find(|l| l.me == me)
    }
}

/// Says whether chapter 12 can run here: the paragraph to print when
/// `DATABASE_URL` is not set, or a line when it names a server that does
/// not answer.
pub fn server_check() -> Result<()> {
    let url = std::env::var(DATABASE_URL).unwrap_or_default();
    if url.trim().is_empty() {
        bail!("{NEEDS_SERVER}");
    }
    if let Some(address) = tcp_address(&url) {
        let answered = std::net::ToSocketAddrs::to_socket_addrs(&address.as_str())
            .ok()
            .into_iter()
            .flatten()
            .any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(3)).is_ok());
        if !answered {
            bail!(
                "no PostgreSQL server answers at {address} (DATABASE_URL); start one with lab/scripts/postgres-up"
            );
        }
    }
    Ok(())
}

/// `host:port` of a `postgres://` URL, when it names one host over TCP.
fn tcp_address(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit('@').next()?;
    if host_port.is_empty() || host_port.contains(',') || host_port.starts_with('%') {
        return None;
    }
    Some(if host_port.contains(':') && !host_port.ends_with(']') {
        host_port.to_string()
    } else {
        format!("{host_port}:5432")
    })
}

/// A schema name no other play uses at the same time.
fn schema_name() -> String {
    static PLAYS: AtomicUsize = AtomicUsize::new(0);
    format!(
        "notify_12_{}_{}_{}",
        std::process::id(),
        PLAYS.fetch_add(1, Ordering::Relaxed),
        now_us() % 1_000_000
    )
}

/// The case processes of a play, killed if the play ends early.
struct Running {
    children: Vec<(usize, Child)>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Starts `case` with `orders`, its standard error going to `name.err`.
fn spawn(case: &Case, dir: &Path, name: &str, orders: &Orders) -> Result<Child> {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, serde_json::to_string_pretty(orders)?)
        .with_context(|| format!("could not write {}", file.display()))?;
    let err = std::fs::File::create(dir.join(format!("{name}.err")))
        .context("could not create a case process's error file")?;
    let mut command = Command::new(&case.exe);
    if let Duty::Relay(plan) = &orders.duty {
        if plan.clock_skew_ms != 0 {
            command
                .env("LD_PRELOAD", skewed_clock(&case.exe)?)
                .env("NOTIFY_CLOCK_SKEW_MS", plan.clock_skew_ms.to_string());
        }
    }
    command
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .with_context(|| format!("could not start {}", case.exe.display()))
}

/// The C source of the library that puts a relay's clock off.
const SKEW_SOURCE: &str = include_str!("skew/skew.c");

/// The library a relay with a skewed clock is started with (`LD_PRELOAD`):
/// built once with the C compiler beside `exe`'s folder, under a name that
/// depends on its source, so checks that run side by side share it.
fn skewed_clock(exe: &Path) -> Result<PathBuf> {
    let dir = exe
        .parent()
        .context("a case binary lives in a folder")?
        .join("notify-skew");
    let library = dir.join(format!(
        "libskew-{:016x}.so",
        crate::chapter::fingerprint(SKEW_SOURCE.as_bytes())
    ));
    if library.exists() {
        return Ok(library);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let unique = format!("{}-{}", std::process::id(), now_us());
    let source = dir.join(format!("skew-{unique}.c"));
    let built = dir.join(format!("libskew-{unique}.so"));
    std::fs::write(&source, SKEW_SOURCE)
        .with_context(|| format!("could not write {}", source.display()))?;
    // The C compiler the environment names, or the system's: `cc`, or
    // `gcc` where no `cc` is installed.
    let compile = |cc: &std::ffi::OsStr| {
        Command::new(cc)
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&built)
            .arg(&source)
            .output()
    };
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let out = match compile(&cc) {
        Err(err)
            if err.kind() == std::io::ErrorKind::NotFound && std::env::var_os("CC").is_none() =>
        {
            compile("gcc".as_ref())
        }
        other => other,
    }
    .with_context(|| {
        format!(
            "could not run the C compiler ({}) to build the library that puts a relay's clock off",
            cc.to_string_lossy()
        )
    })?;
    let _ = std::fs::remove_file(&source);
    if !out.status.success() {
        bail!(
            "the C compiler could not build the library that puts a relay's clock off:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Whole or not at all, whichever check renames first.
    std::fs::rename(&built, &library)
        .with_context(|| format!("could not keep {}", library.display()))?;
    Ok(library)
}

fn said(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.err")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Runs one short duty (setup, collect) and waits for it.
fn duty(case: &Case, dir: &Path, name: &str, orders: &Orders) -> Result<()> {
    let mut child = spawn(case, dir, name, orders)?;
    let began = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(());
            }
            bail!("{}: {}", case.name, said(dir, name));
        }
        if began.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{}: the {name} step did not finish within 60 s", case.name);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Plays `play` with `case`.
pub fn play(case: &Case, play: &Play) -> Result<Played> {
    let dir = tempfile::Builder::new()
        .prefix("notify-12-")
        .tempdir()
        .context("could not create a folder for the play")?;
    let dir = dir.path();
    let schema = schema_name();
    let orders = |duty| Orders {
        schema: schema.clone(),
        duty,
    };
    let mut processes = 1;
    let to: PathBuf = dir.join("seen.json");
    if let Err(err) = duty(case, dir, "setup", &orders(Duty::Setup { rows: play.rows })) {
        // Whatever the setup created goes with the collect step.
        let _ = duty(case, dir, "collect", &orders(Duty::Collect { to }));
        return Err(err);
    }
    // An operator's readings of the outbox while the relays run: how long
    // each claim lasted.
    let watch_file = dir.join("watched.txt");
    let watcher = spawn(
        case,
        dir,
        "watch",
        &orders(Duty::Watch {
            to: watch_file.clone(),
            every_ms: WATCH_EVERY_MS,
        }),
    );
    let relayed = relay(case, dir, play, &orders, &mut processes);
    if let Ok(mut watcher) = watcher {
        processes += 1;
        let _ = watcher.kill();
        let _ = watcher.wait();
    }
    let watched = Watched::read(&watch_file);
    processes += 1;
    let collected = duty(
        case,
        dir,
        "collect",
        &orders(Duty::Collect { to: to.clone() }),
    );
    let (lives, began_us, stopped) = relayed?;
    collected?;
    let text = std::fs::read_to_string(&to).context("the collect step wrote nothing")?;
    let seen: Seen = serde_json::from_str(&text).context("the collect step wrote no valid JSON")?;
    Ok(Played {
        seen,
        lives,
        began_us,
        stopped,
        processes,
        watched,
    })
}

type Lives = (Vec<Life>, i64, bool);

fn relay(
    case: &Case,
    dir: &Path,
    play: &Play,
    orders: &dyn Fn(Duty) -> Orders,
    processes: &mut usize,
) -> Result<Lives> {
    let start_at = SystemTime::now() + HEAD_START;
    let began_us = start_at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    let mut kills = play.kills.clone();
    kills.sort_by_key(|k| k.at_ms);
    // A life's crash: the first kill of its relay still to come, or past
    // while it was down (then it crashes at its first delivered send).
    let crash_for = |kills: &[Kill], me: &str| {
        kills
            .iter()
            .find(|k| k.relay == slot_of(me))
            .map_or(0, |k| k.at_ms)
    };
    let plan_for = |me: &str, at: SystemTime, crash_at_ms: u64| {
        let mut plan = play.relay.clone();
        plan.crash_at_ms = crash_at_ms;
        plan.me = me.to_string();
        plan.seed = play.relay.seed ^ crate::chapter::fingerprint(me.as_bytes());
        plan.start_at_ms = at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        plan.play_start_ms = (began_us / 1000) as u64;
        let hang = play.hangs.iter().find(|h| h.relay == slot_of(me));
        plan.hang_from_ms = hang.map_or(0, |h| h.from_ms);
        plan.hang_fails_after = hang.map_or(0, |h| h.fails_after);
        plan.clock_skew_ms = play
            .clock_skews_ms
            .get(slot_of(me) as usize - 1)
            .copied()
            .unwrap_or(0);
        orders(Duty::Relay(plan))
    };
    let mut running = Running {
        children: Vec::new(),
    };
    let mut lives: Vec<Life> = Vec::new();
    // Per relay: its current life's index in `lives`, and restarts so far.
    let mut current: Vec<(Option<usize>, u32)> = Vec::new();
    for r in 1..=play.relays {
        let me = format!("relay-{r}");
        let child = spawn(
            case,
            dir,
            &me,
            &plan_for(&me, start_at, crash_for(&kills, &me)),
        )?;
        *processes += 1;
        running.children.push((lives.len(), child));
        current.push((Some(lives.len()), 0));
        lives.push(Life {
            me,
            started_us: began_us,
            ended_us: 0,
            killed: false,
            trouble: None,
        });
    }
    // (when, relay) restarts waiting.
    let mut restarts: Vec<(Instant, u32)> = Vec::new();
    let began = Instant::now() + HEAD_START;
    let mut stopped = false;
    loop {
        // Ends.
        for (life, child) in &mut running.children {
            let life = &mut lives[*life];
            if life.ended_us != 0 {
                continue;
            }
            if let Some(status) = child.try_wait()? {
                life.ended_us = now_us();
                // Its planned crash, right after a delivered send: a kill,
                // at the moment it gave.
                if let Some(at) = crashed(&said(dir, &life.me)) {
                    life.ended_us = at;
                    life.killed = true;
                    let slot = slot_of(&life.me);
                    if let Some(k) = kills.iter().position(|k| k.relay == slot) {
                        let kill = kills.remove(k);
                        current[(slot - 1) as usize].0 = None;
                        restarts.push((Instant::now() + Duration::from_millis(kill.down_ms), slot));
                    }
                    continue;
                }
                if !status.success() {
                    life.trouble = Some(format!(
                        "{status}: {}",
                        said(dir, &life.me).lines().last().unwrap_or("")
                    ));
                }
            }
        }
        // Kills due: a relay that delivered nothing since its moment came
        // (its breaker held it, or its rows were refused) is killed
        // from outside.
        let now = Instant::now();
        // A kill waits while its relay is down: its next life has it.
        let overdue = kills.iter().position(|k| {
            let Some(index) = current[(k.relay - 1) as usize].0 else {
                return false;
            };
            let started_ms = (lives[index].started_us - began_us).max(0) as u64 / 1000;
            began + Duration::from_millis(k.at_ms.max(started_ms)) + CRASH_WAIT <= now
        });
        if let Some(k) = overdue {
            let kill = kills.remove(k);
            let slot = &mut current[(kill.relay - 1) as usize];
            let index = slot.0.expect("an overdue kill's relay is running");
            // A relay that is done with its work is left alone.
            if lives[index].ended_us == 0 {
                // The moment of death is taken before the signal: a relay
                // waiting for the killed one's row locks may send that row
                // a moment after the kill, before this process hears of it.
                let at = now_us();
                if let Some((_, child)) = running.children.iter_mut().find(|(i, _)| *i == index) {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                lives[index].ended_us = at;
                lives[index].killed = true;
                slot.0 = None;
                restarts.push((now + Duration::from_millis(kill.down_ms), kill.relay));
            }
        }
        // Restarts due.
        let due: Vec<u32> = restarts
            .iter()
            .filter(|(at, _)| *at <= now)
            .map(|(_, r)| *r)
            .collect();
        restarts.retain(|(at, _)| *at > now);
        for r in due {
            let slot = &mut current[(r - 1) as usize];
            slot.1 += 1;
            let me = format!("relay-{r}.{}", slot.1);
            let child = spawn(
                case,
                dir,
                &me,
                &plan_for(&me, SystemTime::now(), crash_for(&kills, &me)),
            )?;
            *processes += 1;
            slot.0 = Some(lives.len());
            running.children.push((lives.len(), child));
            lives.push(Life {
                me,
                started_us: now_us(),
                ended_us: 0,
                killed: false,
                trouble: None,
            });
        }
        let all_ended = lives.iter().all(|l| l.ended_us != 0);
        if all_ended && restarts.is_empty() {
            break;
        }
        if began.elapsed() > play.limit {
            stopped = true;
            for (life, child) in &mut running.children {
                if lives[*life].ended_us == 0 {
                    let _ = child.kill();
                    let _ = child.wait();
                    lives[*life].ended_us = now_us();
                    lives[*life].trouble = Some(format!(
                        "still relaying after {:.0} s, stopped",
                        play.limit.as_secs_f64()
                    ));
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok((lives, began_us, stopped))
}
