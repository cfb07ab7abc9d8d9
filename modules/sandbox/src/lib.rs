//! The sandbox of `hands`: what confines the commands tools-shell starts. Today this crate
//! holds the network by domain ([`proxy`]); the launcher moves here next (SPEC §11).

// Unit tests make and read their fixtures by path and spawn what they test against; the
// lib target itself is checked without this (clippy.toml, SPEC §11).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

#[cfg(target_os = "linux")]
pub mod listen;
#[cfg(target_os = "linux")]
pub mod proxy;
#[cfg(target_os = "linux")]
mod sys;
