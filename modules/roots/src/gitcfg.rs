//! Git config files read as git reads them, without running git: a parser that follows git's
//! own grammar (`config.c`: sections and `"subsections"`, bare keys, quotes, escapes, comments,
//! `\` line continuations, CRLF, a UTF-8 BOM), the files a config pulls in (`include.path`,
//! `includeIf.*.path`, recursively, bounded as git bounds them), and the keys a repository made
//! by a command may set ([`refusal_for_new_repository`]).
//!
//! Nothing here executes anything or follows anything but the paths a config names; every
//! read is bounded (bytes per file, files per resolution, include depth).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The longest config file read; past it the file is treated as unreadable (git would read it,
/// so its includes may be missed: the caller protects the file itself either way).
pub const MAX_BYTES: u64 = 1 << 20;

/// git's `MAX_INCLUDE_DEPTH`.
pub const MAX_DEPTH: usize = 10;

/// One `section[.subsection].key = value` of a config file. Section and key are lowercased
/// (git compares them so); the subsection keeps its case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub section: String,
    pub subsection: Option<Vec<u8>>,
    pub key: String,
    /// None for a bare key (`[core] bare`), which git reads as true.
    pub value: Option<Vec<u8>>,
}

impl Entry {
    fn is(&self, section: &str, key: &str) -> bool {
        self.section == section && self.subsection.is_none() && self.key == key
    }
}

/// Why a text is not a config git would read (git stops at the same place).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
}

/// The characters of a config text as git's `get_next_char` gives them: `\r\n` as `\n`, and
/// the end of the text as a final `\n` with `eof` set.
struct Chars<'a> {
    text: &'a [u8],
    at: usize,
    eof: bool,
    line: usize,
}

impl Chars<'_> {
    fn next(&mut self) -> u8 {
        let Some(&c) = self.text.get(self.at) else {
            self.eof = true;
            return b'\n';
        };
        self.at += 1;
        if c == b'\r' && self.text.get(self.at) == Some(&b'\n') {
            self.at += 1;
            self.line += 1;
            return b'\n';
        }
        if c == b'\n' {
            self.line += 1;
        }
        c
    }
}

/// git's `isspace` (its own ctype table: space, tab, newline, carriage return).
fn space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn keychar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

/// Parses a config text as git does; the entries in order, or where git would stop.
pub fn parse(text: &[u8]) -> Result<Vec<Entry>, ParseError> {
    match parse_lenient(text) {
        (entries, None) => Ok(entries),
        (_, Some(e)) => Err(e),
    }
}

/// The entries git reads from a text, and where it stopped if it met a bad line (git reads,
/// and follows the includes of, what came before it).
pub fn parse_lenient(text: &[u8]) -> (Vec<Entry>, Option<ParseError>) {
    let text = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
    let mut cs = Chars { text, at: 0, eof: false, line: 1 };
    let mut out = Vec::new();
    let mut section: Option<(String, Option<Vec<u8>>)> = None;
    let mut comment = false;
    loop {
        let c = cs.next();
        if c == b'\n' {
            if cs.eof {
                return (out, None);
            }
            comment = false;
            continue;
        }
        if comment || space(c) {
            continue;
        }
        if c == b'#' || c == b';' {
            comment = true;
            continue;
        }
        let parsed = if c == b'[' {
            header(&mut cs).map(|h| section = Some(h))
        } else if c.is_ascii_alphabetic() {
            key_value(&mut cs, c).map(|(key, value)| {
                // A key before any section: git hands it on without a dot; it names nothing.
                if let Some((s, sub)) = &section {
                    out.push(Entry { section: s.clone(), subsection: sub.clone(), key, value });
                }
            })
        } else {
            None
        };
        if parsed.is_none() {
            return (out, Some(ParseError { line: cs.line }));
        }
    }
}

