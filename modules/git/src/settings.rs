//! tools-git's `config` table: the raw shape a daemon's config file may hold (strict serde) and
//! its validation into [`Settings`] with concrete values, so a wrong table is a config error at
//! startup that names its key, not a surprise at the first push.

use serde::Deserialize;
use std::path::PathBuf;

/// The `config` table of tools-git, exactly as the file may write it.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawSettings {
    pub author_name: Option<String>,
    pub author_email: Option<String>,
    /// Absent: pushing is off.
    pub push: Option<RawPush>,
}

/// `config.push` of tools-git.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawPush {
    pub remote: Option<String>,
    pub branches: Option<Vec<String>>,
    /// Empty: unset.
    pub ssh_auth_sock: Option<String>,
    /// Empty: unset (trust on first use).
    pub known_hosts: Option<String>,
    /// The only remote URLs or local paths a push may go to (`~` expands).
    pub urls: Option<Vec<String>>,
}

/// One problem in the table; the daemon places it at its file, line and section.
pub use hands_tool::Problem;

/// The validated table: every default filled in, every path `~`-expanded and absolute, the
/// branch patterns and URLs known to compile.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Commit identity `(name, email)`; `None` = the repository's `user.name`/`user.email`.
    pub author: Option<(String, String)>,
    /// `None`: pushing is off.
    pub push: Option<PushSettings>,
}

impl Settings {
    /// What [`crate::Git::new`] takes: these settings and what the daemon decides (the
    /// `network` grant, its state dir).
    pub fn git_settings(&self, network: bool, state_dir: Option<PathBuf>) -> GitSettings {
        GitSettings { author: self.author.clone(), push: self.push.clone(), network, state_dir }
    }
}

impl RawSettings {
    /// Validates the table; `expand` is the daemon's `~` expansion (the only one its config
    /// file knows). Every problem is reported, not just the first.
    pub fn validate(self, expand: &dyn Fn(&str) -> PathBuf) -> Result<Settings, Vec<Problem>> {
        let mut problems = Vec::new();
        let author = match (self.author_name, self.author_email) {
            (Some(name), Some(email)) => {
                if let Err(p) = crate::check_author(&name, &email) {
                    problems.push(p);
                }
                Some((name, email))
            }
            (None, None) => None,
            _ => {
                problems.push(Problem::new(
                    "author_name",
                    "author_name and author_email go together",
                    Some("set both, or neither to use the repository's identity"),
                ));
                None
            }
        };
        let push = self.push.map(|p| {
            let d = PushSettings::default();
            let path = |v: Option<String>| v.filter(|v| !v.is_empty()).map(|v| expand(&v));
            PushSettings {
                remote: p.remote.unwrap_or(d.remote),
                branches: p.branches.unwrap_or(d.branches),
                ssh_auth_sock: path(p.ssh_auth_sock),
                known_hosts: path(p.known_hosts),
                // URLs pass as they are; only a leading `~` (a local path) expands.
                urls: p.urls.map(|list| {
                    list.into_iter()
                        .map(|u| {
                            if u.starts_with('~') {
                                expand(&u).to_string_lossy().into_owned()
                            } else {
                                u
                            }
                        })
                        .collect()
                }),
            }
        });
        if let Some(p) = &push
            && let Err(problem) = crate::compile_push(p.clone())
        {
            problems.push(problem);
        }
        if problems.is_empty() { Ok(Settings { author, push }) } else { Err(problems) }
    }
}

/// The settings of tools-git, validated by [`crate::Git::new`].
#[derive(Debug, Clone, Default)]
pub struct GitSettings {
    /// Commit identity `(name, email)`; `None` = the repository's `user.name`/`user.email`.
    pub author: Option<(String, String)>,
    /// Push policy; `None` = pushing is off.
    pub push: Option<PushSettings>,
    /// Whether the module holds the `network` grant (required by `push`).
    pub network: bool,
    /// The daemon's state dir (absolute): where push over SSH records host keys on first use
    /// when `known_hosts` is not set (`<state_dir>/known_hosts`). `None`: no trust on first
    /// use, so SSH push needs `known_hosts`.
    pub state_dir: Option<PathBuf>,
}

