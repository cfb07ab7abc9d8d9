//! The one error map: every failure a client sees is shaped here. Module errors keep their
//! types (`hands_roots::PathError`, `hands_fs::FsError`, `hands_git::GitError`, tools-shell's
//! refusals) up to this file, which turns each into a tool result with `isError` and the
//! message written for people and models — with `structuredContent.denied` when a layer
//! refused (SPEC §6). A protocol error is only for a call that cannot be routed: an unknown
//! tool (malformed requests never reach a tool: rmcp answers them).
//!
//! Whether a failure is a refusal is the error's own answer (`is_refusal`), and the audit
//! records it so: `refused: …` for a refusal, `error: …` for a plain failure such as a file
//! that does not exist.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock};

/// One refusal in a result's `structuredContent.denied` (SPEC §6): what was blocked, by which
/// layer, why, and what a person can do. Present, with `isError`, on every refusal.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Denial {
    /// What was blocked: the path, argv, tool or rule (cut as error quotes are).
    pub what: String,
    /// The layer that refused: roots, denied paths, secret files, protected paths, read-only
    /// root, hard links, gate, brake, allowlist, sandbox (enforce), git confinement, git push
    /// policy.
    pub layer: String,
    /// Why, in a sentence.
    pub why: String,
    /// What a person can do (a config key, a command), or that it cannot be approved.
    pub remedy: String,
}

impl Denial {
    pub fn new(what: &str, layer: &str, why: &str, remedy: &str) -> Denial {
        Denial {
            what: hands_roots::shown(what).to_string(),
            layer: layer.to_string(),
            why: why.to_string(),
            remedy: remedy.to_string(),
        }
    }
}

/// A tool's answer and whether it is a refusal (for the audit's `refused:` outcome).
pub struct Answer {
    pub result: CallToolResult,
    pub refused: bool,
}

impl Answer {
    /// A success, or a failure that is not a refusal.
    pub fn plain(result: CallToolResult) -> Answer {
        Answer { result, refused: false }
    }
}

/// A failure a module returns: its message, its denial feedback when a layer refused, and
/// whether it is a refusal at all.
pub trait ToolFailure: std::fmt::Display {
    /// What was blocked, by which layer, and what a person can do; `None` for a failure no
    /// layer decided (not found, an I/O error, an invalid argument).
    fn denial(&self) -> Option<Denial>;
    /// Whether the audit records this failure as a refusal.
    fn is_refusal(&self) -> bool;
}

/// A failure as a tool result: text only.
pub fn tool_error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// A refusal: the text (short; it says what to do) and `structuredContent.denied`.
pub fn refused(text: String, denied: Vec<Denial>) -> CallToolResult {
    let mut r = tool_error(text);
    r.structured_content = Some(serde_json::json!({ "denied": denied }));
    r
}

/// A module error as the client sees it: a refusal carries its denial feedback.
pub fn module_error<E: ToolFailure>(e: &E) -> Answer {
    let result = match e.denial() {
        Some(d) => refused(e.to_string(), vec![d]),
        None => tool_error(e.to_string()),
    };
    Answer { result, refused: e.is_refusal() }
}

/// Arguments that do not fit the tool's parameters.
pub fn invalid_arguments(name: &str, e: &serde_json::Error) -> CallToolResult {
    // serde quotes the offending value (a 10 MB string in a number's place): cut it.
    tool_error(format!(
        "invalid arguments for `{name}`: {}; the tool's inputSchema lists its parameters",
        hands_roots::shown(&e.to_string())
    ))
}

/// The answer to a call whose task failed (a panic): logged, and the client told to retry.
pub fn internal_failure(name: &str, why: &str) -> CallToolResult {
    tracing::error!(tool = name, "tool task failed: {why}");
    tool_error(format!("`{name}` failed internally; the server keeps serving — please retry"))
}

/// A call of a tool this server does not publish: the one protocol error of `tools/call`.
pub fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(
        format!(
            "unknown tool `{}`; tools/list shows the tools this server publishes",
            hands_roots::shown(name)
        ),
        None,
    )
}

/// A tools-shell failure as the client sees it: a refusal (the brake, `enforce`, one resolution)
/// names the tool as what was blocked; the variant, not the text, decides.
pub fn shell_failure(e: &hands_shell::ShellError, tool: &str) -> Answer {
    let result = match e.denial() {
        Some(d) => {
            refused(e.to_string(), vec![Denial { what: hands_roots::shown(tool).to_string(), ..d }])
        }
        None => tool_error(e.to_string()),
    };
    Answer { result, refused: e.is_refusal() }
}

