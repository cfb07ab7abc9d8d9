//! The relay's MCP handler of one agent session (or one 2026-07-28 call) on one runner: rmcp's
//! streamable HTTP service runs it exactly as `hands serve --http` runs a `HandsServer`, and it
//! hands every request to the runner's `HandsServer` over the link and its answer back — the
//! runner decides everything. What the runner asks in the middle of a call (a person's
//! question, when its `approvals = "client"`) goes to the agent's client on that call's own
//! stream, and the client's answer back; progress comes the same way, and the agent's
//! cancellation (or hangup) goes to the runner, which stops the command.

use super::hub::{Delivery, Inbound, LinkSession, Runner};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage,
    ClientNotification, ClientRequest, DiscoverRequest, DiscoverRequestParams, DiscoverResult,
    GetMeta, InitializeRequest, InitializeRequestParams, InitializeResult, InputRequiredResult,
    ListToolsRequest, ListToolsResult, PaginatedRequestParams, RequestId, ServerConfig,
    ServerJsonRpcMessage,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// One handler: an agent's rmcp session at the relay, and the link session it opened.
pub struct Proxy {
    inner: Arc<Inner>,
}

struct Inner {
    runner: Arc<Runner>,
    agent: Arc<str>,
    session: Mutex<Option<Arc<LinkSession>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(s) = hands_roots::lock(&self.session).take() {
            s.close();
        }
    }
}

impl Proxy {
    pub fn new(runner: Arc<Runner>, agent: Arc<str>) -> Proxy {
        Proxy { inner: Arc::new(Inner { runner, agent, session: Mutex::default() }) }
    }

    /// The link session, opened at the first request (whose peer then carries the runner's
    /// questions that belong to no call).
    fn session(&self, ctx: &RequestContext<RoleServer>) -> Result<Arc<LinkSession>, McpError> {
        let mut slot = hands_roots::lock(&self.inner.session);
        if let Some(s) = slot.as_ref() {
            return Ok(s.clone());
        }
        let (tx, rx) = mpsc::channel(crate::link::MAX_QUEUED);
        let s = self
            .inner
            .runner
            .open(&self.inner.agent, tx)
            .map_err(|why| McpError::internal_error(why.to_string(), None))?;
        tokio::spawn(loose(s.clone(), rx, ctx.peer.clone()));
        *slot = Some(s.clone());
        Ok(s)
    }

    /// Sends `request` (with the context's `_meta`) and waits for its answer's `result`.
    async fn forward(
        &self,
        mut request: ClientRequest,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let session = self.session(ctx)?;
        *request.get_meta_mut() = ctx.meta.clone();
        let id = ctx.id.clone();
        let progress = ctx.meta.get_progress_token().and_then(|t| serde_json::to_value(t).ok());
        let mut rx = session.wait(&id, progress);
        let sent = session.send(&ClientJsonRpcMessage::request(request, id.clone()));
        if let Err(e) = sent {
            session.done(&id);
            return Err(McpError::internal_error(e.to_string(), None));
        }
        let hangup = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<crate::hangup::Hangup>())
            .map(|h| h.0.clone())
            .unwrap_or_default();
        loop {
            tokio::select! {
                m = rx.recv() => match m {
                    Some((Inbound::Answer(v), _held)) => {
                        session.done(&id);
                        return answer(v);
                    }
                    // Its bytes stay counted until the agent has been given it.
                    Some((Inbound::Request(v), _held)) => ask(&session, v, &ctx.peer).await,
                    Some((Inbound::Notification(v), held)) => notify(v, &held, &ctx.peer).await,
                    None => return Err(lost(&session)),
                },
                () = ctx.ct.cancelled() => return Err(cancel(&session, &id)),
                () = hangup.cancelled() => return Err(cancel(&session, &id)),
                () = session.ended.cancelled() => return Err(lost(&session)),
            }
        }
    }
}

/// The agent cancelled the call, or hung up: the runner is told to stop it.
fn cancel(session: &LinkSession, id: &RequestId) -> McpError {
    session.done(id);
    let note = serde_json::json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the agent cancelled the call"},
    });
    let _ = session.send(&note);
    McpError::internal_error("the call was cancelled", None)
}

fn lost(session: &LinkSession) -> McpError {
    let why = session.why();
    McpError::internal_error(
        if why.is_empty() {
            "the runner's session ended; the call's result was lost".to_string()
        } else {
            why
        },
        None,
    )
}

