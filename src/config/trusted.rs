//! What the host trusts, and who could reach it (SPEC §1 and §3, "What the host trusts is out
//! of reach"). One rule says which module's commands or file tools reach a path — [`reach`]:
//! by the path's real name and by the identity (device and inode) of it and of every folder
//! above it, so that a link or a bind mount into a root does not hide it. What follows from it
//! at startup ([`refuse`], [`placement`]): a config file or the folder hands takes its
//! configuration from that a command or file tool could write is refused, so is a state dir
//! inside a root and a token file one could read; a writable root that is or holds the daemon
//! user's home needs `allow_home = true`. What follows while serving ([`paths`]): the daemon's
//! binary and launcher, its config files and tokens, and with `allow_home` the home's start-up
//! surface are [`HostPath`]s, read-only to every tool and command wherever they lie.
//! `docs/decisions/0053-what-the-host-trusts.md` has the reasoning.

mod identity;
mod mountinfo;
pub mod one_name;
pub mod path_writers;

use identity::Identity;
pub use identity::on_the_way as links_on_the_way;

use super::{Config, ConfigError, ConfigProblem, ModuleId, ModuleSettings};
use hands_roots::HostPath;
pub use hands_roots::lenient_canonical;
use std::path::{Path, PathBuf};

/// A place a module's commands or file tools reach: the module, whether they may write there,
/// and where that is, as a person reads it ("inside the root /p of tools-fs (writable)").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    pub module: ModuleId,
    pub write: bool,
    pub place: String,
}

/// Every place of `config` whose commands or file tools reach `path`, the writable ones first:
/// a root of any module (read-write or read-only), and for tools-shell the folders of the
/// state dir its commands write (their home, the tmux sessions' folders) and the folders every
/// command sees read-only (the system folders, the module's `path`).
pub fn reach(config: &Config, path: &Path) -> Vec<Reach> {
    let id = Identity::of(path);
    let state = absolute(&config.state_dir);
    let mut out = Vec::new();
    for m in &config.modules {
        for r in &m.roots {
            let how = if r.writable { "writable" } else { "read-only" };
            let inside = format!("inside the root {} of {} ({how})", r.path.display(), m.id.name());
            // A link in a read-only root is out of reach: only the real path counts there.
            let place = match r.writable {
                true => id.placed(&r.path, &inside),
                false => id.within(&r.path).then(|| id.placed(&r.path, &inside)).flatten(),
            };
            if let Some(place) = place {
                out.push(Reach { module: m.id, write: r.writable, place });
            }
        }
        let ModuleSettings::Shell(sh) = &m.settings else { continue };
        for (dir, what) in [("sandbox-home", "their home"), ("tmux", "their tmux sessions")] {
            let dir = state.join(dir);
            let inside = format!(
                "inside {}, a folder every command of {} sees and writes ({what})",
                dir.display(),
                m.id.name()
            );
            if let Some(place) = id.placed(&dir, &inside) {
                out.push(Reach { module: m.id, write: true, place });
            }
        }
        let seen = hands_sandbox::launcher::SYSTEM
            .iter()
            .copied()
            .chain(sh.command_path.split(':').filter(|d| Path::new(d).is_absolute()));
        for dir in seen.map(Path::new).filter(|d| id.within(d)) {
            let place =
                format!("inside {}, a folder every command of {} sees", dir.display(), m.id.name());
            out.push(Reach { module: m.id, write: false, place });
        }
    }
    out.sort_by_key(|r| !r.write);
    out
}

/// Where a command or file tool of `config` could write `path`, unless the path is one the
/// sandbox keeps read-only there anyway (the home's start-up surface, under `allow_home`).
fn writer(config: &Config, path: &Path, surface: &[PathBuf]) -> Option<Reach> {
    let id = Identity::of(path);
    if surface.iter().any(|s| id.within(s)) {
        return None;
    }
    reach(config, path).into_iter().find(|r| r.write)
}

