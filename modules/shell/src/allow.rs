//! The allowlist of tools-shell's `run` and `os-*` tools and of `hands exec` (SPEC §4.4):
//! entries parsed from `commands = { allow, deny, confirm }`, an argv matched against them,
//! binary names checked, `PATH` resolution, and the names of published tools. Pure: no MCP,
//! no config file, no process.
//!
//! An entry is a binary name, optionally followed by leading arguments that must match as whole
//! tokens (`kubectl get` admits `kubectl get pods`, not `kubectl getsecrets`), or `*` (every
//! binary). `deny` wins over `allow`; `confirm` admits nothing by itself, it only marks an
//! admitted argv as needing a person's yes for each run.
//!
//! The lists apply to every program an argv runs, not only to `argv[0]`: a program that runs
//! another one (`env rm x`, `timeout 10 bash -c …`, `find . -exec rm {} ;` — the `wrap` lines
//! of `sandbox-profiles/wrappers.txt`) is unwrapped, and each program inside must be named, be
//! admitted by `allow` (or named by the entry that admitted the wrapper: `timeout 10 make`), not
//! be denied, and asks a person when `confirm` lists it. A wrapper's form that hides its program
//! (`env -S TEXT`, `flock -c TEXT`, an option the profile does not list) is refused unless an
//! allow entry names the form up to that token.

use crate::wrappers::{Inner, Profile};
use std::fmt;
use std::path::{Path, PathBuf};

/// How many programs deep an argv is unwrapped (`env nice timeout 5 rm` is four).
pub const MAX_DEPTH: usize = 8;

/// Programs that run only after a person says yes, unless `commands.confirm` is set: the
/// destructive classics and every shell (a shell runs whatever text it is given).
pub const DEFAULT_CONFIRM: &[&str] = &[
    "rm", "rmdir", "dd", "mkfs", "shred", "fdisk", "parted", "shutdown", "reboot", "halt", "sh",
    "bash", "zsh", "fish", "dash", "ksh",
];

/// The longest tool name MCP clients accept.
pub const MAX_TOOL_NAME: usize = 128;

/// One list entry: `*`, or a binary with leading arguments that must match token by token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Any,
    Prefix { bin: String, args: Vec<String> },
}

impl Entry {
    /// Parses `"kubectl get"` (tokens split on whitespace) or `"*"`.
    pub fn parse(text: &str) -> Result<Entry, AllowError> {
        let mut tokens = text.split_whitespace().map(str::to_string);
        let Some(bin) = tokens.next() else {
            return Err(AllowError::EmptyEntry);
        };
        if bin == "*" {
            return match tokens.next() {
                None => Ok(Entry::Any),
                Some(_) => Err(AllowError::StarWithArguments(text.to_string())),
            };
        }
        check_name(&bin)?;
        Ok(Entry::Prefix { bin, args: tokens.collect() })
    }

    /// Whether `argv` (binary, then arguments) starts with this entry, token by token.
    pub fn matches(&self, argv: &[String]) -> bool {
        match self {
            Entry::Any => !argv.is_empty(),
            Entry::Prefix { bin, args } => {
                argv.first() == Some(bin)
                    && argv.len() > args.len()
                    && argv[1..=args.len()].iter().zip(args).all(|(a, b)| a == b)
            }
        }
    }
}

impl Entry {
    /// How many leading tokens of an argv the entry names (`*`: none).
    fn tokens(&self) -> usize {
        match self {
            Entry::Any => 0,
            Entry::Prefix { args, .. } => args.len() + 1,
        }
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Any => write!(f, "*"),
            Entry::Prefix { bin, args } if args.is_empty() => write!(f, "{bin}"),
            Entry::Prefix { bin, args } => write!(f, "{bin} {}", args.join(" ")),
        }
    }
}

