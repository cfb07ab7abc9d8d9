//! The control socket and what travels over it: the typed protocol every front end of a
//! person speaks ([`protocol`]), the one function that carries a person's action out
//! ([`act`], `Daemon::act`), the daemon's listener ([`socket`]) with `hands exec`'s runs
//! ([`exec`]), and the front ends' side ([`client`]).

pub mod act;
pub mod client;
pub mod exec;
pub mod protocol;
pub mod socket;

pub use protocol::SOCKET;
pub use socket::{Control, start};
