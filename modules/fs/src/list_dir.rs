//! `list_dir`: one folder's entries, read through the descriptor the resolver opened.

use crate::{FsError, ToolText};
use hands_roots::Resolver;
use rustix::fs::{AtFlags, Dir, FileType};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const DEFAULT_LIMIT: u64 = 1000;

/// Parameters of `list_dir`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirParams {
    /// Folder to list: absolute, or relative to the first root. Default: the first root.
    pub path: Option<String>,
    /// Most entries to return (default 1000); `truncated` says when there were more.
    pub limit: Option<u64>,
}

/// What `list_dir` returns: the folder's entries by kind, each kind sorted by name. Names map
/// to what else is known of them (a file's size, a link's target) rather than each entry being
/// an object of its own: the same facts in a quarter of the bytes, for clients and the models
/// reading them.
#[derive(Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ListDirOutput {
    /// The real absolute path of the folder listed.
    pub path: String,
    /// Its folders, sorted by name.
    pub folders: Vec<String>,
    /// Its regular files, sorted by name, each with its size in bytes (`null` for a file gone
    /// before its size was read).
    pub files: BTreeMap<String, Option<u64>>,
    /// Its symbolic links, sorted by name, each with where it points as written in the link,
    /// not followed (`null` when the link could not be read). Absent when there are none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub links: BTreeMap<String, Option<String>>,
    /// Its FIFOs, sockets and devices, sorted by name. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other: Vec<String>,
    /// Entries in the folder (hidden secret and denied entries not counted).
    pub total: u64,
    /// Whether `limit` cut the list: folders are kept first, then files, links, the rest.
    pub truncated: bool,
}

/// The kinds of entry, in the order `list_dir` keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Folder,
    File,
    Link,
    Other,
}

/// One entry: its kind, name, and the file's size or the link's target.
type Entry = (Kind, String, Option<u64>, Option<String>);

/// Lists the folder at `p.path`: sizes by `statat` on the folder's descriptor, symlink targets
/// by `readlinkat`, never following a link; entries the policy hides are left out.
pub fn list_dir(resolver: &Resolver, p: ListDirParams) -> Result<ListDirOutput, FsError> {
    list_dir_within(resolver, p, None)?.ok_or(FsError::OverCap)
}

/// `list_dir`, unless the folder's own size (`st_size`) is over `cap`: then `None`, with
/// nothing read but the folder's opening (see [`crate::INLINE_CAP`]).
pub fn list_dir_within(
    resolver: &Resolver,
    p: ListDirParams,
    cap: Option<u64>,
) -> Result<Option<ListDirOutput>, FsError> {
    let limit = p.limit.unwrap_or(DEFAULT_LIMIT);
    let opened = resolver.open_dir(p.path.as_deref().unwrap_or(""))?;
    if cap.is_some_and(|c| opened.size > c) {
        return Ok(None);
    }
    let abs = opened.abs;
    let mut dir = Dir::new(opened.fd).map_err(|e| FsError::io(&abs, "read", e.into()))?;

    // Names first: the descriptor's read position belongs to `dir` while it iterates.
    let mut names: Vec<(CString, FileType)> = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(|e| FsError::io(&abs, "read", e.into()))?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        names.push((name.to_owned(), entry.file_type()));
    }
    let fd = dir.fd().map_err(|e| FsError::io(&abs, "read", e.into()))?;
    let hider = resolver.hider(&abs);

    let mut entries: Vec<Entry> = Vec::with_capacity(names.len());
    for (name, dtype) in names {
        let name_os = std::ffi::OsStr::from_bytes(name.to_bytes());
        // An entry that vanished since readdir keeps its readdir type and shows no size.
        let stat = rustix::fs::statat(fd, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).ok();
        let kind = match stat.as_ref().map_or(dtype, |s| FileType::from_raw_mode(s.st_mode)) {
            FileType::Directory => Kind::Folder,
            FileType::RegularFile => Kind::File,
            FileType::Symlink => Kind::Link,
            _ => Kind::Other,
        };
        let ids = stat.as_ref().map(|s| (s.st_dev, s.st_ino));
        if hider.hides(&abs, name_os, ids, kind != Kind::Folder) {
            continue;
        }
        let size = match (kind, &stat) {
            (Kind::File, Some(s)) => u64::try_from(s.st_size).ok(),
            _ => None,
        };
        let target = if kind == Kind::Link {
            rustix::fs::readlinkat(fd, name.as_c_str(), Vec::new())
                .ok()
                .map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned())
        } else {
            None
        };
        entries.push((kind, String::from_utf8_lossy(name.to_bytes()).into_owned(), size, target));
    }

    entries.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let total = entries.len() as u64;
    let truncated = total > limit;
    entries.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let mut out = ListDirOutput {
        path: display(&abs),
        folders: Vec::new(),
        files: BTreeMap::new(),
        links: BTreeMap::new(),
        other: Vec::new(),
        total,
        truncated,
    };
    for (kind, name, size, target) in entries {
        match kind {
            Kind::Folder => out.folders.push(name),
            Kind::File => {
                out.files.insert(name, size);
            }
            Kind::Link => {
                out.links.insert(name, target);
            }
            Kind::Other => out.other.push(name),
        }
    }
    Ok(Some(out))
}

fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl ListDirOutput {
    /// Entries shown.
    pub fn shown(&self) -> usize {
        self.folders.len() + self.files.len() + self.links.len() + self.other.len()
    }
}

impl ToolText for ListDirOutput {
    fn text(&self) -> String {
        let mut out = format!("{}:\n", self.path);
        if self.shown() == 0 {
            out.push_str("(empty)\n");
        }
        for name in &self.folders {
            let _ = writeln!(out, "{name}/");
        }
        for (name, size) in &self.files {
            let _ = match size {
                Some(size) => writeln!(out, "{name}  {size} bytes"),
                None => writeln!(out, "{name}"),
            };
        }
        for (name, target) in &self.links {
            let _ = match target {
                Some(target) => writeln!(out, "{name} -> {target}"),
                None => writeln!(out, "{name} -> (unreadable link)"),
            };
        }
        for name in &self.other {
            let _ = writeln!(out, "{name}  (FIFO, socket or device)");
        }
        if self.truncated {
            let _ = writeln!(
                out,
                "[truncated: {} of {} entries shown; raise limit to see more]",
                self.shown(),
                self.total
            );
        }
        out
    }
}
