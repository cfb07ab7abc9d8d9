//! The one integration-test binary: every suite drives the real `hands` binary over stdio with
//! rmcp's client (or raw JSON-RPC lines where the test is about malformed input).

mod suite;
