//! The MCP server: [`HandsServer`], the rmcp handler of one connection. It lists the
//! registry's tools and runs each call through the trust gate (`src/gate/`), the tool's
//! handler (`src/registry.rs`) and the audit log; the [`Daemon`] it serves from is built once in
//! `src/daemon.rs`.

use crate::config::ActionClass;
use crate::errors::{Answer, refused, tool_error, unknown_tool};
use crate::gate::{Asker, Call, Refusal, Retry, Verdict};
use crate::registry::{Checked, Entry, Handler, McpCall, McpFn, Seal, text_of};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

pub use crate::daemon::{Daemon, absolute, git_agent_socket, policy_lists};

/// The rmcp handler of one connection.
#[derive(Clone)]
pub struct HandsServer {
    daemon: Arc<Daemon>,
    /// Who is connected: `stdio`, the `name` of an HTTP client's token, or `runner:<agent>` for
    /// an agent's session over a runner's link. It is the identity approvals and the audit log
    /// record.
    client: Arc<str>,
    /// Whether a person may be asked through this client (as it declared, SPEC §6); `false` for
    /// a runner's agents under `approvals = "local"`: their questions are parked for the person
    /// at this machine, whatever their client declared.
    asks_client: bool,
    /// Standing *session* permissions of this connection: (module, tool, epoch granted in).
    session: Arc<Mutex<HashSet<(String, String, u64)>>>,
    /// Cancelled when this connection's client has gone (the stdio transport tells): its
    /// running commands die at once.
    gone: tokio_util::sync::CancellationToken,
}

impl HandsServer {
    pub fn new(daemon: Arc<Daemon>, client: &str) -> Self {
        HandsServer {
            daemon,
            client: Arc::from(client),
            asks_client: true,
            session: Default::default(),
            gone: Default::default(),
        }
    }

    /// The handler of one agent session over a runner's link (`src/runner`): identity
    /// `runner:<agent>`, asked through its client only when `asks_client`.
    pub fn for_runner(daemon: Arc<Daemon>, client: &str, asks_client: bool) -> Self {
        HandsServer { asks_client, ..HandsServer::new(daemon, client) }
    }

    /// The token that ends this connection's commands when cancelled.
    pub fn gone(&self) -> tokio_util::sync::CancellationToken {
        self.gone.clone()
    }

    /// The connected client's identity (`stdio` or an HTTP client's configured name).
    pub fn client(&self) -> &str {
        &self.client
    }

    /// The gate, the call, and its audit record (SPEC §8): every write- and external-class
    /// call and every call that does not succeed is recorded and fsynced before its result is
    /// returned; a read-class success is not recorded.
    async fn audited(
        &self,
        def: &Entry,
        args: JsonObject,
        retry: Retry,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let mut arguments = args.clone();
        // The tool's own phase before the gate (`src/registry.rs`): what it refuses before
        // anyone is asked, and what the person's question and the record carry besides the
        // arguments as sent (`run`'s full argv and the binary it resolved to; a widening as
        // checked, which is what the run gets).
        let (ready, before) = match def.handler.check(args, self.client.clone()).await {
            Checked::Ready(mut ready) => {
                arguments.extend(std::mem::take(&mut ready.shown));
                (Some(ready), None)
            }
            Checked::Refused { why, shown } => {
                arguments.extend(shown);
                (None, Some(why))
            }
        };
        let arguments = serde_json::Value::Object(arguments);
        let confirm = ready.as_ref().is_some_and(|r| r.confirm);
        let verdict = match self.verdict(def, &arguments, before, confirm, retry, ctx).await {
            // Not decided yet: the client asks its person and retries.
            Verdict::Ask(input) => return CallToolResponse::InputRequired(input),
            decided => decided,
        };
        let answer = match (&verdict, ready) {
            (Verdict::Ask(_), _) => return tool_error("the gate has not decided".into()).into(),
            (Verdict::Deny { why, .. }, _) => Answer {
                result: refused(why.message.clone(), vec![why.denial.clone()]),
                refused: true,
            },
            (Verdict::Allow { .. }, Some(ready)) => {
                // A command's network question may go to this client while the call waits
                // (netgate.rs) — not to a runner's relay under `approvals = "local"`.
                let netgate = self.daemon.netgate().filter(|_| self.asks_client);
                (ready.run)(crate::shell_mcp::caller(ctx, &self.gone, self.client(), netgate)).await
            }
            (Verdict::Allow { .. }, None) => Answer::plain(tool_error(format!(
                "`{}` was refused before the gate, which allowed it",
                def.tool.name
            ))),
        };
        let Answer { result, refused } = answer;
        self.recorded(def, arguments, &verdict, result, refused).await
    }

