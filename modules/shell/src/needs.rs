//! The one-run expansion a person approved for the call running now (SPEC §6; parsed and
//! checked by the daemon's `src/needs.rs`): what tools-shell adds to that one launch — each
//! `write` path a writable root of its spec, each `network` entry an allow rule of its ticket.

use std::path::PathBuf;

/// A parsed, checked expansion request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// `host` or `host:port`, lowercased (a port-less entry allows every port of the host).
    pub network: Vec<String>,
    /// Absolute, clean, existing paths with no link in them.
    pub write: Vec<PathBuf>,
}

tokio::task_local! {
    /// The expansion a person approved for the call running in this task: read by
    /// tools-shell when it builds the launch's spec and proxy ticket.
    pub static GRANTED: std::sync::Arc<Needs>;
}

/// The approved expansion of the call running now, if any.
pub fn granted() -> Option<std::sync::Arc<Needs>> {
    GRANTED.try_with(std::sync::Arc::clone).ok()
}

/// Why a `needs.network` cannot be granted by a module without the proxy.
pub const NO_PROXY: &str = "`needs.network` is refused: tools-shell's commands do not reach the \
     network through the proxy here (no `network` grant with network.mode = \"domain\"), so \
     nothing could carry a one-run host";
