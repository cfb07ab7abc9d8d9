//! tools-shell logic that needs neither MCP nor the sandbox: output capture and rendering.

pub mod capture;
