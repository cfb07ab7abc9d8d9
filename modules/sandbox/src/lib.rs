//! The sandbox of `hands`: what confines the commands tools-shell starts. Today this crate
//! holds the network by domain ([`proxy`]); the launcher moves here next (SPEC §11).

#[cfg(target_os = "linux")]
pub mod listen;
#[cfg(target_os = "linux")]
pub mod proxy;
#[cfg(target_os = "linux")]
mod sys;
