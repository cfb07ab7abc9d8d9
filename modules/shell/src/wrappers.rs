//! Programs that run another program (`env rm x`, `timeout 10 bash -c …`, `find -exec`): the
//! data of `sandbox-profiles/wrappers.txt` and the unwrapping of an argv into the argvs of the
//! programs it runs, so that the allowlist checks each of them, not only `argv[0]` (SPEC §4.4).
//! Pure: no process, no file.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The embedded profile; a person extends it there (the build embeds it).
const PROFILE: &str = include_str!("../../../sandbox-profiles/wrappers.txt");

/// How one wrapper's own arguments are read (see the profile's header).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Wrapper {
    flags: Vec<String>,
    values: Vec<String>,
    optional: Vec<String>,
    text: Vec<String>,
    numeric: bool,
    assign: bool,
    skip: usize,
    bare: Option<String>,
    exec: Vec<String>,
}

/// The parsed profile: the wrappers by name and the opaque programs.
#[derive(Debug, Default)]
pub struct Profile {
    wrappers: HashMap<String, Wrapper>,
    opaque: Vec<String>,
}

/// What one argv runs, besides its own program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inner {
    /// Not a wrapper, or a wrapper given no command (`nice` alone prints the niceness).
    Nothing,
    /// The argvs it runs, each with the index in the outer argv where it starts (for `bare`,
    /// the argv's length: nothing of the outer argv names it).
    Runs(Vec<(Vec<String>, usize)>),
    /// The wrapper's form cannot be unwrapped: the index of the token that makes it so, and why.
    Unknown(usize, String),
}

/// A line of `sandbox-profiles/wrappers.txt` that cannot be read ([`Profile::parse`]); `line`
/// counts from 1. The embedded profile's parse is tested, so this is a build's mistake: the
/// allowlist then refuses every argv and names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("sandbox-profiles/wrappers.txt line {line}: `wrap` needs a program")]
    NoProgram { line: usize },
    #[error("sandbox-profiles/wrappers.txt line {line}: bad {word}")]
    BadSkip { line: usize, word: String },
    #[error("sandbox-profiles/wrappers.txt line {line}: unknown field `{word}`")]
    UnknownField { line: usize, word: String },
    #[error("sandbox-profiles/wrappers.txt line {line}: `{option}` is not `-x` or `--long`")]
    NotAnOption { line: usize, option: String },
    #[error(
        "sandbox-profiles/wrappers.txt line {line}: a line starts with `wrap` or `opaque`: \
         `{text}`"
    )]
    BadLine { line: usize, text: String },
}

fn list(v: &str) -> Vec<String> {
    v.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect()
}

impl Profile {
    /// Parses the profile's text; an error names the line and what is wrong with it.
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let mut p = Profile::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = n + 1;
            let mut words = line.split_whitespace();
            match words.next() {
                Some("opaque") => p.opaque.extend(words.map(str::to_string)),
                Some("wrap") => {
                    let name = words.next().ok_or(ProfileError::NoProgram { line: at })?;
                    let mut w = Wrapper::default();
                    for word in words {
                        let (key, value) = word.split_once('=').unwrap_or((word, ""));
                        match key {
                            "flags" => w.flags = list(value),
                            "values" => w.values = list(value),
                            "optional" => w.optional = list(value),
                            "text" => w.text = list(value),
                            "exec" => w.exec = list(value),
                            "numeric" => w.numeric = true,
                            "assign" => w.assign = true,
                            "skip" => {
                                w.skip = value.parse().map_err(|_| ProfileError::BadSkip {
                                    line: at,
                                    word: word.to_string(),
                                })?
                            }
                            "bare" => w.bare = Some(value.to_string()),
                            _ => {
                                return Err(ProfileError::UnknownField {
                                    line: at,
                                    word: word.to_string(),
                                });
                            }
                        }
                    }
                    let options = [&w.flags, &w.values, &w.optional, &w.text];
                    for o in options.into_iter().flatten() {
                        let long = o.len() > 2 && o.starts_with("--");
                        let short = o.len() == 2 && o.starts_with('-') && o != "--";
                        if !long && !short {
                            return Err(ProfileError::NotAnOption { line: at, option: o.clone() });
                        }
                    }
                    p.wrappers.insert(name.to_string(), w);
                }
                _ => {
                    return Err(ProfileError::BadLine { line: at, text: line.to_string() });
                }
            }
        }
        Ok(p)
    }

    /// The embedded profile, parsed once. Its parse is tested; were it broken, no program
    /// would be a wrapper and every `wrap` line's program would be refused by [`Profile::get`]'s
    /// caller instead (see `allow::Policy::new`, which reports the error at startup).
    pub fn embedded() -> Result<&'static Profile, ProfileError> {
        static PARSED: OnceLock<Result<Profile, ProfileError>> = OnceLock::new();
        PARSED.get_or_init(|| Profile::parse(PROFILE)).as_ref().map_err(Clone::clone)
    }

    /// Whether `bin` runs another program named in its arguments.
    pub fn is_wrapper(&self, bin: &str) -> bool {
        self.wrappers.contains_key(bin)
    }

    /// Whether `bin` runs commands it reads as text, from files or from its input.
    pub fn is_opaque(&self, bin: &str) -> bool {
        self.opaque.iter().any(|o| o == bin)
    }

    /// What `argv` runs besides its own program.
    pub fn inner(&self, argv: &[String]) -> Inner {
        let Some(w) = argv.first().and_then(|b| self.wrappers.get(b)) else {
            return Inner::Nothing;
        };
        if !w.exec.is_empty() {
            return exec_commands(w, argv);
        }
        let mut i = 1;
        // The wrapper's own options, up to the first operand or `--`.
        while let Some(a) = argv.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') || a == "-" {
                break;
            }
            match option(w, argv, i) {
                Ok(next) => i = next,
                Err(why) => return Inner::Unknown(i, why),
            }
        }
        if w.assign {
            while let Some((name, _)) = argv.get(i).and_then(|a| a.split_once('=')) {
                if name == "PATH" || name.starts_with("LD_") {
                    return Inner::Unknown(
                        i,
                        format!(
                            "it sets {name}, which decides which program (or library) the \
                             command runs"
                        ),
                    );
                }
                i += 1;
            }
        }
        i += w.skip;
        if i >= argv.len() {
            return match &w.bare {
                Some(b) => Inner::Runs(vec![(vec![b.clone()], argv.len())]),
                None => Inner::Nothing,
            };
        }
        if argv[i].starts_with('-') {
            // `flock FILE -c TEXT`: the wrapper reads an option after its operands.
            return Inner::Unknown(i, format!("its command would start with `{}`", argv[i]));
        }
        Inner::Runs(vec![(argv[i..].to_vec(), i)])
    }
}

