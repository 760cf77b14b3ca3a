//! The chapter registry agrees with the files: every case, variant and text
//! exists, every binary is declared in Cargo.toml, and each case file is the
//! one the registry fingerprints as shipped.

#[path = "../checks/mod.rs"]
#[allow(dead_code)]
mod checks;

mod common;

use lab::chapter::fingerprint;

fn declares(manifest: &str, bin: &str, path: &str) -> bool {
    manifest.contains(&format!("name = \"{bin}\"\npath = \"{path}\""))
}

#[test]
fn every_chapter_names_files_that_exist_and_binaries_cargo_builds() {
    let root = common::root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for (i, chapter) in checks::CHAPTERS.iter().enumerate() {
        assert_eq!(
            chapter.number as usize,
            i + 1,
            "chapters are numbered in order"
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
        assert!(
            chapter.variants.iter().any(|v| v.name == "solution"),
            "chapter {} has a reference solution",
            chapter.number
        );
        for variant in chapter.variants {
            assert!(root.join(variant.file).is_file(), "{}", variant.file);
            assert!(
                declares(&manifest, variant.bin, variant.file),
                "{}",
                variant.bin
            );
        }
    }
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
