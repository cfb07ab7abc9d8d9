//! A sandbox made ready ahead of the next command (decision 0077): once a command has ended,
//! the daemon starts a launcher with the same spec but no command; it builds the whole sandbox
//! (namespaces, the new root, masks, the cgroup leaf, Landlock) and its init waits before the
//! command's fork. The next call whose spec names the same sandbox ([`launcher::Spec::
//! sandbox_key`]: the same masks and identities the daemon's checks see now, the same roots,
//! limits and walls) sends its spec on the report channel and runs at once; any other call, or
//! one that comes after the ready one has gone, starts a launcher of its own as before. The
//! init refuses a call when the view it built is not what it was ([`launcher::Cause::Changed`]:
//! the daemon walks again and starts the call afresh), so a sandbox that waited is held to what
//! a fresh one is. At most one waits in a slot (a module has one for its commands and one for
//! the tmux client commands of the session last used, decision 0078); it dies with the daemon
//! (its parent-death signal), with the module, and at the brake.

use hands_roots::lock;
use hands_sandbox::launcher;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long after a command's end its successor's sandbox is started: the call's answer is on
/// its way first (the launcher's start takes the runtime's thread for its `vfork`).
const AFTER: Duration = Duration::from_millis(2);

/// How long [`Slot::end`] waits for the launcher that waited to tidy up and exit.
const END_WAIT: Duration = Duration::from_secs(2);

/// The module's one sandbox made ready ahead, if any.
#[derive(Default)]
pub(crate) struct Slot(Mutex<State>);

#[derive(Default)]
struct State {
    ready: Option<Ready>,
    /// The brake holds, or the module is ending: none is made.
    held_off: bool,
}

/// A launcher whose init waits for a call, the key of the sandbox it built, and the identity
/// of the home folder it built it from (the launcher checks the home at every start; a ready
/// one is passed over once the home on the host is another, or gone).
struct Ready {
    key: Vec<u8>,
    home: Option<(u64, u64)>,
    child: tokio::process::Child,
    reports: launcher::Reports,
}

impl Slot {
    /// The sandbox made ready for `spec`, given its call: `None` when none waits, it is another
    /// sandbox (dropped: its launcher is killed), it has ended, or the call cannot be sent.
    pub(crate) fn take(
        &self,
        spec: &launcher::Spec,
    ) -> Option<(tokio::process::Child, launcher::Reports)> {
        let mut ready = lock(&self.0).ready.take()?;
        if spec.sandbox_key().ok()? != ready.key
            || home_id(spec).is_none_or(|home| Some(home) != ready.home)
            || !matches!(ready.child.try_wait(), Ok(None))
        {
            return None;
        }
        ready.reports.send_call(spec).ok()?;
        Some((ready.child, ready.reports))
    }

    /// Makes a sandbox ready for a call like the one of `spec` (which ran to its end), unless
    /// one waits already or none can ([`launcher::Spec::ready_for_next`]). Started from a task
    /// of the runtime, never from a blocking thread: the launcher's parent-death signal is the
    /// thread's that started it, and the blocking pool ends idle threads.
    pub(crate) fn prepare(self: &Arc<Self>, spec: &launcher::Spec, launcher_bin: &std::path::Path) {
        if let Ok(s) = self.0.try_lock().as_deref()
            && (s.ready.is_some() || s.held_off)
        {
            return;
        }
        let Some((ready, key)) = spec.ready_for_next() else { return };
        let (slot, bin): (Arc<Self>, PathBuf) = (self.clone(), launcher_bin.to_path_buf());
        tokio::spawn(async move {
            tokio::time::sleep(AFTER).await;
            let mut state = lock(&slot.0);
            if state.ready.is_some() || state.held_off {
                return;
            }
            let home = home_id(&ready);
            match ready.spawn_piped(&bin) {
                Ok((child, reports)) => state.ready = Some(Ready { key, home, child, reports }),
                Err(e) => tracing::debug!("no sandbox made ready ahead: {e}"),
            }
        });
    }

    /// Ends the sandbox that waits, if any, and makes none until [`Slot::resume`] (the brake,
    /// the module's end). Its channel is closed, so its init's wait ends and the launcher
    /// tidies up as after any start that failed — its cgroup leaf removed, which a killed
    /// launcher would leave behind (found by the VM matrix's leftovers check on cgroup v2);
    /// killed only when it has not ended within [`END_WAIT`].
    pub(crate) async fn end(&self) {
        let ready = {
            let mut state = lock(&self.0);
            state.held_off = true;
            state.ready.take()
        };
        let Some(Ready { mut child, reports, .. }) = ready else { return };
        drop(reports);
        if tokio::time::timeout(END_WAIT, child.wait()).await.is_err() {
            let _ = child.kill().await;
        }
    }

    /// Ends the sandbox that waits, if any, without holding the next off: its channel closed,
    /// its launcher tidies up and is reaped in the background (a tmux session ended, whose
    /// socket folder the waiting sandbox binds).
    pub(crate) fn discard(&self) {
        let ready = lock(&self.0).ready.take();
        if let Some(Ready { child, reports, .. }) = ready {
            drop(reports);
            launcher::report::reap_later(child);
        }
    }

    /// Sandboxes are made ready again (the brake lifted).
    pub(crate) fn resume(&self) {
        lock(&self.0).held_off = false;
    }
}

impl super::Shell {
    /// At the daemon's start, once the sandbox self-test has passed: the first `bash` call's
    /// sandbox made ready, as every later one is after the command before it (decision 0078).
    /// Its spec is a `bash` call's in the default working folder; the key leaves the command,
    /// folder and environment out, so it serves any first call that the walk of the roots
    /// then finds the same. Nothing is made where a command could not run now (the brake,
    /// `enforce` with a wall missing) or none can wait (no namespaces).
    pub async fn ready_first(self: &Arc<Self>) {
        let me = self.clone();
        let runs = tokio::task::spawn_blocking(move || me.refuse_when_unsafe().is_ok());
        if runs.await.unwrap_or(false) {
            // For a stdio daemon's one client; an HTTP daemon's first caller may not take it.
            self.prepare_ordinary(super::containment::STDIO).await;
        }
    }

    /// Makes ready the sandbox of an ordinary `bash` call of `client` in the default working
    /// folder: the first call's, and the next one's after a call a person widened (`needs`),
    /// whose own sandbox the next call is unlikely to want (decision 0078).
    pub(crate) async fn prepare_ordinary(&self, client: &str) {
        let Ok(cwd) = self.resolve_cwd(None).await else { return };
        let argv = crate::bash::argv("true");
        match self.spec(argv, &cwd, client, None, None, None).await {
            Ok(spec) => self.ready.prepare(&spec, &self.launcher),
            Err(e) => tracing::debug!("no sandbox made ready for an ordinary call: {e}"),
        }
    }
}

/// The device and inode of the folder at `spec`'s home, if it is one (not followed).
fn home_id(spec: &launcher::Spec) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(spec.home_dir()).ok()?;
    m.is_dir().then(|| (m.dev(), m.ino()))
}
