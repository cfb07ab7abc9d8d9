//! A tmux pane's output log read as a person sees it, and the conditions the tmux tools wait
//! for: the raw bytes tmux read from the pane (`pipe-pane`, with escape sequences, `\r`
//! overwrites and echoed input) rendered into lines by `vte`'s parser; the shell-integration
//! marks (OSC 133) that tell when a typed command ended; the patterns `ready`/`wait` take;
//! and `/proc/net/tcp` listeners.
//!
//! A rendered line is final once its newline arrives: cursor movements across lines (a
//! full-screen program redrawing) are not followed — `tmux_read` without `since` shows tmux's
//! own screen for those.

use std::collections::VecDeque;

/// The longest line kept (characters); the rest of a longer line is dropped.
const MAX_LINE: usize = 64 * 1024;
/// The most marks one rendering records (a pane printing nothing but marks cannot grow the
/// daemon's memory).
const MAX_MARKS: usize = 10_000;
/// The longest pattern `ready`/`wait` take.
pub const MAX_PATTERN: usize = 1000;

/// Something the pane's output said besides its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// OSC 133;C: the pane's shell started a command line it read (bash's `PS0`).
    CommandStart,
    /// OSC 133;D;STATUS: the shell is back at its prompt; the last command's exit status.
    CommandDone(Option<i32>),
    /// A cursor-position question (CSI 6 n): the pane's shell asks it as it exits (see
    /// `DRAIN_ON_EXIT` in tmux.rs), so the pane may just have ended.
    CursorQuery,
}

/// The renderer's state between bytes.
#[derive(Debug, Default)]
struct Lines {
    /// Finished lines, the newest last; at most `keep` (older ones only counted).
    done: VecDeque<String>,
    keep: usize,
    /// Every finished line, kept or not.
    total: u64,
    /// The line being written, and the column the next character goes to.
    cur: Vec<char>,
    col: usize,
    marks: Vec<(u64, Mark)>,
    /// A callback fired for the last byte: the parser is between sequences.
    fired: bool,
    /// The last byte finished a line.
    newline: bool,
}

impl Lines {
    fn put(&mut self, c: char) {
        if self.col >= MAX_LINE {
            return;
        }
        while self.cur.len() < self.col {
            self.cur.push(' ');
        }
        if self.col < self.cur.len() {
            self.cur[self.col] = c;
        } else {
            self.cur.push(c);
        }
        self.col += 1;
    }

    fn mark(&mut self, m: Mark) {
        if self.marks.len() < MAX_MARKS {
            self.marks.push((self.total, m));
        }
    }

    fn finish_line(&mut self) {
        let line: String = self.cur.drain(..).collect();
        self.done.push_back(line.trim_end().to_string());
        while self.done.len() > self.keep {
            self.done.pop_front();
        }
        self.total += 1;
        self.col = 0;
        self.newline = true;
    }
}