/// `[section]`, `[section "subsection"]` or the old `[section.subsection]`, after its `[`.
fn header(cs: &mut Chars<'_>) -> Option<(String, Option<Vec<u8>>)> {
    let mut name = Vec::new();
    loop {
        let c = cs.next();
        if cs.eof {
            return None;
        }
        if c == b']' {
            break;
        }
        if space(c) {
            // `[section "subsection"]`: spaces, a quoted name with `\` escaping any character.
            let mut c = c;
            while space(c) {
                if c == b'\n' {
                    return None;
                }
                c = cs.next();
            }
            if c != b'"' {
                return None;
            }
            let mut sub = Vec::new();
            loop {
                let mut c = cs.next();
                if c == b'\n' {
                    return None;
                }
                if c == b'"' {
                    break;
                }
                if c == b'\\' {
                    c = cs.next();
                    if c == b'\n' {
                        return None;
                    }
                }
                sub.push(c);
            }
            if cs.next() != b']' {
                return None;
            }
            return Some((String::from_utf8(name).ok()?, Some(sub)));
        }
        if !keychar(c) && c != b'.' {
            return None;
        }
        name.push(c.to_ascii_lowercase());
    }
    if name.is_empty() {
        return None;
    }
    let name = String::from_utf8(name).ok()?;
    // The old form: everything after the first dot is the subsection, lowercased.
    Some(match name.split_once('.') {
        Some((s, sub)) => (s.to_string(), Some(sub.as_bytes().to_vec())),
        None => (name, None),
    })
}

/// A key (its first character `first`) and its value, up to the end of its line.
fn key_value(cs: &mut Chars<'_>, first: u8) -> Option<(String, Option<Vec<u8>>)> {
    let mut key = vec![first.to_ascii_lowercase()];
    let mut c;
    loop {
        c = cs.next();
        if cs.eof || !keychar(c) {
            break;
        }
        key.push(c.to_ascii_lowercase());
    }
    while c == b' ' || c == b'\t' {
        c = cs.next();
    }
    let key = String::from_utf8(key).ok()?;
    if c == b'\n' {
        return Some((key, None));
    }
    if c != b'=' {
        return None;
    }
    Some((key, Some(value(cs)?)))
}

/// git's `parse_value`: quotes, escapes (`\\ \" \n \t \b`, and `\` before a newline joins the
/// next line), comments outside quotes, outer spaces trimmed. A NUL ends the value as it ends
/// git's C string.
fn value(cs: &mut Chars<'_>) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    let (mut quote, mut comment) = (false, false);
    let mut trim: Option<usize> = None;
    loop {
        let mut c = cs.next();
        if c == b'\n' {
            if quote {
                return None;
            }
            if let Some(t) = trim {
                v.truncate(t);
            }
            if let Some(nul) = v.iter().position(|&b| b == 0) {
                v.truncate(nul);
            }
            return Some(v);
        }
        if comment {
            continue;
        }
        if space(c) && !quote {
            if trim.is_none() {
                trim = Some(v.len());
            }
            if !v.is_empty() {
                v.push(c);
            }
            continue;
        }
        if !quote && (c == b';' || c == b'#') {
            comment = true;
            continue;
        }
        trim = None;
        if c == b'\\' {
            c = cs.next();
            c = match c {
                b'\n' => continue,
                b't' => b'\t',
                b'b' => 8,
                b'n' => b'\n',
                b'\\' | b'"' => c,
                _ => return None,
            };
            v.push(c);
            continue;
        }
        if c == b'"' {
            quote = !quote;
            continue;
        }
        v.push(c);
    }
}

/// Reads a config file as git would (following symlinks), bounded; None when it is missing,
/// not a regular file, or larger than [`MAX_BYTES`]. Opened non-blocking, so a FIFO planted
/// under the name cannot stall the reader.
#[expect(
    clippy::disallowed_methods,
    reason = "what git on the host reads: by path, following links, anywhere; only read"
)]
pub fn read(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return None;
    }
    let mut buf = Vec::new();
    f.take(MAX_BYTES).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// What a chain of config files names for the host's git to read or run.
#[derive(Debug, Default, Clone)]
pub struct Named {
    /// Every file read or named by an include (missing ones too), absolute and lexical.
    pub files: Vec<PathBuf>,
    /// `core.hooksPath` values (`~` expanded; relative ones as written).
    pub hooks_paths: Vec<PathBuf>,
    /// `core.worktree` values (git takes a relative one from the git dir).
    pub worktrees: Vec<PathBuf>,
    /// `extensions.worktreeConfig` is set to true somewhere.
    pub worktree_config: bool,
    /// A file past the include depth or the file budget was not read.
    pub cut: bool,
}

