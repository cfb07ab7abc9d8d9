//! The one mutex helper of every crate of hands (the daemon's and the modules'): a lock that a
//! panic elsewhere does not poison for good. It lives here, in the crate every other one
//! reaches; clippy's `disallowed-methods` (`clippy.toml`) refuses `Mutex::lock` anywhere else,
//! so a second helper cannot come back (there were five).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking the guard back from a poisoned mutex: every mutex of hands guards a table,
/// a set, a cache or a command's output tail that each holder leaves consistent before it could
/// panic, so a panic in one connection (or one walker thread, one command) must not take down
/// every other one.
#[expect(
    clippy::disallowed_methods,
    reason = "the one place that may call `Mutex::lock` (clippy.toml)"
)]
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
