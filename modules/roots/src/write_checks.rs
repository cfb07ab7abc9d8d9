//! What a write may touch ([`Resolver::prepare_write`]): read-only roots, protected, denied
//! and secret paths, what the host trusts, a git dir's control files, hard-linked targets and
//! symlinks that dangle or leave the root; missing parent folders made on the way.

use crate::openat::{fstat, openat2_beneath, statat_nofollow};
use crate::trust::{GitDirPiece, is_piece_name, lock_folder};
use crate::{Located, Made, PathError, Resolver, Result, WriteTarget, fd_path, kind_name};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

impl Resolver {
    /// Prepares a write of the file at `path`: refuses read-only roots, protected, denied and
    /// secret paths, hard-linked targets and symlinks that dangle or leave the root; creates
    /// missing parent folders when `create_parents` is set.
    pub fn prepare_write(&self, path: &str, create_parents: bool) -> Result<WriteTarget> {
        let loc = self.locate(path)?;
        self.prepare_write_at(loc, create_parents, 0)
    }

    fn prepare_write_at(
        &self,
        loc: Located,
        create_parents: bool,
        depth: u32,
    ) -> Result<WriteTarget> {
        let Some(name) = loc.rel.file_name().map(OsStr::to_os_string) else {
            return Err(PathError::IsADirectory { path: loc.abs });
        };
        self.check_writable(&loc.abs)?;
        let parent_rel = loc.rel.parent().unwrap_or(Path::new("")).to_path_buf();
        // A refused write leaves nothing behind: the folders made on its way go again with
        // `made` (empty, as they were just made; one a command filled meanwhile stays). An
        // allowed one carries them to the writer, which keeps them only once it has written.
        let mut made = Made::default();
        let parent = self.open_parent(&loc, &parent_rel, create_parents, &mut made.0)?;
        let mut target = self.target_in(loc, parent, name, depth)?;
        target.made = made;
        Ok(target)
    }

    /// The checks of [`Resolver::prepare_write_at`] once the parent folder is open.
    fn target_in(
        &self,
        loc: Located,
        parent: OwnedFd,
        name: std::ffi::OsString,
        depth: u32,
    ) -> Result<WriteTarget> {
        let (parent_abs, parent_root) = self.real_path(parent.as_fd(), &loc.abs);
        let abs = parent_abs.join(&name);
        // The real location decides: a link inside a writable root into a read-only root or a
        // protected folder does not make it writable.
        if parent_root.is_none() {
            return Err(PathError::Escapes {
                path: loc.abs,
                root: self.roots[loc.root].path.clone(),
            });
        }
        self.check_writable(&abs)?;
        if let Some(wt) = crate::busy::being_made(&abs) {
            let rule = format!("inside `{}`, a worktree git_worktree_add makes now", wt.display());
            return Err(PathError::Protected { path: abs, rule });
        }
        // The folder by identity too: a trusted folder reached under a name the check above
        // cannot know (a bind mount of it inside the root).
        let pst = fstat(&parent, &parent_abs)?;
        self.check_host_path(&abs, Some((pst.st_dev, pst.st_ino)))?;
        let held = self.check_git_control(parent.as_fd(), &parent_abs, &name)?;
        match statat_nofollow(parent.as_fd(), &name) {
            Ok(st) => {
                let ft = FileType::from_raw_mode(st.st_mode);
                match ft {
                    FileType::RegularFile => {
                        self.check_hidden(&abs, Some(&st), true)?;
                        self.check_host_path(&abs, Some((st.st_dev, st.st_ino)))?;
                        if st.st_nlink > 1 {
                            return Err(PathError::HardLinked { path: abs, links: st.st_nlink });
                        }
                        Ok(WriteTarget {
                            parent,
                            name,
                            abs,
                            existing: Some(st),
                            made: Made::default(),
                            held,
                        })
                    }
                    FileType::Symlink => {
                        if depth > 0 {
                            return Err(PathError::LinkLoop { path: abs });
                        }
                        // Follow the link only to where it already points, beneath the root.
                        let fd = self
                            .open_beneath(loc.root, &loc.rel, OFlags::PATH, &loc.abs)
                            .map_err(|e| match e {
                                PathError::NotFound { path } => PathError::DanglingLink { path },
                                other => other,
                            })?;
                        let (target, troot) = self.real_path(fd.as_fd(), &loc.abs);
                        let troot = troot.ok_or_else(|| PathError::Escapes {
                            path: loc.abs.clone(),
                            root: self.roots[loc.root].path.clone(),
                        })?;
                        let rel = target
                            .strip_prefix(&self.roots[troot].path)
                            .unwrap_or(Path::new(""))
                            .to_path_buf();
                        self.prepare_write_at(
                            Located { root: troot, rel, abs: target },
                            false,
                            depth + 1,
                        )
                    }
                    other => Err(PathError::NotRegular { path: abs, kind: kind_name(other) }),
                }
            }
            Err(Errno::NOENT) => {
                self.check_hidden(&abs, None, true)?;
                Ok(WriteTarget { parent, name, abs, existing: None, made: Made::default(), held })
            }
            Err(e) => Err(PathError::Io { path: abs, op: "stat", source: e.into() }),
        }
    }