/// Reads `start` (a config file) and every file it includes, recursively (git's relative
/// include paths are relative to the including file's folder; `~/` is `home`), collecting
/// what they name. At most `budget` files are read in all (decremented).
pub fn resolve(start: &Path, home: Option<&Path>, budget: &mut usize, named: &mut Named) {
    resolve_at(start, home, budget, named, 0);
}

fn resolve_at(file: &Path, home: Option<&Path>, budget: &mut usize, n: &mut Named, depth: usize) {
    if !n.files.iter().any(|f| f == file) {
        n.files.push(file.to_path_buf());
    }
    if depth > MAX_DEPTH || *budget == 0 {
        n.cut = true;
        return;
    }
    *budget -= 1;
    let Some(text) = read(file) else { return };
    // git stops at the first bad line, but what it read before counts.
    let (entries, _) = parse_lenient(&text);
    let dir = file.parent().unwrap_or(Path::new("/"));
    for e in &entries {
        let path_of =
            |v: &[u8]| expand(v, home).map(|p| if p.is_absolute() { p } else { dir.join(p) });
        let include = e.is("include", "path")
            || (e.section == "includeif" && e.subsection.is_some() && e.key == "path");
        if include && let Some(p) = e.value.as_deref().and_then(path_of) {
            resolve_at(&crate::lexical(&p), home, budget, n, depth + 1);
        } else if e.is("core", "hookspath")
            && let Some(p) = e.value.as_deref().and_then(|v| expand(v, home))
        {
            n.hooks_paths.push(p);
        } else if e.is("core", "worktree")
            && let Some(p) = e.value.as_deref().and_then(|v| expand(v, home))
        {
            n.worktrees.push(p);
        } else if e.is("extensions", "worktreeconfig") {
            n.worktree_config = e.value.as_deref().is_none_or(truthy);
        }
    }
}

/// A path value as git's `interpolate_path` expands it: `~/` (and `~` alone) is `home`. A
/// `%(prefix)/` path is git's install prefix and `~user/` another user's home: no root holds
/// either (None).
fn expand(v: &[u8], home: Option<&Path>) -> Option<PathBuf> {
    if v.is_empty() || v.starts_with(b"%(prefix)/") {
        return None;
    }
    if v == b"~" || v.starts_with(b"~/") {
        let mut rest = &v[1..];
        while let Some(r) = rest.strip_prefix(b"/") {
            rest = r;
        }
        return home.map(|h| h.join(std::ffi::OsStr::from_bytes(rest)));
    }
    if v.starts_with(b"~") {
        return None;
    }
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(v)))
}

/// git's boolean words for true (an empty value is false).
fn truthy(v: &[u8]) -> bool {
    let v = String::from_utf8_lossy(v).to_ascii_lowercase();
    matches!(v.as_str(), "true" | "yes" | "on") || v.parse::<i64>().is_ok_and(|n| n != 0)
}

