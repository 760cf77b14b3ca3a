//! Finding the workshop and building case binaries.
//!
//! A learner's case is its own binary, built alone with cargo (`cargo build
//! --bin case03`), so a half-edited case 3 never blocks case 4. The versions
//! kept under `checks/` (the reference solutions and the patched wrong fixes)
//! are not cargo targets: each is compiled on demand by rustc against the lab
//! library cargo built, and kept under a name that depends on its bytes.
//!
//! Whichever way a binary was built, it carries the fingerprint of the source
//! it was compiled from, and [`verified`] asks it before anything is played:
//! cargo judges freshness by file times, which two clones sharing one target
//! folder can fool.

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

/// Builds binary `bin` of the workshop at `root`, printing nothing. Besides
/// what came of it, returns the compiler's warnings about `bin`'s own file
/// (never the lab's), rendered as cargo prints them, or "" when there are
/// none.
pub fn build(root: &Path, bin: &str) -> Result<(Built, String)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let format = if colored::control::SHOULD_COLORIZE.should_colorize() {
        "--message-format=json-diagnostic-rendered-ansi"
    } else {
        "--message-format=json"
    };
    let showing = std::io::stderr().is_terminal();
    if showing {
        crate::status::clear();
        // Only a first build is slow: the lab's dependencies, SQLite among
        // them, are compiled once. Later saves rebuild the case alone.
        let first = !root.join("target").join("debug").join(bin).exists();
        let cost = match first {
            true => " (its first build compiles SQLite once: 1–2 minutes on 2 cores, longer on a busy machine)",
            false => "",
        };
        eprint!("\r\x1b[2Kbuilding {bin} with cargo{cost}...");
    }
    let mut child = Command::new(&cargo)
        .args(["build", "--quiet", "--bin", bin, format])
        .args(features_args(&required_features(root, bin)))
        .arg("--manifest-path")
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
    let mut warnings = Vec::new();
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
            // Cargo replays a fresh binary's warnings too, so they show on
            // every build until the learner fixes them, as with cargo.
            Some("compiler-message")
                if msg["message"]["level"] == "warning" && msg["target"]["name"] == bin =>
            {
                let spans = msg["message"]["spans"].as_array().map_or(0, Vec::len);
                if let (Some(text), true) = (msg["message"]["rendered"].as_str(), spans > 0) {
                    warnings.push(text.to_string());
                }
            }
            _ => {}
        }
    }
    let status = child.wait().context("could not wait for cargo")?;
    let cargo_said = stderr.join().unwrap_or_default();
    if showing {
        eprint!("\r\x1b[2K");
    }
    let built = match exe {
        Some(exe) if status.success() => Built::Ready(exe),
        _ if !errors.is_empty() => Built::DoesNotCompile(errors.join("")),
        _ => bail!("cargo could not build {bin}:\n{}", cargo_said.trim_end()),
    };
    Ok((built, warnings.join("")))
}

