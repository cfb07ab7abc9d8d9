//! The `hands` daemon as a library: every layer of the binary, so tests can drive a
//! `HandsServer` in process and `src/main.rs` stays one line.

// Unit tests make and read their fixtures by path and spawn what they test against; the
// lib target itself is checked without this (clippy.toml, SPEC §11).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod approvals;
pub mod audit;
pub mod cli;
pub mod config;
pub mod control;
pub mod dashboard;
pub mod exec;
pub mod hangups;
pub mod http;
pub mod masks;
pub mod netgate;
pub mod netns;
pub mod probe;
pub mod profiles;
pub mod report;
#[cfg(target_os = "linux")]
pub mod sandbox;
pub mod server;
pub mod shell;
pub mod shown;
pub mod stdio;
pub mod tools;
