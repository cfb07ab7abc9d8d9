//! The mounts of this process (`/proc/self/mountinfo`), and whether a folder sees a path
//! through one ([`seen_through`]). A folder the person bind-mounted into a root — the state
//! dir, the folder of the config or of a token file — has no name, no link and no folder in
//! common with the root, so neither the path nor the identities on its way tell; the mount
//! table does (found by the tenth attack pass: `mount --bind STATE ROOT/bst`, and one `write`
//! of `bst/approvals.json` let every later `bash` run without a person).

use std::path::{Path, PathBuf};

/// One line of the mount table: the filesystem (its device), the folder of it that is
/// mounted, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mount {
    dev: String,
    root: PathBuf,
    point: PathBuf,
}

/// How a folder sees a path: the name the path has there, and the mount that shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) name: PathBuf,
    pub(super) mount: PathBuf,
}

/// This process's mount table; none when it cannot be read (the other checks still hold).
#[expect(clippy::disallowed_methods, reason = "the kernel's mount table, read to check paths")]
pub(super) fn table() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo").map(|t| parse(&t)).unwrap_or_default()
}

/// The mounts of a mountinfo text, in its order (a later mount hides an earlier one at the
/// same point). Fields: id, parent, major:minor, root, mount point, options, …
pub(super) fn parse(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(' ').skip(2);
            let (dev, root, point) = (f.next()?, f.next()?, f.next()?);
            Some(Mount { dev: dev.to_string(), root: unescape(root), point: unescape(point) })
        })
        .collect()
}

/// A mountinfo path: the kernel writes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// The mount `real` (a real path) lies on — the one with the longest mount point above it,
/// the last of equals — and `real`'s path within that filesystem.
fn locate<'a>(mounts: &'a [Mount], real: &Path) -> Option<(&'a Mount, PathBuf)> {
    let m = mounts
        .iter()
        .filter(|m| real.starts_with(&m.point))
        .max_by_key(|m| m.point.components().count())?;
    let m = mounts.iter().rev().find(|o| o.point == m.point)?;
    let rest = real.strip_prefix(&m.point).ok()?;
    Some((m, m.root.join(rest)))
}

/// Whether the folder `dir` sees `real` (both real paths) through a mount, and how: a mount
/// of `real`'s filesystem at or below `dir` whose mounted folder is `real`'s folder or one
/// above it (the state dir bound into a root); or the mount `dir` lies on, when `dir` shows a
/// folder at or above `real`'s (a root bound from a folder that holds it).
pub(super) fn seen_through(mounts: &[Mount], dir: &Path, real: &Path) -> Option<Seen> {
    let (on, fs_path) = locate(mounts, real)?;
    let below = mounts.iter().filter(|m| m.dev == on.dev && m.point.starts_with(dir));
    for m in below {
        if let Ok(rest) = fs_path.strip_prefix(&m.root) {
            return Some(Seen { name: m.point.join(rest), mount: m.point.clone() });
        }
    }
    let (holds, dir_fs) = locate(mounts, dir)?;
    let rest = fs_path.strip_prefix(&dir_fs).ok().filter(|_| holds.dev == on.dev)?;
    Some(Seen { name: dir.join(rest), mount: holds.point.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root fs, a tmpfs at /tmp, the state dir bound into a project whose name has a space,
    /// and a project bound from a folder of /srv.
    const SAMPLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /tmp rw,nosuid shared:9 - tmpfs tmpfs rw
41 30 8:1 /var/lib/hands /tmp/my\\040proj/bst rw,relatime shared:1 - ext4 /dev/sda1 rw
42 22 8:1 /srv /home/u/work rw,relatime - ext4 /dev/sda1 rw
43 22 0:41 / /home/u/work/cache rw - tmpfs tmpfs rw
";

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn parses_fields_and_escapes() {
        let m = parse(SAMPLE);
        assert_eq!(m.len(), 5);
        assert_eq!(m[2].dev, "8:1");
        assert_eq!(m[2].root, p("/var/lib/hands"));
        assert_eq!(m[2].point, p("/tmp/my proj/bst"));
        assert_eq!(unescape("a\\011b\\134c\\012"), p("a\tb\\c\n"));
        // Not an escape: kept as written.
        assert_eq!(unescape("a\\9b\\04"), p("a\\9b\\04"));
        assert!(parse("garbage\n\n").is_empty());
    }

    #[test]
    fn the_state_dir_bound_into_a_root_is_seen_there() {
        let m = parse(SAMPLE);
        let file = p("/var/lib/hands/approvals.json");
        let seen = seen_through(&m, &p("/tmp/my proj"), &file).unwrap();
        assert_eq!(seen.name, p("/tmp/my proj/bst/approvals.json"));
        assert_eq!(seen.mount, p("/tmp/my proj/bst"));
        // Neither the folder above the bound one nor a sibling of it is seen.
        assert!(seen_through(&m, &p("/tmp/my proj"), &p("/var/lib")).is_none());
        assert!(seen_through(&m, &p("/tmp/my proj"), &p("/var/lib/other")).is_none());
        // Another folder of /tmp sees nothing of it.
        assert!(seen_through(&m, &p("/tmp/other"), &file).is_none());
    }

    #[test]
    fn a_root_bound_from_a_folder_that_holds_the_path_sees_it() {
        let m = parse(SAMPLE);
        let seen = seen_through(&m, &p("/home/u/work"), &p("/srv/keys/agent.token")).unwrap();
        assert_eq!(seen.name, p("/home/u/work/keys/agent.token"));
        assert_eq!(seen.mount, p("/home/u/work"));
        // A folder of the root shows only what lies beneath its own folder of /srv.
        assert!(seen_through(&m, &p("/home/u/work/a"), &p("/srv/keys/x")).is_none());
        assert!(seen_through(&m, &p("/home/u/work/keys"), &p("/srv/keys/x")).is_some());
        // Another filesystem mounted in the root shows nothing of sda1.
        assert!(seen_through(&m, &p("/home/u/work/cache"), &p("/srv/keys/x")).is_none());
        // Nothing in common.
        assert!(seen_through(&m, &p("/home/u/other"), &p("/etc/hands/x")).is_none());
    }

    #[test]
    fn a_later_mount_at_the_same_point_hides_the_earlier() {
        let text = format!("{SAMPLE}50 30 0:40 /elsewhere /tmp rw - tmpfs tmpfs rw\n");
        let m = parse(&text);
        // /tmp is now tmpfs's /elsewhere: /tmp/x is /elsewhere/x of 0:40.
        let (on, fs) = locate(&m, &p("/tmp/x")).unwrap();
        assert_eq!((on.dev.as_str(), fs), ("0:40", p("/elsewhere/x")));
    }
}
