//! The count of a listener's cut connections, by reason, written as one log line a second at
//! most (decision 0057): a flood of cut connections writes a dozen lines, not one each.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Why a connection was cut (or not accepted), as the log counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Refused at the cap with a 503: every slot served a vouched-for request.
    Full = 0,
    /// Closed to make room for a newcomer.
    Evicted,
    /// No request head (or TLS handshake) within `conns::HEADER_TIMEOUT`: idle, silent or slow.
    Head,
    /// A request body late (408).
    Body,
    /// Ended by an error (a reset, a malformed request).
    Error,
    /// `accept` itself failed (out of descriptors?).
    Accept,
    /// A request refused (429, 503) past its token's share of the connections, or past all
    /// tokens' (`conns::vouch`).
    Share,
}

const REASONS: [&str; 7] = [
    "refused at the cap (503)",
    "closed to make room",
    "without a request head in time (idle or slow)",
    "with a request body late (408)",
    "ended by an error",
    "failed accepts",
    "refused past a token's share (429, 503)",
];

/// Counts of cut connections, written as one line a second at most.
pub struct Tally {
    name: &'static str,
    counts: Mutex<([u64; 7], Option<String>)>,
    /// A line is due within the second.
    armed: AtomicBool,
}

impl Tally {
    /// The tally of the listener `name` (its prefix in the log).
    pub fn new(name: &'static str) -> Arc<Tally> {
        Arc::new(Tally { name, counts: Mutex::new(([0; 7], None)), armed: AtomicBool::new(false) })
    }

    /// Counts one `cut` (with its error, if any); the line comes within a second. Needs a
    /// tokio runtime (every listener runs on one).
    pub fn note(self: &Arc<Self>, cut: Cut, detail: Option<String>) {
        {
            let mut c = hands_roots::lock(&self.counts);
            c.0[cut as usize] = c.0[cut as usize].saturating_add(1);
            if detail.is_some() {
                c.1 = detail;
            }
        }
        if !self.armed.swap(true, Ordering::SeqCst) {
            let me = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                me.flush();
            });
        }
    }

    /// Writes what was counted since the last line, if anything.
    fn flush(&self) {
        // Disarmed first: a cut counted from here on is in this line or arms the next.
        self.armed.store(false, Ordering::SeqCst);
        let (counts, last) = std::mem::take(&mut *hands_roots::lock(&self.counts));
        let Some(line) = line(self.name, &counts, last.as_deref()) else { return };
        if counts[Cut::Accept as usize] > 0 {
            tracing::warn!("{line}");
        } else {
            tracing::debug!("{line}");
        }
    }
}

/// The log line of a second's counts, if any.
fn line(name: &str, counts: &[u64; 7], last: Option<&str>) -> Option<String> {
    let parts: Vec<String> = counts
        .iter()
        .zip(REASONS)
        .filter(|(n, _)| **n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
    if parts.is_empty() {
        return None;
    }
    let last = last.map(|e| format!("; the last error: {e}")).unwrap_or_default();
    Some(format!("{name}: connections in the last second: {}{last}", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seconds_cuts_are_one_line_of_counts() {
        assert_eq!(line("http", &[0; 7], None), None);
        let l = line("http", &[2, 0, 1700, 0, 1, 0, 0], Some("connection reset")).unwrap();
        assert_eq!(
            l,
            "http: connections in the last second: 2 refused at the cap (503), 1700 without a \
             request head in time (idle or slow), 1 ended by an error; the last error: \
             connection reset"
        );
    }
}
