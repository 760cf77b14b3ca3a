//! `notify hint N`: a nudge for a chapter's case, kept with the chapter's
//! data in `checks/caseNN/hints.md`, not in code.
//!
//! The file holds `## ` sections: the first is the hint, the second is
//! shown with `--more`. Anything before the first section is a title for
//! people reading the file and is not printed.

use std::path::Path;

use anyhow::{Context, Result};
use colored::Colorize;

use super::{data_file, EXIT_PASS};
use crate::chapter::Chapter;

/// Prints the hint for `chapter`, and the second hint too with `more`.
pub(super) fn hint(root: &Path, chapter: &Chapter, more: bool) -> Result<i32> {
    print!("{}", text(root, chapter, more)?);
    Ok(EXIT_PASS)
}

/// The hint for `chapter` as printed, ending in a newline.
pub(super) fn text(root: &Path, chapter: &Chapter, more: bool) -> Result<String> {
    let file = data_file(chapter, "hints.md");
    let path = root.join(&file);
    if !path.is_file() {
        return Ok(format!(
            "case {} has no hints yet ({file} does not exist).\nThe chapter's text walks towards the fix: notify read {}\n",
            chapter.number, chapter.number
        ));
    }
    let hints = std::fs::read_to_string(&path)
        .with_context(|| format!("could not read the hints in {}", path.display()))?;
    let hints = sections(&hints);
    let Some(first) = hints.first() else {
        return Ok(format!(
            "case {} has no hints yet ({file} has no `## ` section).\n",
            chapter.number
        ));
    };
    let mut out = format!(
        "{}\n\n{first}\n\n",
        format!("hint for case {} ({})", chapter.number, chapter.title).bold(),
    );
    match (hints.get(1), more) {
        (Some(second), true) => out.push_str(&format!("{}\n\n{second}\n", "another hint:".bold())),
        (Some(_), false) => out.push_str(&format!(
            "still stuck? notify hint {} --more\n",
            chapter.number
        )),
        (None, true) => out.push_str(&format!("case {} has no second hint.\n", chapter.number)),
        (None, false) => {}
    }
    Ok(out)
}

/// The bodies of the `## ` sections of `text`, trimmed, in order.
fn sections(text: &str) -> Vec<String> {
    let mut found: Vec<Vec<&str>> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with("## ") {
            found.push(Vec::new());
        } else if let Some(section) = found.last_mut() {
            section.push(line);
        }
    }
    found
        .into_iter()
        .map(|lines| lines.join("\n").trim().to_string())
        .filter(|body| !body.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::sections;

    #[test]
    fn sections_skip_the_title_and_keep_code_blocks_whole() {
        let text =
            "# Hints\n\nintro\n\n## Hint\n\nlook here\n\n## More\n\n```\n## not a heading\n```\n";
        assert_eq!(
            sections(text),
            vec!["look here", "```\n## not a heading\n```"]
        );
    }
}
