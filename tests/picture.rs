//! `notify check N --html FILE`: one page that draws each failing scenario,
//! beside the reference's run of it, read back with real parsers and, in
//! CI, rendered by a real browser.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{notify, stderr, stdout};

/// Writes the page of `notify check CHAPTER --variant VARIANT --html` into
/// `dir` and returns its path and text.
fn page(dir: &Path, chapter: &str, variant: &str) -> (PathBuf, String) {
    let file = dir.join(format!("case{chapter}-{variant}.html"));
    let out = notify(&[
        "check",
        chapter,
        "--variant",
        variant,
        "--html",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("the picture: {}", file.display())),
        "{}",
        stdout(&out)
    );
    let text = std::fs::read_to_string(&file).expect("the page was written");
    (file, text)
}

/// Every `<svg>` of `html`, each parsed as XML by Python's `xml.etree`:
/// how many there were, and the text of each one's `<title>`s.
fn parsed_svgs(html: &str) -> (usize, Vec<String>) {
    let script = r#"
import re, sys, xml.etree.ElementTree as ET
html = sys.stdin.read()
svgs = re.findall(r"<svg\b.*?</svg>", html, re.S)
titles = []
for svg in svgs:
    root = ET.fromstring(svg)
    titles += [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title")]
    titles += [t.text or "" for t in root.iter("title")]
print(len(svgs))
for t in titles:
    print(t.replace("\n", " "))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(html.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "an SVG of the page is not well-formed XML: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let count = lines.next().unwrap().parse().unwrap();
    (count, lines.map(String::from).collect())
}

#[test]
fn a_failing_scenario_is_drawn_beside_the_reference_s_run_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_, html) = page(dir.path(), "5", "ignores-retry-after");
    // Self-contained: nothing is fetched, nothing runs.
    for outside in ["<script", "<link", "src=", "@import", "url("] {
        assert!(!html.contains(outside), "the page holds {outside}");
    }
    assert!(html.len() < 3_000_000, "{} bytes", html.len());
    // Two failing properties, each a section with both runs drawn, and
    // the first send where they part marked on both.
    assert_eq!(html.matches("<section class=\"fail\">").count(), 2);
    assert_eq!(
        html.matches("The reference, on the same scenario").count(),
        2
    );
    assert_eq!(html.matches(">first difference</text>").count(), 4);
    // The chapter's own batch: jon's 429 retried after 6 s, where the
    // reference waits its Retry-After and sends eli's email first.
    assert!(
        html.contains("First difference, at send 12: your case&apos;s was “email to jon@example.com: provider failed at 0:00:06”"),
        "{html}"
    );
    assert!(
        html.contains("First difference, at send 2: your case&apos;s was “email to dev@example.com: provider failed at 0:00:14”, the reference&apos;s “email to dev@example.com: provider failed at 0:01:08”."),
        "{html}"
    );
    // The rules' time: the backoff after each failure, shaded.
    assert!(html.contains("class=\"band wait\""));
    // The properties that held, with what they were judged on.
    assert_eq!(
        html.matches("<span class=\"mark ok\">PASS</span>").count(),
        8
    );
    let (svgs, titles) = parsed_svgs(&html);
    // The legend, then the case's and the reference's run for each of the
    // two failures.
    assert_eq!(svgs, 5);
    assert!(
        titles
            .iter()
            .any(|t| t.contains("email to dev@example.com: provider failed → 429: slow down")),
        "{titles:?}"
    );
    assert!(
        titles.iter().any(
            |t| t.contains("dev: backoff 3, 5 min (a 429: its Retry-After may ask for longer)")
        ),
        "{titles:?}"
    );
}

#[test]
fn a_check_of_the_reference_draws_no_second_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("solution.html");
    let out = notify(&["check", "1", "--solution", "--html", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(!html.contains("<section class=\"fail\">"));
    assert!(html.contains("Properties that hold"));
    assert_eq!(parsed_svgs(&html).0, 1);
}

#[test]
fn a_page_that_cannot_be_written_is_a_clear_error() {
    let out = notify(&[
        "check",
        "1",
        "--variant",
        "send-after-commit",
        "--html",
        "/nonexistent/folder/page.html",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("could not write the page to /nonexistent/folder/page.html"),
        "{}",
        stderr(&out)
    );
}

/// Renders `page` in headless chromium: a screenshot, and the browser's
/// log, where a console error would be.
fn screenshot(page: &Path, png: &Path) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,1600",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs: .ci/run installs Debian's chromium");
    assert!(out.status.success(), "{}", stderr(&out));
    stderr(&out)
}

/// How many different colours a PNG's pixels have, decoded by Python's
/// zlib (8-bit RGB or RGBA, not interlaced: what chromium writes).
fn colours(png: &Path) -> usize {
    let script = r#"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat = 8, b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
    if kind == b"IDAT":
        idat += body
    pos += 12 + n
assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
bpp = 3 if colour == 2 else 4
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
seen = set()
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[i] = (line[i] + pr) & 255
    if y % 4 == 0:
        for x in range(0, stride, bpp * 2):
            seen.add(bytes(line[x:x + 3]))
    prev = line
print(len(seen))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(png)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().parse().unwrap()
}

#[test]
#[ignore = "needs Debian's chromium, which .ci/run installs"]
fn the_pages_of_chapters_5_and_8_render_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    for (chapter, variant) in [
        ("5", "ignores-retry-after"),
        ("8", "deadline-from-last-try"),
    ] {
        let (file, _) = page(dir.path(), chapter, variant);
        let png = file.with_extension("png");
        let log = screenshot(&file, &png);
        for error in ["CONSOLE", "Uncaught", "Failed to load"] {
            assert!(!log.contains(error), "chapter {chapter}'s page: {log}");
        }
        // A blank page is one colour; a drawn one has lanes, bands, marks
        // and text in many.
        let seen = colours(&png);
        assert!(
            seen > 40,
            "chapter {chapter}'s screenshot has {seen} colours"
        );
        // Kept for a person to look at, when asked.
        if let Ok(keep) = std::env::var("NOTIFY_KEEP_SCREENSHOTS") {
            std::fs::create_dir_all(&keep).unwrap();
            std::fs::copy(&png, Path::new(&keep).join(png.file_name().unwrap())).unwrap();
        }
    }
}
