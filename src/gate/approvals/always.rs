//! Standing *always* permissions (SPEC §6, decision 0003): `<state_dir>/approvals.json`, one
//! [`Standing`] per client, module and tool, bound to the version of hands it was given for,
//! surviving restarts; replaced whole under a lock file shared with `hands approvals revoke`.

use super::{Approvals, now, random_hex};
use crate::gate::action::Action;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A standing *always* permission.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Standing {
    pub id: String,
    pub client: String,
    pub module: String,
    pub tool: String,
    /// The version of hands (and so of the module) it was given for; another asks again.
    pub version: String,
    pub granted: u64,
}

/// The version a standing permission is bound to.
pub fn module_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Reads the standing *always* permissions (a missing file is none); a file with another
/// name (a hard link, perhaps in a root) is refused, checked on the open file each time.
pub fn read_always(path: &Path) -> anyhow::Result<Vec<Standing>> {
    use crate::config::trusted::one_name::read_one_name;
    match read_one_name(path, "the standing permissions") {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!("{} is not valid ({e}); a person can remove it", path.display())
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    }
}

/// Replaces the standing permissions atomically (temp file, fsync, rename), under a lock file
/// shared with `hands approvals revoke`.
#[expect(
    clippy::disallowed_methods,
    reason = "the state dir's standing permissions, replaced whole"
)]
pub fn update_always(
    path: &Path,
    f: impl FnOnce(&mut Vec<Standing>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let lock_path = path.with_extension("lock");
    let lock_file = std::fs::File::create(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    rustix::fs::flock(&lock_file, rustix::fs::FlockOperation::LockExclusive)
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    let mut all = read_always(path)?;
    f(&mut all)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    let text = serde_json::to_string_pretty(&all).context("cannot encode the permissions")?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}

impl Approvals {
    /// Whether a standing *always* permission covers this client, module and tool at this
    /// version. An unreadable file covers nothing (fails closed).
    pub fn always_allows(&self, a: &Action) -> bool {
        let all = read_always(&self.always_path).unwrap_or_else(|e| {
            tracing::warn!("standing permissions not honoured: {e:#}");
            Vec::new()
        });
        all.iter().any(|s| {
            s.client == a.client
                && s.module == a.module
                && s.tool == a.tool
                && s.version == module_version()
        })
    }

    /// Records an *always* permission.
    pub fn grant_always(&self, a: &Action) -> anyhow::Result<()> {
        let id = format!("p-{}", random_hex(6)?);
        update_always(&self.always_path, |all| {
            all.retain(|s| !(s.client == a.client && s.module == a.module && s.tool == a.tool));
            all.push(Standing {
                id,
                client: a.client.clone(),
                module: a.module.clone(),
                tool: a.tool.clone(),
                version: module_version().to_string(),
                granted: now(),
            });
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn always_permissions_persist_and_are_bound_to_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let ap = Approvals::new(dir.path(), Duration::from_secs(60)).unwrap();
        let a = Action::bash_of("stdio", "ls");
        assert!(!ap.always_allows(&a));
        ap.grant_always(&a).unwrap();
        let again = Approvals::new(dir.path(), Duration::from_secs(60)).unwrap();
        assert!(again.always_allows(&a));
        update_always(&again.always_path, |all| {
            all[0].version = "0.0.1-older".into();
            Ok(())
        })
        .unwrap();
        assert!(!again.always_allows(&a));
    }
}
