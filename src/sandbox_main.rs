//! `hands-sandbox`: the sandbox launcher on its own, the same code as `hands __sandbox`
//! (`hands_sandbox::launcher`). The daemon runs it for every command when it lies beside the
//! `hands` binary (`launcher_binary`); being small, it starts and forks faster.

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    hands_sandbox::launcher::main()
}

#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(125)
}