/// Reads the option at `argv[i]`; the index after it (and its value), or why it cannot be read.
fn option(w: &Wrapper, argv: &[String], i: usize) -> Result<usize, String> {
    let a = &argv[i];
    let text =
        |o: &str| format!("its option `{o}` makes it run text or a program hands cannot name");
    if let Some(long) = a.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((n, _)) => (format!("--{n}"), true),
            None => (a.clone(), false),
        };
        return if w.text.contains(&name) {
            Err(text(&name))
        } else if w.flags.contains(&name) || w.optional.contains(&name) {
            Ok(i + 1)
        } else if w.values.contains(&name) {
            if inline || i + 1 < argv.len() { Ok(i + 1 + usize::from(!inline)) } else { Ok(i + 1) }
        } else {
            Err(format!("its option `{name}` is not in sandbox-profiles/wrappers.txt"))
        };
    }
    if w.numeric && a[1..].chars().all(|c| c.is_ascii_digit()) {
        return Ok(i + 1);
    }
    // A cluster of short options: `-0v`, `-n5`, `-u NAME`.
    for (k, c) in a.char_indices().skip(1) {
        let o = format!("-{c}");
        let rest = &a[k + c.len_utf8()..];
        if w.text.contains(&o) {
            return Err(text(&o));
        } else if w.optional.contains(&o) {
            return Ok(i + 1);
        } else if w.values.contains(&o) {
            return Ok(if rest.is_empty() { i + 2 } else { i + 1 });
        } else if !w.flags.contains(&o) {
            return Err(format!("its option `{o}` is not in sandbox-profiles/wrappers.txt"));
        }
    }
    Ok(i + 1)
}

