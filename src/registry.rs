//! The tool registry: every published tool as one [`Entry`] — what `tools/list` shows, its
//! module and action class, and its handler — built from the modules' catalogues
//! (`hands_fs::catalogue`, `hands_git::catalogue`, `hands_shell::catalogue` through
//! `src/shell_mcp.rs`).
//! A call is routed by looking its name up here; there is no dispatch to keep in step with
//! the catalogue, so a tool cannot be sent to another tool's code.
//!
//! [`Registrar`] is the rmcp-typed adapter of [`hands_tool::Register`]: the module crates pass
//! each tool's spec with the function implementing it, and the parameter and output types of
//! that function become the published schemas (rmcp's `schema_for_type`/`schema_for_output`).
//!
//! Tools from outside the modules come in through the same [`Entry`]: `Daemon::with_tools`
//! adds them to the modules' (`tests/conformance` adds the MCP conformance suite's scenario
//! tools so, as [`Handler::Mcp`] tools).

mod portable;

use crate::config::{ActionClass, ModuleId};
use crate::errors::{
    Answer, Denial, ToolFailure, internal_failure, invalid_arguments, module_error,
};
use crate::gate::Refusal;
use crate::gate::approvals::Approvals;
pub use crate::gate::approvals::SealError;
use hands_tool::{Capped, Class, Hints, Output, Params, Register, Run, Spec};
use rmcp::handler::server::tool::{schema_for_output, schema_for_type};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ResourceContents, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A handler's pending answer.
pub type Reply = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// Runs one call that the gate allowed: the arguments as sent, and who waits for it.
pub type CallFn = Arc<dyn Fn(JsonObject, hands_shell::Caller) -> Reply + Send + Sync>;

/// A tool's phase before the gate: the arguments as sent and the calling client's identity,
/// refused or prepared ([`Checked`]).
pub type CheckFn = Arc<dyn Fn(JsonObject, Arc<str>) -> Pending + Send + Sync>;

/// The pending verdict of a tool's phase before the gate.
pub type Pending = Pin<Box<dyn Future<Output = Checked> + Send>>;

/// What a published tool runs.
#[derive(Clone)]
pub enum Handler {
    /// Parses the arguments and runs the tool.
    Call(CallFn),
    /// Looks at the call before the gate (tools-shell's `Shell::prepare`: a wall missing in
    /// `enforce`, `run`'s and `os-*`'s allowlist, the widening `needs` asks for, a widened
    /// session typed into, a tmux session that is not the caller's), and prepares what runs
    /// once the gate allows.
    Checked(CheckFn),
    /// A tool that speaks MCP itself: once the gate allows the call (judged on its arguments
    /// as sent), it is given the request whole, with its connection and the gate's [`Seal`],
    /// and answers it — an input-required result, a request to the client, progress. No
    /// caller, no audit record of its outcome: for tools that test the protocol, such as the
    /// MCP conformance suite's scenario tools (`tests/conformance`), never a module's tool.
    Mcp(McpFn),
}

/// Serves one call of a [`Handler::Mcp`] tool that the gate allowed.
pub type McpFn = Arc<dyn Fn(McpCall) -> McpReply + Send + Sync>;

/// A [`Handler::Mcp`] tool's pending answer.
pub type McpReply = Pin<Box<dyn Future<Output = Result<CallToolResponse, McpError>> + Send>>;

/// One call of a [`Handler::Mcp`] tool: the request as the client sent it (its
/// `requestState` and `inputResponses` are the tool's own), the connection it came on, and the
/// gate's seal for the tool's own state.
pub struct McpCall {
    pub request: CallToolRequestParams,
    pub context: RequestContext<RoleServer>,
    pub seal: Seal,
}

/// The gate's seal, for a tool's own `requestState`: the codec, key, client binding and
/// lifetime of the gate's own questions, so a state sealed for one client opens for no other,
/// and a tampered or expired one for nobody.
pub struct Seal {
    approvals: Arc<Approvals>,
    client: Arc<str>,
}

impl Seal {
    pub(crate) fn new(approvals: Arc<Approvals>, client: Arc<str>) -> Seal {
        Seal { approvals, client }
    }

    /// `value`, sealed for this connection's client.
    pub fn seal<T: Serialize>(&self, value: &T) -> Result<String, SealError> {
        self.approvals.seal_for(&self.client, value)
    }

    /// A state the client echoed, opened: sealed by this daemon, for this client, in time.
    pub fn open<T: DeserializeOwned>(&self, state: &str) -> Result<T, SealError> {
        self.approvals.open_for(&self.client, state)
    }
}

impl Handler {
    /// The phase before the gate of one call with `args` by `client`; a plain
    /// [`Handler::Call`] is prepared as it is.
    pub async fn check(&self, args: JsonObject, client: Arc<str>) -> Checked {
        match self {
            Handler::Call(call) => Checked::call(call, args),
            Handler::Checked(check) => check(args, client).await,
            // `src/server.rs` hands these the request whole, never through here.
            Handler::Mcp(_) => Checked::Ready(Ready {
                shown: JsonObject::new(),
                confirm: false,
                run: Box::new(|_| {
                    let e = "a tool that speaks MCP itself is served whole".to_string();
                    Box::pin(async move { Answer::plain(crate::errors::tool_error(e)) })
                }),
            }),
        }
    }
}

