//! tools-shell's one adapter in the daemon, as tools-fs and tools-git have theirs: it builds the
//! module's [`Shell`] from `daemon.toml`, turns `hands_shell::catalogue` into registry entries
//! (the adapter of `hands_tool::RegisterTasks`: each tool's schema, its check before the gate —
//! `Shell::prepare`, run off the runtime's threads — and its run), and turns an MCP request's
//! context into the [`Caller`] a command or tmux wait runs for: its cancellation, its progress
//! notifications, the client's name, and the client a command's network question may go to.
//! The commands, sessions, widenings and their checks are `hands_shell`'s.

use crate::config::{Config, Grant, ModuleCfg, ModuleId, ShellSettings};
use crate::errors::{Answer, shell_failure};
use crate::registry::{
    CheckFn, Checked, Entry, Handler, Ready, class_of, embedded, parse, parsing, published,
    structured, text_of,
};
use hands_roots::Resolver;
pub use hands_shell::running::RunningCommand;
pub use hands_shell::service::Tee;
pub use hands_shell::{Caller, Progress, Shell, ShellError};
use hands_tool::{
    Check, Files, Go, Made, Output, Params, Prepared, RegisterTasks, Spec, Task, no_files,
};
use rmcp::RoleServer;
use rmcp::model::{JsonObject, ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The module's [`Shell`], from its `[[builtins]]` entry, its validated settings and the
/// daemon's sandbox settings (what the host trusts comes in the resolver's policy).
pub fn new(
    m: &ModuleCfg,
    settings: &ShellSettings,
    config: &Config,
    resolver: Arc<Resolver>,
    lists: &hands_roots::PolicyLists,
    still: Arc<hands_sandbox::still::Still>,
) -> anyhow::Result<Shell> {
    Shell::new(hands_shell::service::Setup {
        module: hands_shell::service::Module {
            name: m.id.name().to_string(),
            roots: m.roots.clone(),
            network: m.has(Grant::Network),
        },
        settings,
        run_as: config.run_as.as_deref(),
        resolver,
        lists,
        state_dir: &config.state_dir,
        enforce: config.sandbox_mode == crate::config::SandboxMode::Enforce,
        answer_cap: config.runner.as_ref().map(|_| answer_cap(settings.output_chars)),
        still,
    })
}

/// What `bash`'s `outputs` may add to one answer over a runner's link: a link frame
/// (`crate::link::MAX_FRAME`) less the rest of a `bash` result — its output twice (structured and text),
/// escaped — and room for the envelope.
fn answer_cap(output_chars: usize) -> u64 {
    let rest = 4 * output_chars + 256 * 1024;
    crate::config::LINK_FRAME.saturating_sub(rest) as u64
}

/// The tools of tools-shell, in their published order, with handlers over `sh`. `network`: the
/// module holds the `network` grant.
pub fn tools(sh: &Arc<Shell>, settings: &ShellSettings, network: bool) -> Vec<Entry> {
    let mut r = Registrar { sh: sh.clone(), entries: Vec::new() };
    hands_shell::catalogue::register(settings, network, &mut r);
    r.entries
}

/// Collects tools-shell's catalogue into entries whose handlers hold the module's [`Shell`].
struct Registrar {
    sh: Arc<Shell>,
    entries: Vec<Entry>,
}

impl RegisterTasks<Shell, ShellError, Caller> for Registrar {
    fn task<P: Params, O: Output>(
        &mut self,
        spec: Spec,
        run: Task<Shell, P, O, ShellError, Caller>,
        text: fn(&O) -> String,
    ) {
        let name = spec.name;
        let call = parsing(&self.sh, name, move |sh, params: P, caller| {
            let reply = run(sh, params, caller);
            async move { shaped(reply.await, name, text, no_files) }
        });
        self.entries.push(Entry::new::<P, O>(ModuleId::Shell, &spec, Handler::Call(call)));
    }

    fn checked<P: Params, G: Prepared, O: Output>(
        &mut self,
        spec: Made,
        check: Check<Shell, P, G>,
        run: Go<Shell, P, G, O, ShellError, Caller>,
        text: fn(&O) -> String,
        files: Files<O>,
    ) {
        let tool = published::<P, O>(spec.name.clone(), &spec.title, spec.description, spec.hints);
        let (sh, name) = (self.sh.clone(), Arc::<str>::from(spec.name));
        let check: CheckFn = Arc::new(move |args, client| {
            let (sh, name, check) = (sh.clone(), name.clone(), check.clone());
            let shape = Shape { text, files };
            Box::pin(async move { prepare(sh, name, check, run, shape, args, client).await })
        });
        self.entries.push(Entry {
            tool,
            module: ModuleId::Shell,
            class: class_of(spec.class),
            handler: Handler::Checked(check),
        });
    }
}

/// How a tool's output becomes its result: its text mirror, and the files it carries.
struct Shape<O> {
    text: fn(&O) -> String,
    files: Files<O>,
}

/// One call's phase before the gate: its arguments parsed as `P`, then `check` for `client`
/// (on a blocking thread when it may walk a folder); refused with its reason and layer, or
/// ready with what the check prepared — shown to the person asked, kept by the audit record,
/// and given to `run`.
async fn prepare<P: Params, G: Prepared, O: Output>(
    sh: Arc<Shell>,
    name: Arc<str>,
    check: Check<Shell, P, G>,
    run: Go<Shell, P, G, O, ShellError, Caller>,
    shape: Shape<O>,
    args: JsonObject,
    client: Arc<str>,
) -> Checked {
    let refused = |why: crate::gate::Refusal, argv: Option<Vec<String>>| {
        let mut shown = JsonObject::new();
        if let Some(argv) = argv {
            shown.insert("argv".into(), serde_json::json!(argv));
        }
        Checked::Refused { why, shown }
    };
    // `needs` may walk a folder; without it the check is a few lookups, done in place on a
    // one-thread runtime (`briefly`).
    let light = args.get("needs").is_none_or(serde_json::Value::is_null);
    let params = match parse::<P>(args, &name) {
        Ok(p) => p,
        Err(e) => {
            let remedy = "fix the arguments as the message says (the tool's inputSchema \
                          describes them)";
            return refused(
                crate::gate::Refusal::new(&name, "arguments", text_of(&e), remedy),
                None,
            );
        }
    };
    let on = sh.clone();
    let checking = move || {
        let r = check(&on, &params, &client);
        (params, r)
    };
    let checked = if light {
        hands_shell::service::briefly(checking).await
    } else {
        tokio::task::spawn_blocking(checking).await.map_err(hands_shell::service::Unfinished::from)
    };
    let (params, prepared) = match checked {
        Ok(done) => done,
        Err(e) => {
            let why = format!("`{name}` could not be checked before the gate: {e}");
            let remedy = "retry; a person can look at the daemon's log";
            return refused(crate::gate::Refusal::new(&name, "sandbox", why, remedy), None);
        }
    };
    let g = match prepared {
        Ok(g) => g,
        Err(r) => {
            let why = crate::gate::Refusal::new(&r.what, r.layer, r.message, &r.remedy);
            return refused(why, r.argv);
        }
    };
    let shown = match serde_json::to_value(&g) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => JsonObject::new(),
    };
    let confirm = g.confirm();
    Checked::Ready(Ready {
        shown,
        confirm,
        run: Box::new(move |caller| {
            Box::pin(async move {
                let done = run(sh, params, g, caller).await;
                shaped(done, &name, shape.text, shape.files)
            })
        }),
    })
}

