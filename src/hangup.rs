//! A call's hangup: the token the HTTP transport fires when the call's client has gone
//! (`src/transport/hangups.rs` decides when), carried in the request's extensions to where the
//! call's `Caller` is built (`src/shell_mcp.rs`). It lives in the lowest layer so that the
//! transport and tools-shell's end both reach it without either using the other.

use tokio_util::sync::CancellationToken;

/// Fires when the call's client has gone. Travels in the HTTP request's extensions, which rmcp
/// hands to the handler as `http::request::Parts`.
#[derive(Clone, Debug)]
pub struct Hangup(pub CancellationToken);
