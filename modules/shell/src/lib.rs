//! tools-shell logic that needs neither MCP nor the sandbox: output capture and rendering, and
//! the `bash` tool's parameters and result, and the tmux tools' command lines and results.

pub mod bash;
pub mod capture;
pub mod tmux;
