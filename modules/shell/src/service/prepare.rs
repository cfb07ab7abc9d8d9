//! The phase of a call before the gate, in one place (`Shell::prepare`): a command refused
//! when a wall is missing in `enforce`; `run`'s and `os-*`'s argv checked against the
//! allowlist and their binary resolved; `needs` checked into the widening a person is shown
//! (one walk, under the same policy as the launch); a `tmux_send` into a widened session named
//! as the widening it types into; a session the caller did not start (or that is not there)
//! refused before a person is asked about it. What it prepares ([`Prepared`]) is what the person asked and
//! the audit record see besides the arguments as sent, and what the run receives.

use super::Shell;
use crate::ShellError;
use crate::needs::{self, Needs, Widening};
use hands_tool::Refused;
use serde::Serialize;

/// One allowlisted command, checked by the policy and resolved on the configured PATH; as the
/// person asked and the audit record see it, its `argv` and `binary`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Checked {
    /// The binary's name, then the arguments, as asked.
    pub argv: Vec<String>,
    /// The absolute path the binary resolved to; the sandbox runs it as argv[0].
    #[serde(rename = "binary")]
    pub program: std::path::PathBuf,
    /// The device and inode that path had when the configuration was loaded: the launcher
    /// runs that file or nothing.
    #[serde(skip)]
    pub identity: (u64, u64),
    /// Only a person's yes for this one run lets it run.
    #[serde(skip)]
    pub confirm: bool,
}

/// A call that starts a command, or types into a session, as its check sees it.
pub enum Launching<'a> {
    /// `bash`, or `tmux_start` (`session`: the widening lasts for the session's life).
    Command { tool: &'a str, needs: Option<&'a Needs>, session: bool },
    /// `run` or an `os-*` tool: its full argv (`None`: the tool has no entry).
    Program { tool: &'a str, argv: Option<Vec<String>> },
    /// `tmux_send` into `session`, by the client `whose`.
    Send { session: &'a str, whose: &'a str },
    /// `tmux_read` or `tmux_kill` (`tool`) of `session`, by the client `whose`.
    Session { tool: &'a str, session: &'a str, whose: &'a str },
}

/// What a call's check prepared. Serialized (the program's `argv` and `binary`, the checked
/// `needs`), it is added to the arguments the person asked and the audit record see.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Prepared {
    /// `run` and `os-*`: the program as checked.
    #[serde(flatten)]
    pub program: Option<Checked>,
    /// The widening as checked: what the person is shown and exactly what the launch gets (a
    /// `tmux_send`'s: the session's, which it types into).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs: Option<Widening>,
}

impl hands_tool::Prepared for Prepared {
    fn confirm(&self) -> bool {
        self.program.as_ref().is_some_and(|c| c.confirm)
    }
}

/// What a person can do about an argv the allowlist refuses.
pub const ALLOW_REMEDY: &str = "a person can add an entry to tools-shell's commands.allow in \
                                daemon.toml (commands.deny always wins)";

/// What a `needs` widening is checked by, owned, so that a blocking thread can take it.
struct NeedsRules {
    resolver: std::sync::Arc<hands_roots::Resolver>,
    state_dir: std::path::PathBuf,
    state_id: Option<hands_sandbox::launcher::Identity>,
    proxied: bool,
    path_folders: Vec<std::path::PathBuf>,
}

impl NeedsRules {
    /// `f` with the rules.
    fn with<R>(&self, f: impl FnOnce(&needs::Rules<'_>) -> R) -> R {
        f(&needs::Rules {
            policy: self.resolver.policy(),
            trust: self.resolver.trust().map(|t| t.as_ref()),
            state_dir: &self.state_dir,
            state_id: self.state_id,
            proxied: self.proxied,
            path_folders: &self.path_folders,
        })
    }
}

impl Shell {
    fn needs_rules(&self) -> NeedsRules {
        NeedsRules {
            resolver: self.resolver.clone(),
            state_dir: self.state_dir.clone(),
            state_id: self.state_id,
            proxied: self.network_proxied(),
            path_folders: self.path_folders(),
        }
    }

    /// A widening a person approved, checked again just before its run or session starts
    /// ([`needs::recheck`]): a refusal when its folder changed during the question. The walk
    /// is off a multi-thread runtime's workers ([`super::briefly`]).
    pub(crate) async fn recheck_needs(
        &self,
        widening: Option<&Widening>,
    ) -> Result<(), ShellError> {
        let Some(w) = widening.filter(|w| !w.write.is_empty()).cloned() else { return Ok(()) };
        let rules = self.needs_rules();
        super::briefly(move || rules.with(|r| needs::recheck(&w, r)))
            .await
            .map_err(|e| {
                ShellError::Failed(format!("the widening could not be checked again: {e}"))
            })?
            .map_err(|e| ShellError::Changed(e.to_string()))
    }