/// A call after its tool's phase before the gate.
pub enum Checked {
    /// Refused before anyone is asked; `shown` is added to the arguments the audit record
    /// carries (`run`'s and `os-*`'s full argv).
    Refused { why: Refusal, shown: JsonObject },
    /// For the gate to judge, and to run if it allows.
    Ready(Ready),
}

impl Checked {
    /// `call` with `args` as sent: nothing to add, nothing to confirm.
    pub fn call(call: &CallFn, args: JsonObject) -> Checked {
        let call = call.clone();
        Checked::Ready(Ready {
            shown: JsonObject::new(),
            confirm: false,
            run: Box::new(move |caller| call(args, caller)),
        })
    }
}

/// A call prepared before the gate.
pub struct Ready {
    /// Added to the arguments the person asked sees and the audit record keeps (`run`'s and
    /// `os-*`'s full argv and the binary it resolved to; a widening as checked, with the
    /// identity of each folder it grants).
    pub shown: JsonObject,
    /// Only a person's yes for this one run lets it run, whatever `[trust]` says.
    pub confirm: bool,
    /// Runs it, given who waits for it.
    pub run: Box<dyn FnOnce(hands_shell::Caller) -> Reply + Send>,
}

/// One published tool.
#[derive(Clone)]
pub struct Entry {
    /// As `tools/list` shows it.
    pub tool: Tool,
    pub module: ModuleId,
    pub class: ActionClass,
    pub handler: Handler,
}

impl Entry {
    /// An entry for `spec` whose parameters are `P` and whose output is `O`.
    pub fn new<P, O>(module: ModuleId, spec: &Spec, handler: Handler) -> Entry
    where
        P: schemars::JsonSchema + 'static,
        O: schemars::JsonSchema + 'static,
    {
        let tool = published::<P, O>(spec.name, spec.title, spec.description, spec.hints);
        Entry { tool, module, class: class_of(spec.class), handler }
    }

    pub fn name(&self) -> &str {
        self.tool.name.as_ref()
    }
}

/// A tool as `tools/list` shows it: its name, title, description and annotations, the schema
/// of its parameters `P`, and that of its output `O` with the `denied` list. The one place an
/// rmcp [`Tool`] is made: for a catalogue's [`Spec`] ([`Entry::new`]) and for a tool made from
/// the configuration (tools-shell's `os-*`, whose name and text are not `'static`).
pub fn published<P, O>(
    name: impl Into<Cow<'static, str>>,
    title: &str,
    description: impl Into<Cow<'static, str>>,
    hints: Hints,
) -> Tool
where
    P: schemars::JsonSchema + 'static,
    O: schemars::JsonSchema + 'static,
{
    let mut input = (*schema_for_type::<P>()).clone();
    portable::rewrite(&mut input, portable::Side::Input);
    Tool::new_with_raw(name, Some(description.into()), Arc::new(input))
        .with_title(title)
        .with_raw_output_schema(output_schema::<O>())
        .with_annotations(annotations(title, hints))
}

/// The gate's class of a catalogue's class.
pub(crate) fn class_of(c: Class) -> ActionClass {
    match c {
        Class::Read => ActionClass::Read,
        Class::Write => ActionClass::Write,
        Class::External => ActionClass::External,
    }
}

/// `O`'s output schema, with the optional `denied` list every refusal carries.
fn output_schema<O: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = (*schema_for_output::<O>()).clone();
    let denied = serde_json::json!({
        "description": "Only on a refusal (isError true): what was blocked, by which layer, \
                        and what a person can do.",
        "type": "array",
        "items": schemars::schema_for!(Denial),
    });
    if let Some(serde_json::Value::Object(props)) = schema.get_mut("properties") {
        props.insert("denied".into(), denied);
    }
    portable::rewrite(&mut schema, portable::Side::Output);
    Arc::new(schema)
}

/// MCP's annotations for `hints`, titled.
fn annotations(title: &str, hints: Hints) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(hints.read_only)
        .destructive(hints.destructive)
        .idempotent(hints.idempotent)
        .open_world(hints.open_world)
}

/// Collects one module's catalogue into entries whose handlers hold the module's state.
pub struct Registrar<S> {
    module: ModuleId,
    state: Arc<S>,
    entries: Vec<Entry>,
}

impl<S> Registrar<S> {
    pub fn new(module: ModuleId, state: Arc<S>) -> Registrar<S> {
        Registrar { module, state, entries: Vec::new() }
    }

    /// The entries, in the order the catalogue registered them.
    pub fn into_entries(self) -> Vec<Entry> {
        self.entries
    }
}

