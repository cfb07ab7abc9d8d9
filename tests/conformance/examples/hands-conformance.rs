//! `hands-conformance`: `hands` with the MCP conformance suite's scenario tools beside the
//! modules' (`hands_conformance::tools`), for `scripts/conformance` only. The same command line
//! as `hands`; the tools are served by `serve`.

fn main() -> std::process::ExitCode {
    hands::cli::run_with(hands_conformance::tools)
}
