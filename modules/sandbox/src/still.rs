//! A work tree held still while the daemon's own git reads or writes it by name (decision 0083).
//!
//! libgit2 works on path names: a checkout writes `d/f` by its name, a commit reads `d/f` by
//! its name, after the tool checked `d` once. A command running at the same time (a `bash`
//! call, a tmux session's loop) could swap `d` for a symbolic link in between, and the daemon,
//! which runs on the host with every wall behind it, would write or read wherever the link
//! points (found by the fourth attack pass: a worktree written into the state dir, a hook
//! planted in `.git/hooks`, a secret outside the roots committed). So a git tool that touches a
//! work tree runs only while nothing a command runs can change that tree: no command of the
//! daemon's shell is running there and no tmux session of it lives, and a command that starts
//! meanwhile waits until the tool is done. Two such git tools run one after the other. Other
//! daemons over the same trees see this one's commands and tools, and it theirs, by marks on
//! the folders themselves ([`across`], decision 0084).

mod across;

pub use across::{Marks, Unmarked};
use hands_roots::lock;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

/// The daemon's one record of what may move its trees (shared by tools-shell and tools-git).
#[derive(Default)]
pub struct Still {
    state: Mutex<State>,
    /// Wakes a git tool waiting for another's hold to end.
    freed: Condvar,
    /// Wakes commands waiting for a hold to end.
    released: tokio::sync::Notify,
    shell: OnceLock<Shell>,
}

impl std::fmt::Debug for Still {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Still").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    /// Commands starting or running now.
    moving: usize,
    /// Whether a git tool holds the trees still.
    held: bool,
    /// Paths outside the roots that running commands may write (a person widened them,
    /// `needs.write`), once per command.
    widened: Vec<PathBuf>,
}

/// What tools-shell's commands can change: its writable roots, and its live tmux sessions.
struct Shell {
    roots: Vec<PathBuf>,
    sessions: Box<dyn Fn() -> Vec<String> + Send + Sync>,
}

/// A command counted as running until this is dropped: in its daemon, and by its marks for
/// every other (a tmux session's launcher inherits them, [`Moving::marks`]).
pub struct Moving(Arc<Still>, Marks, Vec<PathBuf>);

impl Moving {
    /// The marks other daemons see while the command runs.
    pub fn marks(&self) -> &Marks {
        &self.1
    }
}

impl Drop for Moving {
    fn drop(&mut self) {
        let mut s = lock(&self.0.state);
        s.moving -= 1;
        for w in &self.2 {
            if let Some(i) = s.widened.iter().position(|p| p == w) {
                s.widened.swap_remove(i);
            }
        }
    }
}

/// The trees held still until this is dropped, with the marks other daemons see.
pub struct Held<'a>(&'a Still, Marks);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // The marks first: a command woken below looks for them at once.
        drop(std::mem::take(&mut self.1));
        lock(&self.0.state).held = false;
        // Every waiting tool: the first to wake holds, or is refused (a command started) and
        // must not leave the others asleep (found by attacking the first version, which woke
        // one: a refused tool's wake-up was lost and the rest waited for good).
        self.0.freed.notify_all();
        self.0.released.notify_waiters();
    }
}

/// Why a git tool cannot hold its tree still now: what runs there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Busy {
    /// Commands running now (`bash`, `run`, `hands exec`).
    pub commands: usize,
    /// The live tmux sessions, by name.
    pub sessions: Vec<String>,
    /// A folder where another daemon's command (or a process holding such a mark) can change
    /// a tree (decision 0084).
    pub elsewhere: Option<PathBuf>,
    /// Why the trees could not be marked or checked for other daemons' commands.
    pub unchecked: Option<Unmarked>,
}

/// Why a command cannot start: a git tool's mark has been on its trees for longer than
/// [`WAIT_ELSEWHERE`], or they could not be marked or checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elsewhere {
    Held(PathBuf),
    Unchecked(Unmarked),
}

impl std::fmt::Display for Elsewhere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = match self {
            Elsewhere::Held(at) => at,
            Elsewhere::Unchecked(why) => {
                return write!(
                    f,
                    "the command did not start: {}; a command's roots are marked so that \
                     other hands daemons' git tools see it (decision 0084). Check that the \
                     daemon can open the folder and has descriptors left",
                    why.0
                );
            }
        };
        write!(
            f,
            "the command did not start: for {}s a git tool's mark has been on `{}` (decision \
             0084): another hands daemon's git tool holds it still, or a process holds such a \
             lock on the folder (a command of this daemon or another can take one). Run the \
             command again when that tool is done; ending the tmux sessions that could hold the \
             lock frees it (/proc/locks lists it as OFDLCK, pid -1, by the folder's inode)",
            WAIT_ELSEWHERE.as_secs(),
            hands_roots::shown(at)
        )
    }
}

