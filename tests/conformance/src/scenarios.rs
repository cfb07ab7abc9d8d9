//! What the scenario-specific tools of the official MCP conformance suite do (their catalogue
//! is `lib.rs`). The daemon's gate has judged each call before it comes here
//! (`hands::registry::Handler::Mcp`): the brake, the audit check, the policy.
//!
//! What they ask of a client follows the same rules as the gate's own questions: a request
//! only for a capability the client declared ([`Reach`] for elicitation, the declared
//! `sampling`/`roots` otherwise, read per request as the gate reads them), and every
//! `requestState` sealed with the gate's own codec, key, client binding and lifetime
//! ([`Seal`]). A state that does not open is a JSON-RPC error.

use hands::errors::tool_error;
use hands::gate::approvals::Reach;
use hands::registry::{McpCall, Seal};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, InputRequest, InputRequiredResult,
    InputResponses, ProgressNotificationParam,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A 1×1 red PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
/// A WAV file with no samples (8 kHz, mono, 8 bit).
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";

/// What a conformance tool's `requestState` carries, sealed.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    tool: String,
    round: u32,
    nonce: String,
}

/// One input a tool needs from the client.
#[derive(Clone, Copy)]
enum Need {
    Elicit(&'static str, &'static str, &'static str, &'static str),
    Sample(&'static str, u32),
    Roots,
}

impl Need {
    fn request(self) -> Result<InputRequest, McpError> {
        let v = match self {
            Need::Elicit(_, message, field, ty) => json!({
                "method": "elicitation/create",
                "params": { "message": message, "requestedSchema": { "type": "object",
                    "properties": { field: { "type": ty } }, "required": [field] } }
            }),
            Need::Sample(text, max) => json!({
                "method": "sampling/createMessage",
                "params": { "messages": [{ "role": "user",
                    "content": { "type": "text", "text": text } }], "maxTokens": max }
            }),
            Need::Roots => json!({ "method": "roots/list", "params": {} }),
        };
        serde_json::from_value(v).map_err(|e| {
            McpError::internal_error(format!("cannot build an input request: {e}"), None)
        })
    }

    fn key(self) -> &'static str {
        match self {
            Need::Elicit(key, ..) => key,
            Need::Sample(..) => "capital_question",
            Need::Roots => "client_roots",
        }
    }

    /// Whether the client declared what this request needs (SPEC §6: nothing is sent for a
    /// capability the client did not declare).
    fn declared(self, caps: Option<&ClientCapabilities>) -> bool {
        match self {
            Need::Elicit(..) => Reach::of(caps) == Reach::Form,
            Need::Sample(..) => caps.is_some_and(|c| c.sampling.is_some()),
            Need::Roots => caps.is_some_and(|c| c.roots.is_some()),
        }
    }

    /// Whether `answer` is a well-formed answer to this request.
    fn answered_by(self, answer: &Value) -> bool {
        match self {
            Need::Elicit(_, _, field, _) => {
                answer.get("action").and_then(Value::as_str) == Some("accept")
                    && answer.get("content").and_then(|c| c.get(field)).is_some()
            }
            Need::Sample(..) => answer.get("content").is_some(),
            Need::Roots => answer.get("roots").is_some_and(Value::is_array),
        }
    }
}

fn text(t: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![rmcp::model::ContentBlock::text(t)])
}

fn result_of(v: Value) -> Result<CallToolResponse, McpError> {
    serde_json::from_value::<CallToolResult>(v)
        .map(Into::into)
        .map_err(|e| McpError::internal_error(format!("cannot build the result: {e}"), None))
}

fn missing(what: &str) -> McpError {
    let mut caps = ClientCapabilities::default();
    match what {
        "sampling" => caps.sampling = Some(Default::default()),
        "roots" => caps.roots = Some(Default::default()),
        _ => caps.elicitation = Some(Default::default()),
    }
    McpError::missing_required_client_capability(caps)
}