impl vte::Perform for Lines {
    fn print(&mut self, c: char) {
        self.fired = true;
        if !c.is_control() {
            self.put(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        self.fired = true;
        match byte {
            b'\n' | 0x0b | 0x0c => self.finish_line(),
            b'\r' => self.col = 0,
            0x08 => self.col = self.col.saturating_sub(1),
            b'\t' => {
                let next = (self.col / 8 + 1) * 8;
                while self.col < next && self.col < MAX_LINE {
                    self.put(' ');
                }
            }
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &vte::Params, inter: &[u8], _ignore: bool, action: char) {
        self.fired = true;
        if !inter.is_empty() {
            return;
        }
        let first = params.iter().next().and_then(|p| p.first().copied()).unwrap_or(0) as usize;
        let n = first.max(1);
        match action {
            // Erase in line: to its end, from its start, all of it.
            'K' => match first {
                0 => self.cur.truncate(self.col),
                1 => {
                    for c in self.cur.iter_mut().take(self.col + 1) {
                        *c = ' ';
                    }
                }
                _ => self.cur.clear(),
            },
            'C' => self.col = (self.col + n).min(MAX_LINE),
            'D' => self.col = self.col.saturating_sub(n),
            'G' => self.col = (n - 1).min(MAX_LINE),
            // Delete, insert and erase characters at the cursor.
            'P' => {
                let end = (self.col + n).min(self.cur.len());
                if self.col < end {
                    self.cur.drain(self.col..end);
                }
            }
            // One splice: a pane asking for 65535 blanks costs one move, not 65535.
            '@' if self.col <= self.cur.len() => {
                let col = self.col;
                self.cur.splice(col..col, std::iter::repeat_n(' ', n.min(MAX_LINE)));
                self.cur.truncate(MAX_LINE);
            }
            'X' => {
                for c in self.cur.iter_mut().skip(self.col).take(n) {
                    *c = ' ';
                }
            }
            'n' if first == 6 => self.mark(Mark::CursorQuery),
            _ => {}
        }
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], _bell: bool) {
        self.fired = true;
        if params.first() != Some(&&b"133"[..]) {
            return;
        }
        let mark = match params.get(1).and_then(|p| p.first()) {
            Some(b'C') => Mark::CommandStart,
            Some(b'D') => Mark::CommandDone(
                params.get(2).and_then(|s| std::str::from_utf8(s).ok()?.trim().parse().ok()),
            ),
            _ => return,
        };
        self.mark(mark);
    }

    fn esc_dispatch(&mut self, _i: &[u8], _ignore: bool, _byte: u8) {
        self.fired = true;
    }

    fn hook(&mut self, _p: &vte::Params, _i: &[u8], _ignore: bool, _a: char) {
        self.fired = true;
    }

    fn unhook(&mut self) {
        self.fired = true;
    }
}

/// Renders a pane's output as it arrives (a wait's view): finished lines (the last `keep`
/// of them), the line being written, and the marks seen.
pub struct Screen {
    parser: vte::Parser,
    lines: Lines,
}

impl Screen {
    pub fn new(keep: usize) -> Screen {
        Screen { parser: vte::Parser::new(), lines: Lines { keep, ..Lines::default() } }
    }

    /// Feeds more of the output.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.advance(&mut self.lines, bytes);
    }

    /// How many lines have finished.
    pub fn total(&self) -> u64 {
        self.lines.total
    }

    /// The finished lines kept, oldest first.
    pub fn done(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.lines.done.iter().map(String::as_str)
    }

    /// The line being written (no newline yet), as it stands: a prompt keeps its trailing
    /// blank, so that a pattern such as `>>> $` finds it.
    pub fn partial(&self) -> String {
        self.lines.cur.iter().collect()
    }

    /// The marks seen, each with the number of lines finished before it.
    pub fn marks(&self) -> &[(u64, Mark)] {
        &self.lines.marks
    }
}

/// The start of `tmux_read`'s answer for a `since` cursor: the lines `data` renders to, cut
/// at `max_lines` lines and `max_chars` characters.
#[derive(Debug, PartialEq, Eq)]
pub struct Page {
    pub text: String,
    pub lines: usize,
    /// How many bytes of `data` `text` covers: the next cursor is the old one plus this. It
    /// never ends inside an escape sequence or a UTF-8 character.
    pub consumed: usize,
    /// Some of `data` is left for another read.
    pub more: bool,
    /// A line longer than `max_chars` was cut.
    pub cut: bool,
}

/// Renders `data` (the log from a cursor on) and keeps its start: whole lines while they fit,
/// then the line being written when all of them did.
pub fn page(data: &[u8], max_lines: usize, max_chars: usize) -> Page {
    let mut parser = vte::Parser::new();
    let mut l = Lines { keep: usize::MAX, ..Lines::default() };
    // Where each finished line ends, and where the parser last stood between sequences.
    let mut ends: Vec<usize> = Vec::new();
    let mut clean = 0;
    for (i, b) in data.iter().enumerate() {
        parser.advance(&mut l, std::slice::from_ref(b));
        if l.fired {
            clean = i + 1;
            l.fired = false;
        }
        if l.newline {
            ends.push(i + 1);
            l.newline = false;
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut chars = 0;
    let mut consumed = 0;
    let mut cut = false;
    for (line, end) in l.done.iter().zip(&ends) {
        let n = line.chars().count() + usize::from(!out.is_empty());
        if out.len() >= max_lines || chars + n > max_chars {
            if out.is_empty() {
                // One line longer than the whole budget: its start, then the next line.
                out.push(line.chars().take(max_chars).collect());
                consumed = *end;
                cut = true;
            }
            let more = consumed < data.len();
            return Page { lines: out.len(), text: out.join("\n"), consumed, more, cut };
        }
        chars += n;
        out.push(line.clone());
        consumed = *end;
    }
    let partial: String = l.cur.iter().collect::<String>().trim_end().to_string();
    let n = partial.chars().count() + usize::from(!out.is_empty());
    if out.len() < max_lines && chars + n <= max_chars {
        if !partial.is_empty() {
            out.push(partial);
        }
        consumed = clean.max(consumed);
    }
    let more = consumed < data.len();
    Page { lines: out.len(), text: out.join("\n"), consumed, more, cut }
}

/// Why a `ready`/`wait` pattern cannot be waited for ([`pattern`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternError {
    #[error("pattern is empty; give a regular expression such as `listening on`")]
    Empty,
    /// It has this many characters, more than [`MAX_PATTERN`].
    #[error("pattern is {0} characters; at most {MAX_PATTERN}")]
    TooLong(usize),
    /// The regex crate refused it (bad syntax, or its compiled form is over the bound).
    #[error("pattern is not a valid regular expression (Rust `regex` syntax): {0}")]
    Invalid(regex::Error),
}

/// How `ready`/`wait` patterns are compiled: `^` and `$` match at line ends, and the compiled
/// form is bounded. A bad pattern is an error that says why.
pub fn pattern(p: &str) -> Result<regex::Regex, PatternError> {
    if p.is_empty() {
        return Err(PatternError::Empty);
    }
    let chars = p.chars().count();
    if chars > MAX_PATTERN {
        return Err(PatternError::TooLong(chars));
    }
    regex::RegexBuilder::new(p)
        .multi_line(true)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
        .map_err(PatternError::Invalid)
}

/// TCP sockets in LISTEN state in a `/proc/net/tcp` or `/proc/net/tcp6` table: `(port, inode)`.
pub fn listeners(table: &str) -> Vec<(u16, u64)> {
    table
        .lines()
        .skip(1)
        .filter_map(|row| {
            let f: Vec<&str> = row.split_whitespace().collect();
            let local = f.get(1)?;
            if *f.get(3)? != "0A" {
                return None;
            }
            let port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
            let inode = f.get(9)?.parse().ok()?;
            Some((port, inode))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(bytes: &[u8]) -> (Vec<String>, String) {
        let mut s = Screen::new(100);
        s.feed(bytes);
        (s.done().map(String::from).collect(), s.partial().trim_end().to_string())
    }

    #[test]
    fn text_is_read_as_a_person_sees_it() {
        // Colours, a title, a progress line overwritten with \r, a backspace, erase-to-end.
        let (done, partial) = render(
            b"\x1b]0;title\x07\x1b[1;32mgreen\x1b[0m\r\n10%\r50%\r100%\r\nab\x08c\r\nlong\r\x1b[Kshort\r\n>>> ",
        );
        assert_eq!(done, ["green", "100%", "ac", "short"]);
        assert_eq!(partial, ">>>");
        let (done, _) = render(b"a\tb\r\n");
        assert_eq!(done, ["a       b"]);
        // Insert and delete characters; a huge count is bounded.
        let (done, _) = render(b"abc\x1b[2D\x1b[2@XY\r\nabcd\r\x1b[2Px\r\n\x1b[65535@z\r\n");
        assert_eq!(done, ["aXYbc", "xd", "z"]);
    }

    #[test]
    fn shell_marks_and_the_exit_question_are_seen_and_not_shown() {
        let mut s = Screen::new(10);
        s.feed(b"make\r\n\x1b]133;C\x07out\r\n\x1b]133;D;2\x07$ \x1b[6n");
        assert_eq!(s.done().collect::<Vec<_>>(), ["make", "out"]);
        assert_eq!(s.partial(), "$ ");
        assert_eq!(
            s.marks(),
            [(1, Mark::CommandStart), (2, Mark::CommandDone(Some(2))), (2, Mark::CursorQuery)]
        );
    }

    #[test]
    fn a_page_never_ends_inside_a_sequence_and_keeps_whole_lines() {
        let data = b"one\r\ntwo\r\nthree\r\npart\x1b[3";
        let p = page(data, 100, 1000);
        assert_eq!(p.text, "one\ntwo\nthree\npart");
        assert_eq!(&data[p.consumed..], b"\x1b[3", "the unfinished sequence is left for later");
        assert!(p.more);
        let p = page(data, 2, 1000);
        assert_eq!((p.text.as_str(), p.consumed, p.more), ("one\ntwo", 10, true));
        let p = page(data, 100, 8);
        assert_eq!((p.text.as_str(), p.consumed), ("one\ntwo", 10));
        // A line longer than the budget: its start, and the cursor moves past it.
        let p = page(b"abcdefghij\r\nk\r\n", 100, 4);
        assert_eq!((p.text.as_str(), p.consumed, p.cut), ("abcd", 12, true));
        // A UTF-8 character cut in two waits for its second half.
        let p = page("é".as_bytes()[..1].as_ref(), 100, 100);
        assert_eq!((p.text.as_str(), p.consumed), ("", 0));
    }

    #[test]
    fn the_kept_lines_are_bounded_and_all_are_counted() {
        let mut s = Screen::new(3);
        for i in 0..10 {
            s.feed(format!("{i}\r\n").as_bytes());
        }
        assert_eq!(s.done().collect::<Vec<_>>(), ["7", "8", "9"]);
        assert_eq!(s.total(), 10);
    }

    #[test]
    fn patterns_are_checked_and_match_per_line() {
        let bad = pattern("(").unwrap_err();
        assert!(matches!(bad, PatternError::Invalid(_)), "{bad:?}");
        assert!(bad.to_string().contains("not a valid regular expression"), "{bad}");
        assert!(matches!(pattern(""), Err(PatternError::Empty)));
        let long = pattern(&"a".repeat(MAX_PATTERN + 1)).unwrap_err();
        assert_eq!(long, PatternError::TooLong(MAX_PATTERN + 1));
        assert!(long.to_string().contains("at most"), "{long}");
        assert!(pattern("^ready$").unwrap().is_match("x\nready\ny"));
    }

    #[test]
    fn listening_sockets_are_read_from_proc_net_tcp() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
                 0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0\n   \
                 1: 0100007F:1F91 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 999 1 0\n";
        assert_eq!(listeners(t), [(8080, 12345)]);
    }
}