/// How long a command waits for another daemon's git tool before it is refused.
pub const WAIT_ELSEWHERE: std::time::Duration = std::time::Duration::from_secs(60);

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        match self.commands {
            0 => {}
            1 => parts.push("a command runs".to_string()),
            n => parts.push(format!("{n} commands run")),
        }
        let names: Vec<String> = self.sessions.iter().take(5).map(|s| format!("`{s}`")).collect();
        match self.sessions.len() {
            0 => {}
            1 => parts.push(format!("tmux session {} lives", names.join(""))),
            n if n > 5 => parts.push(format!("tmux sessions {}, … live", names.join(", "))),
            _ => parts.push(format!("tmux sessions {} live", names.join(", "))),
        }
        if let Some(why) = &self.unchecked {
            parts.push(format!(
                "the roots could not be checked for other hands daemons' commands ({})",
                why.0
            ));
        }
        if let Some(at) = &self.elsewhere {
            parts.push(format!(
                "a command that can change `{}` runs (seen by its mark on the folder, decision \
                 0084: another hands daemon's command or session, which that daemon ends — \
                 tmux_kill, hands stop —, or a session of this one a person let write there)",
                hands_roots::shown(at)
            ));
        }
        f.write_str(&parts.join(" and "))
    }
}

impl Still {
    /// Names what tools-shell's commands can change: its writable roots (as resolved) and a
    /// census of its live tmux sessions. Once; without it nothing conflicts.
    pub fn set_shell(
        &self,
        roots: Vec<PathBuf>,
        sessions: Box<dyn Fn() -> Vec<String> + Send + Sync>,
    ) {
        let _ = self.shell.set(Shell { roots, sessions });
    }

