//! Tool schemas every MCP client accepts quietly. schemars writes two things that are legal
//! JSON Schema but not portable: integer `format`s of its own (`uint64`, `uint32`, `uint16`,
//! `int32`, `uint`) that no JSON Schema 2020-12 validator knows (Claude Code printed one
//! "unknown format" line for each), and nullable types as `type` arrays (`["string", "null"]`),
//! which clients that read `type` as one string reject or drop (the MCP Inspector's `type-union`
//! portability warning). Each published schema is rewritten once, when the registry is built:
//! an integer format becomes the `minimum`/`maximum` it meant, any other unknown format goes,
//! and a nullable type becomes the plain type in a tool's input (a parameter that may be left
//! out needs no `null`) or `anyOf` branches of one type each in its output (where `null` is a
//! value the tool returns).

use serde_json::{Map, Value};

/// The `format` values of the JSON Schema 2020-12 format vocabulary, which every validator
/// knows; any other is removed.
const FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords that annotate a schema rather than constrain its value: they stay on the outer
/// schema when a nullable type is split into `anyOf` branches.
const ANNOTATIONS: &[&str] =
    &["title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"];

/// Which of a tool's two schemas is rewritten.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Input,
    Output,
}

/// Rewrites `schema` (a tool's whole input or output schema) in place.
pub fn rewrite(schema: &mut Map<String, Value>, side: Side) {
    node(schema, side, 0);
}

/// Deeper than any schema schemars writes for these types; a bound so that a cycle cannot
/// recurse forever.
const MAX_DEPTH: usize = 64;

fn node(schema: &mut Map<String, Value>, side: Side, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    integer_format(schema);
    if let Some(Value::String(f)) = schema.get("format")
        && !FORMATS.contains(&f.as_str())
    {
        schema.remove("format");
    }
    nullable(schema, side);
    for (key, value) in schema.iter_mut() {
        match (key.as_str(), value) {
            ("properties" | "$defs" | "definitions" | "patternProperties", Value::Object(m)) => {
                for sub in m.values_mut() {
                    if let Value::Object(s) = sub {
                        node(s, side, depth + 1);
                    }
                }
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(items)) => {
                for sub in items {
                    if let Value::Object(s) = sub {
                        node(s, side, depth + 1);
                    }
                }
            }
            (
                "items" | "additionalProperties" | "not" | "if" | "then" | "else" | "contains",
                Value::Object(s),
            ) => node(s, side, depth + 1),
            _ => {}
        }
    }
}

/// `format: uint16` and its kin become the bounds they stand for.
fn integer_format(schema: &mut Map<String, Value>) {
    let Some(Value::String(f)) = schema.get("format") else { return };
    let (min, max): (i64, Option<i64>) = match f.as_str() {
        "uint" | "uint64" | "uint128" | "usize" => (0, None),
        "uint8" => (0, Some(u8::MAX.into())),
        "uint16" => (0, Some(u16::MAX.into())),
        "uint32" => (0, Some(u32::MAX.into())),
        "int8" => (i8::MIN.into(), Some(i8::MAX.into())),
        "int16" => (i16::MIN.into(), Some(i16::MAX.into())),
        "int32" => (i32::MIN.into(), Some(i32::MAX.into())),
        // int64 and wider: a JSON number holds what it can; nothing to add.
        "int" | "int64" | "int128" | "isize" => {
            schema.remove("format");
            return;
        }
        _ => return,
    };
    schema.remove("format");
    let tighter_min = match schema.get("minimum").and_then(Value::as_f64) {
        Some(m) => m < min as f64,
        None => true,
    };
    if tighter_min {
        schema.insert("minimum".into(), min.into());
    }
    if let Some(max) = max {
        let tighter_max = match schema.get("maximum").and_then(Value::as_f64) {
            Some(m) => m > max as f64,
            None => true,
        };
        if tighter_max {
            schema.insert("maximum".into(), max.into());
        }
    }
}