impl ToolFailure for hands_shell::ShellError {
    fn denial(&self) -> Option<Denial> {
        use hands_shell::ShellError as S;
        let (layer, remedy) = match self {
            S::Enforce { .. } => (
                "sandbox (enforce)",
                "a person fixes the host (`hands doctor` shows what is missing) or sets \
                 sandbox.mode = \"best-effort\"",
            ),
            S::Braked => ("brake", "a person runs `hands stop --release` (or restarts the daemon)"),
            S::Changed(_) => (
                "sandbox (one resolution)",
                "a person puts the folder back (or restarts the daemon when a configured root \
                 was replaced on purpose); a widening is asked for again",
            ),
            // Only a refusal carries a denial (a program not found is a plain failure here).
            other if other.is_refusal() => other.own_layer()?,
            _ => return None,
        };
        // What was blocked is the call itself: `shell_failure` names the tool.
        Some(Denial::new("", layer, &self.to_string(), remedy))
    }

    fn is_refusal(&self) -> bool {
        hands_shell::ShellError::is_refusal(self)
    }
}

impl ToolFailure for hands_roots::PathError {
    fn denial(&self) -> Option<Denial> {
        use hands_roots::PathError as P;
        let roots = "a person can declare a root that holds it in the module's `filesystem` \
                     in daemon.toml";
        let (what, layer, remedy) = match self {
            P::Outside { path, .. } => (path.display().to_string(), "roots", roots),
            P::Escapes { path, .. } => (path.display().to_string(), "roots", roots),
            P::DotDot { path } => (path.clone(), "roots", "give the path without `..`"),
            P::Tilde { path } => (
                path.clone(),
                "roots",
                "write the absolute path (tool paths expand nothing, `~` included)",
            ),
            P::LinkLoop { path } | P::DanglingLink { path } => {
                (path.display().to_string(), "roots", "use the link's target path directly")
            }
            P::Denied { path, .. } => (
                path.display().to_string(),
                "denied paths",
                "nobody can approve it: a person can remove it from sandbox.deny (credential \
                 paths always stay refused)",
            ),
            P::Secret { path } => (
                path.display().to_string(),
                "secret files",
                "a person can read it themselves, or narrow sandbox.secret_patterns",
            ),
            P::Protected { path, .. } => (
                path.display().to_string(),
                "protected paths",
                "a person makes this change outside hands",
            ),
            P::Trusted { path, remedy, .. } => {
                let what = path.display().to_string();
                return Some(Denial::new(&what, "host-trusted paths", &self.to_string(), remedy));
            }
            P::ReadOnlyRoot { path, .. } => (
                path.display().to_string(),
                "read-only root",
                "a person can set `write = true` on that root in daemon.toml",
            ),
            P::HardLinked { path, .. } => (
                path.display().to_string(),
                "hard links",
                "a person can remove the other links, or write a new file",
            ),
            _ => return None,
        };
        Some(Denial::new(&what, layer, &self.to_string(), remedy))
    }

    fn is_refusal(&self) -> bool {
        hands_roots::PathError::is_refusal(self)
    }
}

impl ToolFailure for hands_fs::FsError {
    fn denial(&self) -> Option<Denial> {
        match self {
            hands_fs::FsError::Path(p) => p.denial(),
            _ => None,
        }
    }

    fn is_refusal(&self) -> bool {
        hands_fs::FsError::is_refusal(self)
    }
}

impl ToolFailure for hands_git::GitError {
    fn denial(&self) -> Option<Denial> {
        use hands_git::GitError as G;
        let (what, layer, remedy) = match self {
            G::Path(p) => return p.denial(),
            G::RepoOutside { target, .. } => (
                target.display().to_string(),
                "roots",
                "a person can declare a root that holds the whole repository",
            ),
            G::HostileConfig { key, .. } => (
                key.clone(),
                "git confinement",
                "a person removes the key from the repository's config",
            ),
            G::HiddenPath { path } => {
                (path.clone(), "secret files", "a person commits it themselves, if they mean to")
            }
            G::ProtectedChange { what, .. } => {
                (what.clone(), "protected paths", "a person makes this change outside hands")
            }
            G::PushOff | G::PushNoNetwork | G::PushBranchRefused { .. } | G::PushUrl { .. } => (
                "git_push".to_string(),
                "git push policy",
                "a person can change tools-git's push settings (remote, branches, the network \
                 grant) in daemon.toml",
            ),
            _ => return None,
        };
        Some(Denial::new(&what, layer, &self.to_string(), remedy))
    }

    fn is_refusal(&self) -> bool {
        hands_git::GitError::is_refusal(self)
    }
}
