//! What `notify` adds to the compiler's messages about a learner's case: a
//! line under its warnings, and under a signature error the signature the
//! operation was shipped with.

use std::path::Path;

use colored::Colorize;

use super::reset;
use crate::chapter::Chapter;

/// The compiler's warnings about `chapter`'s case (`rendered` as cargo
/// prints them), with a line that says the case was built anyway; "" when
/// there are none.
pub(super) fn warnings(chapter: &Chapter, rendered: &str) -> String {
    if rendered.trim().is_empty() {
        return String::new();
    }
    format!(
        "{rendered}{} case {} is built and runs; the warnings above are about {}\n\n",
        "note:".bold(),
        chapter.number,
        chapter.case_file
    )
}

/// Under the compiler's `errors`: when `lab::serve!` could not call one of
/// the case's operations, the signature each such operation was shipped
/// with; "" otherwise.
pub(super) fn signature_note(root: &Path, chapter: &Chapter, errors: &str) -> String {
    let plain = strip_ansi(errors);
    if !plain.contains("cannot call this operation") {
        return String::new();
    }
    let Ok(shipped) = reset::shipped(root, chapter) else {
        return String::new();
    };
    let shipped = String::from_utf8_lossy(&shipped);
    let mut names: Vec<&str> = Vec::new();
    for line in plain.lines() {
        if let Some(name) = line
            .split_once("the operation is `")
            .and_then(|(_, ty)| operation_name(ty))
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let mut out = String::new();
    for name in names {
        if let Some(signature) = signature(&shipped, name) {
            out.push_str(&format!(
                "{} operation `{name}` must keep the signature it was shipped with:\n    {signature}\n",
                "note:".bold()
            ));
        }
    }
    if !out.is_empty() {
        out.push_str("  A parameter you no longer use stays, renamed with a leading underscore (`_email`).\n\n");
    }
    out
}

/// `for<'a> fn(&'a mut Db) -> Result<()> {invite}` → `invite`: the name
/// rustc gives a function item's type, at its end.
fn operation_name(ty: &str) -> Option<&str> {
    let ty = ty.trim_end().trim_end_matches('`');
    let (_, name) = ty.rsplit_once('{')?;
    let name = name.strip_suffix('}')?;
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(name)
}

/// The signature of function `name` in `source`, on one line, without its
/// body: e.g. `pub fn invite(db: &mut Db, email: &Email, invite: &Invite) -> Result<()>`.
fn signature(source: &str, name: &str) -> Option<String> {
    let start = source.find(&format!("fn {name}("))?;
    let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
    let end = start + source[start..].find('{')?;
    let text = source[line_start..end]
        .split_whitespace()
        .collect::<Vec<_>>();
    Some(text.join(" ").replace("( ", "(").replace(", )", ")"))
}

/// `text` without terminal colour codes.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_comes_from_the_function_items_type() {
        assert_eq!(
            operation_name(
                "for<'a, 'b> fn(&'a mut Db, &'b Invite) -> Result<(), anyhow::Error> {invite}`"
            ),
            Some("invite")
        );
        assert_eq!(operation_name("fn() {}`"), None);
    }

    #[test]
    fn a_signature_spread_over_lines_is_put_on_one() {
        let source = "use x;\n\npub fn relay(\n    db: &mut Db,\n    email: &Email,\n) -> Result<()> {\n    Ok(())\n}\n";
        assert_eq!(
            signature(source, "relay").as_deref(),
            Some("pub fn relay(db: &mut Db, email: &Email) -> Result<()>")
        );
    }
}
