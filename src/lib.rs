//! The `hands` daemon as a library: every layer of the binary, so tests can drive a
//! `HandsServer` in process and `src/main.rs` stays one line.

pub mod audit;
pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod dashboard;
pub mod errors;
pub mod exec;
pub mod gate;
pub mod hangups;
pub mod http;
pub mod masks;
pub mod netgate;
pub mod netns;
pub mod probe;
pub mod profiles;
pub mod registry;
pub mod report;
#[cfg(target_os = "linux")]
pub mod sandbox;
pub mod server;
pub mod shell;
pub mod shown;
pub mod stdio;
pub mod tools;

/// The approvals store lives with the gate; the old path stays for its many callers.
pub use gate::approvals;
