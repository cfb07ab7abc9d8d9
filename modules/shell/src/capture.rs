//! Bounded output capture: keep the end of a stream in memory bounded by a budget, count what
//! was dropped, and render the kept bytes as text a model can read safely.

use std::collections::VecDeque;

/// Keeps the last `keep` bytes written to it and counts the rest.
#[derive(Debug)]
pub struct Tail {
    keep: usize,
    buf: VecDeque<u8>,
    total: u64,
}

impl Tail {
    pub fn new(keep: usize) -> Tail {
        Tail { keep, buf: VecDeque::with_capacity(keep.min(64 * 1024)), total: 0 }
    }

    /// Appends bytes; older bytes past the budget are dropped.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let bytes = if bytes.len() > self.keep { &bytes[bytes.len() - self.keep..] } else { bytes };
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.keep);
        self.buf.drain(..overflow);
        self.buf.extend(bytes);
    }

    /// Bytes seen in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept bytes, in order.
    pub fn bytes(&self) -> Vec<u8> {
        self.buf.iter().copied().collect()
    }
}

/// Captured text as shown to the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    /// Bytes of the stream not shown (dropped from the front).
    pub dropped_bytes: u64,
    /// Invalid UTF-8 was replaced with U+FFFD.
    pub invalid_utf8: bool,
}

/// How many characters `c` takes once rendered: control characters other than newline and tab
/// are escaped (`\r`, `\u{1b}`).
fn width(c: char) -> usize {
    match c {
        '\n' | '\t' => 1,
        '\r' => 2,
        c if c.is_control() => format!("{:x}", c as u32).len() + 4,
        _ => 1,
    }
}

/// The rendered length of `bytes` in characters, escapes included (see [`render`]).
pub fn rendered_chars(bytes: &[u8]) -> usize {
    bytes
        .utf8_chunks()
        .map(|c| c.valid().chars().map(width).sum::<usize>() + usize::from(!c.invalid().is_empty()))
        .sum()
}

/// Renders the end of a stream: at most `max_chars` characters of `kept` (the end of a stream of
/// `total` bytes), control characters other than newline and tab escaped as `\u{..}` — the
/// escapes count against `max_chars` — and invalid UTF-8 replaced. A character cut by the
/// capture's edge is dropped whole.
pub fn render(kept: &[u8], total: u64, max_chars: usize) -> Rendered {
    // Skip UTF-8 continuation bytes at the front: the capture may have cut a character.
    let skip = if total > kept.len() as u64 {
        kept.iter().take(3).take_while(|b| (**b & 0xC0) == 0x80).count()
    } else {
        0
    };
    // Decode into (character, bytes it came from) so the cut below counts bytes exactly.
    let mut units: Vec<(char, usize)> = Vec::with_capacity(kept.len());
    let mut invalid_utf8 = false;
    for chunk in kept[skip..].utf8_chunks() {
        units.extend(chunk.valid().chars().map(|c| (c, c.len_utf8())));
        if !chunk.invalid().is_empty() {
            invalid_utf8 = true;
            units.push((char::REPLACEMENT_CHARACTER, chunk.invalid().len()));
        }
    }
    // From the end, as many characters as fit in `max_chars` once rendered.
    let mut start = units.len();
    let mut used = 0;
    while start > 0 && used + width(units[start - 1].0) <= max_chars {
        start -= 1;
        used += width(units[start].0);
    }
    let shown: usize = units[start..].iter().map(|(_, n)| n).sum();
    let mut text = String::with_capacity(shown);
    for &(ch, _) in &units[start..] {
        match ch {
            '\n' | '\t' => text.push(ch),
            '\r' => text.push_str("\\r"),
            c if c.is_control() => text.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => text.push(c),
        }
    }
    Rendered { text, dropped_bytes: total.saturating_sub(shown as u64), invalid_utf8 }
}

/// Splits a character budget between stdout and stderr: each gets half, and what one does not
/// need goes to the other.
pub fn split_budget(budget: usize, out_chars: usize, err_chars: usize) -> (usize, usize) {
    let half = budget / 2;
    if out_chars <= half {
        (out_chars, (budget - out_chars).min(err_chars))
    } else if err_chars <= budget - half {
        ((budget - err_chars).min(out_chars), err_chars)
    } else {
        (half, budget - half)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_end_within_its_budget() {
        let mut t = Tail::new(10);
        t.push(b"0123456789abc");
        assert_eq!(t.bytes(), b"3456789abc");
        t.push(b"XY");
        assert_eq!(t.bytes(), b"56789abcXY");
        assert_eq!(t.total(), 15);
        let mut small = Tail::new(100);
        small.push(b"hi");
        assert_eq!(small.bytes(), b"hi");
    }

    #[test]
    fn render_escapes_controls_and_flags_invalid_utf8() {
        let r = render(b"ok\x1b[31mred\r\n\xff", 13, 1000);
        assert_eq!(r.text, "ok\\u{1b}[31mred\\r\n\u{fffd}");
        assert!(r.invalid_utf8);
        assert_eq!(r.dropped_bytes, 0);
    }

    #[test]
    fn render_keeps_the_end_and_counts_dropped_bytes() {
        let r = render(b"abcdefghij", 10, 4);
        assert_eq!(r.text, "ghij");
        assert_eq!(r.dropped_bytes, 6);
        // A multi-byte character cut at the capture's edge is dropped, not shown as garbage.
        let kept = "é-end".as_bytes()[1..].to_vec();
        let r = render(&kept, 100, 100);
        assert_eq!(r.text, "-end");
        assert!(!r.invalid_utf8);
        assert_eq!(r.dropped_bytes, 96);
    }

    #[test]
    fn escapes_count_against_the_budget() {
        let zeros = vec![0u8; 1000];
        let r = render(&zeros, 1000, 30);
        assert_eq!(r.text, "\\u{0}".repeat(6));
        assert_eq!(r.text.chars().count(), 30);
        assert_eq!(r.dropped_bytes, 994);
        assert_eq!(rendered_chars(&zeros), 5000);
        assert_eq!(rendered_chars(b"a\r\n\x1b\xff"), 1 + 2 + 1 + 6 + 1);
        // An escape that does not fit whole is left out, not cut.
        let r = render(b"ab\x1b", 3, 5);
        assert_eq!(r.text, "");
        assert_eq!(r.dropped_bytes, 3);
        let r = render(b"ab\x1b", 3, 7);
        assert_eq!(r.text, "b\\u{1b}");
    }

    #[test]
    fn budget_goes_where_it_is_needed() {
        assert_eq!(split_budget(100, 10, 500), (10, 90));
        assert_eq!(split_budget(100, 500, 10), (90, 10));
        assert_eq!(split_budget(100, 500, 500), (50, 50));
        assert_eq!(split_budget(100, 5, 5), (5, 5));
    }
}
