//! The unix sockets in the roots a command must not reach (decision 0107, SPEC §5.2: no host
//! unix sockets). A socket file is reachable by its path from any namespace, and a host
//! program's socket in a root (the person's tmux, another daemon's sessions under a trusted
//! state dir, an editor's or a container engine's IPC) would let a command have it run what
//! the command asks, outside the sandbox. The walk of the roots lists every socket file with
//! its identity; each is masked unless its socket is bound in the calling client's own network
//! namespace ([`hands_sandbox::bound`]): what that client's own programs serve stays theirs to
//! reach, another client's is not.

use super::Shell;
use crate::ShellError;
use hands_roots::lock;
use hands_sandbox::masks::Found;
use hands_sandbox::netns;
use hands_sandbox::resolve::Identity;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A `sock_diag` socket in each holder's namespace, with the number of its last question.
pub(super) type Diags = std::sync::Mutex<HashMap<netns::Process, (OwnedFd, u32)>>;

impl Shell {
    /// The sockets of `found` that `client`'s commands must not reach: every one whose socket
    /// the client's namespace does not hold. Where the client has no namespace of its own to
    /// ask, every one but those below `own` (a tmux session's socket folder, for its client
    /// commands); with one, not even those: a session's own server is bound there, and a
    /// host socket a command moved into its folder is not.
    pub(crate) fn foreign_sockets(
        &self,
        found: &Found,
        client: &str,
        own: Option<&Path>,
    ) -> Result<Vec<(PathBuf, Identity)>, ShellError> {
        let asks = self.netns.is_some()
            && !self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed);
        let mut candidates = found
            .sockets
            .iter()
            .filter(|(p, _)| asks || own.is_none_or(|o| !p.starts_with(o)))
            .peekable();
        if candidates.peek().is_none() {
            return Ok(Vec::new());
        }
        let bound = self.bound_in(client).map_err(|e| {
            ShellError::Sandbox(format!(
                "the unix sockets in the roots could not be told apart (the client's own from \
                 the host's): {e}; commands are refused until they can. A person can remove \
                 the sockets from the roots, or run `hands doctor`"
            ))
        })?;
        Ok(candidates
            .filter(|(_, id)| !bound.contains(&(id.dev, id.ino as u32)))
            .cloned()
            .collect())
    }

    /// The sockets bound in `client`'s network namespace, by their files; none without one of
    /// its own (the host's network, or no namespaces), where no socket is the client's.
    fn bound_in(&self, client: &str) -> std::io::Result<HashSet<(u64, u32)>> {
        let Some(n) = &self.netns else { return Ok(HashSet::new()) };
        if self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(HashSet::new());
        }
        let holder = n.holder(&super::client_key(client)).map_err(std::io::Error::other)?;
        let mut diags = lock(&self.diags);
        diags.retain(|h, _| h.alive());
        let (fd, seq) = match diags.entry(holder) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert((hands_sandbox::listen::diag(&self.exe, holder.pid, holder.start)?, 0))
            }
        };
        *seq = seq.wrapping_add(1);
        let asked = hands_sandbox::bound::bound(fd.as_fd(), *seq);
        if asked.is_err() {
            // A socket left mid-answer would mix answers: the next question gets a new one.
            diags.remove(&holder);
        }
        asked
    }
}
