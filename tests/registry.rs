//! The chapter registry agrees with the files: every case and text exists,
//! every case binary is declared in Cargo.toml (and nothing else is), every
//! patch in the catalogue applies, and each case file is the one the registry
//! fingerprints as shipped.

use crate::checks;
use crate::common;

use lab::catalogue;
use lab::chapter::fingerprint;

fn declares(manifest: &str, bin: &str, path: &str) -> bool {
    manifest.contains(&format!("name = \"{bin}\"\npath = \"{path}\""))
}

#[test]
fn every_chapter_names_files_that_exist_and_binaries_cargo_builds() {
    let root = common::root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for (i, chapter) in checks::CHAPTERS.iter().enumerate() {
        // In order; a chapter still planned leaves a gap (see checks::PLANNED).
        let previous = i.checked_sub(1).map_or(0, |p| checks::CHAPTERS[p].number);
        assert!(
            chapter.number > previous,
            "chapters are numbered in order: {} after {previous}",
            chapter.number
        );
        assert!(
            !checks::PLANNED.iter().any(|p| p.number == chapter.number),
            "chapter {} is written, so it is no longer planned",
            chapter.number
        );
        assert!(
            root.join(chapter.case_file).is_file(),
            "{}",
            chapter.case_file
        );
        assert!(
            root.join(chapter.text_file).is_file(),
            "{}",
            chapter.text_file
        );
        assert!(
            declares(&manifest, chapter.bin, chapter.case_file),
            "{}",
            chapter.bin
        );
    }
    // The versions under checks/ are compiled by notify on demand: beside
    // one binary per case, Cargo.toml declares the notify command and tools
    // that build only with a feature of their own (`.ci/mutants-sql`'s).
    let bins: Vec<&str> = manifest
        .split("[[bin]]")
        .skip(1)
        .map(|bin| bin.split("\n[").next().unwrap_or(bin))
        .collect();
    let cases = bins
        .iter()
        .filter(|b| b.contains("path = \"cases/"))
        .count();
    assert_eq!(cases, checks::CHAPTERS.len(), "one binary per case");
    let others: Vec<&&str> = bins
        .iter()
        .filter(|b| !b.contains("path = \"cases/"))
        .collect();
    assert!(
        others
            .iter()
            .all(|b| b.contains("name = \"notify\"") || b.contains("required-features")),
        "Cargo.toml declares the notify command, one binary per case, and feature-gated tools, nothing else: {others:?}"
    );
    assert!(
        !manifest.contains("path = \"checks/"),
        "no version under checks/ is a cargo target"
    );
}

#[test]
fn every_patch_applies_to_its_reference_and_describes_itself() {
    let root = common::root();
    let mut wrong = Vec::new();
    let mut count = 0;
    for chapter in checks::CHAPTERS {
        assert!(
            root.join(catalogue::solution_file(chapter)).is_file(),
            "chapter {} has a reference solution",
            chapter.number
        );
        let patched = catalogue::patched(&root, chapter).unwrap();
        assert!(
            patched.iter().any(|p| p.name == catalogue::SHIPPED),
            "chapter {} keeps its case as shipped",
            chapter.number
        );
        for version in patched {
            count += 1;
            let file = catalogue::patch_file(chapter, &version.name);
            if version.about.is_empty() || version.about.starts_with("---") {
                wrong.push(format!("{file} opens with no one-line description"));
            }
            match catalogue::source(&root, chapter, &version.name) {
                Ok(text) if text == catalogue::solution(&root, chapter).unwrap() => {
                    wrong.push(format!("{file} changes nothing"))
                }
                Ok(_) => {}
                Err(err) => wrong.push(format!("{file}: {err:#}")),
            }
        }
    }
    assert!(count > 8, "the catalogue is read");
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn each_case_is_shipped_as_the_registry_remembers_it() {
    let root = common::root();
    for chapter in checks::CHAPTERS {
        let bytes = std::fs::read(root.join(chapter.case_file)).unwrap();
        assert_eq!(
            fingerprint(&bytes),
            chapter.shipped_hash,
            "{} changed: update shipped_hash in checks/ to {:#x} if the change is meant",
            chapter.case_file,
            fingerprint(&bytes)
        );
    }
}

/// Every correct alternative in the catalogue (`alt-*`, "a correct
/// alternative: ...") passes its chapter's quick check: a design the rules
/// leave free, other than the reference's, is not failed for being other.
/// Chapter 12's need a PostgreSQL server: its own tests play them.
#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn every_correct_alternative_of_chapters_1_to_5_passes_its_check() {
    alternatives_pass(1..=5);
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn every_correct_alternative_of_chapters_6_to_8_passes_its_check() {
    alternatives_pass(6..=8);
}

#[test]
#[ignore = "grades a catalogued fix; run with `cargo test -- --include-ignored`, as CI does"]
fn every_correct_alternative_of_chapters_9_to_11_passes_its_check() {
    alternatives_pass(9..=11);
}

/// The alternatives of `chapters`, apart so that the test threads share
/// them: together they take about two minutes.
fn alternatives_pass(chapters: std::ops::RangeInclusive<u32>) {
    for chapter in checks::CHAPTERS
        .iter()
        .filter(|c| chapters.contains(&c.number))
    {
        let alternatives = common::alternatives(chapter.number);
        assert!(
            !alternatives.is_empty(),
            "chapter {} has correct alternatives",
            chapter.number
        );
        for name in alternatives {
            let number = chapter.number.to_string();
            let (code, report) = common::checked_json(&[&number, "--variant", &name]);
            assert_eq!(code, 0, "chapter {number}: {name} must pass: {report}");
        }
    }
}