/// `find … -exec CMD … ;` (or `+`): every command among the arguments.
fn exec_commands(w: &Wrapper, argv: &[String]) -> Inner {
    let mut runs = Vec::new();
    let mut i = 1;
    while i < argv.len() {
        if !w.exec.contains(&argv[i]) {
            i += 1;
            continue;
        }
        let start = i + 1;
        let Some(len) = argv[start..].iter().position(|a| a == ";" || a == "+") else {
            return Inner::Unknown(i, format!("its `{}` has no closing `;` or `+`", argv[i]));
        };
        if len == 0 {
            return Inner::Unknown(i, format!("its `{}` names no command", argv[i]));
        }
        if argv[start].contains("{}") {
            return Inner::Unknown(
                start,
                "the command's name comes from the file names it finds (`{}`)".to_string(),
            );
        }
        runs.push((argv[start..start + len].to_vec(), start));
        i = start + len + 1;
    }
    if runs.is_empty() { Inner::Nothing } else { Inner::Runs(runs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn runs(s: &str) -> Vec<String> {
        match Profile::embedded().unwrap().inner(&argv(s)) {
            Inner::Runs(r) => r.into_iter().map(|(a, _)| a.join(" ")).collect(),
            other => panic!("{s}: {other:?}"),
        }
    }

    fn unknown(s: &str) -> usize {
        match Profile::embedded().unwrap().inner(&argv(s)) {
            Inner::Unknown(at, _) => at,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn the_embedded_profile_parses() {
        let p = Profile::embedded().unwrap();
        for w in ["env", "timeout", "nice", "nohup", "setsid", "stdbuf", "xargs", "flock"] {
            assert!(p.is_wrapper(w), "{w}");
        }
        for w in ["ionice", "taskset", "chrt", "time", "sudo", "doas", "busybox", "find"] {
            assert!(p.is_wrapper(w), "{w}");
        }
        for o in ["sh", "bash", "make", "watch", "parallel", "python3", "gdb"] {
            assert!(p.is_opaque(o), "{o}");
        }
        assert_eq!(p.inner(&argv("ls -l")), Inner::Nothing);
    }

    #[test]
    fn the_inner_command_is_found_past_options_assignments_and_operands() {
        assert_eq!(runs("env rm x"), ["rm x"]);
        assert_eq!(runs("env -i -u HOME A=1 B=2 rm -rf x"), ["rm -rf x"]);
        assert_eq!(runs("env -uHOME --chdir=/tmp -- rm x"), ["rm x"]);
        assert_eq!(runs("env -iv0 rm"), ["rm"]);
        assert_eq!(runs("timeout 10 bash -c x"), ["bash -c x"]);
        assert_eq!(runs("timeout -s KILL -k 1 10 bash"), ["bash"]);
        assert_eq!(runs("timeout --signal=KILL 10 rm"), ["rm"]);
        assert_eq!(runs("nice -n 5 rm"), ["rm"]);
        assert_eq!(runs("nice -10 rm"), ["rm"]);
        assert_eq!(runs("nice -n5 rm"), ["rm"]);
        assert_eq!(runs("nohup rm"), ["rm"]);
        assert_eq!(runs("stdbuf -oL -e 0 rm"), ["rm"]);
        assert_eq!(runs("flock -w 3 /tmp/l rm x"), ["rm x"]);
        assert_eq!(runs("taskset -c 0 rm"), ["rm"]);
        assert_eq!(runs("chrt -f 10 rm"), ["rm"]);
        assert_eq!(runs("xargs -0 -n 1 rm"), ["rm"]);
        assert_eq!(runs("busybox rm x"), ["rm x"]);
        assert_eq!(runs("unshare -r"), ["sh"]);
        assert_eq!(runs("chroot / rm"), ["rm"]);
        assert_eq!(runs("find . -name x -exec rm {} ; -execdir mv {} y +"), ["rm {}", "mv {} y"]);
        assert_eq!(runs("sudo -u root rm"), ["rm"]);
        assert_eq!(runs("env env env rm"), ["env env rm"]);
    }

    #[test]
    fn forms_that_hide_the_command_are_unknown() {
        assert_eq!(unknown("env -S rm"), 1);
        assert_eq!(unknown("env --split-string=rm"), 1);
        assert_eq!(unknown("env -iS rm"), 1);
        assert_eq!(unknown("env --frobnicate rm"), 1);
        assert_eq!(unknown("env PATH=/tmp rm"), 1);
        assert_eq!(unknown("env A=1 LD_PRELOAD=/x.so ls"), 2);
        assert_eq!(unknown("flock /tmp/l -c rm"), 2);
        assert_eq!(unknown("flock -c rm /tmp/l"), 1);
        assert_eq!(unknown("xargs -I {} {} x"), 1);
        assert_eq!(unknown("sudo -s"), 1);
        assert_eq!(unknown("find . -exec {} ;"), 3);
        assert_eq!(unknown("find . -exec rm x"), 2);
        assert_eq!(unknown("timeout -Z 10 rm"), 1);
    }

    #[test]
    fn a_wrapper_without_a_command_runs_nothing_or_its_default() {
        let p = Profile::embedded().unwrap();
        assert_eq!(p.inner(&argv("env")), Inner::Nothing);
        assert_eq!(p.inner(&argv("env -i A=1")), Inner::Nothing);
        assert_eq!(p.inner(&argv("nice")), Inner::Nothing);
        assert_eq!(p.inner(&argv("find . -name x")), Inner::Nothing);
        assert_eq!(p.inner(&argv("nsenter -t 1 -m")), Inner::Runs(vec![(argv("sh"), 4)]));
    }

    #[test]
    fn bad_profile_lines_are_named() {
        let e = Profile::parse("wrap x flags=-ff").unwrap_err();
        assert_eq!(e, ProfileError::NotAnOption { line: 1, option: "-ff".into() });
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = Profile::parse("\nwrap x colour=red").unwrap_err();
        assert_eq!(e, ProfileError::UnknownField { line: 2, word: "colour=red".into() });
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(matches!(Profile::parse("frob x"), Err(ProfileError::BadLine { line: 1, .. })));
        assert_eq!(Profile::parse("wrap").unwrap_err(), ProfileError::NoProgram { line: 1 });
    }
}