/// The keys a repository a command made may have in its `config` (`new_repositories =
/// "allow"`): what `git init`, `git clone`, `git remote`, `git branch --set-upstream` and
/// `git config user.*` write. `*` is any subsection. Everything else is refused: a key that
/// names a program (`core.fsmonitor`, `core.hooksPath`, `core.sshCommand`, `*.driver`,
/// `filter.*`, `alias.*`, `remote.*.uploadpack`, ...), moves where git reads config from
/// (`include.path`, `core.worktree`) or loosens a check would run on the person's next `git
/// status` there — or in the repository that records it as a submodule.
const NEW_REPOSITORY_KEYS: &[(&str, Option<&str>, &str)] = &[
    ("core", None, "repositoryformatversion"),
    ("core", None, "filemode"),
    ("core", None, "bare"),
    ("core", None, "logallrefupdates"),
    ("core", None, "ignorecase"),
    ("core", None, "precomposeunicode"),
    ("core", None, "symlinks"),
    ("core", None, "autocrlf"),
    ("core", None, "eol"),
    ("core", None, "safecrlf"),
    ("core", None, "quotepath"),
    ("core", None, "sparsecheckout"),
    ("core", None, "sparsecheckoutcone"),
    ("core", None, "abbrev"),
    ("extensions", None, "objectformat"),
    ("extensions", None, "refstorage"),
    ("remote", Some("*"), "url"),
    ("remote", Some("*"), "pushurl"),
    ("remote", Some("*"), "fetch"),
    ("remote", Some("*"), "push"),
    ("remote", Some("*"), "tagopt"),
    ("remote", Some("*"), "mirror"),
    ("remote", Some("*"), "prune"),
    ("branch", Some("*"), "remote"),
    ("branch", Some("*"), "merge"),
    ("branch", Some("*"), "rebase"),
    ("branch", Some("*"), "pushremote"),
    ("branch", Some("*"), "description"),
    ("user", None, "name"),
    ("user", None, "email"),
    ("init", None, "defaultbranch"),
    ("pull", None, "rebase"),
    ("pull", None, "ff"),
    ("push", None, "default"),
    ("push", None, "autosetupremote"),
    ("fetch", None, "prune"),
    ("submodule", Some("*"), "url"),
    ("submodule", Some("*"), "active"),
    ("lfs", None, "repositoryformatversion"),
];

/// Why a `config` a command wrote for a repository it made is refused, if it is: a text git
/// would not read as it is written (a `\` line continuation, a NUL byte, a line git stops
/// at), or a key outside [`NEW_REPOSITORY_KEYS`] (named in the reason).
pub fn refusal_for_new_repository(text: &[u8]) -> Option<String> {
    if text.contains(&0) {
        return Some("it holds a NUL byte".into());
    }
    // Line by line, the way git writes its config: a continuation joins lines in ways a
    // reader can miss, and git itself never writes one.
    let continued = text.split(|&b| b == b'\n').any(|l| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        l.iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
    });
    if continued {
        return Some("a line ends with `\\` (a continuation git never writes)".into());
    }
    let entries = match parse(text) {
        Ok(e) => e,
        Err(ParseError { line }) => return Some(format!("line {line} is not valid git config")),
    };
    for e in entries {
        let allowed = NEW_REPOSITORY_KEYS.iter().any(|(s, sub, k)| {
            *s == e.section && *k == e.key && sub.is_some() == e.subsection.is_some()
        });
        if !allowed {
            let sub = match &e.subsection {
                Some(s) => format!(".{}", String::from_utf8_lossy(s)),
                None => String::new(),
            };
            return Some(format!(
                "`{}{sub}.{}` may not be set in a repository a command made (it can name a \
                 program, or where git reads config from, for the person's git)",
                e.section, e.key
            ));
        }
    }
    None
}

