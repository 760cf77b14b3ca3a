//! Small things about the terminal: links, and whether it understands
//! escape codes at all.

use std::io::IsTerminal;
use std::path::Path;

/// `text` as a clickable link to the file at `path` (an OSC 8 hyperlink to
/// its file:// URL) when standard output is a terminal; plain text otherwise.
pub(super) fn file_link(path: &Path, text: &str) -> String {
    if !std::io::stdout().is_terminal() || dumb() {
        return text.to_string();
    }
    format!("\x1b]8;;{}\x1b\\{text}\x1b]8;;\x1b\\", file_url(path))
}

/// True under `TERM=dumb`: a terminal that understands no escape codes
/// (no links, no clearing, no moving the cursor).
pub(super) fn dumb() -> bool {
    std::env::var("TERM").is_ok_and(|term| term == "dumb")
}

/// The file:// URL of an absolute path, with the bytes a URL cannot carry
/// percent-encoded.
pub(super) fn file_url(path: &Path) -> String {
    let mut url = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                url.push(byte as char)
            }
            _ => url.push_str(&format!("%{byte:02X}")),
        }
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_url_encodes_spaces_and_keeps_slashes() {
        assert_eq!(
            file_url(Path::new("/home/dana/my work/case01.rs")),
            "file:///home/dana/my%20work/case01.rs"
        );
    }
}