/// Asks the case binary `exe` for the fingerprint of the source it was built
/// from (see [`crate::serve::FINGERPRINT`]).
pub fn fingerprint_of(exe: &Path) -> Result<u64> {
    let out = Command::new(exe)
        .arg(crate::serve::FINGERPRINT)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .with_context(|| format!("could not run the case binary {}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .strip_prefix("fnv1a64 ")
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .with_context(|| {
            format!(
                "{} did not say which source it was built from; it is not a case binary of this workshop",
                exe.display()
            )
        })
}

/// Builds binary `bin` (a learner's case) with cargo, and makes sure the
/// binary was built from `source`, the bytes about to be graded. Returns
/// the compiler's warnings about the case too, as [`build`] does.
///
/// Cargo judges freshness by file times, so it may hand over a binary built
/// from other bytes (another clone sharing the target folder, a file put
/// back with an old time): then the binary is removed and built again, and
/// if that does not help, it is an error. The binary that passes is copied
/// to a place of its own, named after its source, so that a build started
/// meanwhile (another clone, another terminal) cannot change what is played.
pub fn build_verified(root: &Path, bin: &str, source: &[u8]) -> Result<(Built, String)> {
    let wanted = crate::chapter::fingerprint(source);
    for attempt in 0..3 {
        let (exe, warnings) = match build(root, bin)? {
            (Built::Ready(exe), warnings) => (exe, warnings),
            (errors @ Built::DoesNotCompile(_), warnings) => return Ok((errors, warnings)),
        };
        if let Some(kept) = keep(&exe, bin, wanted)? {
            return Ok((Built::Ready(kept), warnings));
        }
        if attempt == 0 {
            eprintln!(
                "note: cargo held a {bin} built from another version of its file fresh (a target folder shared with another clone?); building it again."
            );
        }
        forget(&exe);
    }
    bail!(
        "cargo keeps giving a {bin} built from another version of its file, so it cannot be graded.\n\
         Run `cargo clean` (or delete this workshop's target folder) and try again."
    )
}

/// Copies `exe` to `notify-graded/BIN-FINGERPRINT/` beside it, if the copy
/// was built from the source whose fingerprint is `wanted`, and forgets the
/// copies of `bin` no check has used for a while.
fn keep(exe: &Path, bin: &str, wanted: u64) -> Result<Option<PathBuf>> {
    let graded = exe
        .parent()
        .context("cargo's binary is in no folder")?
        .join("notify-graded");
    let dir = graded.join(format!("{bin}-{wanted:016x}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let name = exe.file_name().context("cargo's binary has no name")?;
    let staged = dir.join(format!("{}.{}", name.to_string_lossy(), unique()));
    std::fs::copy(exe, &staged)
        .with_context(|| format!("could not copy {} to {}", exe.display(), staged.display()))?;
    if fingerprint_of(&staged)? != wanted {
        let _ = std::fs::remove_file(&staged);
        return Ok(None);
    }
    let kept = dir.join(name);
    std::fs::rename(&staged, &kept)
        .with_context(|| format!("could not move {} into place", staged.display()))?;
    forget_old(&graded, bin, &dir);
    Ok(Some(kept))
}

/// Removes the kept copies of `bin` other than `current` that are older than
/// a check could take, so that a learner's hundred edits do not fill the disk.
fn forget_old(graded: &Path, bin: &str, current: &Path) {
    let prefix = format!("{bin}-");
    let Ok(entries) = std::fs::read_dir(graded) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > std::time::Duration::from_secs(15 * 60));
        let same_bin = entry
            .file_name()
            .to_string_lossy()
            .strip_prefix(&prefix)
            .is_some_and(|rest| rest.len() == 16 && rest.chars().all(|c| c.is_ascii_hexdigit()));
        if old && same_bin && path != current {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// A name part no other thread or process uses at the same time.
fn unique() -> String {
    format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "")
}

/// Removes a binary cargo holds fresh by mistake, in both places cargo keeps
/// it (`target/debug/NAME` and `target/debug/deps/NAME-HASH`), so that the
/// next build compiles it again.
fn forget(exe: &Path) {
    let _ = std::fs::remove_file(exe);
    let (Some(dir), Some(name)) = (exe.parent(), exe.file_stem().and_then(|n| n.to_str())) else {
        return;
    };
    let stem = format!("{}-", name.replace('-', "_"));
    let Ok(entries) = std::fs::read_dir(dir.join("deps")) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let hashed = file
            .strip_prefix(&stem)
            .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'));
        if hashed && !file.ends_with(".d") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The cargo features binary `bin` of the workshop at `root` requires (its
/// `required-features` in Cargo.toml), e.g. `postgres` for a case that
/// runs on a PostgreSQL server; none for most.
pub fn required_features(root: &Path, bin: &str) -> Vec<String> {
    /// The part of Cargo.toml this needs: its `[[bin]]` targets.
    #[derive(serde::Deserialize)]
    struct Manifest {
        #[serde(default)]
        bin: Vec<Target>,
    }
    #[derive(serde::Deserialize)]
    struct Target {
        name: String,
        #[serde(default, rename = "required-features")]
        required_features: Vec<String>,
    }
    std::fs::read_to_string(root.join("Cargo.toml"))
        .ok()
        .and_then(|text| toml::from_str::<Manifest>(&text).ok())
        .and_then(|m| m.bin.into_iter().find(|b| b.name == bin))
        .map(|b| b.required_features)
        .unwrap_or_default()
}

/// `--features a,b` for cargo, or nothing.
fn features_args(features: &[String]) -> Vec<String> {
    if features.is_empty() {
        Vec::new()
    } else {
        vec!["--features".to_string(), features.join(",")]
    }
}

/// The case binary a version is named after: `case12` for `case12-solution`.
fn base_bin(name: &str) -> &str {
    name.split('-').next().unwrap_or(name)
}

/// The crates a case may name in `use`, besides the lab.
const CASE_CRATES: [&str; 9] = [
    "rusqlite",
    "serde",
    "serde_json",
    "anyhow",
    "jiff",
    "minijinja",
    "hmac",
    "sha2",
    "hex",
];

/// What rustc needs to compile a case against the lab cargo built.
struct Library {
    /// `target/debug/deps`.
    deps: PathBuf,
    /// `--extern NAME=PATH` for the lab and [`CASE_CRATES`].
    externs: Vec<(String, PathBuf)>,
    /// `-L` paths that build scripts asked for (e.g. a bundled SQLite).
    linked: Vec<String>,
    /// The lab's own rlib and its time: a new lab means new binaries.
    stamp: String,
}

/// Builds the lab library with cargo, with `features` (whose crates a case
/// may name too, e.g. `postgres`), and says where its pieces are.
fn library(root: &Path, features: &[String]) -> Result<Library> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .args(["build", "--quiet", "--lib", "--message-format=json"])
        .args(features_args(features))
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .current_dir(root)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| {
            format!(
                "could not run cargo ({}) to build the lab: is the Rust toolchain installed?",
                Path::new(&cargo).display()
            )
        })?;
    if !out.status.success() {
        bail!(
            "cargo could not build the lab library:\n{}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    let mut externs = Vec::new();
    let mut linked = Vec::new();
    let mut lab = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match msg["reason"].as_str() {
            Some("compiler-artifact") => {
                let Some(name) = msg["target"]["name"].as_str() else {
                    continue;
                };
                let files: Vec<&str> = msg["filenames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let Some(rlib) = in_deps(&files) else {
                    continue;
                };
                let rlib = rlib.as_path();
                if name == "lab" {
                    lab = Some(PathBuf::from(rlib));
                }
                if name == "lab"
                    || CASE_CRATES.contains(&name)
                    || features.iter().any(|f| f == name)
                {
                    externs.push((name.to_string(), PathBuf::from(rlib)));
                }
            }
            Some("build-script-executed") => {
                for path in msg["linked_paths"].as_array().into_iter().flatten() {
                    if let Some(path) = path.as_str() {
                        linked.push(path.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    let lab = lab.context("cargo built the lab but did not say where its library is")?;
    // The lab's rlib is copied up to `target/debug/`; its dependencies stay
    // in `target/debug/deps/`.
    let deps = externs
        .iter()
        .find(|(name, _)| name != "lab")
        .and_then(|(_, rlib)| rlib.parent())
        .context("cargo built the lab but did not say where its dependencies are")?
        .to_path_buf();
    let modified = std::fs::metadata(&lab)
        .and_then(|m| m.modified())
        .with_context(|| format!("could not read the time of {}", lab.display()))?;
    let stamp = format!("{}@{modified:?}", lab.display());
    Ok(Library {
        deps,
        externs,
        linked,
        stamp,
    })
}

/// The rlib of a compiled crate in `target/debug/deps/`, which cargo writes
/// only when it rebuilds the crate. A library's copy in `target/debug/` is
/// linked anew by every cargo build, fresh or not, and a linker reading it
/// at that moment dies of a bus error: several notify processes at once
/// would compile against a file another one's cargo is replacing.
fn in_deps(files: &[&str]) -> Option<PathBuf> {
    let in_deps: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| Path::new(f).parent().is_some_and(|d| d.ends_with("deps")))
        .collect();
    if let Some(rlib) = in_deps.iter().find(|f| f.ends_with(".rlib")) {
        return Some(PathBuf::from(rlib));
    }
    // The lab's own artifact names its rmeta in deps/ and its rlib above it.
    in_deps
        .iter()
        .find_map(|f| f.strip_suffix(".rmeta"))
        .map(|stem| PathBuf::from(format!("{stem}.rlib")))
        .filter(|rlib| rlib.is_file())
        .or_else(|| {
            files
                .iter()
                .find(|f| f.ends_with(".rlib"))
                .map(PathBuf::from)
        })
}

/// The compiler cargo uses: the `rustc` beside cargo when notify runs under
/// cargo, so both come from the same toolchain.
fn rustc() -> PathBuf {
    if let Some(rustc) = std::env::var_os("RUSTC") {
        return rustc.into();
    }
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .and_then(|cargo| {
            let beside = cargo.with_file_name(format!("rustc{}", std::env::consts::EXE_SUFFIX));
            beside.is_file().then_some(beside)
        })
        .unwrap_or_else(|| "rustc".into())
}

/// Builds a version of a case kept under `checks/` from its text, named
/// `name` (e.g. `case01-send-after-commit`). The binary is kept under
/// `target/debug/notify-versions/` by a name made from its source and the
/// lab's build, so the same bytes are compiled once and other bytes never
/// reuse it.
pub fn build_version(root: &Path, name: &str, source: &str) -> Result<Built> {
    let library = library(root, &required_features(root, base_bin(name)))?;
    let key = crate::chapter::fingerprint(format!("{}\n{source}", library.stamp).as_bytes());
    let dir = library
        .deps
        .parent()
        .context("cargo's deps folder is in no folder")?
        .join("notify-versions")
        .join(format!("{name}-{key:016x}"));
    let exe = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if exe.is_file() {
        return Ok(Built::Ready(exe));
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    // Two notify processes may build the same version at once: each writes
    // its own files and renames them into place.
    let unique = unique();
    let file = format!("{name}.rs");
    let staged = dir.join(format!("{file}.{unique}"));
    std::fs::write(&staged, source)
        .with_context(|| format!("could not write {}", staged.display()))?;
    std::fs::rename(&staged, dir.join(&file))
        .with_context(|| format!("could not write {}", dir.join(&file).display()))?;

    let showing = std::io::stderr().is_terminal();
    if showing {
        eprint!("building {name}...\r");
    }
    // rustc writes its object files beside its output, named after the
    // crate: two builds of one version at once need folders of their own,
    // or one truncates the objects the other's linker is reading.
    let scratch = dir.join(format!("build-{unique}"));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("could not create {}", scratch.display()))?;
    let output = scratch.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let mut command = Command::new(rustc());
    command
        .args(["--edition", "2021", "--crate-type", "bin", "--crate-name"])
        .arg(name.replace('-', "_"))
        // No debug info, and none linked in from the lab: a panic's message
        // keeps its file and line all the same, and linking takes a quarter
        // of the time.
        .args(["-C", "debuginfo=0", "-C", "strip=debuginfo"])
        .args(["--cap-lints", "allow"])
        .arg(if colored::control::SHOULD_COLORIZE.should_colorize() {
            "--color=always"
        } else {
            "--color=never"
        })
        .arg("-L")
        .arg(format!("dependency={}", library.deps.display()));
    for path in &library.linked {
        command.arg("-L").arg(path);
    }
    for (crate_name, rlib) in &library.externs {
        command
            .arg("--extern")
            .arg(format!("{crate_name}={}", rlib.display()));
    }
    let out = command
        .arg("-o")
        .arg(&output)
        .arg(&file)
        // `lab::serve!` finds the source it fingerprints from these two.
        .env("CARGO_MANIFEST_DIR", &dir)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not run rustc ({})", rustc().display()))?;
    if showing {
        eprint!("{}\r", " ".repeat(name.len() + 12));
    }
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&scratch);
        return Ok(Built::DoesNotCompile(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    let moved = std::fs::rename(&output, &exe)
        .with_context(|| format!("could not move the built {name} to {}", exe.display()));
    let _ = std::fs::remove_dir_all(&scratch);
    moved?;
    Ok(Built::Ready(exe))
}