impl<S, E> Register<S, E> for Registrar<S>
where
    S: Send + Sync + 'static,
    E: ToolFailure + Send + 'static,
{
    fn tool<P: Params, O: Output>(
        &mut self,
        spec: Spec,
        run: Run<S, P, O, E>,
        text: fn(&O) -> String,
    ) {
        let name = spec.name;
        let call = parsing(&self.state, name, move |state, params: P, _| {
            on_pool(state, params, name, run, text)
        });
        self.entries.push(Entry::new::<P, O>(self.module, &spec, Handler::Call(call)));
    }

    fn capped<P: Params + Clone, O: Output>(
        &mut self,
        spec: Spec,
        small: Capped<S, P, O, E>,
        whole: Run<S, P, O, E>,
        text: fn(&O) -> String,
    ) {
        let name = spec.name;
        let call = parsing(&self.state, name, move |state, params: P, _| {
            run_small(state, params, name, small, whole, text)
        });
        self.entries.push(Entry::new::<P, O>(self.module, &spec, Handler::Call(call)));
    }
}

/// A handler over a module's `state`: the arguments parsed as `P` (else the tool error that
/// says what is wrong with them, and nothing runs), then `go` with them and the caller.
pub fn parsing<S, P, F, Fut>(state: &Arc<S>, name: &'static str, go: F) -> CallFn
where
    S: Send + Sync + 'static,
    P: DeserializeOwned + Send + 'static,
    F: Fn(Arc<S>, P, hands_shell::Caller) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    let (state, go) = (state.clone(), Arc::new(go));
    Arc::new(move |args, caller| {
        let (state, go) = (state.clone(), go.clone());
        Box::pin(async move {
            match parse::<P>(args, name) {
                Ok(params) => go(state, params, caller).await,
                Err(e) => Answer::plain(e),
            }
        })
    })
}

/// Parses a tool's arguments, or the tool error that says what is wrong with them.
pub fn parse<P: DeserializeOwned>(args: JsonObject, name: &str) -> Result<P, CallToolResult> {
    serde_json::from_value(serde_json::Value::Object(args)).map_err(|e| invalid_arguments(name, &e))
}

/// A result's text, its text blocks joined by newlines.
pub fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A successful result: structured content plus its text mirror.
pub fn structured<O: Serialize>(out: &O, text: String, name: &str) -> CallToolResult {
    match serde_json::to_value(out) {
        Ok(v) => {
            let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
            r.structured_content = Some(v);
            r
        }
        Err(e) => crate::errors::tool_error(format!(
            "`{name}` produced a result that cannot be encoded: {e}"
        )),
    }
}

/// A file a result carries, as MCP's embedded resource: text as text, anything else as base64.
pub fn embedded(file: hands_tool::Attachment) -> ContentBlock {
    use base64::Engine;
    let hands_tool::Attachment { uri, mime, body } = file;
    let contents = match body {
        hands_tool::Body::Text(text) => ResourceContents::text(text, uri),
        hands_tool::Body::Bytes(bytes) => {
            let blob = base64::engine::general_purpose::STANDARD.encode(bytes);
            ResourceContents::blob(blob, uri)
        }
    };
    ContentBlock::resource(contents.with_mime_type(mime))
}

/// A call of `read` or `list_dir`, whose calls are mostly small. On the stdio daemon's one
/// runtime thread the call is first tried right there with `small`, capped at
/// [`hands_fs::INLINE_CAP`] bytes: a small call takes tens of microseconds, about what the hop
/// to a blocking thread and back costs. Over the cap it stops right after opening, and `whole`
/// runs on the blocking pool like every other call, so a large file or folder cannot hold up
/// the client's other calls. Over HTTP (many clients, a worker per core) the pool serves every
/// call.
async fn run_small<S, P, O, E>(
    state: Arc<S>,
    params: P,
    name: &'static str,
    small: Capped<S, P, O, E>,
    whole: Run<S, P, O, E>,
    text: fn(&O) -> String,
) -> Answer
where
    S: Send + Sync + 'static,
    P: Clone + Send + 'static,
    O: Serialize + Send + 'static,
    E: ToolFailure + Send + 'static,
{
    if hands_shell::service::on_one_thread() {
        let inline = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            small(&state, params.clone(), Some(hands_fs::INLINE_CAP))
        }));
        match inline {
            Ok(Ok(Some(out))) => return Answer::plain(structured(&out, text(&out), name)),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => return module_error(&e),
            Err(_) => return Answer::plain(internal_failure(name, "it panicked")),
        }
    }
    on_pool(state, params, name, whole, text).await
}

/// Runs `f` on a blocking thread and shapes its result: structured content plus its text
/// mirror, or the module's error through the error map.
async fn on_pool<S, P, O, E>(
    state: Arc<S>,
    params: P,
    name: &'static str,
    f: Run<S, P, O, E>,
    text: fn(&O) -> String,
) -> Answer
where
    S: Send + Sync + 'static,
    P: Send + 'static,
    O: Serialize + Send + 'static,
    E: ToolFailure + Send + 'static,
{
    let joined = tokio::task::spawn_blocking(move || f(&state, params)).await;
    match joined {
        Ok(Ok(out)) => Answer::plain(structured(&out, text(&out), name)),
        Ok(Err(e)) => module_error(&e),
        Err(e) => Answer::plain(internal_failure(name, &e.to_string())),
    }
}
