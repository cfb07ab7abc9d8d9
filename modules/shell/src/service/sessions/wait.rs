//! What the tmux tools wait for and read back, on the host side: a session's output log (the
//! `out.NNNNNN` files `pipe-pane` writes into its socket folder, see
//! `crate::tmux::pipe_script`), cursors into it, the TCP ports its processes listen on,
//! and the bounded wait behind `tmux_start`'s `ready` and `tmux_send`'s `wait`.
//!
//! The socket folder is writable from inside the session's sandbox, so the log is read as
//! untrusted: no symlink is followed, only regular files are read, and every read is bounded.
//! A pane that tampers with its own log only spoils what is reported about itself.

use super::Meta;
use crate::pane::{Mark, Screen};
use crate::service::{Shell, halted};
use crate::tmux::{self, LOG_CHUNK, Until};
use crate::{Caller, ShellError};
use hands_sandbox::netns;
use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The most log bytes one read takes in (a `since` page, or one step of a wait).
pub const READ_CAP: usize = 1 << 20;
/// Lines a wait keeps for its answer and its pattern.
const KEEP_LINES: usize = 5000;
/// How often a wait looks at the log.
const POLL: Duration = Duration::from_millis(50);
/// How often a wait asks tmux whether the command ended (a tmux client in the sandbox), and
/// looks for a listening port.
const STATE_EVERY: Duration = Duration::from_secs(1);
const PORT_EVERY: Duration = Duration::from_millis(250);
/// Lines already searched that a pattern search takes again, so that a pattern spanning
/// lines that arrived in two steps is still found.
const OVERLAP: u64 = 20;
/// The most entries read from one folder of /proc or of the log.
const MAX_ENTRIES: usize = 100_000;

/// A session's output log.
pub struct Log {
    dir: PathBuf,
}

/// Bytes of the log from a cursor on.
pub struct Chunk {
    pub data: Vec<u8>,
    /// Where `data` starts: the cursor, or the oldest byte kept when the cursor's are gone.
    pub start: u64,
    /// Lines (estimated for a partly dropped file) and bytes after the cursor no longer kept.
    pub lost_lines: u64,
    /// More follows `data`.
    pub more: bool,
}

/// Opens a file of the log: never through a symlink, never a FIFO or device (which could
/// block or be endless), only a regular file.
fn open_plain(path: &Path) -> Option<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty()).ok()?;
    let f = std::fs::File::from(fd);
    f.metadata().ok()?.is_file().then_some(f)
}

impl Log {
    pub fn new(dir: PathBuf) -> Log {
        Log { dir }
    }

    /// The indices of the log files there are, oldest first.
    fn indices(&self) -> Vec<u64> {
        let mut v: Vec<u64> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .take(MAX_ENTRIES)
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                let n = name.to_str()?.strip_prefix(tmux::LOG_PREFIX)?;
                (n.len() == 6 && n.bytes().all(|b| b.is_ascii_digit())).then(|| n.parse().ok())?
            })
            .collect();
        v.sort_unstable();
        v
    }

    fn file(&self, index: u64) -> PathBuf {
        self.dir.join(format!("{}{index:06}", tmux::LOG_PREFIX))
    }

    /// The cursor now: how many bytes the pane has printed.
    pub fn end(&self) -> u64 {
        let Some(&last) = self.indices().last() else { return 0 };
        let size = open_plain(&self.file(last)).and_then(|f| f.metadata().ok()).map(|m| m.len());
        last * LOG_CHUNK + size.unwrap_or(0).min(LOG_CHUNK)
    }

    /// Line counts of the removed files, by index (the pruning loop's notes).
    fn dropped(&self) -> std::collections::HashMap<u64, u64> {
        let mut text = String::new();
        if let Some(f) = open_plain(&self.dir.join(tmux::LOG_DROPPED)) {
            let _ = f.take(1 << 20).read_to_string(&mut text);
        }
        text.lines()
            .filter_map(|l| {
                let (i, n) = l.trim().split_once(' ')?;
                Some((i.parse().ok()?, n.trim().parse().ok()?))
            })
            .collect()
    }

    /// At most `max` bytes from `from` on.
    pub fn read(&self, from: u64, max: usize) -> Result<Chunk, ShellError> {
        let indices = self.indices();
        let end = self.end();
        if from > end {
            return Err(ShellError::Failed(format!(
                "cursor {from} is past the end of this session's output ({end} bytes so far): it \
                 comes from another session of that name; read without `since` for a fresh cursor"
            )));
        }
        let oldest = indices.first().map_or(end, |i| i * LOG_CHUNK);
        let (start, lost_lines) = if from < oldest {
            let dropped = self.dropped();
            let first = from / LOG_CHUNK;
            let lines: u64 = (first..oldest / LOG_CHUNK)
                .map(|i| {
                    let n = dropped.get(&i).copied().unwrap_or(0);
                    // Of the first file, only the part after the cursor was lost.
                    if i == first { n * (LOG_CHUNK - from % LOG_CHUNK) / LOG_CHUNK } else { n }
                })
                .sum();
            (oldest, lines)
        } else {
            (from, 0)
        };
        let mut data = Vec::new();
        let mut at = start;
        while at < end && data.len() < max {
            let index = at / LOG_CHUNK;
            let Some(mut f) = open_plain(&self.file(index)) else { break };
            if f.seek(SeekFrom::Start(at % LOG_CHUNK)).is_err() {
                break;
            }
            let want = ((LOG_CHUNK - at % LOG_CHUNK) as usize).min(max - data.len());
            let before = data.len();
            let _ = f.take(want as u64).read_to_end(&mut data);
            let got = (data.len() - before) as u64;
            if got == 0 {
                break;
            }
            at += got;
        }
        let (mut start, mut lost_lines) = (start, lost_lines);
        if start > from {
            // The oldest file kept starts inside a line: that line is lost too.
            if let Some(i) = data.iter().position(|b| *b == b'\n') {
                data.drain(..=i);
                start += i as u64 + 1;
                lost_lines += 1;
            }
        }
        Ok(Chunk { more: at < end, data, start, lost_lines })
    }
}