    /// The audit record of a decided call (SPEC §8), fsynced before its result is returned:
    /// every write- and external-class call and every call that does not succeed; a read-class
    /// success is not recorded. `refused`: the tool itself refused (its first line says why).
    async fn recorded(
        &self,
        def: &Entry,
        arguments: serde_json::Value,
        verdict: &Verdict,
        result: CallToolResult,
        refused: bool,
    ) -> CallToolResponse {
        let Some((decision, decided_by)) = verdict.recorded() else { return result.into() };
        let failed = result.is_error == Some(true);
        if def.class == ActionClass::Read && !failed {
            return result.into();
        }
        let first_line = |r: &CallToolResult| text_of(r).lines().next().unwrap_or("").to_string();
        // The gate's refusal in full; a module's refusal (its error's own `is_refusal`) and a
        // plain failure by their first line.
        let outcome = match (verdict, refused, failed) {
            (Verdict::Deny { why, .. }, _, _) => format!("refused: {}", why.message),
            (_, true, _) => format!("refused: {}", first_line(&result)),
            (_, false, true) => format!("error: {}", first_line(&result)),
            (_, false, false) => "ok".to_string(),
        };
        let entry = crate::audit::Entry {
            client: self.client().to_string(),
            module: def.module.name().to_string(),
            tool: def.tool.name.to_string(),
            class: def.class.to_string(),
            arguments,
            decision,
            decided_by,
            outcome,
            result: result.structured_content.as_ref().and_then(crate::audit::facts),
        };
        let audit = self.daemon.audit.clone();
        let written = tokio::task::spawn_blocking(move || audit.append(&entry)).await;
        self.daemon.audit.settle_later();
        match written {
            Ok(Ok(_)) => result,
            Ok(Err(e)) => self.unaudited(def, &result, &e.to_string()),
            Err(e) => self.unaudited(def, &result, &e.to_string()),
        }
        .into()
    }

    /// A call of a tool that speaks MCP itself ([`Handler::Mcp`]): the gate first, on the
    /// arguments as sent; then the tool, given the request whole and the gate's seal.
    async fn served_whole(
        &self,
        def: &Entry,
        serve: &McpFn,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
        let verdict = self.verdict(def, &arguments, None, false, Retry::default(), &context).await;
        let result = match &verdict {
            Verdict::Allow { .. } => {
                let seal = Seal::new(self.daemon.approvals.clone(), self.client.clone());
                match serve(McpCall { request, context, seal }).await? {
                    CallToolResponse::Complete(result) => result,
                    // Not finished yet: recorded when it is.
                    pending => return Ok(pending),
                }
            }
            Verdict::Deny { why, .. } => refused(why.message.clone(), vec![why.denial.clone()]),
            Verdict::Ask(input) => return Ok(CallToolResponse::InputRequired(input.clone())),
        };
        Ok(self.recorded(def, arguments, &verdict, result, false).await)
    }

    /// The gate's verdict on a call of `def` by this connection's client.
    async fn verdict(
        &self,
        def: &Entry,
        arguments: &serde_json::Value,
        before: Option<Refusal>,
        confirm: bool,
        retry: Retry,
        ctx: &RequestContext<RoleServer>,
    ) -> Verdict {
        let call = Call {
            tool: def.tool.name.as_ref(),
            module: def.module,
            class: def.class,
            arguments,
            confirm,
        };
        let d = &self.daemon;
        let waits = crate::shell_mcp::caller(ctx, &self.gone, self.client(), None);
        let asker = Asker {
            waits: &waits,
            client: self.client(),
            asks_client: self.asks_client,
            session: &self.session,
            config: &d.config,
            approvals: &d.approvals,
            audit: &d.audit,
            stopped: d.brake(),
            stateless_sessions: d.stateless_sessions(),
            resolver: d.resolver(def.module).map(|r| &**r),
        };
        crate::gate::decide(&asker, &call, before, retry, ctx).await
    }

    /// The call happened (or was refused) but its record could not be written: the client
    /// learns both, and the daemon's log says so.
    fn unaudited(&self, def: &Entry, result: &CallToolResult, why: &str) -> CallToolResult {
        let path = self.daemon.audit.path().display().to_string();
        tracing::error!(tool = %def.tool.name, "cannot write the audit log {path}: {why}");
        let mut content = result.content.clone();
        content.push(ContentBlock::text(format!(
            "hands could not write this call's audit record to {path} ({why}); the result above \
             stands, but a person should fix the audit log (disk space, permissions)"
        )));
        CallToolResult::error(content)
    }
}

/// What the server says of itself (`initialize`, `server/discover`); the relay says the same
/// for the runners it serves.
pub fn info() -> ServerConfig {
    ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        .with_server_info(
            Implementation::new("hands", env!("CARGO_PKG_VERSION"))
                .with_title("hands — confined files, shell and git for coding agents"),
        )
        .with_instructions(
            "Tools act only beneath the roots the person declared; paths may be absolute \
             (under a root) or relative to the first root. Refusals say why and what to do.",
        )
}

/// The answer to a method this server does not know: its name cut for display (rmcp's own
/// echoes it whole: a 3 MB name came back and was logged whole, found by session 40's attack
/// pass).
pub(crate) fn unknown_method(method: &str) -> McpError {
    let shown = hands_roots::shown(method);
    McpError::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!("unknown method {shown}: this server answers the MCP methods only"),
        None,
    )
}

impl ServerHandler for HandsServer {
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, McpError> {
        Err(unknown_method(&request.method))
    }

    fn get_info(&self) -> ServerConfig {
        let info = info();
        // In a container the commands' walls differ from the host's: the agent is told which
        // before its first command (decision 0071).
        match self.daemon.container_line() {
            Some(line) => {
                let said = info.instructions.clone().unwrap_or_default();
                info.with_instructions(format!("{said} Commands run in {line}"))
            }
            None => info,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            self.daemon.tools().iter().map(|d| d.tool.clone()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(def) = self.daemon.tool(request.name.as_ref()) else {
            return Err(unknown_tool(request.name.as_ref()));
        };
        if let Handler::Mcp(serve) = &def.handler {
            return self.served_whole(def, serve, request, context).await;
        }
        let retry = Retry { state: request.request_state, responses: request.input_responses };
        let args = request.arguments.unwrap_or_default();
        Ok(self.audited(def, args, retry, &context).await)
    }
}
