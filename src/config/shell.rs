//! The checks of tools-shell's `config` table that make a config invalid, ranges included (a
//! value out of range is an error naming the range, never clamped at use). The table's shape
//! is tools-shell's own (`hands_shell::settings`); these checks place its problems at keys.

use hands_shell::settings::ShellConfig;

/// The checks of tools-shell's `commands` and `tools` that make a config invalid: entries that
/// are not names (a `/`, `.`, `..`), `*` with arguments, published names MCP would refuse.
/// (A tool whose binary `allow` does not admit, an empty description and two entries with one
/// name are `hands doctor` warnings, not errors.) Each finding: key, message, hint.
pub(super) fn check_shell(sh: &ShellConfig) -> Vec<(String, String, Option<&'static str>)> {
    use hands_shell::allow;
    let mut out = Vec::new();
    if let Err(e) = sh.policy() {
        let key = e.split(':').next().unwrap_or("commands").to_string();
        out.push((
            format!("config.{key}"),
            e,
            Some("entries are binary names with optional leading arguments, e.g. \"kubectl get\", or \"*\""),
        ));
    }
    for (i, t) in sh.tools.iter().enumerate() {
        if let Err(e) = allow::tool_name(&t.bin, &t.args) {
            out.push((
                format!("config.tools[{i}]"),
                e.to_string(),
                Some("a tools entry is { bin = \"kubectl\", args = [\"get\"], description = \"...\" }"),
            ));
        }
    }
    if let Err(e) = sh.network_mode() {
        out.push(e);
    }
    for (key, value, range, hint) in [
        ("max_concurrent", sh.max_concurrent, MAX_CONCURRENT, "the default is 4 commands at once"),
        ("output_chars", sh.output_chars, OUTPUT_CHARS, "the default is 30000 characters"),
        (
            "run_output_chars",
            sh.run_output_chars,
            RUN_OUTPUT_CHARS,
            "the default is 8192 characters",
        ),
    ] {
        if let Some(v) = value
            && !range.contains(&v)
        {
            out.push((
                format!("config.{key}"),
                format!("must be between {} and {}; got {v}", range.start(), range.end()),
                Some(hint),
            ));
        }
    }
    out
}

/// The ranges `max_concurrent`, `output_chars` and `run_output_chars` must lie in.
pub const MAX_CONCURRENT: std::ops::RangeInclusive<u64> = 1..=1024;
pub const OUTPUT_CHARS: std::ops::RangeInclusive<u64> = 100..=1_000_000;
pub const RUN_OUTPUT_CHARS: std::ops::RangeInclusive<u64> = 1..=1_000_000;