    /// Counts a command as running (a session as starting) until the guard is dropped, and
    /// marks its roots and the paths a person let it write beside them (`widened`) for other
    /// daemons; waits while a git tool holds the trees still — this daemon's, or another's for
    /// up to [`WAIT_ELSEWHERE`].
    pub async fn moving(self: &Arc<Self>, widened: &[PathBuf]) -> Result<Moving, Elsewhere> {
        let began = std::time::Instant::now();
        let roots = self.shell.get().map(|s| s.roots.as_slice()).unwrap_or_default();
        let roots: Vec<PathBuf> = roots.iter().chain(widened).cloned().collect();
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let admitted = {
                let mut s = lock(&self.state);
                (!s.held).then(|| {
                    s.moving += 1;
                    s.widened.extend_from_slice(widened);
                })
            };
            if admitted.is_none() {
                released.await;
                continue;
            }
            // Marked first, then looked: of this and another daemon's tool starting together,
            // one sees the other.
            // Counted from here: a failure below drops the guard, and the count with it.
            let mut moving = Moving(self.clone(), Marks::default(), widened.to_vec());
            moving.1 = Marks::command(&roots).map_err(Elsewhere::Unchecked)?;
            let Some(at) = across::git_at(&roots).map_err(Elsewhere::Unchecked)? else {
                return Ok(moving);
            };
            drop(moving);
            if began.elapsed() >= WAIT_ELSEWHERE {
                return Err(Elsewhere::Held(at));
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Holds `trees` still for a git tool: waits for another git tool's hold to end, then
    /// refuses while a command runs or a tmux session lives where they can change one of
    /// `trees` — this daemon's, or another's (its marks). Blocking: git tools run on blocking
    /// threads.
    pub fn hold(&self, trees: &[&Path]) -> Result<Held<'_>, Busy> {
        let mut s = lock(&self.state);
        while s.held {
            s = self.freed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        if let Some(shell) = self.shell.get()
            && shell.roots.iter().any(|r| trees.iter().any(|t| overlaps(r, t)))
        {
            let sessions = (shell.sessions)();
            if s.moving > 0 || !sessions.is_empty() {
                return Err(Busy { commands: s.moving, sessions, ..Busy::default() });
            }
        }
        // A command a person let write a path beside the roots (found attacking 0084: a
        // widened command's loop raced a git tool whose tree no shell root overlapped).
        if s.widened.iter().any(|w| trees.iter().any(|t| overlaps(w, t))) {
            return Err(Busy { commands: s.moving, ..Busy::default() });
        }
        // Marked first, then looked (as a command does): no command of this daemon runs there
        // now, so a mark found is another's.
        let unchecked = |why| Busy { unchecked: Some(why), ..Busy::default() };
        let marks = Marks::git(trees).map_err(unchecked)?;
        if let Some(at) = across::command_at(trees).map_err(unchecked)? {
            return Err(Busy { elsewhere: Some(at), ..Busy::default() });
        }
        s.held = true;
        Ok(Held(self, marks))
    }
}

/// Whether a command that can write below `root` can change something below `tree`.
fn overlaps(root: &Path, tree: &Path) -> bool {
    root.starts_with(tree) || tree.starts_with(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree of real folders (`p/root/sub`, `q/other`): the marks are taken on them.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        for d in ["p/root/sub", "q/other"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let base = dir.path().to_path_buf();
        (dir, base)
    }

    fn still(base: &Path, sessions: Vec<String>) -> Arc<Still> {
        let s = Arc::new(Still::default());
        s.set_shell(vec![base.join("p/root")], Box::new(move || sessions.clone()));
        s
    }

    #[tokio::test]
    async fn a_running_command_or_a_live_session_refuses_a_hold_where_it_can_write() {
        let (_dir, base) = tree();
        let s = still(&base, Vec::new());
        let m = s.moving(&[]).await.unwrap();
        let busy = s.hold(&[&base.join("p/root/sub")]).map(|_| ()).unwrap_err();
        assert_eq!(busy.commands, 1);
        // Beside the roots: nothing there can move.
        assert!(s.hold(&[&base.join("q/other")]).is_ok());
        drop(m);
        assert!(s.hold(&[&base.join("p/root/sub")]).is_ok(), "no command runs now");
        let s = still(&base, vec!["dev".into()]);
        let busy = s.hold(&[&base.join("p")]).map(|_| ()).unwrap_err();
        assert_eq!(busy.sessions, vec!["dev".to_string()]);
        assert!(busy.to_string().contains("`dev`"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_waiting_tool_answers_when_a_hold_ends() {
        let (_dir, base) = tree();
        for _ in 0..20 {
            let s = still(&base, Vec::new());
            let held = s.hold(&[&base.join("p/root")]).unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            for _ in 0..3 {
                let (s, tx, root) = (s.clone(), tx.clone(), base.join("p/root"));
                std::thread::spawn(move || tx.send(s.hold(&[&root]).is_ok()));
            }
            let s2 = s.clone();
            let cmd = tokio::spawn(async move {
                let _m = s2.moving(&[]).await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            });
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            drop(held);
            for _ in 0..3 {
                let answered = rx.recv_timeout(std::time::Duration::from_secs(5));
                assert!(answered.is_ok(), "a waiting tool never answered");
            }
            cmd.await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_command_waits_while_a_tree_is_held() {
        let (_dir, base) = tree();
        let s = still(&base, Vec::new());
        let held = s.hold(&[&base.join("p/root")]).unwrap();
        let s2 = s.clone();
        let started = tokio::spawn(async move {
            let _m = s2.moving(&[]).await.unwrap();
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!started.is_finished(), "a command started while the tree was held");
        drop(held);
        tokio::time::timeout(std::time::Duration::from_secs(5), started).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_command_waits_while_another_daemons_tool_holds_its_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let s = Arc::new(Still::default());
        s.set_shell(vec![root.clone()], Box::new(Vec::new));
        // Another daemon's git tool, on a tree above the root (its marks: another open file).
        let elsewhere = Marks::git(&[dir.path()]).unwrap();
        let s2 = s.clone();
        let started = tokio::spawn(async move { s2.moving(&[]).await.map(drop) });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!started.is_finished(), "a command started while another daemon held its root");
        drop(elsewhere);
        let done = tokio::time::timeout(std::time::Duration::from_secs(5), started).await;
        assert_eq!(done.unwrap().unwrap(), Ok(()));
        // And this daemon's running command refuses the other's tool (seen by its marks).
        let running = s.moving(&[]).await.unwrap();
        assert_eq!(across::command_at(&[dir.path()]).unwrap().as_deref(), Some(dir.path()));
        assert_eq!(across::command_at(&[&root]), Ok(Some(root.clone())));
        drop(running);
        assert_eq!(across::command_at(&[dir.path()]), Ok(None));
    }
}
