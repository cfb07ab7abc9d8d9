//! tools-shell's end of the tool registry: the adapter of `hands_tool::RegisterTasks` that
//! turns `hands_shell::catalogue` (each tool's spec, types and handler, and which are
//! published) into registry entries, the phase before the gate of the tools that run commands
//! (a missing wall in `enforce`; `run`'s and `os-*`'s allowlist), and the shaping of a
//! tools-shell result.

use crate::config::{ModuleId, ShellSettings};
use crate::errors::{ALLOW_REMEDY, Answer, shell_refusal};
use crate::registry::{
    CallFn, CheckFn, Checked, Entry, Handler, Ready, class_of, parse, parsing, published,
    structured, text_of,
};
use crate::shell_mcp::{Caller, Refusal, Shell};
use hands_shell::run::{OsToolParams, RunParams};
use hands_tool::{Launch, Made, Output, Params, RegisterTasks, Spec, Task};
use rmcp::model::JsonObject;
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
            async move { Answer::plain(shaped(reply.await, name, text)) }
        });
        let handler = match launch.starts {
            true => Handler::Checked(starting(&self.sh, name, call)),
            false => Handler::Call(call),
        };
        let mut entry = Entry::new::<P, O>(ModuleId::Shell, &spec, handler);
        // `needs`, the one-run widening, lives outside the tools' own parameters (src/needs.rs).
        if launch.widens {
            crate::needs::publish(&mut entry.tool);
            entry.widens = true;
        }
        self.entries.push(entry);
    }

    fn program<P: Params, O: Output>(&mut self, spec: Made, entry: Option<usize>) {
        let tool = published::<P, O>(spec.name.clone(), &spec.title, spec.description, spec.hints);
        let (sh, name) = (self.sh.clone(), Arc::<str>::from(spec.name));
        let check: CheckFn = Arc::new(move |args| {
            cannot_run(&sh, &name).unwrap_or_else(|| check_program(&sh, &name, entry, args))
        });
        self.entries.push(Entry {
            tool,
            module: ModuleId::Shell,
            class: class_of(spec.class),
            widens: false,
            handler: Handler::Checked(check),
        });
    }
}

/// A tool that starts a command: refused before the gate when it cannot run, else `call`.
fn starting(sh: &Arc<Shell>, name: &'static str, call: CallFn) -> CheckFn {
    let sh = sh.clone();
    Arc::new(move |args| cannot_run(&sh, name).unwrap_or_else(|| Checked::call(&call, args)))
}

/// A command that cannot run (a wall missing in `enforce`) is refused before anyone is asked
/// to approve it (SPEC §5.2).
fn cannot_run(sh: &Shell, name: &str) -> Option<Checked> {
    let Refusal(msg) = sh.cannot_run()?;
    let why = crate::gate::Refusal::new(
        name,
        "sandbox",
        msg,
        "a person fixes the missing wall as `hands doctor` says, or sets \
         sandbox.mode = \"best-effort\"",
    );
    Some(Checked::Refused { why, shown: JsonObject::new() })
}

/// A call of `run` (`entry` is `None`) or of the `os-*` tool of `tools[i]` (`Some(i)`): its
/// parameters parsed, its full argv checked by SPEC §4.4's policy and its binary resolved on
/// PATH, so that the person asked and the audit record see both; or why it is refused (with
/// the argv, when there is one).
fn check_program(
    sh: &Arc<Shell>,
    name: &Arc<str>,
    entry: Option<usize>,
    args: JsonObject,
) -> Checked {
    let refused = |what: &str, msg: String, argv: Option<&[String]>| {
        let mut shown = JsonObject::new();
        if let Some(argv) = argv {
            shown.insert("argv".into(), serde_json::json!(argv));
        }
        let why = crate::gate::Refusal::new(what, "allowlist", msg, ALLOW_REMEDY);
        Checked::Refused { why, shown }
    };
    let parsed = match entry {
        Some(i) => parse::<OsToolParams>(args, name).map(|p| {
            let argv = sh.os_argv(i, &p.args);
            (argv, p.cwd, p.timeout_secs)
        }),
        None => parse::<RunParams>(args, name).map(|p| (Some(p.argv), p.cwd, p.timeout_secs)),
    };
    let (argv, cwd, timeout_secs) = match parsed {
        Ok((Some(argv), cwd, timeout_secs)) => (argv, cwd, timeout_secs),
        Ok((None, ..)) => return refused(name, format!("`{name}` has no entry"), None),
        Err(e) => return refused(name, text_of(&e), None),
    };
    let checked = match sh.check(&argv) {
        Ok(checked) => checked,
        Err(Refusal(msg)) => {
            return refused(&hands_shell::allow::show(&argv), msg, Some(&argv));
        }
    };
    let mut shown = JsonObject::new();
    shown.insert("argv".into(), serde_json::json!(checked.argv));
    shown.insert("binary".into(), serde_json::json!(checked.program));
    let (sh, name) = (sh.clone(), name.clone());
    Checked::Ready(Ready {
        shown,
        confirm: checked.confirm,
        run: Box::new(move |caller| {
            Box::pin(async move {
                let out = sh.run_program(&checked, cwd, timeout_secs, caller, None).await;
                Answer::plain(shaped(out, &name, ToString::to_string))
            })
        }),
    })
}

/// A tools-shell result: structured content plus its text mirror rendered by `text`, or the
/// refusal as a tool error (with denial feedback when a wall or the brake refused it).
fn shaped<O: serde::Serialize>(
    r: Result<O, Refusal>,
    name: &str,
    text: impl Fn(&O) -> String,
) -> rmcp::model::CallToolResult {
    match r {
        Ok(out) => structured(&out, text(&out), name),
        Err(Refusal(msg)) => shell_refusal(msg, name),
    }
}
