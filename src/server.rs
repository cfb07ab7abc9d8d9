//! The MCP server: one [`Daemon`] (config, pinned roots, the tool catalogue) shared by every
//! connection, and [`HandsServer`], the rmcp handler that lists tools and dispatches calls
//! through the trust policy to the module crates.

use crate::config::{Config, ModuleId, TrustAction};
use crate::tools::{ToolDef, ToolKind};
use hands_fs::{FsError, ToolText};
use hands_roots::{Policy, PolicyLists, Resolver, RootSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Everything a connection needs, built once at startup.
pub struct Daemon {
    pub config: Config,
    fs: Option<Arc<Resolver>>,
    tools: Vec<ToolDef>,
}

/// Builds the compiled policy shared by every module's resolver.
pub fn policy_lists(config: &Config) -> PolicyLists {
    let home = crate::config::home_dir();
    PolicyLists {
        credentials: crate::profiles::credentials()
            .map(|c| crate::config::expand_tilde(c, home.as_deref()))
            .filter(|p| p.is_absolute())
            .collect(),
        deny: config.deny.clone(),
        secret_patterns: config.secret_patterns.clone(),
        secret_exceptions: crate::profiles::secret_exceptions().map(str::to_string).collect(),
        protected: crate::profiles::protected().map(str::to_string).collect(),
    }
}

impl Daemon {
    /// Pins every declared module's roots and assembles the tool catalogue.
    pub fn new(config: Config) -> anyhow::Result<Daemon> {
        let lists = policy_lists(&config);
        let mut fs = None;
        let mut tools = Vec::new();
        for m in &config.modules {
            if m.id != ModuleId::Fs {
                continue;
            }
            let specs: Vec<RootSpec> = m
                .roots
                .iter()
                .map(|r| RootSpec { path: r.path.clone(), writable: r.writable })
                .collect();
            let policy =
                Policy::new(&lists).map_err(|e| anyhow::anyhow!("sandbox.secret_patterns: {e}"))?;
            let resolver = Resolver::new(&specs, policy)
                .map_err(|e| anyhow::anyhow!("{}: {e}", m.id.name()))?;
            fs = Some(Arc::new(resolver));
            tools.extend(crate::tools::fs_tools());
        }
        Ok(Daemon { config, fs, tools })
    }

    pub fn tools(&self) -> &[ToolDef] {
        &self.tools
    }

    /// Modules that are declared but whose tools this version does not have yet.
    pub fn unavailable_modules(&self) -> Vec<ModuleId> {
        self.config.modules.iter().map(|m| m.id).filter(|id| *id != ModuleId::Fs).collect()
    }
}

/// The rmcp handler of one connection.
#[derive(Clone)]
pub struct HandsServer {
    daemon: Arc<Daemon>,
}

impl HandsServer {
    pub fn new(daemon: Arc<Daemon>) -> Self {
        HandsServer { daemon }
    }

    fn trust_for(&self, def: &ToolDef) -> TrustAction {
        self.daemon
            .config
            .modules
            .iter()
            .find(|m| m.id == def.module)
            .map(|m| m.trust.for_class(def.class))
            .unwrap_or(TrustAction::Deny)
    }

    async fn dispatch(&self, def: &ToolDef, args: JsonObject) -> CallToolResult {
        match self.trust_for(def) {
            TrustAction::Allow => {}
            TrustAction::Deny => {
                return tool_error(format!(
                    "`{}` is refused by policy: trust.{} = \"deny\" for {}; a person can change \
                     this in daemon.toml",
                    def.tool.name,
                    def.class,
                    def.module.name()
                ));
            }
            TrustAction::Ask => {
                // Fail closed: until a person can be asked, "ask" refuses.
                return tool_error(format!(
                    "`{}` needs a person's approval (trust.{} = \"ask\"), and this version cannot \
                     ask yet; a person can set trust.{} = \"allow\" for {} in daemon.toml",
                    def.tool.name,
                    def.class,
                    def.class,
                    def.module.name()
                ));
            }
        }
        let Some(resolver) = self.daemon.fs.clone() else {
            return tool_error(format!(
                "`{}` is not available: its module is not declared",
                def.tool.name
            ));
        };
        match def.kind {
            ToolKind::Read => run_fs(resolver, args, "read", hands_fs::read::read).await,
            ToolKind::Write => run_fs(resolver, args, "write", hands_fs::write::write).await,
            ToolKind::Edit => run_fs(resolver, args, "edit", hands_fs::edit::edit).await,
            ToolKind::ListDir => run_fs(resolver, args, "list_dir", hands_fs::list::list_dir).await,
            ToolKind::Glob => run_fs(resolver, args, "glob", hands_fs::search::glob).await,
            ToolKind::Grep => run_fs(resolver, args, "grep", hands_fs::search::grep).await,
        }
    }
}

fn tool_error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Parses the arguments, runs a file tool on a blocking thread and shapes its result.
async fn run_fs<P, O>(
    resolver: Arc<Resolver>,
    args: JsonObject,
    name: &'static str,
    f: fn(&Resolver, P) -> Result<O, FsError>,
) -> CallToolResult
where
    P: DeserializeOwned + Send + 'static,
    O: Serialize + ToolText + Send + 'static,
{
    let params: P = match serde_json::from_value(serde_json::Value::Object(args)) {
        Ok(p) => p,
        Err(e) => {
            return tool_error(format!(
                "invalid arguments for `{name}`: {e}; the tool's inputSchema lists its parameters"
            ));
        }
    };
    let joined = tokio::task::spawn_blocking(move || f(&resolver, params)).await;
    match joined {
        Ok(Ok(out)) => {
            let text = out.text();
            match serde_json::to_value(&out) {
                Ok(v) => {
                    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
                    r.structured_content = Some(v);
                    r
                }
                Err(e) => {
                    tool_error(format!("`{name}` produced a result that cannot be encoded: {e}"))
                }
            }
        }
        Ok(Err(e)) => tool_error(e.to_string()),
        Err(e) => {
            tracing::error!(tool = name, "tool task failed: {e}");
            tool_error(format!(
                "`{name}` failed internally; the server keeps serving — please retry"
            ))
        }
    }
}

impl ServerHandler for HandsServer {
    fn get_info(&self) -> ServerConfig {
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

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            self.daemon.tools.iter().map(|d| d.tool.clone()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(def) = self.daemon.tools.iter().find(|d| d.tool.name == request.name) else {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`; tools/list shows the tools this server publishes",
                    request.name
                ),
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        Ok(self.dispatch(def, args).await.into())
    }
}