/// One problem of the file (or of the embedded default), with its remedy.
pub(super) fn problem(config: &Config, key: &str, message: String, hint: &str) -> ConfigError {
    ConfigError {
        file: config.source.clone(),
        problems: vec![ConfigProblem {
            line: None,
            section: String::new(),
            key: key.to_string(),
            message,
            hint: Some(hint.to_string()),
        }],
    }
}

/// Refuses a config file that a command or file tool of that same configuration could write:
/// the next daemon would follow what the agent wrote (SPEC §1). Every subcommand checks it, so
/// that none follows such a file.
pub fn placement(config: &Config) -> Result<(), ConfigError> {
    let Some(file) = &config.file else { return Ok(()) };
    match writer(config, file, &home_surface(config)) {
        None => Ok(()),
        Some(r) => Err(problem(
            config,
            "",
            format!(
                "this configuration lies {}, where a command or file tool of {} could rewrite \
                 it: the next `hands serve` would follow what the agent wrote (its roots, its \
                 trust)",
                r.place,
                r.module.name()
            ),
            "keep daemon.toml outside every writable root, mounted into none — \
             ~/.config/hands/daemon.toml is \
             where hands looks without --config — or declare narrower roots",
        )),
    }
}

/// What `serve` (and `check` and `doctor`, which refuse what it refuses) checks before it
/// builds anything: the embedded default not run from the home; [`placement`]; the folder
/// hands takes its configuration from (and `$HANDS_CONFIG`'s file) out of every writable root;
/// the state dir in no root and holding none; each token file out of the reach of commands and
/// file tools.
pub fn refuse(config: &Config) -> Result<(), ConfigError> {
    if config.file.is_none() && config.source == super::EMBEDDED {
        let homes = homes();
        for m in &config.modules {
            for r in m.roots.iter().filter(|r| r.writable) {
                if let Some(home) = homes.iter().find(|h| Identity::of(h).within(&r.path)) {
                    return Err(problem(
                        config,
                        "",
                        format!(
                            "the current folder {} is (or holds) your home {}: with no \
                             configuration hands serves the current folder, and commands could \
                             write what your next login, terminal or git runs (~/.bashrc, \
                             ~/.gitconfig, ~/.local/bin)",
                            r.path.display(),
                            home.display()
                        ),
                        "run it from a project folder (cd ~/project && hands serve), or \
                         declare the folders in ~/.config/hands/daemon.toml",
                    ));
                }
            }
        }
    }
    placement(config)?;
    one_name::refuse(config)?;
    let surface = home_surface(config);
    let looked_in = super::user_config_file()
        .and_then(|f| f.parent().map(Path::to_path_buf))
        .into_iter()
        .chain(std::env::var_os("HANDS_CONFIG").filter(|p| !p.is_empty()).map(PathBuf::from));
    for place in looked_in {
        if let Some(r) = writer(config, &place, &surface) {
            return Err(problem(
                config,
                "",
                format!(
                    "hands takes its configuration from {}, which lies {}: a command could \
                     write a daemon.toml there that the next `hands serve`, `stop`, \
                     `approvals` and `exec` would follow",
                    place.display(),
                    r.place
                ),
                "declare narrower roots (the project folders), or, for a root that is the \
                 home, set allow_home = true on its entry: the home's start-up files, \
                 ~/.config/hands among them, are then read-only to every tool and command",
            ));
        }
    }
    refuse_state_dir(config)?;
    refuse_root_links(config)?;
    path_writers::refuse(config)?;
    for t in token_files(config) {
        if let Some(r) = readable(config, &t.file) {
            return Err(problem(
                config,
                &t.key,
                format!(
                    "token_file {} lies {}, where a command or file tool could read the token \
                     and call the tools as {}",
                    t.file.display(),
                    r.place,
                    t.whose
                ),
                &format!(
                    "keep it outside every root and every folder commands see, mounted into \
                     none, e.g. \
                     ~/.config/hands/{}.token (chmod 600)",
                    t.name
                ),
            ));
        }
    }
    Ok(())
}

