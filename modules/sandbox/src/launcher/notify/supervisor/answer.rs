//! How a call is answered: a value, an errno, or a new descriptor of the target's, and on
//! which CPU the answer wakes its caller (decisions 0074, 0080–0082).

use super::Answer;
use std::os::fd::OwnedFd;

/// Where an answer (a value or an errno) wakes its caller.
#[derive(Clone, Copy)]
pub(super) enum Wake {
    /// On this thread's CPU: the kernel's same-CPU wake-up (Linux 6.6+), for a caller that
    /// calls alone ([`super::crowd::Crowd`]).
    Here,
    /// Where the scheduler likes, the same-CPU wake-up turned off for this one answer: a caller
    /// in parallel with others, woken here, would preempt this thread while another process's
    /// call waits (decision 0082).
    Anywhere,
    /// Where the scheduler likes: the kernel has no same-CPU wake-up.
    Plain,
}

/// Answers a call: a value, an errno, or a new descriptor of the target's.
/// Whether the caller was woken on this thread's CPU: a held hand-over, or an answer where the
/// kernel wakes it here (`wake`); `hold`: the caller, when it is on this CPU.
pub(super) fn send(
    listener: &OwnedFd,
    id: u64,
    answer: Answer,
    hold: Option<u32>,
    wake: Wake,
) -> bool {
    match answer {
        Answer::Later => false,
        Answer::Value(v) => respond(listener, id, v, 0, wake),
        Answer::Errno(e) => respond(listener, id, 0, e, wake),
        Answer::Fd(fd, cloexec) => {
            match crate::sys::seccomp_notify::answer_fd(listener, id, &fd, cloexec, hold) {
                Ok(held) => held,
                Err(libc::ENOENT) => false,
                Err(errno) => respond(listener, id, 0, errno, wake),
            }
        }
    }
}

/// Answers, waking the caller as `wake` says; whether it was woken on this thread's CPU.
fn respond(listener: &OwnedFd, id: u64, val: i64, errno: i32, wake: Wake) -> bool {
    use crate::sys::seccomp_notify::{answer, set_sync_wake_up};
    let anywhere = matches!(wake, Wake::Anywhere);
    if anywhere {
        set_sync_wake_up(listener, false);
    }
    answer(listener, id, val, errno);
    if anywhere {
        set_sync_wake_up(listener, true);
    }
    matches!(wake, Wake::Here)
}