/// The system and global config files the host's git reads for every repository (`~` is
/// `home`; `$GIT_CONFIG_SYSTEM`, `$GIT_CONFIG_GLOBAL` and `$XDG_CONFIG_HOME` as git takes
/// them), and what they name.
pub fn global(home: Option<&Path>, budget: &mut usize) -> Named {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut files = vec![env("GIT_CONFIG_SYSTEM").unwrap_or_else(|| "/etc/gitconfig".into())];
    if let Some(g) = env("GIT_CONFIG_GLOBAL") {
        files.push(g);
    } else {
        let xdg = env("XDG_CONFIG_HOME").or_else(|| home.map(|h| h.join(".config")));
        files.extend(xdg.map(|x| x.join("git/config")));
        files.extend(home.map(|h| h.join(".gitconfig")));
    }
    let mut named = Named::default();
    for f in files.iter().filter(|f| f.is_absolute()) {
        resolve(f, home, budget, &mut named);
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<String> {
        parse(text.as_bytes())
            .unwrap()
            .into_iter()
            .map(|e| {
                let sub = e.subsection.map(|s| format!(".{}", String::from_utf8(s).unwrap()));
                let v = e.value.map(|v| format!("={}", String::from_utf8(v).unwrap()));
                format!(
                    "{}{}.{}{}",
                    e.section,
                    sub.unwrap_or_default(),
                    e.key,
                    v.unwrap_or_default()
                )
            })
            .collect()
    }

    #[test]
    fn parses_what_git_parses() {
        assert_eq!(keys("[core]\n\tfsmonitor = x\n"), ["core.fsmonitor=x"]);
        // A key on the header's line, CRLF, a BOM, case, a bare key.
        assert_eq!(
            keys("\u{feff}[CORE] HooksPath = .husky/_\r\n\tBare\r\n"),
            ["core.hookspath=.husky/_", "core.bare"]
        );
        // Subsections keep their case and escapes; the old dotted form lowercases.
        assert_eq!(
            keys("[includeIf \"gitdir:~/W\\\"ork/\"]\npath = a.cfg\n[Remote.Origin]\nurl=u\n"),
            ["includeif.gitdir:~/W\"ork/.path=a.cfg", "remote.origin.url=u"]
        );
        // Quotes, escapes, comments, trimmed spaces and a continuation line.
        assert_eq!(
            keys("[a]\nk = \" x # y\" ; c\nj = a\\\n b  \nl = t\\tu # z\n"),
            ["a.k= x # y", "a.j=a b", "a.l=t\tu"]
        );
        assert_eq!(keys("[include]\npath"), ["include.path"]);
        for bad in
            ["[core\nx=1\n", "[a]\n1x = 2\n", "[a]\nk = \"open\n", "[a]\nk = \\q\n", "[a \"s]\n"]
        {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn includes_are_followed_relative_to_the_including_file_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(d.join("repo/.git")).unwrap();
        std::fs::create_dir_all(d.join("home")).unwrap();
        std::fs::write(
            d.join("repo/.git/config"),
            "[include]\n\tpath = ../shared.cfg\n[includeIf \"onbranch:x\"]\n\tpath = ~/cond.cfg\n",
        )
        .unwrap();
        std::fs::write(
            d.join("repo/shared.cfg"),
            "[core]\n\thooksPath = .husky/_\n[include]\npath=deeper/x.cfg\n",
        )
        .unwrap();
        std::fs::create_dir_all(d.join("repo/deeper")).unwrap();
        std::fs::write(
            d.join("repo/deeper/x.cfg"),
            "[include]\npath = x.cfg\n[extensions]\nworktreeConfig\n",
        )
        .unwrap();
        let mut n = Named::default();
        let mut budget = 100;
        resolve(&d.join("repo/.git/config"), Some(&d.join("home")), &mut budget, &mut n);
        assert_eq!(
            n.files,
            [
                d.join("repo/.git/config"),
                d.join("repo/shared.cfg"),
                d.join("repo/deeper/x.cfg"),
                d.join("home/cond.cfg"),
            ]
        );
        assert_eq!(n.hooks_paths, [PathBuf::from(".husky/_")]);
        assert!(n.worktree_config);
        // The self-include stops at git's depth.
        assert!(n.cut);
    }

    #[test]
    fn a_new_repository_config_may_hold_only_what_git_writes_itself() {
        let init = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                    \tlogallrefupdates = true\n[remote \"origin\"]\n\turl = /tmp/x\n\
                    \tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\
                    \tremote = origin\n\tmerge = refs/heads/main\n[user]\n\tname = a\n";
        assert_eq!(refusal_for_new_repository(init.as_bytes()), None);
        for bad in [
            "[core]\n\tfsmonitor = /x\n",
            "[core]\n\thooksPath = h\n",
            "[core] sshCommand = x\n",
            "[include]\n\tpath = x\n",
            "[includeIf \"gitdir:/\"]\n\tpath = x\n",
            "[filter \"a\"]\n\tclean = x\n",
            "[alias]\n\tst = !x\n",
            "[remote \"o\"]\n\tuploadpack = x\n",
            "[core]\n\tfs\\\nmonitor = x\n",
            "[core]\n\tbare = x\0\n",
            "[core.x]\n\turl = x\n",
            "[user]\n\tname = \"x\n",
        ] {
            assert!(refusal_for_new_repository(bad.as_bytes()).is_some(), "{bad:?}");
        }
    }
}
