//! What a `needs.write` path must not reach beyond its own walk (found by session 40's attack
//! pass; decision 0104): what the roots' repositories make the host's git read or run, outside
//! the roots too (an included config, a `core.hooksPath` folder); the global git config and
//! the hooks folder it names; a git dir the path lies in (a bare repository's `hooks`); the
//! home's start-up surface, whether or not a root holds the home; and a unix socket inside (a
//! host program's, which would take commands from the sandbox).

use super::{MAX_SCAN, Rules};
use hands_roots::FileType;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

/// Config files read at most, following the global config's includes.
const GLOBAL_FILES: usize = 64;

/// What the host reads or runs that `p` (absolute, clean, no link on it) is, holds or lies in,
/// with why; or why that cannot be told (then nothing can be granted).
pub(super) fn host_reads(p: &Path, rules: &Rules<'_>) -> Option<String> {
    let touches = |t: &Path| {
        let (links, real) = hands_roots::trust::follow(t);
        links.iter().chain([&real, &t.to_path_buf()]).any(|t| t.starts_with(p) || p.starts_with(t))
    };
    let shown = |t: &Path| hands_roots::shown(&t.display().to_string()).to_string();
    if let Some(trust) = rules.trust {
        let known = match trust.current() {
            Ok(known) => known,
            Err(e) => return Some(format!("what the host's git reads in the roots ({e})")),
        };
        if let Some((t, why)) = known.paths().find(|(t, _)| touches(t)) {
            return Some(format!("{} ({why})", shown(t)));
        }
        if let Some((_, at)) = known.outside.iter().find(|(_, at)| touches(at)) {
            return Some(format!(
                "{}, which the roots' repositories make the host's git read or run",
                shown(at)
            ));
        }
        let mut budget = GLOBAL_FILES;
        let global = trust.global(&mut budget);
        if let Some(f) = global.files.iter().find(|f| touches(f)) {
            return Some(format!("{}, a git config the host's git reads everywhere", shown(f)));
        }
        if let Some(h) = global.hooks_paths.iter().find(|h| h.is_absolute() && touches(h)) {
            return Some(format!(
                "{}, the hooks folder the global git config names (core.hooksPath)",
                shown(h)
            ));
        }
    }
    if let Some(g) = p.ancestors().skip(1).find(|a| is_git_dir(a)) {
        return Some(format!("the git dir {} (its hooks and config run on the host)", shown(g)));
    }
    let home = hands_roots::home_dir()?;
    let surface = hands_sandbox::profiles::home_surface()
        .map(|e| hands_roots::expand_tilde(e, Some(&home)))
        .find(|s| s.is_absolute() && touches(s))?;
    Some(format!(
        "{}, a start-up file of the home (which a login, shell or git runs)",
        shown(&surface)
    ))
}

/// A git dir by what it holds: `HEAD` with `objects` and `refs`, or with `commondir`.
fn is_git_dir(a: &Path) -> bool {
    let has = |n: &str| std::fs::symlink_metadata(a.join(n)).is_ok();
    a.join("HEAD").is_file() && ((has("objects") && has("refs")) || has("commondir"))
}

/// What a walk of a widened folder found beyond its own walk's rules.
#[derive(Default)]
pub(super) struct Scan {
    /// Unix sockets, at any depth.
    pub sockets: Vec<PathBuf>,
    /// A folder that is the daemon's state dir (a bind mount of it placed there).
    pub state: Option<PathBuf>,
}

/// Walks the folder `fd` (named `p`) for unix sockets and for the daemon's state dir (`state`,
/// its identity), at any depth, into mounts too.
pub(super) fn scan(
    p: &Path,
    fd: BorrowedFd<'_>,
    state: Option<hands_sandbox::resolve::Identity>,
) -> std::io::Result<Scan> {
    let start = hands_roots::open_start_at(fd)?;
    let mut found = Scan::default();
    hands_roots::walk_beneath::<std::convert::Infallible>(
        vec![(p.to_path_buf(), start)],
        MAX_SCAN,
        |l| {
            let here = l.folder.fd.and_then(|d| hands_sandbox::resolve::Identity::of(d).ok());
            if here.is_some() && here == state && found.state.is_none() {
                found.state = Some(l.folder.path.to_path_buf());
            }
            for item in l.entries.iter_mut() {
                match item.kind {
                    FileType::Socket => found.sockets.push(l.folder.path.join(&item.name)),
                    FileType::Directory => item.descend = true,
                    _ => {}
                }
            }
            Ok(())
        },
    )
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(found)
}
