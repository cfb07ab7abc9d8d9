//! The `hands` daemon as a library: every layer of the binary, so tests can drive a
//! `HandsServer` in process and `src/main.rs` stays one line.

// The lib target itself is checked without this (clippy.toml, SPEC §11).
#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        reason = "unit tests make and read their fixtures by path and spawn what they test against"
    )
)]

pub mod audit;
pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod dashboard;
pub mod errors;
pub mod gate;
pub mod hangup;
pub mod link;
pub mod netgate;
pub mod registry;
pub mod relay;
pub mod runner;
pub mod server;
pub mod shell_mcp;
pub mod shown;
pub mod transport;
