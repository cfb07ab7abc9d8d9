//! Test-only, never shipped: the scenario-specific tools the official MCP conformance suite
//! (`@modelcontextprotocol/conformance` 0.2.0-alpha.12, `scripts/conformance`) calls —
//! `test_simple_text`, `test_input_required_result_*`, `test_missing_capability` and the rest —
//! added to the daemon through the tool registry's public API (`hands::registry::Entry`,
//! `Handler::Mcp`, `hands::cli::run_with`), so the server has no feature flag for them and its
//! library is built once. `examples/hands-conformance.rs` is the daemon that serves them; what
//! each one does is `scenarios.rs`.
//!
//! They are published by tools-fs as read-class tools, so every call passes the real gate (the
//! brake, the audit check, the policy) before it does anything, and rides the real transports.
//!
//! `test_tool_with_logging` / `test_logging_tool` are not here: hands declares no logging.

mod scenarios;

use hands::config::{ActionClass, ModuleId};
use hands::registry::{Entry, Handler};
use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};
use std::sync::Arc;

/// The tools, with the input each scenario sends.
const TOOLS: [(&str, &str); 24] = [
    ("test_simple_text", "Returns a simple text response."),
    ("test_image_content", "Returns a 1x1 PNG image."),
    ("test_audio_content", "Returns a WAV audio clip."),
    ("test_embedded_resource", "Returns an embedded text resource."),
    ("test_multiple_content_types", "Returns text, an image and a resource."),
    ("test_error_handling", "Always returns a tool error."),
    ("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100."),
    ("test_sampling", "Asks the client to sample (2025-era session)."),
    ("test_elicitation", "Asks the client's person for a username and email."),
    ("test_elicitation_sep1034_defaults", "Elicits a form whose fields carry defaults."),
    ("test_elicitation_sep1330_enums", "Elicits a form with every enum variant."),
    ("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features"),
    ("test_input_required_result_elicitation", "Input-required: one elicitation."),
    ("test_input_required_result_sampling", "Input-required: one sampling request."),
    ("test_input_required_result_list_roots", "Input-required: one roots/list request."),
    ("test_input_required_result_request_state", "Input-required with a sealed state."),
    ("test_input_required_result_multiple_inputs", "Input-required: three requests at once."),
    ("test_input_required_result_multi_round", "Input-required over two rounds."),
    ("test_input_required_result_tampered_state", "Refuses a tampered request state."),
    ("test_input_required_result_capabilities", "Asks only what the client declared."),
    ("test_missing_capability", "Needs sampling; refuses a client without it (-32021)."),
    ("test_streaming_elicitation", "Asks through an input-required result, never a request."),
    ("test_mrtr_echo_state", "Input-required whose state is echoed."),
    ("test_mrtr_no_state", "Input-required without a state."),
];

/// The `json-schema-2020-12` scenario's input schema, which must come back unchanged.
fn schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": { "address": { "$anchor": "addressDef", "type": "object",
            "properties": { "street": { "type": "string" }, "city": { "type": "string" } } } },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" }
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": { "properties": { "contactMethod": { "const": "phone" } },
            "required": ["contactMethod"] },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false
    })
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

/// The catalogue entries: tools-fs, read class (the default policy allows them; a `deny`
/// refuses them like any tool).
pub fn tools() -> Vec<Entry> {
    let serve: hands::registry::McpFn = Arc::new(|call| Box::pin(scenarios::serve(call)));
    TOOLS
        .iter()
        .map(|(name, description)| {
            let schema = match *name {
                "json_schema_2020_12_tool" => schema_2020_12(),
                "test_sampling" => json!({ "type": "object",
                    "properties": { "prompt": { "type": "string" } }, "required": ["prompt"] }),
                "test_elicitation" => json!({ "type": "object",
                    "properties": { "message": { "type": "string" } }, "required": ["message"] }),
                _ => json!({ "type": "object", "properties": {} }),
            };
            let tool = Tool::new(*name, *description, Arc::new(object(schema)));
            Entry {
                tool,
                module: ModuleId::Fs,
                class: ActionClass::Read,
                handler: Handler::Mcp(serve.clone()),
            }
        })
        .collect()
}