/// The `ns/pid_for_children` or `ns/pid` link of a process: which PID namespace it names.
fn pid_ns(pid: &str, which: &str) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/{which}")).ok()
}

/// The session's init: the launcher's child, made in the sandbox's namespaces (the launcher
/// itself stays outside them). The launcher's own pid when it has no child to name.
#[expect(clippy::disallowed_methods, reason = "procfs: the child of the session's launcher")]
fn init_of(launcher: netns::Process) -> i32 {
    std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", launcher.pid))
        .ok()
        .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(launcher.pid)
}

/// TCP ports on which processes of the session listen (found by the socket inodes of the
/// processes in its PID namespace). Falls back to every listener in the session's network
/// namespace when the processes cannot be read; sorted, without duplicates.
pub fn session_ports(launcher: netns::Process) -> Vec<u16> {
    let table = listening(launcher);
    let mut ports: Vec<u16> = match owned(launcher, &table) {
        Some(owned) => owned,
        None => table.iter().map(|(p, _)| *p).collect(),
    };
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Whether a process of the session listens on `port`.
pub fn session_listens(launcher: netns::Process, port: u16) -> bool {
    let table: Vec<(u16, u64)> =
        listening(launcher).into_iter().filter(|(p, _)| *p == port).collect();
    if table.is_empty() {
        return false;
    }
    owned(launcher, &table).is_none_or(|o| !o.is_empty())
}

/// Every TCP listener in the network namespace of the session's launcher (its client's in the
/// module, or the host's with the `network` grant): `(port, inode)`.
#[expect(
    clippy::disallowed_methods,
    reason = "procfs: the TCP listeners of the session's network namespace"
)]
fn listening(launcher: netns::Process) -> Vec<(u16, u64)> {
    let mut v = Vec::new();
    for t in ["tcp", "tcp6"] {
        let mut text = String::new();
        if let Ok(f) = std::fs::File::open(format!("/proc/{}/net/{t}", init_of(launcher))) {
            let _ = f.take(16 << 20).read_to_string(&mut text);
        }
        v.extend(crate::pane::listeners(&text));
    }
    v
}

/// The ports of `table` whose sockets are open in a process of the session's PID namespace;
/// `None` when that namespace cannot be read.
fn owned(launcher: netns::Process, table: &[(u16, u64)]) -> Option<Vec<u16>> {
    if !launcher.alive() {
        return Some(Vec::new());
    }
    let init = init_of(launcher);
    let ns = if init == launcher.pid {
        pid_ns(&launcher.pid.to_string(), "pid_for_children")?
    } else {
        pid_ns(&init.to_string(), "pid")?
    };
    if table.is_empty() {
        return Some(Vec::new());
    }
    let inodes: HashSet<u64> = table.iter().map(|(_, i)| *i).collect();
    let mut found = HashSet::new();
    for e in std::fs::read_dir("/proc").ok()?.take(MAX_ENTRIES).flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        if pid_ns(pid, "pid").as_ref() != Some(&ns) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for fd in fds.take(MAX_ENTRIES).flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else { continue };
            let inode = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok());
            if let Some(i) = inode.filter(|i| inodes.contains(i)) {
                found.insert(i);
            }
        }
    }
    Some(table.iter().filter(|(_, i)| found.contains(i)).map(|(p, _)| *p).collect())
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Held,
    Ended,
    TimedOut,
}

