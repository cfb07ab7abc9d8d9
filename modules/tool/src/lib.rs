//! What a `hands` tool is, as data: the catalogue contract between the module crates (which
//! know nothing of MCP) and the daemon's tool registry (which publishes the tools over MCP).
//!
//! A module's catalogue is one function, `register`, that passes each tool's [`Spec`] together
//! with the function implementing it to a [`Register`]. The tool's parameter and output types
//! are those of that function, so the schema a client reads and the code that runs cannot
//! drift apart, and the tool's name is written once. A module whose tools wait for commands
//! (tools-shell) passes async handlers to a [`RegisterTasks`] the same way.

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

mod attachment;
mod problem;
pub use attachment::{Attachment, Body, Files, no_files};
pub use problem::Problem;

/// `n` and the noun in the number it takes: "1 commit", "2 commits", "0 entries". Every count
/// a tool's text shows goes through it, so no answer reads "1 commits".
pub fn counted(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What a call does to the world, as the trust gate classes it (SPEC §6): `[trust]` maps each
/// class to allow, ask or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Looks, changes nothing.
    Read,
    /// Changes files or repositories under the roots.
    Write,
    /// Runs commands or reaches beyond the machine (push).
    External,
}

/// MCP's tool annotations, stated honestly: what a client may assume about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// Changes nothing.
    pub read_only: bool,
    /// May destroy or overwrite what was there.
    pub destructive: bool,
    /// The same call twice has the effect of one.
    pub idempotent: bool,
    /// Reaches the world beyond the roots (a network, a remote).
    pub open_world: bool,
}

impl Hints {
    /// A tool that only looks: read-only, idempotent, closed world.
    pub const LOOKS: Hints =
        Hints { read_only: true, destructive: false, idempotent: true, open_world: false };
}

/// One published tool, as data: what `tools/list` shows besides the schemas, and the class the
/// gate judges it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub name: &'static str,
    pub title: &'static str,
    /// Read by a model on every call: short, concrete, saying limits and defaults.
    pub description: &'static str,
    pub class: Class,
    pub hints: Hints,
}

/// What a tool's parameters are: JSON with a schema.
pub trait Params: DeserializeOwned + JsonSchema + Send + 'static {}
impl<T: DeserializeOwned + JsonSchema + Send + 'static> Params for T {}

/// What a tool's output is: structured content with a schema (its text mirror is the
/// registration's `text` function).
pub trait Output: Serialize + JsonSchema + Send + 'static {}
impl<T: Serialize + JsonSchema + Send + 'static> Output for T {}

/// A tool's implementation over the module's state `S`, failing with the module's error `E`.
pub type Run<S, P, O, E> = fn(&S, P) -> Result<O, E>;

/// The same, stopping with `Ok(None)` right after opening when its target is over the given
/// size cap (bytes), so that a caller may try small calls inline and send large ones elsewhere.
pub type Capped<S, P, O, E> = fn(&S, P, Option<u64>) -> Result<Option<O>, E>;

/// Where a module's catalogue goes: each call publishes one tool, in the order of the calls.
pub trait Register<S, E> {
    /// A tool whose call runs `run`; `text` renders its output for clients that do not read
    /// structured content.
    fn tool<P: Params, O: Output>(
        &mut self,
        spec: Spec,
        run: Run<S, P, O, E>,
        text: fn(&O) -> String,
    );

    /// A tool whose calls are mostly small: `small` may be tried first under a size cap, and
    /// `whole` runs the call without one.
    fn capped<P: Params + Clone, O: Output>(
        &mut self,
        spec: Spec,
        small: Capped<S, P, O, E>,
        whole: Run<S, P, O, E>,
        text: fn(&O) -> String,
    );
}

/// The pending result of a tool that waits ([`Task`]).
pub type Reply<O, E> = Pin<Box<dyn Future<Output = Result<O, E>> + Send>>;

/// A tool's implementation that waits (for a command, a tmux session) over the module's state
/// `S`, given who waits for it: `C` carries the call's client, cancellation and progress.
pub type Task<S, P, O, E, C> = fn(Arc<S>, P, C) -> Reply<O, E>;

/// A call refused before anyone is asked, by a tool's check ([`Check`]): what was blocked, by
/// which layer, why, and what a person can do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub what: String,
    pub layer: &'static str,
    pub message: String,
    pub remedy: String,
    /// The argv the check looked at, when the call names a program: the audit record keeps it.
    pub argv: Option<Vec<String>>,
}

/// What a tool's check prepared for one call that may go on ([`Check`]). Serialized (a JSON
/// object), it is added to the arguments the person asked and the audit record see — the full
/// argv of a program, the widening as checked — and the run receives it ([`Go`]).
pub trait Prepared: Serialize + Send + 'static {
    /// Only a person's yes for this one run lets it run, whatever the trust policy says and
    /// whatever standing permission exists (a confirm-listed program).
    fn confirm(&self) -> bool;
}

/// A tool's phase before the gate over the module's state `S`: its parsed parameters, and the
/// identity of the client that called (`stdio`, an HTTP client's name, `runner:<agent>`),
/// checked against the module's policy, and refused or prepared as `G`. It may block (it may
/// walk a folder); the daemon runs it off its runtime's threads.
pub type Check<S, P, G> = Arc<dyn Fn(&S, &P, &str) -> Result<G, Refused> + Send + Sync>;

/// Runs a call its check prepared, given who waits for it.
pub type Go<S, P, G, O, E, C> = fn(Arc<S>, P, G, C) -> Reply<O, E>;

/// A tool made from the configuration at startup (tools-shell's `os-*`): a [`Spec`] whose
/// name and text are not `'static`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    pub name: String,
    pub title: String,
    pub description: String,
    pub class: Class,
    pub hints: Hints,
}

impl From<Spec> for Made {
    fn from(s: Spec) -> Made {
        Made {
            name: s.name.to_string(),
            title: s.title.to_string(),
            description: s.description.to_string(),
            class: s.class,
            hints: s.hints,
        }
    }
}

/// Where the catalogue of a module whose tools wait goes (tools-shell): each call publishes one
/// tool, in the order of the calls.
pub trait RegisterTasks<S, E, C> {
    /// A tool whose call awaits `run`, given who waits for it; `text` renders its output for
    /// clients that do not read structured content.
    fn task<P: Params, O: Output>(
        &mut self,
        spec: Spec,
        run: Task<S, P, O, E, C>,
        text: fn(&O) -> String,
    );

    /// A tool whose call is checked before the gate: `check` refuses it before anyone is asked
    /// (a wall missing, an argv the allowlist refuses, a widening that can never be granted) or
    /// prepares it — what the person asked sees besides the arguments, and what `run` receives.
    /// `files` takes the files the output carries (`bash`'s `outputs`), which the result returns
    /// after its text; [`no_files`] for a tool that never carries any.
    fn checked<P: Params, G: Prepared, O: Output>(
        &mut self,
        spec: Made,
        check: Check<S, P, G>,
        run: Go<S, P, G, O, E, C>,
        text: fn(&O) -> String,
        files: Files<O>,
    );
}