/// A tools-shell result: structured content plus its text mirror rendered by `text`, then the
/// files the output carries as embedded resources; or the failure as a tool error (a refusal
/// with its denial feedback, audited `refused:`).
fn shaped<O: serde::Serialize>(
    r: Result<O, ShellError>,
    name: &str,
    text: impl Fn(&O) -> String,
    files: Files<O>,
) -> Answer {
    match r {
        Ok(mut out) => {
            let files = files(&mut out);
            let mut result = structured(&out, text(&out), name);
            if result.is_error != Some(true) {
                result.content.extend(files.into_iter().map(embedded));
            }
            Answer::plain(result)
        }
        Err(e) => shell_failure(&e, name),
    }
}

/// Progress notifications to the MCP client that sent a progress token.
struct Notify {
    peer: rmcp::Peer<RoleServer>,
    token: ProgressToken,
}

impl Progress for Notify {
    fn notify(&self, secs: f64, message: String) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let note =
                ProgressNotificationParam::new(self.token.clone(), secs).with_message(message);
            // A client that cannot take a notification still gets its result.
            let _ = self.peer.notify_progress(note).await;
        })
    }
}

/// An MCP request of `client`: cancelled by `notifications/cancelled`, a disconnect, `gone`
/// (the connection's client has gone) or, over HTTP, the call's own hangup token
/// (src/hangups.rs); progress to the client when it sent a token; and, while one of its
/// commands waits on the network proxy, that command's questions put to this client when it
/// can be asked mid-call (`netgate`, the daemon's network gate).
pub fn caller(
    ctx: &RequestContext<RoleServer>,
    gone: &CancellationToken,
    client: &str,
    netgate: Option<&Arc<crate::netgate::NetGate>>,
) -> Caller {
    let mut caller = Caller::new(client, ctx.ct.clone()).cancelled_by(gone.clone());
    let hangup = ctx
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<crate::hangup::Hangup>())
        .map(|h| h.0.clone());
    if let Some(h) = hangup {
        caller = caller.cancelled_by(h);
    }
    if let Some(token) = ctx.meta.get_progress_token() {
        caller = caller.with_progress(Box::new(Notify { peer: ctx.peer.clone(), token }));
    }
    match (netgate, crate::netgate::client_channel(ctx)) {
        (Some(gate), Some(peer)) => {
            let gate = gate.clone();
            caller.with_asks(Box::new(move |token| {
                Some(Box::new(gate.ask_through(token, peer.clone())) as Box<dyn Send>)
            }))
        }
        _ => caller,
    }
}