/// One call of a scenario tool, which the gate allowed.
pub(crate) async fn serve(call: McpCall) -> Result<CallToolResponse, McpError> {
    let McpCall { request, context: ctx, seal } = call;
    let seal = &seal;
    let args = request.arguments.clone().unwrap_or_default();
    let caps = ctx.client_capabilities();
    let name = request.name.as_ref();
    let state = request.request_state.as_deref();
    let responses = request.input_responses.as_ref();
    let arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let name_q = Need::Elicit("user_name", "What is your name?", "name", "string");
    match name {
        "test_simple_text" => Ok(text("This is a simple text response for testing.").into()),
        "test_image_content" => result_of(json!({ "content": [
                { "type": "image", "data": PNG, "mimeType": "image/png" }] })),
        "test_audio_content" => result_of(json!({ "content": [
                { "type": "audio", "data": WAV, "mimeType": "audio/wav" }] })),
        "test_embedded_resource" => result_of(json!({ "content": [{ "type": "resource",
                "resource": { "uri": "test://embedded-resource", "mimeType": "text/plain",
                    "text": "This is an embedded resource content." } }] })),
        "test_multiple_content_types" => result_of(json!({ "content": [
                { "type": "text", "text": "Multiple content types test:" },
                { "type": "image", "data": PNG, "mimeType": "image/png" },
                { "type": "resource", "resource": { "uri": "test://mixed-content-resource",
                    "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}" } }
            ] })),
        "test_error_handling" => {
            Ok(tool_error("This tool intentionally returns an error for testing".into()).into())
        }
        "test_tool_with_progress" => {
            let token = ctx.meta.get_progress_token();
            for (i, p) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                if let Some(t) = &token {
                    let note = ProgressNotificationParam::new(t.clone(), p).with_total(100.0);
                    let _ = ctx.peer.notify_progress(note).await;
                }
            }
            Ok(text("progress reported: 0, 50, 100 of 100").into())
        }
        // Sampling is deprecated (SEP-2577) but still what this 2025-era scenario tests.
        #[allow(deprecated)]
        "test_sampling" => {
            if !Need::Sample("", 0).declared(caps.as_ref()) {
                return Err(missing("sampling"));
            }
            let params = serde_json::from_value(json!({ "messages": [{ "role": "user",
                    "content": { "type": "text", "text": arg("prompt") } }], "maxTokens": 100 }))
            .map_err(|e| McpError::internal_error(format!("sampling request: {e}"), None))?;
            match ctx.peer.create_message(params).await {
                Ok(r) => Ok(text(format!("LLM response: {}", json!(r.message.content))).into()),
                Err(e) => Ok(tool_error(format!("the client did not sample: {e}")).into()),
            }
        }
        "test_elicitation"
        | "test_elicitation_sep1034_defaults"
        | "test_elicitation_sep1330_enums" => {
            if Reach::of(caps.as_ref()) != Reach::Form {
                return Err(missing("elicitation"));
            }
            let (message, schema) = match name {
                "test_elicitation" => (
                    arg("message"),
                    json!({ "type": "object",
                        "properties": {
                            "username": { "type": "string", "description": "User's response" },
                            "email": { "type": "string", "description": "User's email address" }
                        }, "required": ["username", "email"] }),
                ),
                "test_elicitation_sep1034_defaults" => (
                    "Defaults".into(),
                    json!({
                        "type": "object", "properties": {
                            "name": { "type": "string", "default": "John Doe" },
                            "age": { "type": "integer", "default": 30 },
                            "score": { "type": "number", "default": 95.5 },
                            "status": { "type": "string",
                                "enum": ["active", "inactive", "pending"], "default": "active" },
                            "verified": { "type": "boolean", "default": true } } }),
                ),
                _ => (
                    "Enums".into(),
                    json!({ "type": "object", "properties": {
                        "untitledSingle": { "type": "string",
                            "enum": ["option1", "option2", "option3"] },
                        "titledSingle": { "type": "string", "oneOf": [
                            { "const": "value1", "title": "First Option" },
                            { "const": "value2", "title": "Second Option" },
                            { "const": "value3", "title": "Third Option" }] },
                        "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"] },
                        "untitledMulti": { "type": "array", "items": { "type": "string",
                            "enum": ["option1", "option2", "option3"] } },
                        "titledMulti": { "type": "array", "items": { "anyOf": [
                            { "const": "value1", "title": "First Choice" },
                            { "const": "value2", "title": "Second Choice" },
                            { "const": "value3", "title": "Third Choice" }] } } } }),
                ),
            };
            let params = serde_json::from_value(
                json!({ "mode": "form", "message": message, "requestedSchema": schema }),
            )
            .map_err(|e| McpError::internal_error(format!("elicitation request: {e}"), None))?;
            match ctx.peer.create_elicitation(params).await {
                Ok(r) => Ok(text(format!(
                    "Elicitation completed: action={}, content={}",
                    json!(r.action).as_str().unwrap_or("?"),
                    json!(r.content)
                ))
                .into()),
                Err(e) => Ok(tool_error(format!("the client did not answer: {e}")).into()),
            }
        }
        "json_schema_2020_12_tool" => Ok(text("received").into()),
        "test_input_required_result_elicitation"
        | "test_mrtr_echo_state"
        | "test_mrtr_no_state" => {
            let sealed = name != "test_mrtr_no_state";
            rounds(seal, name, &[name_q], state, responses, caps.as_ref(), false, sealed)
                .map(|r| r.unwrap_or_else(|answers| greet(&answers, "name")))
        }
        "test_streaming_elicitation" => {
            let q = Need::Elicit("confirm", "Please confirm", "ok", "boolean");
            rounds(seal, name, &[q], state, responses, caps.as_ref(), false, true)
                .map(|r| r.unwrap_or_else(|_| text("confirmed").into()))
        }
        "test_input_required_result_sampling" | "test_missing_capability" => {
            let q = Need::Sample("What is the capital of France?", 100);
            rounds(seal, name, &[q], state, responses, caps.as_ref(), false, true).map(|r| {
                r.unwrap_or_else(|a| {
                    let said = a.get("capital_question").and_then(|v| v.get("content"));
                    let said = said.and_then(|c| c.get("text")).and_then(Value::as_str);
                    text(format!("sampled: {}", said.unwrap_or(""))).into()
                })
            })
        }
        "test_input_required_result_list_roots" => {
            rounds(seal, name, &[Need::Roots], state, responses, caps.as_ref(), false, true).map(
                |r| {
                    r.unwrap_or_else(|a| {
                        let roots = a.get("client_roots").and_then(|v| v.get("roots"));
                        text(format!("client roots: {}", roots.cloned().unwrap_or_default())).into()
                    })
                },
            )
        }
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            let q = Need::Elicit("confirm", "Please confirm", "ok", "boolean");
            rounds(seal, name, &[q], state, responses, caps.as_ref(), true, true)
                .map(|r| r.unwrap_or_else(|_| text("state-ok: the sealed state opened").into()))
        }
        "test_input_required_result_multiple_inputs" => {
            let qs = [name_q, Need::Sample("Generate a greeting", 50), Need::Roots];
            rounds(seal, name, &qs, state, responses, caps.as_ref(), true, true)
                .map(|r| r.unwrap_or_else(|a| greet(&a, "name")))
        }
        "test_input_required_result_capabilities" => {
            // Only what the client declared: with nothing at all there is nothing to ask.
            let all = [name_q, Need::Sample("Generate a greeting", 50), Need::Roots];
            let qs: Vec<Need> = all.into_iter().filter(|q| q.declared(caps.as_ref())).collect();
            if qs.is_empty() {
                return Err(missing("sampling"));
            }
            rounds(seal, name, &qs, state, responses, caps.as_ref(), false, true)
                .map(|r| r.unwrap_or_else(|_| text("answered what was declared").into()))
        }
        "test_input_required_result_multi_round" => {
            let step1 = Need::Elicit("step1", "Step 1: What is your name?", "name", "string");
            let step2 =
                Need::Elicit("step2", "Step 2: What is your favorite color?", "color", "string");
            let round = match state {
                Some(s) => opened(seal, name, s)?.round,
                None => 0,
            };
            if round == 0 {
                return rounds(seal, name, &[step1], None, None, caps.as_ref(), true, true)
                    .map(|r| r.unwrap_or_else(|_| text("").into()));
            }
            let answered =
                |q: Need| responses.and_then(|r| r.get(q.key())).is_some_and(|a| q.answered_by(a));
            if round == 1 && answered(step1) {
                return ask(seal, name, &[step2], 2, caps.as_ref(), true);
            }
            if round == 2 && answered(step2) {
                return Ok(text("both rounds answered").into());
            }
            let again = if round == 1 { step1 } else { step2 };
            ask(seal, name, &[again], round, caps.as_ref(), true)
        }
        _ => Err(McpError::invalid_params(format!("`{name}` has no behaviour"), None)),
    }
}

