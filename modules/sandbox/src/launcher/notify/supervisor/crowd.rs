//! Whether the command's calls come from one thread at a time or from several in parallel:
//! the init holds a descriptor's hand-over on its CPU only for a caller alone (decision 0081).

use std::time::{Duration, Instant};

/// Whether one thread of the command makes its calls alone, or several in parallel: a
/// hand-over is held on the init's CPU only for a caller alone. A caller woken on the init's
/// CPU may take the CPU from the init before it is back in `poll` (the scheduler's choice);
/// the init then waits behind it while another process's call waits on an idle CPU (two
/// processes creating in parallel, each computing 300 µs between creates: 554 of 4,000
/// answers traced so, each costing the other process the 300 µs; decision 0081).
#[derive(Default)]
pub(super) struct Crowd {
    last: Option<u32>,
    /// When a call last came from another thread than the one before it.
    mixed: Option<Instant>,
}

impl Crowd {
    /// How long after two threads' calls interleaved the init still counts them as parallel.
    const SETTLE: Duration = Duration::from_millis(2);

    pub(super) fn alone(&mut self, tid: u32) -> bool {
        self.alone_at(tid, Instant::now())
    }

    fn alone_at(&mut self, tid: u32, now: Instant) -> bool {
        if self.last.is_some_and(|last| last != tid) {
            self.mixed = Some(now);
        }
        self.last = Some(tid);
        self.mixed.is_none_or(|at| now.duration_since(at) > Self::SETTLE)
    }
}

#[cfg(test)]
mod tests {
    use super::{Crowd, Duration, Instant};

    #[test]
    fn a_caller_is_alone_until_another_interleaves_and_again_once_it_settles() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let mut c = Crowd::default();
        assert!(c.alone_at(7, at(0)), "the first caller");
        assert!(c.alone_at(7, at(300)), "the same caller again");
        assert!(!c.alone_at(8, at(600)), "another caller interleaves");
        assert!(!c.alone_at(7, at(900)), "the first again, within the settling time");
        assert!(!c.alone_at(7, at(2_800)), "2 ms after the interleaving, not more");
        assert!(c.alone_at(7, at(3_000)), "settled: alone again");
    }
}