    /// The secret files a session's widening holds now ([`needs::secrets_now`]), for its
    /// `tmux_send` to mask; why not, when the folder is not the one granted any more.
    pub(crate) async fn widened_secrets(
        &self,
        w: &Widening,
    ) -> Result<Vec<std::path::PathBuf>, needs::Unwalked> {
        if w.write.is_empty() {
            return Ok(Vec::new());
        }
        let (w, rules) = (w.clone(), self.needs_rules());
        super::briefly(move || rules.with(|r| needs::secrets_now(&w, r)))
            .await
            .map_err(|e| needs::Unwalked::Stopped(e.to_string()))?
    }

    /// The check of one call before the gate (see the module's documentation): what it
    /// prepared, or why it is refused before anyone is asked. May block (a `needs` folder is
    /// walked; a session's record is read).
    pub fn prepare(&self, call: Launching<'_>) -> Result<Prepared, Refused> {
        match call {
            Launching::Command { tool, needs, session } => {
                self.refuse_missing_wall(tool)?;
                let Some(n) = needs else { return Ok(Prepared::default()) };
                let lasts = if session { needs::SESSION_LIFE } else { needs::ONE_RUN };
                match self.needs_rules().with(|rules| needs::check(n, rules, lasts)) {
                    Ok(w) => {
                        self.refuse_unmappable(tool, &w)?;
                        Ok(Prepared { needs: Some(w), ..Prepared::default() })
                    }
                    Err(f) => Err(Refused {
                        what: f.what,
                        layer: f.layer,
                        message: format!("`{tool}` is refused before asking anyone: {}", f.why),
                        remedy: f.remedy.into(),
                        argv: None,
                    }),
                }
            }
            Launching::Program { tool, argv } => {
                self.refuse_missing_wall(tool)?;
                let Some(argv) = argv else {
                    let message = format!("`{tool}` has no entry");
                    return Err(refused(tool, "allowlist", message, ALLOW_REMEDY.into(), None));
                };
                match self.check(&argv) {
                    Ok(checked) => Ok(Prepared { program: Some(checked), needs: None }),
                    Err(e) => {
                        let msg = e.to_string();
                        let what = crate::allow::show(&argv);
                        let (layer, remedy) = e.own_layer().unwrap_or(("allowlist", ALLOW_REMEDY));
                        Err(refused(&what, layer, msg, remedy.into(), Some(argv)))
                    }
                }
            }
            Launching::Send { session, whose } => {
                let needs = self.own_session("tmux_send", session, whose)?;
                Ok(Prepared { needs, ..Prepared::default() })
            }
            Launching::Session { tool, session, whose } => {
                self.own_session(tool, session, whose)?;
                Ok(Prepared::default())
            }
        }
    }

    /// `bash`'s `outputs` before anything runs (`crate::outputs::check`): how many, and each
    /// under the roots by name; refused before anyone is asked.
    pub fn check_outputs(&self, cwd: Option<&str>, outputs: &[String]) -> Result<(), Refused> {
        crate::outputs::check(&self.resolver, cwd, outputs).map_err(|e| {
            let remedy = "fix `outputs` as the message says, and call again".into();
            refused("outputs", "arguments", e.to_string(), remedy, None)
        })
    }

    /// A `needs.write` path of another owner than the user a root daemon's commands run as is
    /// bound id-mapped (SPEC §5.2 item 6); where it cannot be, the command could not write it,
    /// so nobody is asked to allow that.
    fn refuse_unmappable(&self, tool: &str, w: &Widening) -> Result<(), Refused> {
        let bare = self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed);
        let Some(ids) = self.run_as.filter(|_| !bare) else { return Ok(()) };
        for g in &w.write {
            if let Err(why) = hands_sandbox::launcher::idmap::support(&g.path, ids) {
                return Err(refused(
                    &g.path.display().to_string(),
                    "sandbox",
                    format!("`{tool}` is refused before asking anyone: needs.write: {why}"),
                    "a person can name a folder commands may write, or set sandbox.run_as as \
                     said"
                        .into(),
                    None,
                ));
            }
        }
        Ok(())
    }

    /// A command that cannot run (a wall missing in `enforce`) is refused before anyone is
    /// asked to approve it (SPEC §5.2).
    fn refuse_missing_wall(&self, tool: &str) -> Result<(), Refused> {
        match self.cannot_run() {
            None => Ok(()),
            Some(e) => {
                // In a container the fix is how it is started (decision 0071).
                let remedy = match hands_sandbox::container::detect() {
                    Some(c) => format!("a person can {}", c.remedy(false)),
                    None => "a person fixes the missing wall as `hands doctor` says, or sets \
                             sandbox.mode = \"best-effort\""
                        .into(),
                };
                Err(refused(tool, "sandbox", e.to_string(), remedy, None))
            }
        }
    }
}

fn refused(
    what: &str,
    layer: &'static str,
    message: String,
    remedy: String,
    argv: Option<Vec<String>>,
) -> Refused {
    Refused { what: what.to_string(), layer, message, remedy, argv }
}