/// Where and what `push` may push.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// The only remote pushed to (default `origin`).
    pub remote: String,
    /// Glob patterns a branch must match (default `["task/*"]`); `*` stops at `/`, `**` does
    /// not.
    pub branches: Vec<String>,
    /// The ssh-agent socket SSH push authenticates through (absolute). libssh2 finds the
    /// agent only through the `SSH_AUTH_SOCK` environment variable, so the embedding process
    /// must set `SSH_AUTH_SOCK` to this path before it starts any thread; `push` refuses if
    /// the two differ. `None`: the process's own `SSH_AUTH_SOCK`.
    pub ssh_auth_sock: Option<PathBuf>,
    /// The known_hosts file SSH host keys are checked against (absolute). `None`: trust on
    /// first use, recorded in `<state_dir>/known_hosts`.
    pub known_hosts: Option<PathBuf>,
    /// The only remote URLs a push may go to (SSH URLs, absolute paths, `file:///` URLs),
    /// whatever the repository's own config says. A local remote outside the roots is
    /// allowed exactly when it is listed. `None`: the configured remote's URL is used as the
    /// repository has it (local remotes only under writable roots).
    pub urls: Option<Vec<String>>,
}

impl Default for PushSettings {
    fn default() -> Self {
        PushSettings {
            remote: "origin".to_string(),
            branches: vec!["task/*".to_string()],
            ssh_auth_sock: None,
            known_hosts: None,
            urls: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn expand(s: &str) -> PathBuf {
        match s.strip_prefix("~/") {
            Some(rest) => Path::new("/home/x").join(rest),
            None => PathBuf::from(s),
        }
    }

    fn validate(raw: RawSettings) -> Result<Settings, Vec<Problem>> {
        raw.validate(&expand)
    }

    #[test]
    fn defaults_are_filled_and_paths_expanded() {
        let raw = RawSettings {
            push: Some(RawPush {
                known_hosts: Some("~/.ssh/known_hosts".into()),
                ssh_auth_sock: Some(String::new()),
                urls: Some(vec!["~/backup.git".into(), "git@h:r.git".into()]),
                ..RawPush::default()
            }),
            ..RawSettings::default()
        };
        let Ok(s) = validate(raw) else { panic!("valid settings refused") };
        let Some(p) = s.push else { panic!("push dropped") };
        assert_eq!(p.remote, "origin");
        assert_eq!(p.branches, vec!["task/*".to_string()]);
        assert_eq!(p.known_hosts, Some(PathBuf::from("/home/x/.ssh/known_hosts")));
        assert_eq!(p.ssh_auth_sock, None);
        assert_eq!(p.urls, Some(vec!["/home/x/backup.git".into(), "git@h:r.git".into()]));
        assert!(s.author.is_none());
    }

    #[test]
    fn every_problem_names_its_key() {
        let raw = RawSettings {
            author_name: Some("Agent".into()),
            push: Some(RawPush { remote: Some("-x".into()), ..RawPush::default() }),
            ..RawSettings::default()
        };
        let Err(problems) = validate(raw) else { panic!("bad settings accepted") };
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["author_name", "push.remote"]);
        let raw = RawSettings {
            push: Some(RawPush {
                branches: Some(vec!["task/*".into(), "[".into()]),
                ..RawPush::default()
            }),
            ..RawSettings::default()
        };
        let Err(problems) = validate(raw) else { panic!("bad glob accepted") };
        assert_eq!(problems[0].key, "push.branches[1]", "{problems:?}");
        let raw = RawSettings {
            push: Some(RawPush {
                urls: Some(vec!["https://h/r.git".into()]),
                ..RawPush::default()
            }),
            ..RawSettings::default()
        };
        let Err(problems) = validate(raw) else { panic!("https url accepted") };
        assert_eq!(problems[0].key, "push.urls[0]", "{problems:?}");
    }
}
