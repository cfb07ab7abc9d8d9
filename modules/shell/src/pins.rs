//! The programs `run`, `os-*` and `hands exec` may start, by identity (issue 37 point 3,
//! decision 0068): each allowed name is resolved on the module's `path` once, when the
//! configuration is loaded, and its file's device and inode recorded. A call runs that file or
//! nothing: a program replaced since (a `write` of the file tools keeps the exec bit, a build
//! writes a new file) is refused with what changed and what a person can do, by the daemon
//! before anyone is asked and again by the launcher right before it execs.

use crate::allow::{Entry, Policy, check_name};
use crate::settings::ShellTool;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How many names a scan of the `path` folders records at most (`allow = ["*"]`).
const SCAN_LIMIT: usize = 100_000;

/// One program as it was when the configuration was loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The absolute path it was found at (the first `path` folder that has the name).
    pub path: PathBuf,
    /// The device and inode of the file that path led to.
    pub dev: u64,
    pub ino: u64,
}

/// Why a program cannot run as the one the configuration admitted ([`Pins::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// No folder of the module's PATH had `bin` when the configuration was loaded.
    #[error(
        "`{}` was not found in the module's PATH ({path}) when the daemon loaded its \
         configuration; a person can install it there (or add its folder to tools-shell's \
         `path`) and restart the daemon",
        hands_roots::shown(bin)
    )]
    NotFound { bin: String, path: String },
    /// The file `bin` was pinned to is another one now (`now`: its device and inode), or gone
    /// (`None`).
    #[error(
        "`{}` resolved to {} (device {}, inode {}) when the daemon loaded its configuration, \
         and that file is {} now: refused, the program that would run is not the one the \
         configuration admitted; a person who changed it on purpose restarts the daemon",
        hands_roots::shown(bin),
        pinned.path.display(),
        pinned.dev,
        pinned.ino,
        match now {
            Some((dev, ino)) => format!("another (device {dev}, inode {ino})"),
            None => "gone, or no longer an executable file".to_string(),
        }
    )]
    Changed { bin: String, pinned: Pin, now: Option<(u64, u64)> },
}

/// Every allowed name's program, found once.
#[derive(Debug, Clone, Default)]
pub struct Pins {
    by_name: BTreeMap<String, Pin>,
}

impl Pins {
    /// The programs of every allowed name (every executable of the `path` folders for
    /// `allow = ["*"]`) and of every `tools` entry, as they are now.
    pub fn load(policy: &Policy, tools: &[ShellTool], path: &str) -> Pins {
        let mut by_name = BTreeMap::new();
        let named = policy.allow.iter().filter_map(|e| match e {
            Entry::Prefix { bin, .. } => Some(bin.as_str()),
            Entry::Any => None,
        });
        for bin in named.chain(tools.iter().map(|t| t.bin.as_str())) {
            if let Some(p) = find(bin, path) {
                by_name.insert(bin.to_string(), p);
            }
        }
        if policy.allows_everything() {
            for dir in path.split(':').filter(|d| Path::new(d).is_absolute()) {
                let Ok(entries) = std::fs::read_dir(dir) else { continue };
                for e in entries.flatten() {
                    if by_name.len() >= SCAN_LIMIT {
                        break;
                    }
                    let Ok(name) = e.file_name().into_string() else { continue };
                    if by_name.contains_key(&name) {
                        continue;
                    }
                    if let Some(p) = at(&Path::new(dir).join(&name)) {
                        by_name.insert(name, p);
                    }
                }
            }
        }
        Pins { by_name }
    }

    /// The program `bin` runs as: the file recorded at load, if it is still that file.
    pub fn resolve(&self, bin: &str, path: &str) -> Result<&Pin, PinError> {
        let Some(pin) = self.by_name.get(bin) else {
            return Err(PinError::NotFound { bin: bin.to_string(), path: path.to_string() });
        };
        match at(&pin.path) {
            Some(now) if now == *pin => Ok(pin),
            now => Err(PinError::Changed {
                bin: bin.to_string(),
                pinned: pin.clone(),
                now: now.map(|n| (n.dev, n.ino)),
            }),
        }
    }
}

/// `bin` in the first absolute folder of `path` that has it as an executable file.
fn find(bin: &str, path: &str) -> Option<Pin> {
    check_name(bin).ok()?;
    path.split(':').filter(|d| Path::new(d).is_absolute()).find_map(|d| at(&Path::new(d).join(bin)))
}

/// The executable file at `p` (links followed), as a pin.
fn at(p: &Path) -> Option<Pin> {
    let m = std::fs::metadata(p).ok()?;
    (m.is_file() && m.permissions().mode() & 0o111 != 0).then(|| Pin {
        path: p.to_path_buf(),
        dev: m.dev(),
        ino: m.ino(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exe(p: &Path, text: &str) {
        std::fs::write(p, text).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_replaced_program_is_refused_and_an_unchanged_one_runs() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        exe(&bin.join("tool"), "#!/bin/sh\necho tool\n");
        exe(&bin.join("other"), "#!/bin/sh\n");
        let path = bin.to_str().unwrap().to_string();
        let policy = Policy::new(&["tool".into()], &[], Some(&[])).unwrap();
        let pins = Pins::load(&policy, &[], &path);
        assert_eq!(pins.resolve("tool", &path).unwrap().path, bin.join("tool"));
        let err = pins.resolve("other", &path).unwrap_err();
        assert!(matches!(err, PinError::NotFound { .. }), "{err:?}");
        assert!(err.to_string().contains("was not found"), "{err}");
        // Replaced as the file tools do (a new file renamed over it, exec bit kept).
        exe(&bin.join("new"), "#!/bin/sh\necho agent\n");
        std::fs::rename(bin.join("new"), bin.join("tool")).unwrap();
        let err = pins.resolve("tool", &path).unwrap_err();
        assert!(matches!(err, PinError::Changed { now: Some(_), .. }), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("is another") && err.contains("restarts the daemon"), "{err}");
        // `*`: every executable of the folders, found at load.
        let all = Policy::new(&["*".into()], &[], Some(&[])).unwrap();
        let pins = Pins::load(&all, &[], &path);
        assert!(pins.resolve("other", &path).is_ok());
    }
}