/// The state dir holds what the daemon trusts and commands must not touch — the audit log,
/// the standing permissions, the control sockets, tmux session records — so it may not lie
/// inside a root (where the file tools and commands could rewrite it), nor contain one.
fn refuse_state_dir(config: &Config) -> Result<(), ConfigError> {
    let state = absolute(&config.state_dir);
    let id = Identity::of(&state);
    for m in &config.modules {
        for r in &m.roots {
            let link = if r.writable { id.link_in(&r.path) } else { None };
            if id.within(&r.path) || Identity::of(&r.path).within(&state) || link.is_some() {
                let how = match (
                    link,
                    id.mounted_in(&r.path).filter(|_| !id.real.starts_with(&r.path)),
                ) {
                    (Some(l), _) => {
                        format!("is reached through the link {}, which lies", l.display())
                    }
                    (None, Some(m)) => format!(
                        "is seen as {} through the mount at {}, which lies",
                        m.name.display(),
                        m.mount.display()
                    ),
                    (None, None) => "lies".to_string(),
                };
                return Err(problem(
                    config,
                    "[daemon] state_dir",
                    format!(
                        "the state dir {} {how} inside the root {} of {} (or holds it): \
                         commands and file tools could rewrite the audit log and grant \
                         themselves approvals",
                        id.real.display(),
                        r.path.display(),
                        m.id.name()
                    ),
                    "set [daemon] state_dir to a folder outside every root, named without a \
                     link inside a writable root, and mounted into none (`umount` it there), \
                     or declare a narrower root (with no config, run hands from a project folder rather \
                     than from your home)",
                ));
            }
        }
    }
    Ok(())
}

/// A root named through a link that a command or file tool could replace: the next daemon
/// would serve whatever folder the agent pointed it at (`/etc`, with write, for a root daemon).
fn refuse_root_links(config: &Config) -> Result<(), ConfigError> {
    for m in &config.modules {
        for l in &m.root_links {
            let writable = config.modules.iter().flat_map(|w| w.roots.iter().map(move |r| (w, r)));
            for (w, r) in writable.filter(|(_, r)| r.writable) {
                if !Identity::real(&l.folder).within(&r.path) {
                    continue;
                }
                return Err(problem(
                    config,
                    &format!("[[builtins]] id \"{}\" filesystem", m.id.name()),
                    format!(
                        "the root `{}` is reached through the link {}, which lies inside the \
                         writable root {} of {}: a command could point the link elsewhere, and \
                         the next `hands serve` would serve that folder",
                        l.given,
                        l.link.display(),
                        r.path.display(),
                        w.id.name()
                    ),
                    "name the folder itself (its real path), not a link inside a writable root",
                ));
            }
        }
    }
    Ok(())
}

/// A token file of the configuration: its key, the file, whose login it is, and a file name
/// for it in the remedy.
struct TokenFile {
    key: String,
    file: PathBuf,
    whose: String,
    name: String,
}

/// Every token file of the configuration (HTTP clients', the dashboard's, the runner's).
fn token_files(config: &Config) -> Vec<TokenFile> {
    let http = config.http.iter().flat_map(|h| &h.clients).filter_map(|c| {
        Some(TokenFile {
            key: format!("[[server.http.clients]] `{}`", c.name),
            file: c.token_file.clone()?,
            whose: format!("`{}`", c.name),
            name: c.name.clone(),
        })
    });
    let dashboard = config.dashboard.iter().filter_map(|d| {
        Some(TokenFile {
            key: "[server.dashboard]".to_string(),
            file: d.token_file.clone()?,
            whose: "the person (the dashboard)".to_string(),
            name: "dashboard".to_string(),
        })
    });
    // The runner's token lets whoever holds it be this runner at the relay, and so receive
    // the organization's agents' sessions.
    let runner = config.runner.iter().filter_map(|r| match &r.token {
        super::TokenSource::File(file) => Some(TokenFile {
            key: "[runner]".to_string(),
            file: file.clone(),
            whose: format!("runner `{}` at the relay", r.name),
            name: "runner".to_string(),
        }),
        super::TokenSource::Env(_) => None,
    });
    http.chain(dashboard).chain(runner).collect()
}