/// What a wait saw.
pub struct Waited {
    pub outcome: Outcome,
    /// The session's command ended (seen while waiting, or after the condition held).
    pub ended: bool,
    /// The typed command's status (bash's mark), else the session's once ended.
    pub exit_status: Option<i32>,
    /// What the pane printed during the wait, the echo of typed text left out: its end
    /// within the budget, and whether that is all of it.
    pub text: String,
    pub truncated: bool,
    /// Where the wait stopped reading: the next cursor.
    pub cursor: u64,
}

/// A wait's view of the output: the screen it renders, the echo of typed text to leave out.
struct View {
    screen: Screen,
    /// The typed text's lines, which the pane echoes first.
    echo: Vec<String>,
    /// Lines of the screen that are that echo (known once they are finished).
    echo_lines: u64,
    /// Lines already searched for the pattern.
    searched: u64,
    pos: u64,
}

impl View {
    /// The lines after the echo, from finished line `from` on, and the line being written
    /// (unless it may still be echo).
    fn text_from(&mut self, from: u64) -> String {
        self.text_between(from, None)
    }

    /// [`View::text_from`], ending before finished line `to` when given (the line being
    /// written then left out).
    fn text_between(&mut self, from: u64, to: Option<u64>) -> String {
        let total = self.screen.total();
        let kept = self.screen.done().len() as u64;
        // The echo: leading finished lines equal to the typed lines.
        while self.echo_lines < total.min(self.echo.len() as u64) && self.echo_lines >= total - kept
        {
            let i = (self.echo_lines - (total - kept)) as usize;
            let line = self.screen.done().nth(i).unwrap_or_default();
            if line != self.echo[self.echo_lines as usize] {
                // Not an echo: nothing more is left out.
                self.echo.truncate(self.echo_lines as usize);
                break;
            }
            self.echo_lines += 1;
        }
        let from = from.max(self.echo_lines).max(total - kept);
        let upto = to.unwrap_or(total).clamp(from, total);
        let mut lines: Vec<&str> = self
            .screen
            .done()
            .skip((from - (total - kept)) as usize)
            .take((upto - from) as usize)
            .collect();
        let partial = self.screen.partial();
        let pending_echo = self
            .echo
            .get(self.echo_lines as usize)
            .is_some_and(|e| self.echo_lines == total && e.starts_with(partial.trim_end()));
        if to.is_none() && !partial.trim_end().is_empty() && !pending_echo {
            lines.push(&partial);
        }
        lines.join("\n")
    }
}

impl Shell {
    /// Waits, bounded by `timeout`, for `until` in the output from cursor `from` on, or for the
    /// session's command to end; reports progress to the caller each second and stops when the
    /// caller cancels (the session goes on) or the brake is pulled.
    pub(super) async fn wait_for(
        &self,
        m: &Meta,
        until: &Until,
        from: u64,
        typed: Option<&str>,
        timeout: Duration,
        caller: &Caller,
    ) -> Result<Waited, ShellError> {
        let mut halt = self.halt.subscribe();
        if *halt.borrow() {
            return Err(ShellError::Braked);
        }
        let work = self.watch(m, until, from, typed, timeout, caller);
        tokio::select! {
            r = work => r,
            () = caller.cancelled() => Err(ShellError::Cancelled(format!(
                "cancelled: stopped waiting; tmux session {:?} keeps running (tmux_read or \
                 tmux_kill it)",
                m.called()
            ))),
            () = halted(&mut halt) => Err(ShellError::Braked),
        }
    }

