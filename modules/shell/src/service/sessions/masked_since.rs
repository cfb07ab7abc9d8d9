//! What a live session is kept from as the roots change: before each `tmux_send`, the secret
//! files (and a session-life widening's) that appeared since it started, and the unix sockets
//! that are not its client's own (decisions 0079, 0101, 0107), masked in its running sandbox.

use super::{CLIENT_TIMEOUT, Meta, write_atomic};
use crate::ShellError;
use crate::service::Shell;
use std::path::PathBuf;

impl Shell {
    /// Masks, in the session's running sandbox, the secret files the roots hold now that it has
    /// not masked yet (a `.env` created after it started), through `hands __remask`
    /// (`hands_sandbox::launcher::remask`), and records them. Refuses when that fails: what is typed next
    /// could read them.
    pub(super) async fn remask(&self, m: &mut Meta) -> Result<(), ShellError> {
        let found = self.found_masks().await?;
        // A session-life widening's folders too: a secret put there after the start (0101).
        let widened = match &m.needs {
            Some(w) => self.widened_secrets(w).await.map_err(|why| {
                ShellError::Failed(format!(
                    "tmux session {:?} has a widening whose folders could not be checked for \
                     secret files: {why}; nothing was typed. tmux_kill the session and start \
                     it again",
                    m.called()
                ))
            })?,
            None => Vec::new(),
        };
        let known: std::collections::HashSet<PathBuf> = m.masked.iter().cloned().collect();
        // A mask stays only while it is a mount in the session's view: a host rename over its
        // file (an editor's atomic save) took it off, and the new file counts as not masked
        // (decision 0079). One under a masked folder is covered by that folder's mask.
        let mounted = hands_sandbox::launcher::remask::mount_points(&m.launcher);
        let held = |p: &PathBuf| {
            known.contains(p)
                && mounted
                    .as_ref()
                    .is_none_or(|on| p.ancestors().any(|a| on.contains(a) && known.contains(a)))
        };
        // And the unix sockets that are not its client's own (decision 0107).
        let client = m.client.as_deref().unwrap_or(crate::service::containment::STDIO);
        let own = self.tmux.socket_dir(&m.name);
        let sockets = self.foreign_sockets(&found, client, Some(&own))?;
        let sockets = sockets.into_iter().map(|(p, _)| p);
        let new: Vec<PathBuf> = found
            .paths
            .iter()
            .cloned()
            .chain(widened)
            .chain(sockets)
            .filter(|p| !held(p))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let name = &m.name;
        let called = m.called.as_deref().unwrap_or(name);
        let refuse = |why: String| {
            let list: Vec<String> = new.iter().map(|p| p.display().to_string()).collect();
            ShellError::Failed(format!(
                "secret files appeared in the roots or its widened folders after tmux session {called:?} started ({}), and \
                 they could not be hidden from it: {why}; nothing was typed. tmux_kill the session \
                 and start it again (a new session masks them)",
                list.join(", ")
            ))
        };
        let paths: Vec<&std::path::Path> = new.iter().map(|p| p.as_path()).collect();
        let answer = hands_sandbox::launcher::remask::request(
            &self.exe,
            &m.launcher,
            &paths,
            CLIENT_TIMEOUT,
        )
        .await
        .map_err(|e| refuse(e.to_string()))?;
        tracing::info!(
            session = %name,
            masked = ?answer.masked,
            absent = ?answer.absent,
            "masked secret files that appeared after the tmux session started"
        );
        m.masked.extend(answer.masked.into_iter().filter(|p| !known.contains(p)));
        let text = serde_json::to_string(&*m).map_err(|e| refuse(e.to_string()))?;
        write_atomic(&self.tmux.meta_path(name), &text)
            .map_err(|e| refuse(format!("cannot record the session: {e}")))
    }
}