/// Where commands or file tools could read `file`, when they could ([`reach`]), unless a
/// credential or `sandbox.deny` entry masks it there. A token or login kept there could be used
/// by the agent itself.
pub fn readable(config: &Config, file: &Path) -> Option<Reach> {
    let real = lenient_canonical(&absolute(file));
    let masked = hands_sandbox::profiles::credentials()
        .map(|c| super::expand_tilde(c, super::home_dir().as_deref()))
        .chain(config.deny.iter().cloned())
        .any(|d| real.starts_with(&d));
    if masked {
        return None;
    }
    reach(config, file).into_iter().next()
}

/// The daemon user's homes: `$HOME`, and the home the passwd database gives its uid (a login's
/// home, whatever the environment says), each once.
pub fn homes() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let passwd = hands_sandbox::launcher::own_passwd_home();
    for h in super::home_dir().into_iter().chain(passwd) {
        let h = lenient_canonical(&h);
        if h.is_absolute() && h.parent().is_some() && !out.contains(&h) {
            out.push(h);
        }
    }
    out
}

/// Whether the writable root `root` is or holds one of the daemon user's homes; that home.
pub fn holds_home(root: &Path) -> Option<PathBuf> {
    homes().into_iter().find(|h| Identity::of(h).within(root))
}

/// The home's start-up surface (`sandbox-profiles/home-surface.txt`, and the folders of the
/// daemon's PATH inside a writable root) of every home a writable root holds — which, once
/// the configuration is valid, it does only with `allow_home = true`.
fn home_surface(config: &Config) -> Vec<PathBuf> {
    let writable: Vec<&Path> = (config.modules.iter().flat_map(|m| &m.roots))
        .filter(|r| r.writable)
        .map(|r| r.path.as_path())
        .collect();
    let held: Vec<PathBuf> = homes()
        .into_iter()
        .filter(|h| writable.iter().any(|r| Identity::of(h).within(r)))
        .collect();
    if held.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<PathBuf> = held
        .iter()
        .flat_map(|h| {
            hands_sandbox::profiles::home_surface()
                .map(|e| super::expand_tilde(e, Some(h)))
                .filter(|p| p.is_absolute())
        })
        .collect();
    out.extend(path_in_roots(&writable));
    out
}

/// The folders of the daemon's own `PATH` (the person's, at startup) that lie in one of
/// `writable`: a program put there runs when the person next types its name.
fn path_in_roots(writable: &[&Path]) -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .filter(|d| writable.iter().any(|r| Identity::of(d).within(r)))
        .collect()
}

/// The doctor's warnings about what the host trusts (SPEC §9): the daemon's binary or its
/// launcher inside a writable root (protected, but worth knowing), and a folder of the
/// person's PATH there while the home's surface is not protected.
pub fn warnings(config: &Config) -> Vec<String> {
    let mut w = Vec::new();
    for (path, what) in own_binaries() {
        if let Some(r) = reach(config, &path).into_iter().find(|r| r.write) {
            w.push(format!(
                "{what} {} lies {}: it is read-only to commands and file tools (a command's \
                 build cannot replace it); install hands outside the roots (`cargo install \
                 --path .`) to let the agent rebuild it",
                path.display(),
                r.place
            ));
        }
    }
    if home_surface(config).is_empty() {
        let writable: Vec<&Path> = (config.modules.iter().flat_map(|m| &m.roots))
            .filter(|r| r.writable)
            .map(|r| r.path.as_path())
            .collect();
        for d in path_in_roots(&writable) {
            w.push(format!(
                "the folder {} of your PATH lies in a writable root: a command can put a program \
                 there that your shell runs when you next type its name",
                d.display()
            ));
        }
    }
    w
}

