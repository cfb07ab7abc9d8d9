//! `list_dir`: one folder's entries, read through the descriptor the resolver opened.

use crate::{FsError, ToolText};
use hands_roots::Resolver;
use rustix::fs::{AtFlags, Dir, FileType};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
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

/// One entry of a folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DirEntry {
    /// File name within the folder.
    pub name: String,
    /// `dir`, `file`, `symlink` or `other` (FIFO, socket, device).
    pub kind: String,
    /// Size in bytes, for files only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Where a symlink points, as written in the link (not followed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// What `list_dir` returns.
#[derive(Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ListDirOutput {
    /// The real absolute path of the folder listed.
    pub path: String,
    /// Folders first, then everything else, each group sorted by name.
    pub entries: Vec<DirEntry>,
    /// Entries in the folder (hidden secret and denied entries not counted).
    pub total: u64,
    /// Whether `limit` cut the list.
    pub truncated: bool,
}

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

    let mut entries = Vec::with_capacity(names.len());
    for (name, dtype) in names {
        let name_os = std::ffi::OsStr::from_bytes(name.to_bytes());
        // An entry that vanished since readdir keeps its readdir type and shows no size.
        let stat = rustix::fs::statat(fd, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).ok();
        let ft = stat.as_ref().map_or(dtype, |s| FileType::from_raw_mode(s.st_mode));
        let kind = match ft {
            FileType::Directory => "dir",
            FileType::RegularFile => "file",
            FileType::Symlink => "symlink",
            _ => "other",
        };
        let ids = stat.as_ref().map(|s| (s.st_dev, s.st_ino));
        if hider.hides(&abs, name_os, ids, kind != "dir") {
            continue;
        }
        let size = match (kind, &stat) {
            ("file", Some(s)) => u64::try_from(s.st_size).ok(),
            _ => None,
        };
        let target = if kind == "symlink" {
            rustix::fs::readlinkat(fd, name.as_c_str(), Vec::new())
                .ok()
                .map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned())
        } else {
            None
        };
        entries.push(DirEntry {
            name: String::from_utf8_lossy(name.to_bytes()).into_owned(),
            kind: kind.to_string(),
            size,
            target,
        });
    }

    entries.sort_by(|a, b| (a.kind != "dir", &a.name).cmp(&(b.kind != "dir", &b.name)));
    let total = entries.len() as u64;
    let truncated = total > limit;
    entries.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(Some(ListDirOutput { path: display(&abs), entries, total, truncated }))
}

fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl ToolText for ListDirOutput {
    fn text(&self) -> String {
        let mut out = format!("{}:\n", self.path);
        if self.entries.is_empty() {
            out.push_str("(empty)\n");
        }
        for e in &self.entries {
            let _ = match (e.kind.as_str(), e.size, &e.target) {
                ("dir", _, _) => writeln!(out, "{}/", e.name),
                (_, _, Some(t)) => writeln!(out, "{} -> {t}", e.name),
                ("file", Some(size), _) => writeln!(out, "{}  {size} bytes", e.name),
                ("file", None, _) => writeln!(out, "{}", e.name),
                (kind, _, _) => writeln!(out, "{}  ({kind})", e.name),
            };
        }
        if self.truncated {
            let _ = writeln!(
                out,
                "[truncated: {} of {} entries shown; raise limit to see more]",
                self.entries.len(),
                self.total
            );
        }
        out
    }
}
