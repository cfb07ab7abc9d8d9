//! The `[[builtins]]` blocks of `daemon.toml`: id, grants and roots checked here; each module's
//! `config` table dispatched to the schema its module owns, and every problem it reports placed
//! at the block's line and the key.

use super::{
    Grant, ModuleCfg, ModuleId, ModuleSettings, Problems, RawTrust, RootCfg, RootLink, Trust,
    expand_tilde,
};
use serde::Deserialize;
use std::path::Path;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBuiltin {
    id: Spanned<String>,
    #[serde(default)]
    grants: Vec<Spanned<String>>,
    #[serde(default)]
    filesystem: Vec<Spanned<RawRoot>>,
    config: Option<Spanned<toml::Table>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoot {
    path: Spanned<String>,
    #[serde(default)]
    write: bool,
    /// A writable root that is or holds the daemon user's home is refused without it; with
    /// it, the home's start-up surface is protected (`trusted.rs`).
    #[serde(default)]
    allow_home: bool,
}

/// Checks every `[[builtins]]` block; the modules come back in a fixed order (fs, shell, git).
pub(super) fn validate(
    builtins: &[Spanned<RawBuiltin>],
    trust: &Trust,
    home: Option<&Path>,
    p: &mut Problems<'_>,
) -> Vec<ModuleCfg> {
    let mut modules: Vec<ModuleCfg> = Vec::new();
    for b in builtins {
        let bspan = b.span();
        let b = b.get_ref();
        let id_text = b.id.get_ref();
        let Some(id) = ModuleId::parse(id_text) else {
            p.add(
                Some(b.id.span()),
                "[[builtins]]",
                "id",
                format!("unknown module id `{id_text}`"),
                Some("the modules are tools-fs, tools-shell and tools-git"),
            );
            continue;
        };
        let section = format!("[[builtins]] id \"{id_text}\"");
        if modules.iter().any(|m| m.id == id) {
            p.add(
                Some(b.id.span()),
                &section,
                "id",
                "declared twice",
                Some("each module may appear at most once; merge the two blocks"),
            );
            continue;
        }
        let mut grants = Vec::new();
        for g in &b.grants {
            match Grant::parse(g.get_ref()) {
                Some(gr) if !grants.contains(&gr) => grants.push(gr),
                Some(_) => {}
                None => p.add(
                    Some(g.span()),
                    &section,
                    "grants",
                    format!("unknown grant `{}`", g.get_ref()),
                    Some("grants are filesystem, spawn and network"),
                ),
            }
        }
        for need in id.required_grants() {
            if !grants.contains(need) {
                p.add(
                    Some(bspan.clone()),
                    &section,
                    "grants",
                    format!("{} needs the `{}` grant", id.name(), need.name()),
                    Some(&format!("add \"{}\" to grants", need.name())),
                );
            }
        }
        let (mut roots, mut root_links) = (Vec::new(), Vec::new());
        if b.filesystem.is_empty() {
            p.add(
                Some(bspan.clone()),
                &section,
                "filesystem",
                "declares no roots",
                Some("add filesystem = [{ path = \"~/project\", write = true }]"),
            );
        }
        for (i, r) in b.filesystem.iter().enumerate() {
            let r = r.get_ref();
            let key = format!("filesystem[{i}].path");
            let raw_path = r.path.get_ref();
            let expanded = expand_tilde(raw_path, home);
            if !expanded.is_absolute() {
                p.add(
                    Some(r.path.span()),
                    &section,
                    &key,
                    format!("`{raw_path}` is not an absolute path"),
                    Some("write roots as /abs/path or ~/path"),
                );
                continue;
            }
            match std::fs::metadata(&expanded) {
                Err(e) => p.add(
                    Some(r.path.span()),
                    &section,
                    &key,
                    format!("`{raw_path}` cannot be used as a root: {e}"),
                    Some("roots must exist before the daemon starts; create the folder or fix the path"),
                ),
                Ok(m) if !m.is_dir() => p.add(
                    Some(r.path.span()),
                    &section,
                    &key,
                    format!(
                        "`{raw_path}` is not a directory{}",
                        if r.write { " (write = true needs a folder)" } else { "" }
                    ),
                    Some("roots are folders; name the folder that contains the file"),
                ),
                Ok(_) => match std::fs::canonicalize(&expanded) {
                    Ok(c) => {
                        if let Some(home) = r.write.then(|| super::trusted::holds_home(&c)).flatten()
                            && !r.allow_home
                        {
                            p.add(
                                Some(r.path.span()),
                                &section,
                                &key,
                                format!(
                                    "`{raw_path}` is (or holds) your home {}: commands and file \
                                     tools could write what your next login, terminal or git \
                                     runs (~/.bashrc, ~/.gitconfig, ~/.local/bin)",
                                    home.display()
                                ),
                                Some(
                                    "declare the project folders instead (filesystem = [{ path \
                                     = \"~/project\", write = true }]), or accept the home \
                                     with allow_home = true on this entry: its start-up files \
                                     (sandbox-profiles/home-surface.txt) are then read-only to \
                                     every tool and command",
                                ),
                            );
                        }
                        let links = super::trusted::links_on_the_way(&expanded);
                        root_links.extend(links.into_iter().map(|(link, folder)| RootLink {
                            given: raw_path.to_string(),
                            link,
                            folder,
                        }));
                        roots.push(RootCfg { path: c, writable: r.write })
                    }
                    Err(e) => p.add(Some(r.path.span()), &section, &key, e.to_string(), None),
                },
            }
        }
        let settings_span = b.config.as_ref().map(|c| c.span());
        let mut table = b.config.as_ref().map(|c| c.get_ref().clone()).unwrap_or_default();
        // `trust` is the daemon's key in every module's table (the gate reads it); the rest of
        // the table is the module's own schema.
        let trust_override = match table.remove("trust").map(toml::Value::try_into::<RawTrust>) {
            None => None,
            Some(Ok(t)) => Some(t),
            Some(Err(e)) => {
                p.add(
                    settings_span.clone(),
                    &section,
                    "config.trust",
                    e.message(),
                    Some("read, write and external are \"allow\", \"ask\" or \"deny\""),
                );
                None
            }
        };
        // Network rules without the grant would read as if they applied (SPEC §5.4).
        if id == ModuleId::Shell
            && table.contains_key("network")
            && !grants.contains(&Grant::Network)
        {
            p.add(
                settings_span.clone(),
                &section,
                "config.network",
                "a `network` table without the `network` grant: its commands have no network \
                 at all, so its rules would apply to nothing",
                Some("add \"network\" to this module's grants, or drop config.network"),
            );
        }
        let (settings, problems) = module_settings(id, toml::Value::Table(table), home);
        for (key, message, hint) in problems {
            p.add(settings_span.clone(), &section, &key, message, hint);
        }
        // A module overrides how its tools' classes are decided; how long a person is waited
        // for is the daemon's (one approvals queue), so a module-level value is refused rather
        // than silently ignored.
        if trust_override.as_ref().is_some_and(|t| t.approval_timeout_secs.is_some()) {
            p.add(
                settings_span.clone(),
                &section,
                "config.trust.approval_timeout_secs",
                "a module cannot set approval_timeout_secs: it is daemon-wide",
                Some("set it in the top-level [trust] table"),
            );
        }
        let trust = match &trust_override {
            Some(t) => trust.overlay(t),
            None => trust.clone(),
        };
        modules.push(ModuleCfg { id, grants, roots, root_links, trust, settings });
    }
    if builtins.is_empty() {
        p.add(
            None,
            "",
            "builtins",
            "no modules are declared, so no tools would be published",
            Some("add a [[builtins]] block, e.g. id = \"tools-fs\""),
        );
    }
    modules.sort_by_key(|m| m.id);
    modules
}

/// A problem in a module's table: the key (`config.push.remote`), the message, a hint.
type Finding = (String, String, Option<&'static str>);

/// Hands a module's `config` table (without `trust`) to the schema that module owns. On a
/// problem the settings are the defaults (the config is refused anyway); every finding comes
/// back with its key under `config`.
fn module_settings(
    id: ModuleId,
    table: toml::Value,
    home: Option<&Path>,
) -> (ModuleSettings, Vec<Finding>) {
    let unparsed = |e: toml::de::Error| -> Vec<Finding> {
        vec![(
            "config".to_string(),
            e.message().to_string(),
            Some(
                "daemon.toml.example lists each module's config keys (and `trust`, every module's)",
            ),
        )]
    };
    let keyed = |key: String, message: String, hint| (format!("config.{key}"), message, hint);
    match id {
        ModuleId::Fs => match table.try_into::<hands_fs::settings::RawSettings>() {
            Err(e) => (ModuleSettings::Fs(Default::default()), unparsed(e)),
            Ok(raw) => match raw.validate() {
                Ok(s) => (ModuleSettings::Fs(s), Vec::new()),
                Err(problems) => (
                    ModuleSettings::Fs(Default::default()),
                    problems.into_iter().map(|q| keyed(q.key, q.message, q.hint)).collect(),
                ),
            },
        },
        ModuleId::Shell => match table.try_into::<hands_shell::settings::RawSettings>() {
            Err(e) => (ModuleSettings::Shell(Default::default()), unparsed(e)),
            Ok(raw) => match raw.validate(&|s| expand_tilde(s, home)) {
                Ok(s) => (ModuleSettings::Shell(s), Vec::new()),
                Err(problems) => (
                    ModuleSettings::Shell(Default::default()),
                    problems.into_iter().map(|q| keyed(q.key, q.message, q.hint)).collect(),
                ),
            },
        },
        ModuleId::Git => match table.try_into::<hands_git::settings::RawSettings>() {
            Err(e) => (ModuleSettings::Git(Default::default()), unparsed(e)),
            Ok(raw) => match raw.validate(&|s| expand_tilde(s, home)) {
                Ok(s) => (ModuleSettings::Git(s), Vec::new()),
                Err(problems) => (
                    ModuleSettings::Git(Default::default()),
                    problems.into_iter().map(|q| keyed(q.key, q.message, q.hint)).collect(),
                ),
            },
        },
    }
}