/// `type: [X, "null"]`: X alone in an input; `anyOf: [{type: X, …}, {type: "null"}]` in an
/// output, the constraints of X moving into its branch.
fn nullable(schema: &mut Map<String, Value>, side: Side) {
    let Some(Value::Array(types)) = schema.get("type") else { return };
    let rest: Vec<Value> = types.iter().filter(|t| t.as_str() != Some("null")).cloned().collect();
    let had_null = rest.len() < types.len();
    if side == Side::Input || !had_null {
        match rest.as_slice() {
            [one] => {
                schema.insert("type".into(), one.clone());
            }
            _ => {
                schema.insert("type".into(), Value::Array(rest));
            }
        }
        if let Some(Value::Array(values)) = schema.get_mut("enum") {
            values.retain(|v| !v.is_null());
        }
        // `default: null` would now contradict the type; leaving the parameter out is the
        // default.
        if had_null && schema.get("default").is_some_and(Value::is_null) {
            schema.remove("default");
        }
        return;
    }
    let mut branch = Map::new();
    let keys: Vec<String> =
        schema.keys().filter(|k| !ANNOTATIONS.contains(&k.as_str())).cloned().collect();
    for k in keys {
        if let Some(v) = schema.remove(&k) {
            branch.insert(k, v);
        }
    }
    if let Some(Value::Array(values)) = branch.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    let mut branches: Vec<Value> = Vec::new();
    for t in rest {
        let mut b = branch.clone();
        b.insert("type".into(), t);
        branches.push(Value::Object(b));
    }
    branches.push(serde_json::json!({ "type": "null" }));
    schema.insert("anyOf".into(), Value::Array(branches));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rewritten(v: Value, side: Side) -> Value {
        let Value::Object(mut m) = v else { panic!("not an object") };
        rewrite(&mut m, side);
        Value::Object(m)
    }

    #[test]
    fn integer_formats_become_bounds() {
        let s = json!({ "type": "object", "properties": {
            "a": { "type": "integer", "format": "uint16", "minimum": 1 },
            "b": { "type": "integer", "format": "uint64" },
            "c": { "type": "integer", "format": "int32" },
            "d": { "type": "string", "format": "date-time" },
            "e": { "type": "string", "format": "made-up" },
        }});
        let out = rewritten(s, Side::Input);
        assert_eq!(
            out["properties"]["a"],
            json!({ "type": "integer", "minimum": 1, "maximum": 65535 })
        );
        assert_eq!(out["properties"]["b"], json!({ "type": "integer", "minimum": 0 }));
        assert_eq!(
            out["properties"]["c"],
            json!({ "type": "integer", "minimum": -2147483648_i64, "maximum": 2147483647 })
        );
        assert_eq!(out["properties"]["d"]["format"], "date-time");
        assert!(out["properties"]["e"].get("format").is_none());
    }

    #[test]
    fn nullable_types_split_by_side() {
        let s = json!({ "type": "object", "properties": {
            "n": { "description": "d", "type": ["integer", "null"], "format": "uint32",
                   "default": null },
            "s": { "type": ["string", "null"], "enum": ["a", null] },
        }});
        let input = rewritten(s.clone(), Side::Input);
        assert_eq!(
            input["properties"]["n"],
            json!({ "description": "d", "type": "integer", "minimum": 0, "maximum": 4294967295_u64 })
        );
        assert_eq!(input["properties"]["s"], json!({ "type": "string", "enum": ["a"] }));
        let output = rewritten(s, Side::Output);
        assert_eq!(
            output["properties"]["n"],
            json!({ "description": "d", "default": null, "anyOf": [
                { "type": "integer", "minimum": 0, "maximum": 4294967295_u64 },
                { "type": "null" } ] })
        );
        assert_eq!(
            output["properties"]["s"],
            json!({ "anyOf": [{ "type": "string", "enum": ["a"] }, { "type": "null" }] })
        );
    }

    #[test]
    fn nested_schemas_are_reached() {
        let s = json!({ "type": "object", "$defs": { "X": { "type": "object", "properties": {
            "v": { "type": "array", "items": { "type": ["boolean", "null"] } } } } } });
        let out = rewritten(s, Side::Input);
        assert_eq!(out["$defs"]["X"]["properties"]["v"]["items"], json!({ "type": "boolean" }));
    }
}
