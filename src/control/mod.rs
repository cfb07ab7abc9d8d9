//! The control socket and what travels over it: the typed protocol every front end of a
//! person speaks ([`protocol`]), the one function that carries a person's action out
//! ([`act`], `Daemon::act`), the daemon's listener ([`socket`]) and the front ends' side
//! ([`client`]).

pub mod act;
pub mod client;
pub mod protocol;
pub mod socket;

pub use socket::{Control, start};

/// The primary socket's name in the state dir.
pub const SOCKET: &str = "control.sock";
/// The longest line accepted either way.
const MAX_LINE: u64 = 64 * 1024;
/// How long a peer has to send its request.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