/// What is wrong with an entry, a binary name or a published tool. Returned by
/// [`Policy::new`], [`check_name`] and [`tool_name`] at startup (the config is refused) and by
/// [`Policy::decide`] per call (the call is refused); the text says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowError {
    #[error("an entry is empty; write a binary name, optionally followed by leading arguments")]
    EmptyEntry,
    #[error("`{}`: `*` stands alone (it admits every binary on PATH); it takes no arguments", hands_roots::shown(.0))]
    StarWithArguments(String),
    #[error("no binary was given (argv is empty)")]
    EmptyArgv,
    #[error(
        "`{}` is refused: a binary is given by name only, never by path (no `/`, `.` or `..`); \
         it is looked up in the module's configured PATH",
        hands_roots::shown(.0)
    )]
    Pathed(String),
    #[error(
        "`{}` is refused: a binary name cannot contain a NUL byte, whitespace or be empty",
        hands_roots::shown(.0)
    )]
    BadName(String),
    #[error("`{}`{via} is refused: commands.deny lists `{entry}`", hands_roots::shown(argv))]
    Denied { argv: String, entry: String, via: String },
    #[error(
        "`{}`{via} is refused: no entry of commands.allow admits it (allowed: {allowed}); \
         entries match whole leading tokens, so `kubectl get` admits `kubectl get pods` but not \
         `kubectl getsecrets`, and a program run by another (`env`, `timeout`, `xargs`, `find \
         -exec`, … in sandbox-profiles/wrappers.txt) must be admitted too. A person can add an \
         entry to commands.allow in daemon.toml",
        hands_roots::shown(argv)
    )]
    NotAllowed { argv: String, allowed: String, via: String },
    #[error("{0}")]
    Hidden(Box<Hidden>),
    #[error(
        "`{0}` is refused: it nests programs that run programs more than {MAX_DEPTH} deep; run \
         the innermost one directly"
    )]
    TooDeep(String),
    #[error("the wrappers profile is broken, so no argv can be checked: {0}")]
    Profile(crate::wrappers::ProfileError),
    #[error(
        "the published name `{}` is not a valid MCP tool name (1 to {MAX_TOOL_NAME} characters \
         of A-Z a-z 0-9 _ . -); shorten the entry or pass such arguments through `args`",
        hands_roots::shown(.0)
    )]
    BadToolName(String),
}

/// A wrapper's form that hides the program it runs (`env -S TEXT`), for [`AllowError::Hidden`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{argv}`{via} is refused: `{bin}` runs another program, and hands cannot tell which: {why}. \
     Run the program directly, or (a person) list the option in sandbox-profiles/wrappers.txt, \
     or add an allow entry naming this form up to it (`{form}`; nothing inside that form is \
     checked then)"
)]
pub struct Hidden {
    pub argv: String,
    pub bin: String,
    pub why: String,
    pub form: String,
    pub via: String,
}

/// A binary must be a plain name: no `/`, not `.` or `..`, no `..` inside, no NUL, no
/// whitespace. Checked before any list is consulted.
pub fn check_name(bin: &str) -> Result<(), AllowError> {
    if bin.contains('/') || bin == "." || bin.contains("..") {
        return Err(AllowError::Pathed(bin.to_string()));
    }
    if bin.is_empty() || bin.contains('\0') || bin.chars().any(char::is_whitespace) {
        return Err(AllowError::BadName(bin.escape_debug().to_string()));
    }
    Ok(())
}

/// The policy's answer for one argv that passed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted; the trust gate decides as for any external-class call.
    Allowed,
    /// Admitted, but only a person's yes for this one run lets it run.
    Confirm,
}

/// The compiled `commands` table.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub allow: Vec<Entry>,
    pub deny: Vec<Entry>,
    pub confirm: Vec<Entry>,
}

