//! The daemon's one mutex helper: a lock that a panic elsewhere does not poison for good.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking the guard back from a poisoned mutex: every mutex of the daemon guards a
/// table or a set that each holder leaves consistent before it could panic, so a panic in one
/// connection must not take down every other one.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
