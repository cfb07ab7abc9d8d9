//! `write`: create or atomically replace a file (temp file in the same folder, fsync, rename),
//! keeping a replaced file's permissions and refusing stale content via `expected_sha256`.

use crate::text::{HASH_LIMIT, parse_sha256, sha256_hex, verify_sha256};
use crate::{FsError, ToolText};
use hands_roots::{PathError, Resolver, WriteTarget};
use rustix::fs::{AtFlags, FileType, Gid, Mode, OFlags, Uid};
use rustix::io::Errno;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicU64, Ordering};

/// Parameters of `write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    /// The file to create or replace: absolute (under a root) or relative to the first root.
    /// Missing parent folders are created.
    pub path: String,
    /// The complete new content of the file, written as UTF-8 exactly as given.
    pub content: String,
    /// The sha256 that `read` returned; if given, the file must exist and still have this
    /// content, else the write is refused as "changed since read".
    #[serde(default)]
    pub expected_sha256: Option<String>,
}

/// The result of `write`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WriteOutput {
    /// The real absolute path written.
    pub path: String,
    /// `created` or `replaced`.
    pub action: String,
    /// Bytes written.
    pub bytes: u64,
    /// sha256 of the new content.
    pub sha256: String,
}

impl ToolText for WriteOutput {
    fn text(&self) -> String {
        format!("{} `{}` ({} bytes, sha256 {})", self.action, self.path, self.bytes, self.sha256)
    }
}

/// Creates or replaces the file at `p.path` atomically.
pub fn write(resolver: &Resolver, p: WriteParams) -> Result<WriteOutput, FsError> {
    let expected = p.expected_sha256.as_deref().map(parse_sha256).transpose()?;
    // With expected_sha256 the file must already exist, so no folder is created for it.
    let target = resolver.prepare_write(&p.path, expected.is_none())?;
    if let Some(expected) = expected {
        let actual = current_sha256(&target)?;
        verify_sha256(&target.abs, &expected, &actual)?;
    }
    let bytes = p.content.as_bytes();
    // A failure from here on (the disk full, the rename refused) drops `target`, and with it
    // the folders made for it (`hands_roots::Made`); a written file keeps them.
    atomic_write(&target, bytes)?;
    target.made.keep();
    Ok(WriteOutput {
        path: target.abs.display().to_string(),
        action: if target.existing.is_some() { "replaced" } else { "created" }.to_string(),
        bytes: bytes.len() as u64,
        sha256: sha256_hex(bytes),
    })
}

/// The sha256 of the file a write target replaces, read through the target's parent without
/// following links, for comparison with `expected_sha256`.
fn current_sha256(target: &WriteTarget) -> Result<String, FsError> {
    let Some(existing) = &target.existing else {
        return Err(FsError::Invalid(format!(
            "`{}` does not exist, so it cannot have expected_sha256; omit expected_sha256 to \
             create it",
            hands_roots::shown(&target.abs)
        )));
    };
    if u64::try_from(existing.st_size).unwrap_or(0) > HASH_LIMIT {
        return Err(FsError::Invalid(format!(
            "`{}` is over 64 MiB, so it has no sha256 and expected_sha256 cannot be used on it; \
             omit expected_sha256",
            hands_roots::shown(&target.abs)
        )));
    }
    // NONBLOCK: if a FIFO was swapped in since resolution, opening it must not hang.
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let fd = rustix::fs::openat(&target.parent, &target.name, flags, Mode::empty())
        .map_err(|e| FsError::io(&target.abs, "open", e.into()))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| FsError::io(&target.abs, "stat", e.into()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || (st.st_dev, st.st_ino) != (existing.st_dev, existing.st_ino)
    {
        return Err(PathError::Changed { path: target.abs.clone() }.into());
    }
    let mut hasher = Sha256::new();
    let mut file = File::from(fd).take(HASH_LIMIT + 1);
    // digest 0.11's hashers are not `io::Write`: fed from a buffer.
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FsError::io(&target.abs, "read", e)),
        };
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Distinguishes the temp files of concurrent writes within this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Longest part of the target's name used in the temp name, so that it stays under NAME_MAX.
const TEMP_NAME_KEEP: usize = 200;

/// Replaces (or creates) the target's file with `bytes` atomically: the content is written
/// to a temp file in the same folder, given the old file's permission bits (0644 for a new
/// file), fsynced and renamed over the name; the folder is then fsynced. The name holds either
/// the old content or the new, never a part.
///
/// The temp file is unnamed (`O_TMPFILE`) while it is written, so a daemon killed mid-write
/// (`kill -9`, a crash, a full disk) leaves nothing behind: the kernel frees an unnamed file
/// with its last descriptor. It gets a name only once complete, for the instant between
/// `linkat` and `rename`. Filesystems without `O_TMPFILE` get a named temp file from the start,
/// removed on failure.
pub fn atomic_write(target: &WriteTarget, bytes: &[u8]) -> Result<(), FsError> {
    if let Some(file) = unnamed_temp(target) {
        fill(target, &file, bytes)?;
        if link_and_rename(target, &file)? {
            sync_dir(target);
            return Ok(());
        }
    }
    let (tmp, file) = create_temp(target)?;
    let result = fill(target, &file, bytes).and_then(|()| {
        rustix::fs::renameat(&target.parent, &tmp, &target.parent, &target.name)
            .map_err(|e| FsError::io(&target.abs, "rename into place", e.into()))
    });
    if let Err(e) = result {
        // Best effort: the error being returned matters more than a failed cleanup.
        let _ = rustix::fs::unlinkat(&target.parent, &tmp, AtFlags::empty());
        return Err(e);
    }
    sync_dir(target);
    Ok(())
}