impl Policy {
    /// Parses the three lists; `confirm: None` is [`DEFAULT_CONFIRM`]. Errors carry the list
    /// and the entry's index.
    pub fn new(
        allow: &[String],
        deny: &[String],
        confirm: Option<&[String]>,
    ) -> Result<Policy, (&'static str, usize, AllowError)> {
        let list = |name: &'static str, items: &[String]| {
            items
                .iter()
                .enumerate()
                .map(|(i, s)| Entry::parse(s).map_err(|e| (name, i, e)))
                .collect::<Result<Vec<_>, _>>()
        };
        let default: Vec<String> = DEFAULT_CONFIRM.iter().map(|s| s.to_string()).collect();
        Profile::embedded().map_err(|e| ("wrappers", 0, AllowError::Profile(e)))?;
        Ok(Policy {
            allow: list("allow", allow)?,
            deny: list("deny", deny)?,
            confirm: list("confirm", confirm.unwrap_or(&default))?,
        })
    }

    /// `allow = ["*"]`: every binary on PATH is admitted (`hands doctor` warns).
    pub fn allows_everything(&self) -> bool {
        self.allow.contains(&Entry::Any)
    }

    /// Whether `allow` admits anything at all (`run` is published only then).
    pub fn admits_something(&self) -> bool {
        !self.allow.is_empty()
    }

    /// For the argv and every program it runs (unwrapped, see the module's doc): the name
    /// check, then `deny` (which wins over everything), then `allow`, then whether `confirm`
    /// lists it. Confirm when any of them is confirm-listed.
    pub fn decide(&self, argv: &[String]) -> Result<Verdict, AllowError> {
        if argv.is_empty() {
            return Err(AllowError::EmptyArgv);
        }
        let profile = Profile::embedded().map_err(AllowError::Profile)?;
        let mut confirm = false;
        self.level(profile, argv, argv, 0, 0, &mut confirm)?;
        Ok(if confirm { Verdict::Confirm } else { Verdict::Allowed })
    }

    /// Checks one program of `top` (`argv`, at `depth`); `named` is how many of its leading
    /// tokens the allow entry of the program around it spelled out (`timeout 10 make` names
    /// `make` inside `timeout 10 make all`), which admits it as that entry's form.
    fn level(
        &self,
        profile: &Profile,
        top: &[String],
        argv: &[String],
        depth: usize,
        named: usize,
        confirm: &mut bool,
    ) -> Result<(), AllowError> {
        let Some(bin) = argv.first() else { return Err(AllowError::EmptyArgv) };
        check_name(bin)?;
        let via = if depth == 0 { String::new() } else { format!(" (run by `{}`)", show(top)) };
        if let Some(entry) = self.deny.iter().find(|e| e.matches(argv)) {
            return Err(AllowError::Denied { argv: show(argv), entry: entry.to_string(), via });
        }
        let own = self.allow.iter().filter(|e| e.matches(argv)).map(Entry::tokens).max();
        let Some(own) = own.or((named > 0).then_some(0)) else {
            let allowed = if self.allow.is_empty() {
                "none".to_string()
            } else {
                self.allow.iter().map(|e| format!("`{e}`")).collect::<Vec<_>>().join(", ")
            };
            return Err(AllowError::NotAllowed { argv: show(argv), allowed, via });
        };
        let named = named.max(own);
        if self.confirm.iter().any(|e| e.matches(argv)) {
            *confirm = true;
        }
        match profile.inner(argv) {
            Inner::Nothing => Ok(()),
            Inner::Runs(_) if depth + 1 >= MAX_DEPTH => Err(AllowError::TooDeep(show(top))),
            Inner::Runs(runs) => runs.iter().try_for_each(|(inner, start)| {
                let named = named.saturating_sub(*start);
                self.level(profile, top, inner, depth + 1, named, confirm)
            }),
            // The entry that admitted it spells the form out past the token that hides it.
            Inner::Unknown(at, _) if named > at => Ok(()),
            Inner::Unknown(at, why) => Err(AllowError::Hidden(Box::new(Hidden {
                argv: show(argv),
                bin: bin.clone(),
                why,
                form: argv[..=at.min(argv.len() - 1)].join(" "),
                via,
            }))),
        }
    }
}

