//! The `hands` daemon as a library: every layer of the binary, so tests can drive a
//! `HandsServer` in process and `src/main.rs` stays one line.

pub mod audit;
pub mod cli;
pub mod config;
pub mod control;
pub mod dashboard;
pub mod errors;
pub mod exec;
pub mod gate;
pub mod hangups;
pub mod http;
pub mod lock;
pub mod netgate;
pub mod report;
pub mod server;
pub mod shell;
pub mod shown;
pub mod stdio;
pub mod tools;

// The sandbox crate's parts under the names `src/` used before they moved there (issue 19
// moves the callers next; these shims keep that move from touching every file at once).
#[cfg(target_os = "linux")]
pub use hands_sandbox::launcher as sandbox;
pub use hands_sandbox::{masks, netns, probe, profiles};

/// The approvals store lives with the gate; the old path stays for its many callers.
pub use gate::approvals;
