//! tools-shell's end of the tool registry: the adapter of `hands_tool::RegisterTasks` that
//! turns `hands_shell::catalogue` (each tool's spec, types and handler, and which are
//! published) into registry entries, and the shaping of a tools-shell result.

use crate::config::{ModuleId, ShellSettings};
use crate::errors::{Answer, shell_refusal};
use crate::registry::{Entry, Handler, class_of, parsing, published, structured};
use crate::shell_mcp::{Caller, Refusal, Shell};
use hands_tool::{Launch, Made, Output, Params, RegisterTasks, Spec, Task};
use std::sync::Arc;

/// The tools of tools-shell, in their published order, with handlers over `sh`. `network`: the
/// module holds the `network` grant.
pub fn shell_tools(sh: &Arc<Shell>, settings: &ShellSettings, network: bool) -> Vec<Entry> {
    let mut r = Registrar { sh: sh.clone(), entries: Vec::new() };
    hands_shell::catalogue::register(settings, network, &mut r);
    r.entries
}

/// Collects tools-shell's catalogue into entries whose handlers hold the module's [`Shell`].
struct Registrar {
    sh: Arc<Shell>,
    entries: Vec<Entry>,
}

impl RegisterTasks<Shell, Refusal, Caller> for Registrar {
    fn task<P: Params, O: Output>(
        &mut self,
        spec: Spec,
        launch: Launch,
        run: Task<Shell, P, O, Refusal, Caller>,
        text: fn(&O) -> String,
    ) {
        let name = spec.name;
        let call = parsing(&self.sh, name, move |sh, params: P, caller| {
            let reply = run(sh, params, caller);
            async move { Answer::plain(shaped_by(reply.await, name, text)) }
        });
        let mut entry =
            Entry::new::<P, O>(ModuleId::Shell, &spec, launch.starts, Handler::Call(call));
        // `needs`, the one-run widening, lives outside the tools' own parameters (src/needs.rs).
        if launch.widens {
            crate::needs::publish(&mut entry.tool);
            entry.widens = true;
        }
        self.entries.push(entry);
    }

    fn program<P: Params, O: Output>(&mut self, spec: Made, entry: Option<usize>) {
        let tool = published::<P, O>(spec.name, &spec.title, spec.description, spec.hints);
        self.entries.push(Entry {
            tool,
            module: ModuleId::Shell,
            class: class_of(spec.class),
            runs_commands: true,
            widens: false,
            handler: Handler::Program(entry),
        });
    }
}

/// A tools-shell result: structured content plus its text mirror, or the refusal as a tool
/// error (with denial feedback when a wall or the brake refused it).
pub fn shaped<O: serde::Serialize + std::fmt::Display>(
    r: Result<O, Refusal>,
    name: &str,
) -> rmcp::model::CallToolResult {
    shaped_by(r, name, |out| out.to_string())
}

/// [`shaped`], the text mirror rendered by `text`.
fn shaped_by<O: serde::Serialize>(
    r: Result<O, Refusal>,
    name: &str,
    text: impl Fn(&O) -> String,
) -> rmcp::model::CallToolResult {
    match r {
        Ok(out) => structured(&out, text(&out), name),
        Err(Refusal(msg)) => shell_refusal(msg, name),
    }
}
