//! `hands-conformance`: the daemon built with the test-only conformance tools (cargo feature
//! `conformance-tools`), for `scripts/conformance` only. The same entry point as `hands`; a
//! binary of its own so a feature build never replaces `hands` in the target dir.

fn main() -> std::process::ExitCode {
    hands::cli::run()
}