    async fn watch(
        &self,
        m: &Meta,
        until: &Until,
        from: u64,
        typed: Option<&str>,
        timeout: Duration,
        caller: &Caller,
    ) -> Result<Waited, ShellError> {
        let log = Log::new(self.tmux.socket_dir(&m.name));
        let started = Instant::now();
        let echo = typed
            .map(|t| t.split('\n').map(|l| l.trim_end().to_string()).collect())
            .unwrap_or_default();
        let mut v =
            View { screen: Screen::new(KEEP_LINES), echo, echo_lines: 0, searched: 0, pos: from };
        let mut last_growth = Instant::now();
        let mut next_state = started + STATE_EVERY;
        let mut next_port = started;
        let mut next_progress = started + Duration::from_secs(1);
        let mut lost = false;
        let mut queries = 0;
        let mut exit_status = None;
        let mut ended = false;
        let mut until_line = None;
        let outcome = loop {
            // Take in what the pane printed.
            let c = log.read(v.pos, READ_CAP)?;
            if c.start > v.pos {
                lost = true;
            }
            if !c.data.is_empty() {
                v.screen.feed(&c.data);
                last_growth = Instant::now();
            }
            v.pos = c.start + c.data.len() as u64;
            let changed = !c.data.is_empty();
            let now = Instant::now();
            let held = match until {
                Until::Quiet(d) => now.duration_since(last_growth) >= *d,
                Until::Pattern(re) => {
                    changed && {
                        let from_line = v.searched.saturating_sub(OVERLAP);
                        v.searched = v.screen.total();
                        re.is_match(&v.text_from(from_line))
                    }
                }
                Until::Exit => {
                    let marks = v.screen.marks();
                    let start = marks.iter().position(|(_, m)| *m == Mark::CommandStart);
                    let done = start.and_then(|s| {
                        marks[s..].iter().find_map(|(line, m)| match m {
                            Mark::CommandDone(st) => Some((*line, *st)),
                            _ => None,
                        })
                    });
                    match done {
                        Some((line, st)) => {
                            exit_status = st;
                            // What follows the mark is the shell's next prompt.
                            until_line = Some(line);
                            true
                        }
                        None => false,
                    }
                }
                Until::Port(p) => {
                    now >= next_port && {
                        next_port = now + PORT_EVERY;
                        session_listens(m.launcher, *p)
                    }
                }
            };
            if held {
                break Outcome::Held;
            }
            // Has the command ended? Asked each second, and at once when the pane's shell
            // asked its exit question (the drain, see DRAIN_ON_EXIT).
            let asked = v.screen.marks().iter().filter(|(_, m)| *m == Mark::CursorQuery).count();
            if asked > queries || now >= next_state {
                queries = asked;
                next_state = now + STATE_EVERY;
                let r = self.read_settled(&m.name, &m.cwd, 1).await?;
                if r.ended {
                    ended = true;
                    exit_status = r.exit_status;
                    // The log may trail the pane a moment: take in the rest, then judge.
                    self.settle(&log, &mut v).await?;
                    let held = match until {
                        Until::Pattern(re) => re.is_match(&v.text_from(0)),
                        Until::Exit => true,
                        _ => false,
                    };
                    break if held { Outcome::Held } else { Outcome::Ended };
                }
            }
            if started.elapsed() >= timeout {
                break Outcome::TimedOut;
            }
            if caller.wants_progress() && Instant::now() >= next_progress {
                next_progress += Duration::from_secs(1);
                let secs = started.elapsed().as_secs();
                let lines = v.screen.total();
                caller
                    .progress(secs as f64, || format!("waiting {secs} s, {lines} lines of output"))
                    .await;
            }
            tokio::time::sleep(POLL).await;
        };
        let all = v.text_between(0, until_line);
        let (text, cut) = tail_within(all.trim_end(), self.output_chars);
        let dropped = v.screen.total() > v.screen.done().len() as u64;
        Ok(Waited {
            outcome,
            ended,
            exit_status,
            text,
            truncated: cut || dropped || lost,
            cursor: v.pos,
        })
    }

    /// After the command ended: reads the log until it stops growing (at most 1 s).
    async fn settle(&self, log: &Log, v: &mut View) -> Result<(), ShellError> {
        let until = Instant::now() + Duration::from_secs(1);
        let mut quiet = 0;
        while Instant::now() < until && quiet < 3 {
            let c = log.read(v.pos, READ_CAP)?;
            if c.data.is_empty() {
                quiet += 1;
            } else {
                quiet = 0;
                v.screen.feed(&c.data);
            }
            v.pos = c.start + c.data.len() as u64;
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }
}

/// The end of `text` within `max` characters, cut at a line start where one is near;
/// whether anything was left out.
pub fn tail_within(text: &str, max: usize) -> (String, bool) {
    let n = text.chars().count();
    if n <= max {
        return (text.to_string(), false);
    }
    let skip = n - max;
    let rest: String = text.chars().skip(skip).collect();
    let rest = match rest.find('\n') {
        Some(i) if i < rest.len() / 2 => rest[i + 1..].to_string(),
        _ => rest,
    };
    (rest, true)
}

/// The last `n` lines of `text`.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
