//! How contained the module's commands are: the sandbox self-test run once, the walls'
//! mechanisms and the containment tier a result reports, and the refusal before the gate when
//! `enforce` finds a guarantee missing (SPEC §5.2, §5.3).

use super::{Shell, reachable_by_run_as};
use crate::ShellError;
use hands_sandbox::{container, launcher, probe};

/// The identity of a stdio daemon's one client.
pub(crate) const STDIO: &str = "stdio";

impl Shell {
    /// The sandbox self-test, run once (at startup, or by `hands doctor`). In `best-effort`,
    /// where no user namespace can be made, it runs again without namespaces, and so do the
    /// commands after it.
    pub fn self_test(&self) -> &probe::Probe {
        self.probe.get_or_init(|| {
            // In the namespace of a stdio daemon's one client: where most commands run.
            let run = || match self.netns_spec(self.base.clone(), STDIO) {
                Ok(base) => probe::run(&self.launcher, &base, &self.roots),
                Err(failure) => {
                    // The netns holder's exit code says whether namespaces can be made here.
                    let mut p = probe::failed(failure.why);
                    p.no_namespaces = failure.cause == launcher::Cause::NoNamespaces;
                    p
                }
            };
            let mut p = run();
            if !self.enforce && p.namespaces_refused() {
                self.without_namespaces.store(true, std::sync::atomic::Ordering::Relaxed);
                // Commands as `run_as` now reach their home and the tmux sockets through the
                // host's folders, where a root daemon's state dir is usually closed to them.
                let moved = match self.run_as {
                    Some(_) => reachable_by_run_as(self.tmux.records()).map(|dir| {
                        self.tmux.move_sockets(dir.join("tmux"));
                        let _ = self.bare_home.set(dir.join("home"));
                    }),
                    None => Ok(()),
                };
                p = run();
                if let Err(e) = moved {
                    p.checks.push(probe::Check {
                        name: "home and tmux sockets reachable",
                        holds: Some(false),
                        note: format!("{e:#}"),
                    });
                }
            }
            p.mechanisms = self.mechanisms();
            if self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed) {
                p.container = container::detect().map(|c| c.runtime.name().to_string());
            }
            if self.bound.bound == launcher::Bound::None || self.rlimit_unbound() {
                let mut why = self.bound.passed_over.clone();
                if self.rlimit_unbound() {
                    why.push("RLIMIT_NPROC: binds only inside a user namespace".into());
                }
                p.checks.push(probe::Check {
                    name: "process bound",
                    holds: Some(false),
                    note: why.join("; "),
                });
            }
            p
        })
    }

    /// The walls' mechanisms, as the tier names them.
    fn mechanisms(&self) -> Vec<String> {
        let bare = self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed);
        // The container tier's name says there are no namespaces; its walls are listed.
        let in_container = bare && container::detect().is_some();
        let ns = match (bare, in_container) {
            (false, _) => "namespaces",
            (true, false) => "no namespaces (Landlock and seccomp alone)",
            (true, true) => "no namespaces",
        };
        let landlock = match launcher::landlock_abi() {
            0 => "Landlock unavailable".to_string(),
            1 => "Landlock ABI 1 (not used: it forbids renames across folders)".to_string(),
            n => format!("Landlock ABI {n}"),
        };
        let bound = if self.rlimit_unbound() {
            "no process bound (RLIMIT_NPROC binds only in a user namespace)"
        } else {
            self.bound.bound.name()
        };
        let mut m = vec![ns.to_string(), landlock, "seccomp".into()];
        if in_container {
            m.push("rlimits".into());
        }
        m.push(bound.into());
        if let Some(ids) = self.run_as {
            m.push(format!("as uid {}", ids.uid));
        }
        m
    }

    /// Whether the chosen bound is `RLIMIT_NPROC` but commands run without namespaces: on the
    /// host it would count every process of the uid, so the launcher does not set it.
    fn rlimit_unbound(&self) -> bool {
        self.bound.bound == launcher::Bound::Rlimit
            && self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The process bound chosen at startup, and why better mechanisms were passed over.
    pub fn bound(&self) -> &launcher::bounds::Choice {
        &self.bound
    }

    /// Who the commands run as, for a daemon run as root.
    pub fn run_as(&self) -> Option<launcher::Ids> {
        self.run_as
    }

    /// Adds the network namespace of `client` to a launcher spec (starting its holder when
    /// there is none; blocks briefly the first time). Its failure is typed: the self-test takes
    /// best-effort's path when the cause is that namespaces cannot be made here.
    pub(super) fn netns_spec(
        &self,
        spec: launcher::Builder,
        client: &str,
    ) -> Result<launcher::Builder, launcher::Failure> {
        if self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed) {
            let spec = spec.without_namespaces();
            return Ok(match self.bare_home.get() {
                Some(home) => spec.home(home.clone()),
                None => spec,
            });
        }
        match &self.netns {
            Some(n) => Ok(spec.netns(
                n.holder(&super::client_key(client)).map_err(|e| launcher::Failure::of(&e))?,
            )),
            None => Ok(spec),
        }
    }

    /// The self-test's result once it has finished, without waiting for it.
    pub fn probed(&self) -> Option<&probe::Probe> {
        self.probe.get()
    }

    /// The containment tier of a command run now.
    pub(crate) fn containment(&self) -> String {
        match self.probe.get() {
            Some(p) => p.tier(),
            None => "full (launcher refuses to run without every layer; not probed)".into(),
        }
    }

    /// Refuses while `hands stop` holds, and in `enforce` mode when the self-test found a
    /// guarantee missing.
    pub(crate) fn refuse_when_unsafe(&self) -> Result<(), ShellError> {
        if *self.halt.borrow() {
            return Err(ShellError::Braked);
        }
        self.cannot_run().map_or(Ok(()), Err)
    }

    /// In `enforce` mode, when the self-test found a guarantee missing: why no command can run.
    /// The server asks this before the trust gate, so nobody approves a command that would not
    /// run (SPEC §5.2). It waits for the self-test when that is still running (it starts beside
    /// serving, so that `initialize` answers at once): no command runs before the walls it
    /// needs are known to hold. Callers are off the runtime's threads (`Shell::prepare`).
    pub fn cannot_run(&self) -> Option<ShellError> {
        let p = Some(self.self_test()).filter(|p| self.enforce && !p.missing().is_empty())?;
        let notes = p
            .checks
            .iter()
            .filter(|c| c.holds == Some(false))
            .map(|c| format!("{}: {}", c.name, c.note))
            .collect::<Vec<_>>()
            .join("; ");
        // In a container the fix is how it is started: the flags, whatever the note said.
        let fix = match container::detect() {
            Some(c) => format!("This is {}: a person can {}", c.described(), c.remedy(false)),
            None => "A person can fix the host or set sandbox.mode = \"best-effort\"".into(),
        };
        Some(ShellError::Enforce { missing: p.missing().join(", "), notes, fix })
    }
}
