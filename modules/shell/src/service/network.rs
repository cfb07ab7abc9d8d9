//! The network by domain of the module's commands (SPEC §5.4): the proxy serving the module's
//! rules inside its network namespace, each command's (and tmux session's) ticket with it, and
//! the proxy variables a launch gets.

use super::Shell;
use crate::ShellError;
use hands_roots::lock;
use hands_sandbox::{launcher, netns};
use std::sync::{Arc, Mutex};

/// The network by domain of one module: its rules, the proxy serving them (made once the
/// daemon's gate exists), and the listeners in the namespace of the current holder.
pub(super) struct Network {
    pub(super) rules: hands_sandbox::proxy::Rules,
    pub(super) proxy: std::sync::OnceLock<Arc<hands_sandbox::proxy::Proxy>>,
    /// The ports (HTTP, SOCKS5) of the listeners in each holder's namespace (one a client).
    pub(super) listening: Mutex<std::collections::HashMap<netns::Process, (u16, u16)>>,
    /// The tickets of the tmux sessions, by name: a session's panes use its proxy variables
    /// for as long as it lives (dropped at `tmux_kill`, or when it is found gone).
    pub(super) sessions: Mutex<std::collections::HashMap<String, hands_sandbox::proxy::Ticket>>,
}

impl Shell {
    /// Gives the network by domain its gate (the daemon's approvals and audit log), which
    /// exist only after the modules are built. Without it, a proxied connection is refused.
    pub fn connect_network(&self, gate: Arc<dyn hands_sandbox::proxy::Gate>) {
        if let Some(n) = &self.network {
            let proxy = hands_sandbox::proxy::Proxy::new(
                n.rules.clone(),
                gate,
                hands_sandbox::proxy::Limits::default(),
            );
            let _ = n.proxy.set(proxy);
        }
    }

    /// Makes sure the proxy listens inside the namespace of `holder`, `client`'s (a new holder
    /// is a new namespace), and returns the ports.
    fn proxy_ports(
        &self,
        holder: netns::Process,
        client: &str,
    ) -> Result<Option<(u16, u16)>, ShellError> {
        let Some(n) = &self.network else { return Ok(None) };
        let Some(proxy) = n.proxy.get() else {
            return Err(ShellError::Failed("the network proxy is not ready (no gate)".into()));
        };
        let mut listening = lock(&n.listening);
        if let Some(ports) = listening.get(&holder) {
            return Ok(Some(*ports));
        }
        // The ports of holders that have ended are no use to anyone.
        listening.retain(|h, _| h.alive());
        let refuse = |e: std::io::Error| {
            ShellError::Failed(format!(
                "the network proxy could not listen in the module's network namespace: {e}"
            ))
        };
        let l =
            hands_sandbox::listen::acquire(&self.exe, holder.pid, holder.start).map_err(refuse)?;
        let (http, socks) = l.ports().map_err(refuse)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ShellError::Failed("the network proxy needs the daemon's runtime".into())
        })?;
        let _guard = runtime.enter();
        for (listener, is_http) in [(l.http, true), (l.socks, false)] {
            listener.set_nonblocking(true).map_err(refuse)?;
            let listener = tokio::net::TcpListener::from_std(listener).map_err(refuse)?;
            let proxy = Arc::clone(proxy);
            // Each client's listeners take only that client's tickets (decision 0106).
            let on: Arc<str> = client.into();
            if is_http {
                runtime.spawn(proxy.serve_http(listener, on));
            } else {
                runtime.spawn(proxy.serve_socks(listener, on));
            }
        }
        listening.insert(holder, (http, socks));
        Ok(Some((http, socks)))
    }

    /// Whether commands reach the network through the proxy (`network` by domain), the only
    /// way a `needs.network` grant can be carried.
    pub fn network_proxied(&self) -> bool {
        self.network.is_some() && self.netns.is_some()
    }

    /// A command's ticket with the proxy and the spec carrying its proxy variables; the spec
    /// unchanged without the network by domain.
    pub(crate) fn with_proxy(
        &self,
        mut spec: launcher::Spec,
        label: &str,
        client: &str,
        granted: &[String],
    ) -> Result<(launcher::Spec, Option<hands_sandbox::proxy::Ticket>), ShellError> {
        // `needs.network` a person approved for this call (`crate::needs`): the ticket's own
        // allow entries. Without the proxy nothing could carry them: refused, not ignored.
        if !granted.is_empty() && !self.network_proxied() {
            return Err(ShellError::Failed(crate::needs::NO_PROXY.into()));
        }
        let (Some(n), Some(netns)) = (&self.network, &self.netns) else { return Ok((spec, None)) };
        let holder = netns
            .holder(&super::client_key(client))
            .map_err(|e| ShellError::Failed(format!("{e:#}")))?;
        let Some((http, socks)) = self.proxy_ports(holder, client)? else {
            return Ok((spec, None));
        };
        let Some(proxy) = n.proxy.get() else { return Ok((spec, None)) };
        let asker =
            hands_sandbox::proxy::Asker { command: label.to_string(), client: client.to_string() };
        let ticket = proxy.ticket(asker).map_err(|e| {
            ShellError::Failed(format!("the network proxy could not issue a ticket: {e}"))
        })?;
        let entries: Result<Vec<hands_sandbox::proxy::Entry>, _> =
            granted.iter().map(|g| g.parse()).collect();
        ticket.grant(entries.map_err(|e| ShellError::Failed(format!("needs.network: {e}")))?);
        for (k, v) in ticket.env(http, socks) {
            spec.set_env(k, v);
        }
        Ok((spec, Some(ticket)))
    }

    /// Keeps a tmux session's ticket while the session lives (a new one replaces the old).
    pub(crate) fn keep_session_ticket(
        &self,
        session: &str,
        ticket: Option<hands_sandbox::proxy::Ticket>,
    ) {
        if let (Some(n), Some(t)) = (&self.network, ticket) {
            lock(&n.sessions).insert(session.into(), t);
        }
    }

    /// Forgets what the daemon holds of an ended tmux session: its ticket (its token names no
    /// command any more) and its report channel.
    pub(crate) fn end_session_state(&self, session: &str) {
        // A client command's sandbox made ready binds the session's socket folder.
        self.ready_tmux.discard();
        self.end_session_walls(session);
        if let Some(n) = &self.network {
            lock(&n.sessions).remove(session);
        }
    }

    /// The connections the proxy refused a tmux session since the last take (`None` without
    /// the network by domain, or without the session's ticket).
    pub(crate) fn session_ticket_denied(
        &self,
        session: &str,
    ) -> Option<Vec<hands_sandbox::proxy::Denial>> {
        let n = self.network.as_ref()?;
        lock(&n.sessions).get(session).map(|t| t.take_denied())
    }
}
