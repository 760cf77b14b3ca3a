//! The chapters as a book: every relative link and image in README.md and
//! chapters/*.md leads to a file that exists (and an anchor to a heading
//! that exists), SUMMARY.md lists every chapter, and each chapter's page
//! links to its case file.

use crate::checks;
use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

/// README.md, then the chapters' Markdown files in name order.
fn documents() -> Vec<PathBuf> {
    let root = common::root();
    let mut chapters: Vec<PathBuf> = fs::read_dir(root.join("chapters"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    let mut files = vec![root.join("README.md")];
    files.extend(chapters);
    files
}

/// The text's lines with fenced code blocks blanked and, with
/// `strip_code`, inline code removed, so that code that looks like a link
/// or a heading is not taken for one.
fn prose(text: &str, strip_code: bool) -> Vec<String> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        match fence {
            Some(marker) => {
                if trimmed.starts_with(marker) {
                    fence = None;
                }
                out.push(String::new());
                continue;
            }
            None if trimmed.starts_with("```") || trimmed.starts_with("~~~") => {
                fence = Some(&trimmed[..3]);
                out.push(String::new());
                continue;
            }
            None => {}
        }
        if !strip_code {
            out.push(line.to_string());
            continue;
        }
        // Drop `inline code` spans.
        let mut kept = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                kept.push_str(part);
            }
        }
        out.push(kept);
    }
    out
}

/// The targets of the inline links and images (`[text](target)`,
/// `![alt](target)`) and reference definitions (`[label]: target`) of a
/// Markdown text, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in prose(text, true).iter().enumerate() {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let inside = after[..end].trim();
            // `(target "title")` and `(<target>)` forms.
            let target = inside
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_start_matches('<')
                .trim_end_matches('>');
            found.push((n + 1, target.to_string()));
            rest = &after[end..];
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            if let Some((label, target)) = trimmed.split_once("]:") {
                if !label.contains("](") {
                    if let Some(target) = target.split_whitespace().next() {
                        found.push((n + 1, target.to_string()));
                    }
                }
            }
        }
    }
    found
}

/// A heading's anchor as mdBook and GitHub make it: lower case, spaces to
/// hyphens, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings.
fn anchors(text: &str) -> Vec<String> {
    prose(text, false)
        .iter()
        .filter_map(|line| {
            let hashes = line.chars().take_while(|&c| c == '#').count();
            let title = line.get(hashes..)?;
            (1..=6)
                .contains(&hashes)
                .then_some(())
                .filter(|()| title.starts_with(' '))
                .map(|()| slug(title))
        })
        .collect()
}

/// What is wrong with the links of the Markdown file at `file`.
fn broken_links(file: &Path) -> Vec<String> {
    let text = fs::read_to_string(file).unwrap();
    let folder = file.parent().unwrap();
    let mut broken = Vec::new();
    for (line, target) in links(&text) {
        let external = target.contains("://") || target.starts_with("mailto:");
        if target.is_empty() || external {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            folder.join(path)
        };
        let place = format!("{}:{line}", file.display());
        if !resolved.exists() {
            broken.push(format!("{place}: {target} leads to nothing"));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if resolved.extension().is_some_and(|e| e == "md") {
            let headings = anchors(&fs::read_to_string(&resolved).unwrap());
            if !headings.iter().any(|h| h == anchor) {
                broken.push(format!(
                    "{place}: {target}: {} has no heading #{anchor}",
                    resolved.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_and_image_leads_to_a_file_that_exists() {
    let broken: Vec<String> = documents().iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_checker_catches_broken_links_and_ignores_code() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("there.md"), "# A title\n\n## Key points\n").unwrap();
    let page = dir.path().join("page.md");
    fs::write(
        &page,
        "# Page\n\
         [ok](there.md) [ok too](there.md#key-points) [here](#page) ![img](there.md)\n\
         [gone](missing.rs) ![gone](img/missing.png) [bad anchor](there.md#nope)\n\
         [web](https://example.com/x) `[code](nope.rs)`\n\
         ```\n[fenced](nope.rs)\n```\n\
         [ref]: also-missing.md\n",
    )
    .unwrap();
    let broken = broken_links(&page);
    assert_eq!(broken.len(), 4, "{broken:#?}");
    for target in [
        "missing.rs",
        "img/missing.png",
        "there.md#nope",
        "also-missing.md",
    ] {
        assert!(
            broken.iter().any(|b| b.contains(target)),
            "{target}: {broken:#?}"
        );
    }
}

#[test]
fn slugs_follow_mdbook() {
    assert_eq!(
        slug("Send after commit: the outbox"),
        "send-after-commit-the-outbox"
    );
    assert_eq!(
        slug("Why \"send after commit\" is not enough"),
        "why-send-after-commit-is-not-enough"
    );
    assert_eq!(slug("`notify try` experiments"), "notify-try-experiments");
}

#[test]
fn the_summary_lists_every_chapter_in_order() {
    let root = common::root();
    let summary = fs::read_to_string(root.join("chapters/SUMMARY.md")).unwrap();
    let listed: Vec<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    let mut files: Vec<String> = documents()
        .iter()
        .skip(1)
        .filter_map(|p| p.file_name()?.to_str().map(String::from))
        .filter(|name| name != "SUMMARY.md")
        .collect();
    files.sort();
    assert_eq!(
        listed, files,
        "chapters/SUMMARY.md lists each chapter file once, in order"
    );
    for chapter in checks::CHAPTERS {
        let name = Path::new(chapter.text_file).file_name().unwrap();
        assert!(
            listed.iter().any(|l| l.as_str() == name),
            "SUMMARY.md lists chapter {}'s text {}",
            chapter.number,
            chapter.text_file
        );
    }
}

#[test]
fn each_chapter_page_links_to_its_case_file() {
    let root = common::root();
    for chapter in checks::CHAPTERS {
        let text = fs::read_to_string(root.join(chapter.text_file)).unwrap_or_else(|err| {
            panic!(
                "chapter {}'s text {}: {err}",
                chapter.number, chapter.text_file
            )
        });
        let wanted = format!("../{}", chapter.case_file);
        assert!(
            links(&text).iter().any(|(_, t)| *t == wanted),
            "{} links to its case: [{}]({wanted})",
            chapter.text_file,
            chapter.case_file
        );
    }
}

#[test]
fn the_book_is_built_from_the_chapters() {
    let book = fs::read_to_string(common::root().join("book.toml")).unwrap();
    assert!(book.contains("src = \"chapters\""), "{book}");
}
