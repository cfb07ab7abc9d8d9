//! tools-shell, without MCP: its tools as data with their handlers (`catalogue`), the [`Shell`]
//! that runs `bash`, `run`/`os-*` and `hands exec` through the sandbox's launcher (`service`),
//! its tmux sessions (`sessions`), the commands running now (`running`), who waits for them
//! (`caller`), and its settings (`settings`);
//! beside them output capture and rendering, the `bash` tool's parameters and result, the
//! allowlist and its parameters, the programs that run other programs (`wrappers`), the tmux
//! tools' command lines and results, and a pane's output read as a person sees it (`pane`).

// The lib target itself is checked without this (clippy.toml, SPEC §11).
#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        reason = "unit tests make and read their fixtures by path and spawn what they test against"
    )
)]

pub mod allow;
pub mod bash;
pub mod caller;
pub mod capture;
pub mod catalogue;
pub mod hidden;
pub mod hints;
pub mod needs;
pub mod options;
pub mod outputs;
pub mod pane;
pub mod pins;
pub mod run;
pub mod running;
pub mod service;
pub mod settings;
pub mod shell_error;
pub mod tmux;
pub mod wrappers;

pub use caller::{Caller, Progress};
pub use service::{Launching, Prepared, Shell, sessions};
pub use shell_error::ShellError;