/// The runner's answer: its `result`, or its error as the agent's error.
fn answer(v: Value) -> Result<Value, McpError> {
    if let Some(e) = v.get("error") {
        return Err(serde_json::from_value::<McpError>(e.clone())
            .unwrap_or_else(|_| McpError::internal_error("the runner answered an error", None)));
    }
    Ok(v.get("result").cloned().unwrap_or(Value::Null))
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v).map_err(|e| {
        McpError::internal_error(
            format!("the runner's answer does not parse: {}", hands_roots::shown(&e.to_string())),
            None,
        )
    })
}

/// A question of the runner (a person asked through the client): put to the agent's client,
/// its answer sent back.
async fn ask(session: &LinkSession, v: Value, peer: &rmcp::Peer<RoleServer>) {
    let Ok(ServerJsonRpcMessage::Request(req)) = serde_json::from_value::<ServerJsonRpcMessage>(v)
    else {
        return;
    };
    let reply = match peer.send_request(req.request).await {
        Ok(result) => ClientJsonRpcMessage::response(result, req.id),
        Err(e) => ClientJsonRpcMessage::error(
            McpError::internal_error(format!("the agent's client did not answer: {e}"), None),
            Some(req.id),
        ),
    };
    let _ = session.send(&reply);
}

/// The largest notification of a runner the relay forwards (progress, a log line). Once handed
/// to rmcp a message waits in its per-call channel and the agent's connection, outside what the
/// relay counts: a rogue runner's 15 MiB progress notes to an agent that did not read grew the
/// relay by ~280 MiB a session (found by the fifth attack pass). No progress note needs more.
const MAX_NOTIFICATION: usize = 64 << 10;

async fn notify(v: Value, held: &crate::relay::hub::Held, peer: &rmcp::Peer<RoleServer>) {
    if held.bytes() > MAX_NOTIFICATION {
        tracing::warn!(
            "relay: a runner's notification of {} bytes was dropped (at most {MAX_NOTIFICATION} \
             are forwarded)",
            held.bytes()
        );
        return;
    }
    if let Ok(ServerJsonRpcMessage::Notification(n)) =
        serde_json::from_value::<ServerJsonRpcMessage>(v)
    {
        let _ = peer.send_notification(n.notification).await;
    }
}

/// The runner's questions and notifications that belong to no call, for the session's life.
async fn loose(
    session: Arc<LinkSession>,
    mut rx: mpsc::Receiver<Delivery<Value>>,
    peer: rmcp::Peer<RoleServer>,
) {
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some((v, _held)) if v.get("id").is_some() => ask(&session, v, &peer).await,
                Some((v, held)) => notify(v, &held, &peer).await,
                None => return,
            },
            () = session.ended.cancelled() => return,
        }
    }
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        crate::server::info()
    }

    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, McpError> {
        Err(crate::server::unknown_method(&request.method))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        ctx.peer.set_peer_info(request.clone());
        let v = self
            .forward(ClientRequest::InitializeRequest(InitializeRequest::new(request)), &ctx)
            .await?;
        typed(v)
    }

    async fn discover(&self, ctx: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        let req = DiscoverRequest::new(DiscoverRequestParams::default());
        let v = self.forward(ClientRequest::DiscoverRequest(req), &ctx).await?;
        typed(v)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let req = ListToolsRequest { params: request, ..Default::default() };
        let v = self.forward(ClientRequest::ListToolsRequest(req), &ctx).await?;
        typed(v)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let v = self
            .forward(ClientRequest::CallToolRequest(CallToolRequest::new(request)), &ctx)
            .await?;
        if let Ok(r) = serde_json::from_value::<InputRequiredResult>(v.clone()) {
            return Ok(CallToolResponse::InputRequired(r));
        }
        Ok(CallToolResponse::Complete(typed::<CallToolResult>(v)?))
    }

    async fn on_initialized(&self, _ctx: NotificationContext<RoleServer>) {
        self.notify_runner(ClientNotification::InitializedNotification(Default::default()));
    }

    async fn on_roots_list_changed(&self, _ctx: NotificationContext<RoleServer>) {
        self.notify_runner(ClientNotification::RootsListChangedNotification(Default::default()));
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _ctx: NotificationContext<RoleServer>,
    ) {
        let n = rmcp::model::ProgressNotification::new(params);
        self.notify_runner(ClientNotification::ProgressNotification(n));
    }
}

impl Proxy {
    fn notify_runner(&self, n: ClientNotification) {
        let session = hands_roots::lock(&self.inner.session).clone();
        if let Some(s) = session {
            let _ = s.send(&ClientJsonRpcMessage::notification(n));
        }
    }
}
