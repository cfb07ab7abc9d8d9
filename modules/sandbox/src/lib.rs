//! The sandbox of `hands`: what confines the commands tools-shell starts — the launcher and
//! its init ([`launcher`]), the module's network namespace ([`netns`]) and its proxy for the
//! network by domain ([`proxy`]), the walk that finds what to mask ([`masks`]), the probe that
//! shows which walls this machine gives ([`probe`]), and the policy lists ([`profiles`]).

#[cfg(target_os = "linux")]
pub mod launcher;
#[cfg(target_os = "linux")]
pub mod listen;
pub mod masks;
pub mod netns;
pub mod probe;
pub mod profiles;
#[cfg(target_os = "linux")]
pub mod proxy;
#[cfg(target_os = "linux")]
mod sys;
