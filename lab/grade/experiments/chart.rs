//! Drawing the simulated experiments (`try backoff`, `try breaker`) in
//! text: bars in eighths of a character, and simulated time as `m:ss`.

use crate::clock::SECOND;

/// A bar of `value` on a scale where `max` fills `width` characters, drawn
/// in eighths of a character; at least an eighth for any value above 0.
pub fn bar(value: usize, max: usize, width: usize) -> String {
    if value == 0 || max == 0 {
        return String::new();
    }
    const EIGHTHS: [char; 8] = ['▏', '▎', '▍', '▌', '▋', '▊', '▉', '█'];
    let eighths = (value * width * 8).div_ceil(max).max(1);
    let mut out = "█".repeat(eighths / 8);
    if let Some(part) = (eighths % 8).checked_sub(1) {
        out.push(EIGHTHS[part]);
    }
    out
}

/// Simulated time `ms` as `m:ss`.
pub fn clock(ms: i64) -> String {
    let s = ms.div_euclid(SECOND);
    format!("{}:{:02}", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_grow_with_their_value() {
        assert_eq!(bar(0, 10, 16), "");
        assert_eq!(bar(10, 10, 16).chars().count(), 16);
        assert!(bar(1, 100, 16).chars().count() == 1);
        assert_eq!(bar(3, 4, 2), "█▌");
    }

    #[test]
    fn clock_shows_minutes_and_seconds() {
        assert_eq!(clock(0), "0:00");
        assert_eq!(clock(90 * SECOND), "1:30");
        assert_eq!(clock(11 * 60 * SECOND), "11:00");
    }
}