/// An unnamed file in the target's folder, or `None` where the filesystem (or kernel) has no
/// `O_TMPFILE`; the named path then reports any real error itself.
fn unnamed_temp(target: &WriteTarget) -> Option<File> {
    let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
    rustix::fs::openat(&target.parent, ".", flags, Mode::from_raw_mode(0o600)).ok().map(File::from)
}

/// Gives the complete unnamed file a temp name beside the target and renames it over the
/// target. `Ok(false)` when it cannot be linked (no `/proc`): the caller writes a named temp
/// file instead.
fn link_and_rename(target: &WriteTarget, file: &File) -> Result<bool, FsError> {
    use std::os::fd::AsRawFd;
    let proc_link = format!("/proc/self/fd/{}", file.as_raw_fd());
    for _ in 0..16 {
        let tmp = temp_name(target);
        match rustix::fs::linkat(
            rustix::fs::CWD,
            proc_link.as_str(),
            &target.parent,
            &tmp,
            AtFlags::SYMLINK_FOLLOW,
        ) {
            Ok(()) => {
                return match rustix::fs::renameat(
                    &target.parent,
                    &tmp,
                    &target.parent,
                    &target.name,
                ) {
                    Ok(()) => Ok(true),
                    Err(e) => {
                        let _ = rustix::fs::unlinkat(&target.parent, &tmp, AtFlags::empty());
                        Err(FsError::io(&target.abs, "rename into place", e.into()))
                    }
                };
            }
            Err(Errno::EXIST) => continue,
            Err(Errno::NOSPC | Errno::DQUOT) => {
                return Err(FsError::io(&target.abs, "link the temp file", Errno::NOSPC.into()));
            }
            Err(_) => return Ok(false),
        }
    }
    Ok(false)
}

/// A fresh temp name beside the target: `.NAME.hands-tmp-PID-N`.
fn temp_name(target: &WriteTarget) -> OsString {
    let name = target.name.as_bytes();
    let keep = &name[..name.len().min(TEMP_NAME_KEEP)];
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut tmp = b".".to_vec();
    tmp.extend_from_slice(keep);
    tmp.extend_from_slice(format!(".hands-tmp-{}-{n}", std::process::id()).as_bytes());
    OsString::from_vec(tmp)
}

/// Creates a fresh temp file beside the target, never following or reusing an existing name.
fn create_temp(target: &WriteTarget) -> Result<(OsString, File), FsError> {
    let flags = OFlags::WRONLY
        | OFlags::CREATE
        | OFlags::EXCL
        | OFlags::NOFOLLOW
        | OFlags::CLOEXEC
        | OFlags::NOCTTY;
    let mut last = Errno::EXIST;
    for _ in 0..16 {
        let tmp = temp_name(target);
        match rustix::fs::openat(&target.parent, &tmp, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((tmp, File::from(fd))),
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(e) => {
                last = e;
                break;
            }
        }
    }
    Err(FsError::io(&target.abs, "create a temp file beside", last.into()))
}

/// Writes the content into the temp file, gives it the target's owner and mode, and fsyncs it.
fn fill(target: &WriteTarget, mut file: &File, bytes: &[u8]) -> Result<(), FsError> {
    let io = |op, e| FsError::io(&target.abs, op, e);
    file.write_all(bytes).map_err(|e| io("write", e))?;
    let mode = match &target.existing {
        Some(st) => {
            // Best effort: keeping the owner needs privilege; it is done before the chmod
            // because a chown clears set-id bits.
            let _ = rustix::fs::fchown(
                file,
                Some(Uid::from_raw(st.st_uid)),
                Some(Gid::from_raw(st.st_gid)),
            );
            st.st_mode & 0o7777
        }
        None => 0o644,
    };
    rustix::fs::fchmod(file, Mode::from_raw_mode(mode)).map_err(|e| io("chmod", e.into()))?;
    file.sync_all().map_err(|e| io("fsync", e))?;
    Ok(())
}

/// Fsyncs the target's folder so that the rename survives a crash. Best effort: the new
/// content is already in place, and some filesystems refuse to fsync a folder.
fn sync_dir(target: &WriteTarget) {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if let Ok(dir) = rustix::fs::openat(&target.parent, ".", flags, Mode::empty()) {
        let _ = rustix::fs::fsync(&dir);
    }
}
