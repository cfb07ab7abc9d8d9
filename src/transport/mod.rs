//! How MCP reaches the daemon: stdio (one client, the default) and streamable HTTP (many
//! clients, each with its own token), and the watch on HTTP calls whose client hung up.

pub mod door;
pub mod hangups;
pub mod http;
pub mod http_setup;
pub mod stdio;
