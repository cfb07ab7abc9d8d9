//! Tests of the git tools on real repositories in temporary roots: one binary, the suites in
//! `suite/`, the fixtures in `common/`.

// A failed unwrap is a failed test, which is what these assertions want.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Tests spawn git and make and read their fixtures by path.
#![allow(clippy::disallowed_methods)]

mod common;
mod suite;