/// An argv as one line for messages: tokens with spaces or quotes are quoted.
pub fn show(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty() || a.chars().any(|c| c.is_whitespace() || c == '"' || c == '\'') {
                format!("{a:?}")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The published name of a `tools` entry: `os-<bin>[-<arg>…]`, checked against MCP's rules.
pub fn tool_name(bin: &str, args: &[String]) -> Result<String, AllowError> {
    check_name(bin)?;
    let mut name = format!("os-{bin}");
    for a in args {
        name.push('-');
        name.push_str(a);
    }
    let valid = !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if valid { Ok(name) } else { Err(AllowError::BadToolName(name)) }
}

/// Finds `bin` in the folders of `path` (absolute ones only; empty and relative entries are
/// skipped): the first regular file there that someone may execute.
pub fn resolve(bin: &str, path: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if check_name(bin).is_err() {
        return None;
    }
    path.split(':').filter(|d| Path::new(d).is_absolute()).find_map(|dir| {
        let candidate = Path::new(dir).join(bin);
        let meta = std::fs::metadata(&candidate).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn policy(allow: &[&str], deny: &[&str], confirm: Option<&[&str]>) -> Policy {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let confirm = confirm.map(v);
        Policy::new(&v(allow), &v(deny), confirm.as_deref()).unwrap()
    }

    #[test]
    fn entries_match_whole_leading_tokens() {
        let p = policy(&["kubectl get", "rg"], &[], None);
        assert_eq!(p.decide(&argv("kubectl get pods")), Ok(Verdict::Allowed));
        assert_eq!(p.decide(&argv("kubectl get")), Ok(Verdict::Allowed));
        assert_eq!(p.decide(&argv("rg -n x")), Ok(Verdict::Allowed));
        for refused in ["kubectl delete pods", "kubectl getsecrets", "kubectl", "rgx", "ls"] {
            assert!(
                matches!(p.decide(&argv(refused)), Err(AllowError::NotAllowed { .. })),
                "{refused}"
            );
        }
    }

    #[test]
    fn names_with_a_path_are_refused_before_any_list() {
        let p = policy(&["*"], &[], Some(&[]));
        for bin in ["/bin/sh", "./sh", "../bin/sh", "..", ".", "a/b", "x..y"] {
            assert_eq!(p.decide(&[bin.to_string()]), Err(AllowError::Pathed(bin.into())), "{bin}");
        }
        assert!(matches!(p.decide(&["a b".into()]), Err(AllowError::BadName(_))));
        assert!(matches!(p.decide(&["".into()]), Err(AllowError::BadName(_))));
        assert_eq!(p.decide(&[]), Err(AllowError::EmptyArgv));
        // One element with shell syntax is a (strange) name, not a command line.
        assert_eq!(p.decide(&["ls;rm".into()]), Ok(Verdict::Allowed));
    }

    #[test]
    fn deny_beats_allow_and_star() {
        let p = policy(&["*", "shutdown"], &["shutdown", "kubectl delete"], None);
        assert!(matches!(p.decide(&argv("shutdown -h now")), Err(AllowError::Denied { .. })));
        assert!(matches!(p.decide(&argv("kubectl delete x")), Err(AllowError::Denied { .. })));
        assert_eq!(p.decide(&argv("kubectl get x")), Ok(Verdict::Allowed));
        assert!(p.allows_everything());
    }

    #[test]
    fn confirm_is_per_binary_and_admits_nothing_by_itself() {
        let p = policy(&["rm", "ls"], &[], None);
        for a in ["rm -rf x", "rm -r -f x", "rm -fr x", "rm --recursive --force x", "rm x"] {
            assert_eq!(p.decide(&argv(a)), Ok(Verdict::Confirm), "{a}");
        }
        assert_eq!(p.decide(&argv("ls -l")), Ok(Verdict::Allowed));
        assert!(matches!(p.decide(&argv("sh -c x")), Err(AllowError::NotAllowed { .. })));
        let p = policy(&["*"], &[], None);
        for shell in ["sh", "bash", "zsh", "fish", "dash", "ksh"] {
            assert_eq!(p.decide(&[shell.to_string()]), Ok(Verdict::Confirm), "{shell}");
        }
        let p = policy(&["*"], &[], Some(&["git push"]));
        assert_eq!(p.decide(&argv("rm x")), Ok(Verdict::Allowed));
        assert_eq!(p.decide(&argv("git push origin")), Ok(Verdict::Confirm));
    }

    #[test]
    fn deny_allow_and_confirm_apply_to_the_program_a_wrapper_runs() {
        let p = policy(&["env", "timeout", "bash", "ls", "find", "xargs"], &["rm"], None);
        assert!(matches!(p.decide(&argv("env rm x")), Err(AllowError::Denied { .. })));
        assert!(matches!(p.decide(&argv("env -i A=1 rm x")), Err(AllowError::Denied { .. })));
        assert!(matches!(p.decide(&argv("timeout 5 env rm x")), Err(AllowError::Denied { .. })));
        assert!(matches!(p.decide(&argv("find . -exec rm {} ;")), Err(AllowError::Denied { .. })));
        assert!(matches!(p.decide(&argv("xargs -0 rm")), Err(AllowError::Denied { .. })));
        assert_eq!(p.decide(&argv("timeout 10 bash -c x")), Ok(Verdict::Confirm));
        assert_eq!(p.decide(&argv("env ls -l")), Ok(Verdict::Allowed));
        assert_eq!(p.decide(&argv("env")), Ok(Verdict::Allowed));
        assert_eq!(p.decide(&argv("find . -exec ls {} +")), Ok(Verdict::Allowed));
        // The program inside must be admitted too, and named, never pathed.
        assert!(matches!(p.decide(&argv("env cat x")), Err(AllowError::NotAllowed { .. })));
        assert!(matches!(p.decide(&argv("env /bin/rm x")), Err(AllowError::Pathed(_))));
        let e = p.decide(&argv("env rm x")).unwrap_err().to_string();
        assert!(e.contains("`rm x` (run by `env rm x`)") && e.contains("deny lists `rm`"), "{e}");
        // Forms that hide the program are refused, naming the form.
        let e = p.decide(&argv("env -S rm")).unwrap_err();
        assert!(matches!(&e, AllowError::Hidden(h) if h.form == "env -S"), "{e}");
        assert!(matches!(p.decide(&argv("env PATH=. ls")), Err(AllowError::Hidden(_))));
        // `*` admits every program, but deny and confirm still reach inside.
        let p = policy(&["*"], &["rm"], None);
        assert!(matches!(p.decide(&argv("nice -n 5 rm x")), Err(AllowError::Denied { .. })));
        assert_eq!(p.decide(&argv("nohup setsid sh")), Ok(Verdict::Confirm));
        assert_eq!(p.decide(&argv("unshare -r")), Ok(Verdict::Confirm));
        let deep = "env ".repeat(MAX_DEPTH) + "ls";
        assert!(matches!(p.decide(&argv(&deep)), Err(AllowError::TooDeep(_))));
    }

    #[test]
    fn an_entry_naming_the_full_form_admits_it() {
        // `timeout 10 make` names make: make need not be allowed on its own.
        let p = policy(&["timeout 10 make", "flock -c"], &["rm"], Some(&[]));
        assert_eq!(p.decide(&argv("timeout 10 make all")), Ok(Verdict::Allowed));
        assert!(matches!(p.decide(&argv("timeout 10 cat")), Err(AllowError::NotAllowed { .. })));
        assert!(matches!(p.decide(&argv("timeout 9 make")), Err(AllowError::NotAllowed { .. })));
        // deny still applies inside a named form.
        let p2 = policy(&["timeout 10 rm"], &["rm"], Some(&[]));
        assert!(matches!(p2.decide(&argv("timeout 10 rm x")), Err(AllowError::Denied { .. })));
        // A hiding form is admitted only by an entry that names it up to the hiding token.
        assert_eq!(p.decide(&argv("flock -c x /tmp/l")), Ok(Verdict::Allowed));
    }

    #[test]
    fn bad_entries_are_refused() {
        let v = |s: &str| vec![s.to_string()];
        assert!(matches!(Policy::new(&v("/bin/ls"), &[], None), Err(("allow", 0, _))));
        assert!(matches!(Policy::new(&[], &v("* x"), None), Err(("deny", 0, _))));
        assert!(matches!(Policy::new(&[], &[], Some(&v("  "))), Err(("confirm", 0, _))));
    }

    #[test]
    fn tool_names_follow_mcp_rules() {
        assert_eq!(tool_name("kubectl", &argv("get")).unwrap(), "os-kubectl-get");
        assert_eq!(tool_name("rg", &[]).unwrap(), "os-rg");
        assert!(tool_name("kubectl", &["--context=x".into()]).is_err());
        assert!(tool_name("x", &["a".repeat(130)]).is_err());
        assert!(tool_name("/bin/x", &[]).is_err());
    }

    #[test]
    fn resolve_finds_executables_on_absolute_path_folders_only() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let exe = dir.join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.join("plain");
        std::fs::write(&plain, "x").unwrap();
        let path = format!("relative:{}", dir.display());
        assert_eq!(resolve("tool", &path), Some(exe));
        assert_eq!(resolve("plain", &path), None);
        assert_eq!(resolve("../tool", &path), None);
        assert_eq!(resolve("tool", "relative"), None);
    }
}
