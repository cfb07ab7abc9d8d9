//! tools-shell logic that needs neither MCP nor the sandbox: output capture and rendering, and
//! the `bash` tool's parameters and result.

pub mod bash;
pub mod capture;
