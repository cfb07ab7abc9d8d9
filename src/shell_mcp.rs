//! tools-shell's end in the daemon: builds the module's [`Shell`] from `daemon.toml`, and turns
//! an MCP request's context into the [`Caller`] a command or tmux wait runs for (its
//! cancellation, its progress notifications, the client's name). The commands, sessions and
//! their registry are `hands_shell`'s.

use crate::config::{Config, Grant, ModuleCfg, ShellSettings};
use hands_roots::Resolver;
pub use hands_shell::running::RunningCommand;
pub use hands_shell::service::{Checked, Tee};
pub use hands_shell::{Caller, Progress, Refusal, Shell};
use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The module's [`Shell`], from its `[[builtins]]` entry, its validated settings and the
/// daemon's sandbox settings.
pub fn new(
    m: &ModuleCfg,
    settings: &ShellSettings,
    config: &Config,
    resolver: Arc<Resolver>,
    lists: &hands_roots::PolicyLists,
) -> anyhow::Result<Shell> {
    Shell::new(hands_shell::service::Setup {
        module: hands_shell::service::Module {
            name: m.id.name().to_string(),
            roots: m.roots.clone(),
            network: m.has(Grant::Network),
        },
        settings,
        run_as: config.run_as.as_deref(),
        resolver,
        lists,
        state_dir: &config.state_dir,
        enforce: config.sandbox_mode == crate::config::SandboxMode::Enforce,
    })
}

/// Progress notifications to the MCP client that sent a progress token.
struct Notify {
    peer: rmcp::Peer<RoleServer>,
    token: ProgressToken,
}

impl Progress for Notify {
    fn notify(&self, secs: f64, message: String) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let note =
                ProgressNotificationParam::new(self.token.clone(), secs).with_message(message);
            // A client that cannot take a notification still gets its result.
            let _ = self.peer.notify_progress(note).await;
        })
    }
}

/// An MCP request of `client`: cancelled by `notifications/cancelled`, a disconnect, `gone`
/// (the connection's client has gone) or, over HTTP, the call's own hangup token
/// (src/hangups.rs); progress to the client when it sent a token.
pub fn caller(ctx: &RequestContext<RoleServer>, gone: &CancellationToken, client: &str) -> Caller {
    let mut caller = Caller::new(client, ctx.ct.clone()).cancelled_by(gone.clone());
    let hangup = ctx
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<crate::hangup::Hangup>())
        .map(|h| h.0.clone());
    if let Some(h) = hangup {
        caller = caller.cancelled_by(h);
    }
    if let Some(token) = ctx.meta.get_progress_token() {
        caller = caller.with_progress(Box::new(Notify { peer: ctx.peer.clone(), token }));
    }
    // Runs in the call's task, where the server set the client that can be asked (netgate.rs).
    caller.with_asks(Box::new(|token| {
        crate::netgate::ClientAsks::register(token).map(|g| Box::new(g) as Box<dyn Send>)
    }))
}
