//! A path as the kernel finds it ([`Identity`]): its real path, the identity of every folder
//! above it, and the symbolic links on its way ([`on_the_way`]). Whoever may write the folder
//! that holds such a link can point the path elsewhere — the next daemon's config file, its
//! state dir, a token file, a root — whatever the real path says today (found by the eighth
//! attack pass: `--config root/lnk/daemon.toml` with `lnk` pointing out of the root passed,
//! and a command re-pointed `lnk` at a daemon.toml it wrote; a state dir reached the same way
//! let a command write the standing approvals). A folder mounted into another is the same
//! folder under another name too ([`mountinfo`](super::mountinfo), the tenth attack pass).

use super::mountinfo::{self, Mount, Seen};
use super::{absolute, lenient_canonical};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// A path as the kernel finds it: its real path (the missing tail kept as written), the
/// identity of it and of every existing folder above it, and the links on its way.
pub(super) struct Identity {
    pub(super) real: PathBuf,
    ids: Vec<(u64, u64)>,
    /// Each symbolic link met on the way, and the real folder that holds it.
    links: Vec<(PathBuf, Identity)>,
    /// The mount table as it was when the path was looked at.
    mounts: Vec<Mount>,
}

impl Identity {
    pub(super) fn of(p: &Path) -> Identity {
        let abs = absolute(p);
        let links = on_the_way(&abs)
            .into_iter()
            .map(|(link, folder)| (link, Identity::real(&folder)))
            .collect();
        Identity { links, ..Identity::real(&abs) }
    }

    /// `p`'s identity without its links (a real folder, which has none).
    pub(super) fn real(p: &Path) -> Identity {
        let real = lenient_canonical(p);
        let ids = real
            .ancestors()
            .filter_map(|a| std::fs::metadata(a).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect();
        Identity { real, ids, links: Vec::new(), mounts: mountinfo::table() }
    }

    /// Whether the path is `dir` or lies beneath it: by real path, because a folder on its
    /// way is the same folder as `dir` under another name (a bind mount of it), or because a
    /// mount shows it in `dir` ([`Identity::mounted_in`]).
    pub(super) fn within(&self, dir: &Path) -> bool {
        self.real.starts_with(lenient_canonical(dir))
            || std::fs::metadata(dir).is_ok_and(|m| self.ids.contains(&(m.dev(), m.ino())))
            || self.mounted_in(dir).is_some()
    }

    /// How `dir` sees the path through a mount, when it does: a folder at or above the path
    /// mounted at or below `dir`, or `dir` itself mounted from a folder above the path.
    pub(super) fn mounted_in(&self, dir: &Path) -> Option<Seen> {
        mountinfo::seen_through(&self.mounts, &lenient_canonical(dir), &self.real)
    }

    /// A link on the way that lies in `dir` (or beneath it), if one does: whoever writes `dir`
    /// can point the path elsewhere.
    pub(super) fn link_in(&self, dir: &Path) -> Option<&Path> {
        self.links.iter().find(|(_, folder)| folder.within(dir)).map(|(link, _)| link.as_path())
    }

    /// Where the path is, as the place `dir` is named in ("inside the root /p of tools-fs"):
    /// inside it, or reached through a link inside it; `None` when neither.
    pub(super) fn placed(&self, dir: &Path, inside: &str) -> Option<String> {
        if let Some(seen) =
            self.mounted_in(dir).filter(|_| !self.real.starts_with(lenient_canonical(dir)))
        {
            return Some(format!(
                "{inside}, seen as {} through the mount at {}",
                seen.name.display(),
                seen.mount.display()
            ));
        }
        if self.within(dir) {
            return Some(inside.to_string());
        }
        let link = self.link_in(dir)?;
        Some(format!("behind the link {} {inside}", link.display()))
    }
}

/// Symbolic links followed on one path, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// Each link met while resolving the absolute path `p` — (the link as reached, the real
/// folder that holds it) — up to the first missing name (the rest is taken as written); a
/// folder left again by `..` counts as one, since a link put in its place moves where `..`
/// leads.
pub fn on_the_way(p: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let mut todo: VecDeque<OsString> = names(p);
    let mut cur = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            // Out of `cur` again: who may swap `cur` for a link moves where `..` leads.
            let entry = cur.clone();
            if cur.pop() {
                out.push((entry, cur.clone()));
            }
            continue;
        }
        let next = cur.join(&name);
        let Ok(meta) = next.symlink_metadata() else { break };
        if !meta.file_type().is_symlink() {
            cur = next;
            continue;
        }
        hops += 1;
        let Ok(target) = std::fs::read_link(&next) else { break };
        if hops > MAX_LINKS {
            break;
        }
        out.push((next, cur.clone()));
        if target.is_absolute() {
            cur = PathBuf::from("/");
        }
        for (i, n) in names(&target).into_iter().enumerate() {
            todo.insert(i, n);
        }
    }
    out
}

/// The names of `p` in order (`..` kept, `.` and the root dropped).
fn names(p: &Path) -> VecDeque<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn each_link_on_the_way_with_the_folder_that_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("root/sub")).unwrap();
        std::fs::create_dir_all(base.join("out/cfg")).unwrap();
        symlink(base.join("out"), base.join("root/lnk")).unwrap();
        symlink("../root/sub", base.join("out/rel")).unwrap();
        // Through an absolute link in root/, then a relative one in out/.
        let got = on_the_way(&base.join("root/lnk/rel/daemon.toml"));
        assert_eq!(
            got,
            vec![
                (base.join("root/lnk"), base.join("root")),
                (base.join("out/rel"), base.join("out")),
                // The link's own `..` leaves out/.
                (base.join("out"), base.clone()),
            ]
        );
        // Into a folder and out again: that folder could become a link.
        let back = on_the_way(&base.join("root/sub/../../out/cfg"));
        assert_eq!(
            back,
            vec![(base.join("root/sub"), base.join("root")), (base.join("root"), base.clone())]
        );
        // No link: nothing; a missing name ends the walk.
        assert!(on_the_way(&base.join("out/cfg/daemon.toml")).is_empty());
        assert!(on_the_way(&base.join("gone/lnk/x")).is_empty());
        // A loop ends at the kernel's limit.
        symlink(base.join("loop"), base.join("loop")).unwrap();
        assert_eq!(on_the_way(&base.join("loop/x")).len(), MAX_LINKS);
    }
}
