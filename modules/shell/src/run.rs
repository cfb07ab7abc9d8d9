//! The parameters of `run` and of the published `os-*` tools (SPEC §4.4). Both return the
//! `bash` result ([`crate::bash::BashOutput`]), with output capped at `run_output_chars`.

use schemars::JsonSchema;
use serde::Deserialize;

/// The default cap of `run`/`os-*` output, stdout and stderr together, in characters.
pub const DEFAULT_OUTPUT_CHARS: u64 = 8 * 1024;

/// Parameters of `run`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// The program's name (looked up in the configured PATH; no `/`), then its arguments, each
    /// passed exactly as given: no shell, so `|`, `;`, `$(…)` and `*` are literal characters.
    pub argv: Vec<String>,
    /// Working folder: absolute (under a root) or relative to the first root. Default: the
    /// first root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Seconds before the whole process tree is stopped (TERM, then KILL). Default 120, at
    /// most 600.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// Parameters of an `os-*` tool.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OsToolParams {
    /// Arguments appended after the tool's fixed leading arguments, each passed exactly as
    /// given (no shell).
    #[serde(default)]
    pub args: Vec<String>,
    /// Working folder: absolute (under a root) or relative to the first root. Default: the
    /// first root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Seconds before the whole process tree is stopped (TERM, then KILL). Default 120, at
    /// most 600.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}