/// Every path the host trusts under this configuration, for every resolver's policy and every
/// command's sandbox: the daemon's binary and its launcher (beside it, whether there or not),
/// the config file, the folder hands takes its configuration from, the state dirs hands
/// defaults to, `$HANDS_CONFIG`'s file, the token files, and the home's start-up surface.
pub fn paths(config: &Config) -> Vec<HostPath> {
    let mut out = Vec::new();
    let mut add = |path: PathBuf, what: &str, remedy: &str| {
        if path.is_absolute() && !out.iter().any(|t: &HostPath| t.path == path) {
            out.push(HostPath { path, what: what.to_string(), remedy: remedy.to_string() });
        }
    };
    let rebuild = "a person rebuilds or reinstalls hands outside hands; to let the agent build \
                   it, install hands outside the writable roots (`cargo install --path .`)";
    for (path, what) in own_binaries() {
        add(path, what, rebuild);
    }
    let edit = "a person edits it outside hands";
    if let Some(f) = &config.file {
        add(f.clone(), "the daemon's configuration file", edit);
    }
    if let Some(dir) = super::user_config_file().and_then(|f| f.parent().map(PathBuf::from)) {
        add(dir, "the folder hands takes its configuration from", edit);
    }
    // Either state dir hands defaults to holds other daemons' standing permissions (0103).
    let home = super::home_dir();
    let xdg = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()).map(PathBuf::from);
    for s in [home.map(|h| h.join(".local/state/hands")), xdg.map(|x| x.join("hands"))] {
        add(s.unwrap_or_default(), "a state dir hands defaults to (standing permissions)", edit);
    }
    if let Some(p) = std::env::var_os("HANDS_CONFIG").filter(|p| !p.is_empty()) {
        add(absolute(Path::new(&p)), "the configuration $HANDS_CONFIG names", edit);
    }
    for t in token_files(config) {
        add(t.file, "a token file of the daemon's", edit);
    }
    // A CA a command could add to would let anyone it signs stand in for the relay.
    if let Some(ca) = config.runner.as_ref().and_then(|r| r.ca_file.clone()) {
        add(absolute(&ca), "the runner's private CA ([runner] ca_file)", edit);
    }
    // A CA a command could add to would let anyone it signs stand in for the OAuth issuer.
    if let Some(ca) = config.http.as_ref().and_then(|h| h.oauth.as_ref()?.ca_file.clone()) {
        add(absolute(&ca), "the OAuth issuer's private CA ([server.http.oauth] ca_file)", edit);
    }
    let surface = "a start-up file of your home (sandbox-profiles/home-surface.txt) or a folder \
                   of your PATH, which your next login, terminal or git runs";
    let kept = "a person changes it outside hands; allow_home = true on the home's root keeps \
                these read-only to every tool and command";
    for p in home_surface(config) {
        add(p, surface, kept);
    }
    out
}

/// The running binary (its real path) and the launcher beside it, whether it is there or not:
/// what the next daemon runs.
fn own_binaries() -> Vec<(PathBuf, &'static str)> {
    let Ok(exe) = std::env::current_exe() else { return Vec::new() };
    let launcher = exe.with_file_name(hands_sandbox::launcher::LAUNCHER);
    vec![
        (exe, "the daemon's own binary"),
        (launcher, "the daemon's launcher (hands-sandbox), which builds every sandbox"),
    ]
}

