//! The `bash` tool's parameters and result, and how captured output becomes that result.

use crate::capture::{Rendered, Tail, render, split_budget};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Default and maximum of `timeout_secs`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
pub const MAX_TIMEOUT_SECS: u64 = 600;

/// The argv that runs `command` as a `bash` call does: no profile, no rc file.
pub(crate) fn argv(command: &str) -> Vec<String> {
    ["bash", "--noprofile", "--norc", "-c", command].map(String::from).into()
}

/// Parameters of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashParams {
    /// The command line, run with `bash --noprofile --norc -c` inside the sandbox.
    pub command: String,
    /// Working folder: absolute (under a root) or relative to the first root. Default: the
    /// first root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Seconds before the whole process tree is stopped (TERM, then KILL). Default 120, at
    /// most 600.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Optional: a widening for this one run, which a person approves (once or for the
    /// session).
    #[serde(default)]
    pub needs: Option<crate::needs::Needs>,
    /// Optional: files under the roots to return with the result as embedded resources (text
    /// as text, anything else as base64), read once the command has ended, whatever its exit
    /// code or a timeout: at most 8 files, 20 MiB in all; relative paths are in `cwd`. A file
    /// missing or refused (as `read` refuses it) is reported in the result's `outputs`.
    #[serde(default)]
    #[schemars(length(max = 8))]
    pub outputs: Vec<String>,
}

/// The result of `bash`. A non-zero exit, a signal or a timeout is a normal result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BashOutput {
    /// The command's exit code; absent when a signal ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the command, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The timeout stopped the command.
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The end of standard output (control characters escaped).
    pub stdout: String,
    /// The end of standard error (control characters escaped).
    pub stderr: String,
    /// Output was cut: only the end is shown.
    pub truncated: bool,
    /// Bytes of stdout and stderr not shown.
    pub dropped_bytes: u64,
    /// Invalid UTF-8 was replaced with U+FFFD.
    pub invalid_utf8: bool,
    /// What contained the command: `full` (namespaces, read-only root, Landlock, seccomp).
    pub containment: String,
    /// What a wall refused the command while it ran (connections the network proxy refused,
    /// creates of a `.git` or protected path, masked, protected and read-only paths its errors
    /// name), so a denial is not taken for a broken tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<Denied>,
    /// What became of each file `outputs` asked for, in order: returned (as an embedded
    /// resource after the text, under `uri`) or why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<crate::outputs::OutputFile>,
    /// The files returned, for the result's embedded resources (not in the structured content).
    #[serde(skip)]
    #[schemars(skip)]
    pub files: Vec<hands_tool::Attachment>,
}

/// What `run` and `os-*` return: `bash`'s result, whose schema leaves out `outputs` — those
/// tools take no `outputs` parameter, so a model must not be told the field can come back.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct RunOutput(pub BashOutput);

impl JsonSchema for RunOutput {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RunOutput".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // `BashOutput`'s own schema, inline (not a `$ref`), without the one property.
        let mut schema = BashOutput::json_schema(generator);
        if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
            props.remove("outputs");
        }
        // Only `outputs` names it; each published schema has a generator of its own (rmcp's
        // `schema_for_output`), so no other schema loses the definition.
        generator.definitions_mut().remove("OutputFile");
        schema
    }
}

impl fmt::Display for RunOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl BashOutput {
    /// Takes the files the result returns ([`hands_tool::Files`]).
    pub fn take_files(&mut self) -> Vec<hands_tool::Attachment> {
        std::mem::take(&mut self.files)
    }
}

/// A result's `denied`, a line each, as a person and a model read it.
pub(crate) fn write_denied(f: &mut fmt::Formatter<'_>, denied: &[Denied]) -> fmt::Result {
    for d in denied {
        write!(f, "\ndenied by {}: {} ({}); {}", d.layer, d.what, d.why, d.remedy)?;
    }
    Ok(())
}

/// One refusal a command met: what, by which layer, why, and what a person can do.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Denied {
    /// What was blocked: a `host:port`, a path.
    pub what: String,
    /// The layer that blocked it: `network`, `sandbox (filesystem)` (a masked, protected or
    /// read-only path the command met), `sandbox (in-run walls)` (a `.git` or protected path it
    /// tried to create).
    pub layer: String,
    pub why: String,
    /// What a person can do about it.
    pub remedy: String,
}

