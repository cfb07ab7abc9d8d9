//! The one integration-test binary: every suite drives the real `hands` binary over stdio with
//! rmcp's client (or raw JSON-RPC lines where the test is about malformed input).

// A test that cannot set up its fixture should fail loudly, so unwrap is the right tool here.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Tests spawn the binary, git and tmux, and make and read their fixtures by path.
#![allow(clippy::disallowed_methods)]

mod suite;
