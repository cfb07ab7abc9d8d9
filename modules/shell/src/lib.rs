//! tools-shell logic that needs neither MCP nor the sandbox: output capture and rendering, the
//! `bash` tool's parameters and result, the allowlist of `run`/`os-*`/`hands exec` and their
//! parameters, the programs that run other programs (`wrappers`), the tmux tools' command
//! lines and results, and a pane's output read as a person sees it (`pane`).

pub mod allow;
pub mod bash;
pub mod capture;
pub mod pane;
pub mod registry;
pub mod run;
pub mod settings;
pub mod tmux;
pub mod wrappers;