/// How a command ended, as the launcher reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exit(i32),
    Signal(i32),
}

impl Ending {
    /// Reads the launcher's exit code: 128 + N is signal N (as a shell reports it).
    pub fn from_code(code: i32) -> Ending {
        if (129..=128 + 64).contains(&code) {
            Ending::Signal(code - 128)
        } else {
            Ending::Exit(code)
        }
    }
}

/// Renders both captures into one result, sharing `output_chars` between them.
pub fn output(
    ending: Ending,
    timed_out: bool,
    duration_ms: u64,
    out: &Tail,
    err: &Tail,
    output_chars: usize,
    containment: &str,
) -> BashOutput {
    let (out_bytes, err_bytes) = (out.bytes(), err.bytes());
    let chars = crate::capture::rendered_chars;
    let (oc, ec) = split_budget(output_chars, chars(&out_bytes), chars(&err_bytes));
    let o: Rendered = render(&out_bytes, out.total(), oc);
    let e: Rendered = render(&err_bytes, err.total(), ec);
    let dropped = o.dropped_bytes + e.dropped_bytes;
    let (exit_code, signal) = match ending {
        Ending::Exit(c) => (Some(c), None),
        Ending::Signal(s) => (None, Some(s)),
    };
    BashOutput {
        exit_code,
        signal,
        timed_out,
        duration_ms,
        stdout: o.text,
        stderr: e.text,
        truncated: dropped > 0,
        dropped_bytes: dropped,
        invalid_utf8: o.invalid_utf8 || e.invalid_utf8,
        containment: containment.to_string(),
        denied: Vec::new(),
        outputs: Vec::new(),
        files: Vec::new(),
    }
}

impl fmt::Display for BashOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.exit_code, self.signal) {
            (_, Some(s)) => write!(f, "killed by signal {s}")?,
            (Some(c), None) => write!(f, "exit code {c}")?,
            (None, None) => write!(f, "ended")?,
        }
        if self.timed_out {
            write!(f, " (timed out)")?;
        }
        write!(f, " · {} ms · containment: {}", self.duration_ms, self.containment)?;
        if self.truncated {
            write!(f, " · output truncated, {} bytes dropped from the start", self.dropped_bytes)?;
        }
        if self.invalid_utf8 {
            write!(f, " · invalid UTF-8 replaced")?;
        }
        write_denied(f, &self.denied)?;
        for o in &self.outputs {
            match (&o.why, &o.uri) {
                (None, Some(uri)) => write!(
                    f,
                    "\noutput {}: returned below as {uri} ({} bytes, {})",
                    hands_roots::shown(&o.path),
                    o.bytes.unwrap_or_default(),
                    o.mime.as_deref().unwrap_or_default()
                )?,
                (why, _) => {
                    let shown = hands_roots::shown(&o.path);
                    write!(f, "\noutput {shown}: {}", why.as_deref().unwrap_or("-"))?
                }
            }
        }
        if !self.stdout.is_empty() {
            write!(f, "\n--- stdout ---\n{}", self.stdout)?;
        }
        if !self.stderr.is_empty() {
            write!(f, "\n--- stderr ---\n{}", self.stderr)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_read_from_128_plus_n() {
        assert_eq!(Ending::from_code(137), Ending::Signal(9));
        assert_eq!(Ending::from_code(128), Ending::Exit(128));
        assert_eq!(Ending::from_code(3), Ending::Exit(3));
    }

    #[test]
    fn output_keeps_the_end_and_counts_what_was_dropped() {
        let mut out = Tail::new(40);
        out.push(&[b'x'; 100]);
        out.push(b"END");
        let err = Tail::new(40);
        let r = output(Ending::Exit(0), false, 5, &out, &err, 10, "full");
        assert!(r.stdout.ends_with("END"));
        assert_eq!(r.stdout.len(), 10);
        assert!(r.truncated);
        assert_eq!(r.dropped_bytes, 93);
    }
}
