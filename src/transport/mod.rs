//! How MCP reaches the daemon: stdio (one client, the default) and streamable HTTP (many
//! clients, each with its own token or an OAuth access token), the watch on HTTP calls whose client hung up, and the caps
//! and timeouts every HTTP listener (the dashboard's too) holds its connections to.

pub mod conns;
pub mod hangups;
pub mod http;
pub mod http_setup;
pub mod mcp_door;
pub mod oauth;
pub mod shares;
pub mod stdio;
mod tally;
pub mod tls;
