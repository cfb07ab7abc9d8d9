//! The sandbox of `hands`: what confines the commands tools-shell starts — the launcher and
//! its init ([`launcher`]), the module's network namespace ([`netns`]) and its proxy for the
//! network by domain ([`proxy`]), the walk that finds what to mask ([`masks`]), the probe that
//! shows which walls this machine gives ([`probe`]), the policy lists ([`profiles`]), and how
//! a checked path is opened again without being resolved by name ([`resolve`]).

// The lib target itself is checked without this (clippy.toml, SPEC §11).
#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        reason = "unit tests make and read their fixtures by path and spawn what they test against"
    )
)]

// Which unix sockets a network namespace holds, by their files (decision 0107).
#[cfg(target_os = "linux")]
pub mod bound;
#[cfg(target_os = "linux")]
pub mod launcher;
#[cfg(target_os = "linux")]
pub mod listen;
// Which container the daemon runs in, and the flags that give the full sandbox there.
pub mod container;
pub mod masks;
pub mod netns;
pub mod probe;
pub mod resolve;
// A work tree held still while the daemon's git works on it by name (decision 0083).
pub mod still;
// `hands doctor`'s version lines of the host's tmux and git, read in a sandbox of their own.
#[cfg(target_os = "linux")]
pub mod host;
pub mod profiles;
#[cfg(target_os = "linux")]
pub mod proxy;
#[cfg(target_os = "linux")]
mod sys;

pub use sys::set_env_while_single_threaded;
// libgit2's process-global options, for hands-git (decision 0072).
#[cfg(target_os = "linux")]
pub use sys::libgit2;