    /// Refuses writes to read-only roots, protected paths and denied paths, by real path.
    fn check_writable(&self, abs: &Path) -> Result<()> {
        let Some(root) = self.root_of(abs) else {
            return Err(PathError::Outside { path: abs.to_path_buf(), roots: self.roots_list() });
        };
        let r = &self.roots[root];
        if let Some(why) = self.policy.denied(abs, None) {
            return Err(PathError::Denied { path: abs.to_path_buf(), why });
        }
        if !r.writable {
            return Err(PathError::ReadOnlyRoot { path: abs.to_path_buf(), root: r.path.clone() });
        }
        self.check_moved_read_only_roots(abs)?;
        let rel = abs.strip_prefix(&r.path).unwrap_or(Path::new(""));
        if let Some(rule) = self.policy.protected(rel) {
            return Err(PathError::Protected { path: abs.to_path_buf(), rule });
        }
        self.check_host_path(abs, None)?;
        self.host_trusted(abs)
    }

    /// Refuses a write beneath a read-only root that was moved (renamed inside a writable root
    /// by a command): a root is the folder pinned at startup, not its name, so where its
    /// descriptor is now is read-only too. Placing a path by name alone made the moved folder
    /// writable under its new name (decision 0055's "costs and limits", closed by decision
    /// 0070). One `readlink` of the pinned descriptor per read-only root; a root still at its
    /// name is the most specific root's business and costs no more than that.
    fn check_moved_read_only_roots(&self, abs: &Path) -> Result<()> {
        for r in self.roots.iter().filter(|r| !r.writable) {
            let Some(now) = fd_path(r.fd()) else { continue };
            if now != r.path && abs.starts_with(&now) {
                return Err(PathError::ReadOnlyRoot {
                    path: abs.to_path_buf(),
                    root: r.path.clone(),
                });
            }
        }
        Ok(())
    }