/// One round of questions: with every answer present (and the state valid, when one is
/// echoed or `need_state`), `Err(answers)` — the tool completes; else the questions again.
#[allow(clippy::too_many_arguments)]
fn rounds(
    seal: &Seal,
    tool: &str,
    needs: &[Need],
    state: Option<&str>,
    responses: Option<&InputResponses>,
    caps: Option<&ClientCapabilities>,
    need_state: bool,
    sealed: bool,
) -> Result<Result<CallToolResponse, InputResponses>, McpError> {
    if let Some(s) = state {
        opened(seal, tool, s)?;
    }
    let complete = needs
        .iter()
        .all(|q| responses.and_then(|r| r.get(q.key())).is_some_and(|a| q.answered_by(a)));
    if complete && (state.is_some() || !need_state) {
        return Ok(Err(responses.cloned().unwrap_or_default()));
    }
    ask(seal, tool, needs, 1, caps, sealed).map(Ok)
}

/// An input-required result asking `needs`, for the capabilities the client declared.
fn ask(
    seal: &Seal,
    tool: &str,
    needs: &[Need],
    round: u32,
    caps: Option<&ClientCapabilities>,
    sealed: bool,
) -> Result<CallToolResponse, McpError> {
    let mut requests = BTreeMap::new();
    for q in needs {
        if !q.declared(caps) {
            return Err(missing(match q {
                Need::Elicit(..) => "elicitation",
                Need::Sample(..) => "sampling",
                Need::Roots => "roots",
            }));
        }
        requests.insert(q.key().to_string(), q.request()?);
    }
    let state = if sealed {
        let nonce = format!(
            "{:x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let s = State { tool: tool.to_string(), round, nonce };
        Some(seal.seal(&s).map_err(|e| McpError::internal_error(e.to_string(), None))?)
    } else {
        None
    };
    Ok(InputRequiredResult::new(Some(requests), state).into())
}

/// Opens an echoed state: sealed by this daemon, for this client and this tool, in time.
fn opened(seal: &Seal, tool: &str, state: &str) -> Result<State, McpError> {
    let s: State = seal.open(state).map_err(|e| McpError::invalid_params(e.to_string(), None))?;
    if s.tool != tool {
        return Err(McpError::invalid_params(
            format!("the request state belongs to `{}`, not `{tool}`", s.tool),
            None,
        ));
    }
    Ok(s)
}

/// `Hello, <name>!` from the answer to `user_name`.
fn greet(answers: &InputResponses, field: &str) -> CallToolResponse {
    let name = answers
        .get("user_name")
        .and_then(|a| a.get("content"))
        .and_then(|c| c.get(field))
        .and_then(Value::as_str)
        .unwrap_or("");
    text(format!("Hello, {}!", hands::shown::shown(name).text)).into()
}
