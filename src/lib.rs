//! The `hands` daemon as a library: every layer of the binary, so tests can drive a
//! `HandsServer` in process and `src/main.rs` stays one line.

// Unit tests make and read their fixtures by path and spawn what they test against; the
// lib target itself is checked without this (clippy.toml, SPEC §11).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod audit;
pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod dashboard;
pub mod errors;
pub mod gate;
pub mod lock;
pub mod needs;
pub mod netgate;
pub mod registry;
pub mod server;
pub mod shell_mcp;
pub mod shown;
pub mod tools;
pub mod transport;

// The sandbox crate's parts under the names `src/` used before they moved there (issue 19
// moves the callers next; these shims keep that move from touching every file at once).
#[cfg(target_os = "linux")]
pub use hands_sandbox::launcher as sandbox;
pub use hands_sandbox::{masks, netns, probe, profiles};
// tools-shell lives in hands-shell; `crate::shell` names its daemon end (src/shell_mcp.rs), so
// callers read as before.
pub use shell_mcp as shell;

/// The approvals store lives with the gate; the old path stays for its many callers.
pub use gate::approvals;