    /// Refuses a write to a path the host trusts: by name (`abs`, a real path), or by the
    /// identity `dev_ino` of the file or folder there (another name of the same file).
    fn check_host_path(&self, abs: &Path, dev_ino: Option<(u64, u64)>) -> Result<()> {
        match self.policy.host_path(abs, dev_ino) {
            Some(t) => Err(PathError::Trusted {
                path: abs.to_path_buf(),
                what: t.what.clone(),
                remedy: t.remedy.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Refuses the writes that would let a tool steer what git on the host reads or runs,
    /// wherever the repository lies (nested, bare, a submodule's or worktree's git dir named by
    /// a `gitdir:` line) — by what the folder holds, not by its name or a list made earlier:
    /// a file named `.git` (a `gitdir:` line choosing the git dir); `config`,
    /// `config.worktree`, `commondir` or `hooks` in a folder that holds `HEAD` (a git dir), or
    /// anything below such a `hooks`; and `HEAD` beside one of those (it would turn the folder
    /// into a git dir whose config the tool wrote first). So the order of the writes does not
    /// matter, nor a command making the other piece at the same time: the folder looked at is
    /// locked ([`lock_folder`], as a sandbox's init does for its creates) and the locks are
    /// returned, to be held until the file is in place.
    fn check_git_control(
        &self,
        parent: BorrowedFd<'_>,
        parent_abs: &Path,
        name: &OsStr,
    ) -> Result<Vec<OwnedFd>> {
        let has = |dir: BorrowedFd<'_>, n: &str| statat_nofollow(dir, OsStr::new(n)).is_ok();
        let refuse = |rule: String| Err(PathError::Protected { path: parent_abs.join(name), rule });
        let lock = |dir: BorrowedFd<'_>, at: &Path| {
            lock_folder(dir).map_err(|e| PathError::Io {
                path: at.to_path_buf(),
                op: "lock",
                source: e,
            })
        };
        let mut held = Vec::new();
        if is_piece_name(name.as_bytes()) {
            held.push(lock(parent, parent_abs)?);
        }
        if crate::fold::same(name.as_bytes(), b".git") {
            return refuse(
                "a `.git` file names the git dir that git takes config and hooks from; only git \
                 itself creates one"
                    .to_string(),
            );
        }
        let n = name.to_str().unwrap_or("");
        match GitDirPiece::of(n, |c| has(parent, c)) {
            Some(GitDirPiece::Control) => {
                return refuse(format!("`{n}` of a git dir (the folder holds HEAD)"));
            }
            Some(GitDirPiece::Head) => {
                return refuse(
                    "`HEAD` beside a git config or hooks would make the folder a git dir"
                        .to_string(),
                );
            }
            None => {}
        }
        // Below a `hooks` folder of a git dir (its `hooks/pre-commit`, `hooks/x/y`).
        let Some(root) = self.root_of(parent_abs) else { return Ok(held) };
        let top = &self.roots[root].path;
        let inside = parent_abs.strip_prefix(top).unwrap_or(Path::new(""));
        for rel in crate::trust::hooks_owners(inside) {
            let joined = top.join(rel);
            let gitdir = if rel.as_os_str().is_empty() { top.as_path() } else { &joined };
            let flags = OFlags::PATH | OFlags::DIRECTORY;
            if let Ok(fd) = self.open_beneath(root, rel, flags, gitdir) {
                held.push(lock(fd.as_fd(), gitdir)?);
                if has(fd.as_fd(), "HEAD") {
                    return refuse(
                        "the hooks of a git dir (the folder above holds HEAD)".to_string(),
                    );
                }
            }
        }
        Ok(held)
    }

    /// Opens (creating when asked) the parent folder of a write, one component at a time so
    /// that every folder it makes is made beneath the one before it.
    fn open_parent(
        &self,
        loc: &Located,
        parent_rel: &Path,
        create: bool,
        made: &mut Vec<(OwnedFd, std::ffi::OsString)>,
    ) -> Result<OwnedFd> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        match self.open_beneath(loc.root, parent_rel, flags, &loc.abs) {
            Err(PathError::NotFound { .. }) if create => {}
            other => return other,
        }
        let root_fd = self.roots[loc.root].fd();
        let mut cur: OwnedFd = openat2_beneath(root_fd, Path::new("."), flags)
            .map_err(|e| self.map_open_error(e, &loc.abs, loc.root))?;
        let mut walked = self.roots[loc.root].path.clone();
        for comp in parent_rel.components() {
            let Component::Normal(c) = comp else { continue };
            walked.push(c);
            self.check_writable(&walked)?;
            // The lexical path is not where a folder would be made when an earlier component
            // is an in-root symlink (`l -> denied`): check the real path too, before `mkdirat`.
            if let Some(real) = fd_path(cur.as_fd()) {
                self.check_writable(&real.join(c))?;
            }
            match openat2_beneath(cur.as_fd(), Path::new(c), flags) {
                Ok(fd) => cur = fd,
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(cur.as_fd(), c, Mode::from_raw_mode(0o755)) {
                        Ok(()) => {
                            let dir = rustix::io::fcntl_dupfd_cloexec(&cur, 0)
                                .map_err(|e| self.map_open_error(e, &walked, loc.root))?;
                            made.push((dir, c.to_os_string()));
                        }
                        // A dangling symlink occupies the name: refuse rather than follow it.
                        Err(Errno::EXIST) => {
                            return Err(PathError::DanglingLink { path: walked });
                        }
                        Err(e) => {
                            return Err(PathError::Io {
                                path: walked,
                                op: "mkdir",
                                source: e.into(),
                            });
                        }
                    }
                    cur = openat2_beneath(cur.as_fd(), Path::new(c), flags)
                        .map_err(|e| self.map_open_error(e, &walked, loc.root))?;
                }
                Err(e) => return Err(self.map_open_error(e, &walked, loc.root)),
            }
        }
        Ok(cur)
    }
}