/// A relative path taken from the current folder, as tools-shell does.
pub fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    std::env::current_dir().map(|c| c.join(p)).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hands_roots::{PathError, Policy, PolicyLists, Resolver, RootSpec};

    /// tools-fs on `root` (writable), the state dir at `state`, `extra` before the module.
    fn config(root: &Path, state: &Path, extra: &str) -> Config {
        let text = format!(
            "[daemon]\nstate_dir = \"{}\"\n{extra}\n[[builtins]]\nid = \"tools-fs\"\n\
             grants = [\"filesystem\"]\nfilesystem = [{{ path = \"{}\", write = true }}]\n",
            state.display(),
            root.display()
        );
        match super::super::parse(&text, "daemon.toml") {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    /// ARCHITECTURE.md's invariant "nothing the daemon loads is writable by what it confines":
    /// a config whose file, state dir and token file lie in a writable root is refused; one
    /// whose writable root holds the running binary makes the binary and its launcher trusted
    /// paths, which the resolver every file tool goes through refuses to write.
    #[test]
    fn nothing_the_daemon_loads_is_writable_by_what_it_confines() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (root, state) = (base.join("root"), base.join("state"));
        std::fs::create_dir_all(&root).unwrap();
        // The config file.
        let mut cfg = config(&root, &state, "");
        cfg.file = Some(root.join("daemon.toml"));
        let e = placement(&cfg).map(drop).unwrap_err().to_string();
        assert!(e.contains("inside the root") && e.contains("hint:"), "{e}");
        assert!(refuse(&cfg).is_err());
        cfg.file = Some(base.join("daemon.toml"));
        assert!(refuse(&cfg).is_ok(), "beside the root it is the person's");
        // The state dir.
        let cfg = config(&root, &root.join("state"), "");
        let e = refuse(&cfg).map(drop).unwrap_err().to_string();
        assert!(e.contains("state dir") && e.contains("[daemon] state_dir"), "{e}");
        // A token file.
        let token = format!(
            "[server.dashboard]\ntoken_file = \"{}\"\n",
            root.join("dashboard.token").display()
        );
        let e = refuse(&config(&root, &state, &token)).map(drop).unwrap_err().to_string();
        assert!(e.contains("token_file") && e.contains("inside the root"), "{e}");
        // The daemon's binary and its launcher, in a writable root (`cargo run` from a
        // checkout): trusted, and refused to the file tools; nothing is written here.
        let exe = std::env::current_exe().unwrap();
        let folder = exe.parent().unwrap().to_path_buf();
        let cfg = config(&folder, &state, "");
        let trusted = paths(&cfg);
        let launcher = exe.with_file_name(hands_sandbox::launcher::LAUNCHER);
        for p in [&exe, &launcher] {
            assert!(trusted.iter().any(|t| &t.path == p), "{} is not trusted", p.display());
        }
        let lists = PolicyLists { host_paths: trusted, ..PolicyLists::default() };
        let spec = RootSpec { path: folder.clone(), writable: true };
        let resolver = Resolver::new(&[spec], Policy::new(&lists).unwrap()).unwrap();
        for p in [&exe, &launcher] {
            match resolver.prepare_write(p.to_str().unwrap(), false) {
                Err(PathError::Trusted { what, .. }) => assert!(what.contains("daemon's")),
                other => panic!("{}: {:?}", p.display(), other.map(|_| ())),
            }
        }
        // Positive control: a new file beside them is not refused as trusted.
        let beside = folder.join("hands-trusted-test-not-made");
        assert!(!matches!(
            resolver.prepare_write(beside.to_str().unwrap(), false),
            Err(PathError::Trusted { .. })
        ));
        assert!(warnings(&cfg).iter().any(|w| w.contains("the daemon's own binary")));
    }

    /// The one rule finds a path through a link into a root, and tells writable places from
    /// read-only ones.
    #[test]
    fn reach_follows_links_and_tells_writable_from_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (root, state) = (base.join("root"), base.join("state"));
        std::fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(&root, base.join("alias")).unwrap();
        let cfg = config(&root, &state, "");
        let r = reach(&cfg, &base.join("alias/missing/daemon.toml"));
        assert!(r.first().is_some_and(|r| r.write && r.module == ModuleId::Fs), "{r:?}");
        assert!(reach(&cfg, &base.join("daemon.toml")).is_empty());
        let ro = config(&root, &state, "").modules.into_iter().map(|mut m| {
            m.roots.iter_mut().for_each(|r| r.writable = false);
            m
        });
        let cfg = Config { modules: ro.collect(), ..cfg };
        let r = reach(&cfg, &root.join("x"));
        assert!(r.first().is_some_and(|r| !r.write), "{r:?}");
    }
}
