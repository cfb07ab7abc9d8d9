//! The tidy test: invariants of SPEC §11 that are facts about the source tree, checked on every
//! `cargo test` (issue 19 point 8). Every `.rs` file opens with a `//!` line; `unsafe` appears
//! only in the files `UNSAFE_ALLOWED` lists; no process is spawned (`Command::new`) outside the
//! files `SPAWN_ALLOWED` lists; no file in `src/` is longer than `MAX_LINES` unless `OVERSIZE`
//! lists it, none in `modules/*/src/` longer than `MODULE_MAX_LINES`; no two shipped files of
//! different jobs share a name (`SAME_JOB` lists the names one job keeps everywhere); the
//! daemon's top-level modules use only their own layer and those below, with no cycle
//! (`LAYERS`, `UPWARD`), no two files of one folder use each other, and the module crates use
//! only the crates below them, never the daemon (`CRATE_LAYERS`). The lists are the one place to change when a file moves: an entry
//! that matches nothing any more fails the test, so they only shrink. clippy's
//! `disallowed-methods` (`clippy.toml`) is the other half, the same rules at the call site;
//! shipped code silences it only item by item, each time with a reason.
//!
//! A test of its own binary, not in `tests/suite`: it reads the source tree only and needs none
//! of the suite's fixtures, so it builds and runs in seconds.

// Reading the source tree is this test's whole job.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

/// The folders whose `.rs` files are checked, relative to the workspace root.
const TREES: &[&str] = &["src", "modules", "tests", "benches"];

/// Where process spawns are looked for: the code that ships (tests spawn what they like).
const SHIPPED: &[&str] = &["src/", "modules/*/src/"];

/// Files (or folders, ending in `/`) that may hold the `unsafe` keyword. SPEC §11: only the
/// sandbox crate's `sys` module (libgit2's process-global options too, decision 0072); an entry
/// added here says why it must be elsewhere.
const UNSAFE_ALLOWED: &[(&str, &str)] =
    &[("modules/sandbox/src/sys/", "the sandbox crate's unsafe zone")];

/// What building or starting a process looks like: a `Command` made or converted, started, or
/// given Unix-only settings (issue 35 point 4: one spawner).
const SPAWN_WORDS: &[&str] = &["Command::new", "Command::from", ".spawn()", "CommandExt"];

/// Shipped files (or folders) that may spawn a process. SPEC §11: the sandbox's launcher (which
/// forks through `sys`, no `Command`), what starts the launcher (`hands` itself, by its typed
/// spec). Nothing runs on the host: even doctor's version lines of tmux and git go through the
/// launcher (`modules/sandbox/src/host.rs`, decision 0052).
const SPAWN_ALLOWED: &[(&str, &str)] = &[
    ("modules/sandbox/src/listen.rs", "starts the launcher's listener in the module's namespace"),
    ("modules/sandbox/src/netns.rs", "starts the netns holder, the launcher's own binary"),
    ("modules/sandbox/src/launcher/spec.rs", "`Spec::command`: the one way the launcher starts"),
    ("modules/sandbox/src/launcher/remask.rs", "`remask::request` starts `hands __remask`"),
    ("modules/sandbox/src/probe.rs", "the self-test starts the launcher it tests, by its spec"),
    ("modules/sandbox/src/host.rs", "doctor's version lines start the launcher, by its spec"),
    ("modules/sandbox/src/sys/marks.rs", "`inherit` hands the launcher's command its marks"),
];

/// The longest a file in `src/` may be (issue 19 point 7).
const MAX_LINES: usize = 600;

/// Files in `src/` over `MAX_LINES` today. Other engineers are splitting them (issue 19): delete
/// an entry when its file is under the limit or gone (the test says so); add none. (No growth
/// ceiling while the session's splits and features land at once; one can come back after.)
const OVERSIZE: &[&str] = &[];

/// The longest a file in `modules/*/src/` may be (issue 35 point 7): a file past it holds
/// more than one job.
const MODULE_MAX_LINES: usize = 700;

/// File names that several shipped files share because they do one job each wherever they
/// are; any other name names one file only (issue 35 point 7: a reader who meets `http.rs`
/// knows which job it is). An entry no two files share any more fails the test.
const SAME_JOB: &[(&str, &str)] = &[
    ("lib.rs", "a crate's root"),
    ("mod.rs", "a folder module's root"),
    ("tests.rs", "a module's unit tests, in a file of their own"),
    ("error.rs", "a crate's error type"),
    ("catalogue.rs", "a module crate's tools, handed to the daemon's registry"),
    ("settings.rs", "a module crate's `config` table"),
    ("read.rs", "a module crate's read-class tools"),
    ("write.rs", "a module crate's write-class tools"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `TREES`, as a path relative to the root with `/` separators.
fn rust_files() -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                if p.file_name().is_some_and(|n| n == "target") {
                    continue;
                }
                walk(&p, base, out);
            } else if p.extension().is_some_and(|x| x == "rs")
                && let Ok(rel) = p.strip_prefix(base)
            {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let base = root();
    let mut out = Vec::new();
    for t in TREES {
        walk(&base.join(t), &base, &mut out);
    }
    out.sort();
    assert!(out.len() > 50, "the walk found only {} files: is the root right?", out.len());
    out
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Whether `rel` matches `pattern`: a file, a folder ending in `/`, and `*` for one component.
fn matches(pattern: &str, rel: &str) -> bool {
    let (pattern, prefix) = match pattern.strip_suffix('/') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let want: Vec<&str> = pattern.split('/').collect();
    let have: Vec<&str> = rel.split('/').collect();
    if have.len() < want.len() || (!prefix && have.len() != want.len()) {
        return false;
    }
    want.iter().zip(&have).all(|(w, h)| *w == "*" || w == h)
}

fn allowed<'a>(list: &'a [(&'a str, &'a str)], rel: &str) -> Option<&'a str> {
    list.iter().find(|(p, _)| matches(p, rel)).map(|(p, _)| *p)
}

/// The text with comments, string and char literals blanked (newlines kept), so that a word in
/// a comment or a message is not taken for code.
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r' && (at(i + 1) == '"' || (at(i + 1) == '#' && at(i + 2) != '[')) {
            // A raw string: r"…", r#"…"#; only its closing quote with as many `#` ends it.
            let mut hashes = 0;
            let mut j = i + 1;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                out.push(c[i]);
                i += 1;
                continue;
            }
            i = j + 1;
            while i < c.len() {
                if c[i] == '"' && (0..hashes).all(|h| at(i + 1 + h) == '#') {
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A char literal ('a', '\n', '\''); a lifetime ('a) has no closing quote.
            i += if at(i + 1) == '\\' { 3 } else { 2 };
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The code of a shipped file without its unit tests (a `#[cfg(test)] mod … {` block runs to
/// the end of the file, by the house's habit of tests at the foot).
fn without_tests(code: &str) -> &str {
    let mut from = 0;
    while let Some(k) = code[from..].find("#[cfg(test)]") {
        let at = from + k;
        let rest = code[at + 12..].trim_start();
        if let Some(m) = rest.strip_prefix("mod ") {
            let name_end = m.find(|c: char| !c.is_alphanumeric() && c != '_').unwrap_or(m.len());
            if m[name_end..].trim_start().starts_with('{') {
                return &code[..at];
            }
        }
        from = at + 12;
    }
    code
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Line numbers where `word` stands as a whole token (or token sequence) in `code`.
fn lines_with(code: &str, word: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find(word) {
        let at = from + k;
        // A method call (`.spawn()`) follows any receiver.
        let before = !word.starts_with('.') && code[..at].chars().next_back().is_some_and(is_ident);
        let after = code[at + word.len()..].chars().next().is_some_and(is_ident);
        if !before && !after {
            out.push(code[..at].matches('\n').count() + 1);
        }
        from = at + word.len();
    }
    out
}

fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.starts_with("tests") || rel.split('/').any(|c| c == "tests")
}

fn shipped(rel: &str) -> bool {
    SHIPPED.iter().any(|p| matches(p, rel)) && !is_test_file(rel)
}

/// Fails with every finding, and with the list entries that match nothing any more.
fn report(what: &str, findings: Vec<String>) {
    assert!(findings.is_empty(), "{what}:\n  {}", findings.join("\n  "));
}

fn stale(list: &[&str], files: &[String]) -> Vec<String> {
    list.iter()
        .filter(|p| !files.iter().any(|f| matches(p, f)))
        .map(|p| format!("`{p}` matches no file any more: delete its entry"))
        .collect()
}

#[test]
fn every_file_opens_with_a_doc_line() {
    let findings: Vec<String> = rust_files()
        .into_iter()
        .filter(|f| !read(f).starts_with("//!"))
        .map(|f| format!("{f}: the first line is not a `//!` line saying what the file is"))
        .collect();
    report("files without a `//!` opening line", findings);
}

#[test]
fn unsafe_only_where_allowed() {
    let files = rust_files();
    let mut findings = Vec::new();
    let mut used = Vec::new();
    for f in &files {
        let code = code_only(&read(f));
        let lines = lines_with(&code, "unsafe");
        if lines.is_empty() {
            continue;
        }
        match allowed(UNSAFE_ALLOWED, f) {
            Some(entry) => used.push(entry),
            None => findings.push(format!(
                "{f}:{}: `unsafe` outside the sandbox's sys module; move it there (or, with a \
                 reason, add the file to UNSAFE_ALLOWED in tests/tidy.rs)",
                lines[0]
            )),
        }
    }
    let entries: Vec<&str> = UNSAFE_ALLOWED.iter().map(|(p, _)| *p).collect();
    findings.extend(
        entries
            .iter()
            .filter(|e| !used.contains(e))
            .map(|e| format!("UNSAFE_ALLOWED `{e}` holds no `unsafe` any more: delete its entry")),
    );
    report("unsafe code", findings);
}

#[test]
fn processes_are_spawned_only_where_allowed() {
    let files = rust_files();
    let mut findings = Vec::new();
    let mut used = Vec::new();
    for f in files.iter().filter(|f| shipped(f)) {
        let text = code_only(&read(f));
        let code = without_tests(&text);
        let mut lines: Vec<usize> = SPAWN_WORDS.iter().flat_map(|w| lines_with(code, w)).collect();
        lines.sort_unstable();
        if lines.is_empty() {
            continue;
        }
        match allowed(SPAWN_ALLOWED, f) {
            Some(entry) => used.push(entry),
            None => findings.push(format!(
                "{f}:{}: a process spawned outside the sandbox's launcher; spawn through the \
                 launcher's spec (`Spec::output`, `spawn_piped`, `spawn_detached`), or, with a \
                 reason, add the file to SPAWN_ALLOWED in tests/tidy.rs",
                lines[0]
            )),
        }
    }
    let entries: Vec<&str> = SPAWN_ALLOWED.iter().map(|(p, _)| *p).collect();
    findings.extend(
        entries
            .iter()
            .filter(|e| !used.contains(e))
            .map(|e| format!("SPAWN_ALLOWED `{e}` spawns nothing any more: delete its entry")),
    );
    report("process spawns", findings);
}

/// What a silence of clippy's `disallowed-methods` (`clippy.toml`) in `code` looks like at
/// fault: `(line, why)` for each one that covers a whole file (`#![allow(...)]` at a file's
/// top) or carries no `reason = "..."`. A crate root's `#![cfg_attr(test, allow(...))]` covers
/// only its unit tests and is fine with a reason.
fn silence_faults(code: &str) -> Vec<(usize, &'static str)> {
    const LINT: &str = "clippy::disallowed_methods";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find(LINT) {
        let at = from + k;
        from = at + LINT.len();
        let line = code[..at].matches('\n').count() + 1;
        // The attribute around it: from its `#` to the bracket that closes it.
        let Some(start) = code[..at].rfind('#') else { continue };
        let mut depth = 0;
        let mut end = code.len();
        for (i, ch) in code[start..].char_indices() {
            match ch {
                '[' => depth += 1,
                ']' if depth == 1 => {
                    end = start + i + 1;
                    break;
                }
                ']' => depth -= 1,
                _ => {}
            }
        }
        let attr: String = code[start..end].chars().filter(|c| !c.is_whitespace()).collect();
        if attr.starts_with("#![") && !attr.starts_with("#![cfg_attr(test,") {
            out.push((line, "covers the whole file"));
        } else if !attr.contains("reason=") {
            out.push((line, "gives no `reason`"));
        }
    }
    out
}

/// Issue 35 point 4: clippy's `disallowed-methods` (spawning, stdout, opening by path, the raw
/// `Mutex::lock`) is silenced in shipped code only on the smallest item or statement that needs
/// it, and each silence says why (`#[expect(clippy::disallowed_methods, reason = "...")]`), so
/// a new call in a file that has one legitimate use is still caught.
#[test]
fn disallowed_methods_are_silenced_item_by_item_with_a_reason() {
    let mut findings = Vec::new();
    for f in rust_files().iter().filter(|f| shipped(f)) {
        for (line, why) in silence_faults(&code_only(&read(f))) {
            findings.push(format!(
                "{f}:{line}: a silence of clippy::disallowed_methods that {why}; put \
                 `#[expect(clippy::disallowed_methods, reason = \"...\")]` on the smallest item \
                 or statement that needs it, or use the safe way clippy.toml names"
            ));
        }
    }
    report("silenced disallowed methods", findings);
}

#[test]
fn the_silence_check_sees_file_wide_and_unexplained_silences() {
    let code = code_only(
        "#![cfg_attr(test, allow(clippy::disallowed_methods, reason = \"tests\"))]\n\
         #![allow(clippy::disallowed_methods)]\n\
         #[allow(clippy::disallowed_methods)]\nfn a() {}\n\
         #[expect(\n    clippy::disallowed_methods,\n    reason = \"procfs\"\n)]\nfn b() {}\n\
         // #[allow(clippy::disallowed_methods)] in a comment\n\
         #![expect(clippy::disallowed_methods, reason = \"the whole file\")]\n",
    );
    let faults = silence_faults(&code);
    assert_eq!(
        faults,
        [(2, "covers the whole file"), (3, "gives no `reason`"), (11, "covers the whole file")],
        "{code}"
    );
}

#[test]
fn no_file_in_src_is_over_the_size_limit() {
    let files = rust_files();
    let mut findings = Vec::new();
    for f in files.iter().filter(|f| f.starts_with("src/")) {
        let lines = read(f).lines().count();
        let listed = OVERSIZE.contains(&f.as_str());
        if lines > MAX_LINES && !listed {
            findings.push(format!(
                "{f}: {lines} lines, over the limit of {MAX_LINES}; split it by what its parts do"
            ));
        } else if lines <= MAX_LINES && listed {
            findings.push(format!(
                "{f}: {lines} lines, now under the limit: delete its OVERSIZE entry"
            ));
        }
    }
    findings.extend(stale(OVERSIZE, &files));
    report("file sizes", findings);
}

#[test]
fn no_file_in_the_module_crates_is_over_the_size_limit() {
    let findings: Vec<String> = rust_files()
        .iter()
        .filter(|f| matches("modules/*/src/", f))
        .filter_map(|f| {
            let lines = read(f).lines().count();
            (lines > MODULE_MAX_LINES).then(|| {
                format!(
                    "{f}: {lines} lines, over the limit of {MODULE_MAX_LINES}; split it by what \
                     its parts do"
                )
            })
        })
        .collect();
    report("file sizes in modules/*/src", findings);
}

/// The shipped files (`SHIPPED`, tests in them too) by file name, for the names more than one
/// file has.
fn shared_names(files: &[String]) -> Vec<(String, Vec<String>)> {
    let mut by_name: Vec<(String, Vec<String>)> = Vec::new();
    for f in files.iter().filter(|f| SHIPPED.iter().any(|p| matches(p, f))) {
        let name = f.rsplit('/').next().unwrap_or(f).to_string();
        match by_name.iter_mut().find(|(n, _)| *n == name) {
            Some((_, all)) => all.push(f.clone()),
            None => by_name.push((name, vec![f.clone()])),
        }
    }
    by_name.retain(|(_, all)| all.len() > 1);
    by_name
}

#[test]
fn no_two_files_of_different_jobs_share_a_name() {
    let shared = shared_names(&rust_files());
    let mut findings: Vec<String> = shared
        .iter()
        .filter(|(name, _)| !SAME_JOB.iter().any(|(n, _)| n == name))
        .map(|(name, all)| {
            format!(
                "{name} names {}: rename the one whose job the name says least (or, if every \
                 one does the same job, add it to SAME_JOB in tests/tidy.rs with that job)",
                all.join(", ")
            )
        })
        .collect();
    findings.extend(
        SAME_JOB
            .iter()
            .filter(|(n, _)| !shared.iter().any(|(name, _)| name == n))
            .map(|(n, _)| format!("SAME_JOB `{n}`: no two files share it any more; delete it")),
    );
    report("file names shared by files of different jobs", findings);
}

/// The names `code` reaches through `prefix` (`super::`, `crate::gate::`): a path, or each
/// path of a `prefix{…}` group, with its line.
fn path_uses(code: &str, prefix: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find(prefix) {
        let at = from + k;
        from = at + prefix.len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == '$' || c == ':') {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = &code[at + prefix.len()..];
        out.extend(first_names(rest).into_iter().map(|ident| (ident, line)));
    }
    out
}

/// The first name of each item a `use` names after its prefix (`x::…` or each top-level item of
/// a `{…}` group, split at commas outside inner braces), `self` left out.
fn first_names(rest: &str) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(group) = rest.strip_prefix('{') {
        let (mut depth, mut item) = (0, String::new());
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => names.push(std::mem::take(&mut item)),
                _ => {}
            }
            item.push(c);
        }
        names.push(item);
    } else {
        names.push(rest.to_string());
    }
    names
        .iter()
        .map(|n| n.trim_start_matches([',', ' ', '\n', '\t']))
        .map(|n| n.chars().take_while(|c| is_ident(*c)).collect::<String>())
        .filter(|ident| !ident.is_empty() && ident != "self")
        .collect()
}

/// A folder's root file re-exports of its children (`pub use parked::{Parked, Pending};`,
/// `pub use gate::approvals;`, `pub use shell_mcp as shell;`): each name, and the child that
/// holds it.
fn reexports(root_code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for stmt in root_code.split(';') {
        let stmt = stmt.trim();
        let Some(path) = ["pub use ", "pub(crate) use ", "pub(super) use ", "use "]
            .iter()
            .find_map(|p| stmt.rsplit('\n').next().and_then(|l| l.trim().strip_prefix(p)))
            .map(|_| stmt.split_once(" use ").map_or(stmt, |(_, p)| p).trim())
            .or_else(|| stmt.strip_prefix("use ").map(str::trim))
        else {
            continue;
        };
        let path = path.strip_prefix("self::").unwrap_or(path);
        let Some((child, rest)) = path.split_once("::") else {
            if let Some((child, alias)) = path.split_once(" as ") {
                out.push((alias.trim().to_string(), child.trim().to_string()));
            }
            continue;
        };
        let child = child.trim();
        for name in rest.split([',', '{', '}', ' ', '\n', ':']).filter(|n| !n.is_empty()) {
            if name.chars().all(is_ident) && name != "self" && name != "as" {
                out.push((name.to_string(), child.to_string()));
            }
        }
    }
    out
}

/// Every use of one file of a folder by another file of the same folder (the folder's root
/// file — `mod.rs`, `lib.rs`, `main.rs` or the `x.rs` beside `x/` — declares them, and is not
/// one of them): (folder, from, to, where), over the shipped trees, tests left out.
fn sibling_uses(files: &[String]) -> Vec<(String, String, String, String)> {
    let is_root = |name: &str| ["mod.rs", "lib.rs", "main.rs"].contains(&name);
    let mut folders: Vec<String> = files
        .iter()
        .filter(|f| shipped(f))
        .filter_map(|f| f.rsplit_once('/').map(|(d, _)| d.to_string()))
        .collect();
    folders.sort();
    folders.dedup();
    let mut out = Vec::new();
    for dir in folders {
        // The crate's `src/` folder, and the module path of `dir` beneath it.
        let Some(src_at) =
            dir.find("src").filter(|i| dir[i + 3..].is_empty() || dir[i + 3..].starts_with('/'))
        else {
            continue;
        };
        let below = dir[src_at + 3..].trim_start_matches('/');
        let crate_prefix = if below.is_empty() {
            "crate::".to_string()
        } else {
            format!("crate::{}::", below.replace('/', "::"))
        };
        let in_dir: Vec<&String> =
            files.iter().filter(|f| f.rsplit_once('/').is_some_and(|(d, _)| d == dir)).collect();
        let mut siblings: Vec<String> = in_dir
            .iter()
            .filter_map(|f| f.rsplit('/').next())
            .filter(|n| !is_root(n))
            .filter_map(|n| n.strip_suffix(".rs"))
            .map(str::to_string)
            .collect();
        siblings.extend(
            files
                .iter()
                .filter_map(|f| f.strip_prefix(&format!("{dir}/"))?.strip_suffix("/mod.rs"))
                .filter(|n| !n.contains('/'))
                .map(str::to_string),
        );
        let root_file = ["mod.rs", "lib.rs", "main.rs"]
            .iter()
            .map(|n| format!("{dir}/{n}"))
            .chain(std::iter::once(format!("{dir}.rs")))
            .find(|f| files.contains(f));
        let exported = root_file.map(|f| reexports(&code_only(&read(&f)))).unwrap_or_default();
        for f in in_dir.iter().filter(|f| shipped(f)) {
            let name = f.rsplit('/').next().unwrap_or(f);
            if is_root(name) {
                continue;
            }
            let from = name.trim_end_matches(".rs");
            let text = code_only(&read(f));
            let code = without_tests(&text);
            let mut used = path_uses(code, "super::");
            used.extend(path_uses(code, &crate_prefix));
            for (n, line) in used {
                let to = if siblings.contains(&n) {
                    n
                } else {
                    match exported.iter().find(|(e, _)| *e == n) {
                        Some((_, child)) if siblings.contains(child) => child.clone(),
                        _ => continue,
                    }
                };
                if to != from {
                    out.push((dir.clone(), from.to_string(), to, format!("{f}:{line}")));
                }
            }
        }
    }
    out
}

/// The pairs of files of one folder that use each other, each with where.
fn circles(uses: &[(String, String, String, String)]) -> Vec<String> {
    let mut findings = Vec::new();
    let mut seen: Vec<(&str, &str, &str)> = Vec::new();
    for (dir, a, b, at) in uses {
        if a < b
            && !seen.contains(&(dir, a, b))
            && let Some((.., back)) = uses.iter().find(|(d, x, y, _)| d == dir && x == b && y == a)
        {
            seen.push((dir, a, b));
            findings.push(format!(
                "{dir}: `{a}` and `{b}` use each other ({at}, {back}); move what both need into \
                 one of them or a file of its own, or make one a part (a submodule) of the other"
            ));
        }
    }
    findings
}

#[test]
fn no_two_files_of_one_folder_use_each_other() {
    let uses = sibling_uses(&rust_files());
    assert!(
        uses.len() > 50,
        "found only {} uses between files of a folder: is the scan right?",
        uses.len()
    );
    report("files of one folder that use each other", circles(&uses));
}

#[test]
fn the_folder_check_sees_uses_through_super_crate_paths_and_re_exports() {
    let code = code_only("use super::{a::X, b};\nfn f() { super::c::y(); crate::gate::d::z(); }\n");
    let names: Vec<String> = path_uses(&code, "super::").into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let names: Vec<String> =
        path_uses(&code, "crate::gate::").into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["d"]);
    let root = code_only(
        "mod a;\npub use a::{Kind, Walls};\npub(crate) use b::Thing;\npub use c as see;\n",
    );
    let r = reexports(&root);
    for (name, child) in [("Kind", "a"), ("Walls", "a"), ("Thing", "b"), ("see", "c")] {
        assert!(r.contains(&(name.to_string(), child.to_string())), "{name} in {r:?}");
    }
    let u = |d: &str, a: &str, b: &str| (d.to_string(), a.to_string(), b.to_string(), "x".into());
    assert_eq!(circles(&[u("d", "a", "b"), u("d", "b", "c")]), Vec::<String>::new());
    assert_eq!(circles(&[u("d", "a", "b"), u("d", "b", "a"), u("d", "a", "b")]).len(), 1);
    assert!(circles(&[u("d", "a", "b"), u("e", "b", "a")]).is_empty());
}

#[test]
fn the_scanner_sees_code_not_comments_or_strings() {
    let code = code_only(
        "// unsafe here\nlet s = \"unsafe { }\"; let r = r#\"Command::new\"#;\n\
         /* unsafe /* nested */ still */ fn f<'a>(c: char) -> bool { c == '\"' }\nunsafe {}\n",
    );
    assert_eq!(lines_with(&code, "unsafe"), [4], "{code}");
    assert!(lines_with(&code, "Command::new").is_empty(), "{code}");
    assert_eq!(lines_with("std::process::Command::new(x)", "Command::new"), [1]);
    assert_eq!(lines_with("let c = cmd\n.spawn()?;\nx.spawn_blocking()", ".spawn()"), [2]);
    assert!(lines_with("unsafe_code", "unsafe").is_empty());
    let t = "fn a() {}\n#[cfg(test)]\nmod x;\n#[cfg(test)]\nmod tests {\n Command::new }\n";
    assert!(!without_tests(t).contains("Command::new") && without_tests(t).contains("mod x;"));
    assert!(matches("modules/*/src/", "modules/fs/src/a/b.rs"));
    assert!(!matches("src/shell.rs", "src/shell/tmux.rs"));
    assert!(is_test_file("modules/fs/src/tests_rwe.rs") && !shipped("modules/git/tests/a.rs"));
}

#[test]
fn only_the_daemon_depends_on_rmcp() {
    // SPEC §11: the module crates know nothing of MCP; `src/` is the one adapter.
    let base = root().join("modules");
    let mut findings = Vec::new();
    let mut crates = 0;
    for e in std::fs::read_dir(&base).unwrap().flatten() {
        let manifest = e.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        crates += 1;
        if text.lines().any(|l| l.trim_start().starts_with("rmcp")) {
            findings.push(format!("{}: depends on rmcp", manifest.display()));
        }
    }
    assert!(crates >= 5, "found only {crates} module crates: is the root right?");
    report("module crates that depend on rmcp", findings);
}

/// The daemon's top-level modules in layers, top (what a person or a client reaches first) to
/// bottom, as ARCHITECTURE.md's picture draws them: a module may use (`crate::…`) the modules of
/// its own layer and of the layers below, never one above (so, for one, the transport never uses
/// the control socket or the dashboard), and no uses go round in a cycle. `main`,
/// `sandbox_main` and `lib` are the binaries and the library root.
const LAYERS: &[&[&str]] = &[
    &["main", "sandbox_main", "lib", "cli"],
    &["control", "dashboard"],
    &["transport", "runner", "relay", "link"],
    &["server"],
    &["daemon"],
    &["registry", "netgate", "shell_mcp"],
    &["gate"],
    &["audit", "errors", "config", "shown", "hangup"],
];

/// Uses that go up a layer, each with why: none since issue 19 (the last five went by handing
/// the lower module what it reads). Like the other lists it only shrinks (an entry that no use
/// needs any more fails the test); an upward use is what makes a cycle, so one listed here
/// would also be the only way a cycle may stand.
const UPWARD: &[(&str, &str, &str)] = &[];

/// The module crates in layers, top to bottom (ARCHITECTURE.md's picture): a crate depends only
/// on crates of the layers below its own, and none on the daemon (`hands`).
const CRATE_LAYERS: &[&[&str]] = &[
    &["hands-fs", "hands-git", "hands-shell"],
    &["hands-sandbox"],
    &["hands-roots", "hands-tool"],
];

/// The top-level module of the daemon a file of `src/` belongs to (`gate` for
/// `src/gate/ask.rs`, `server` for `src/server.rs`).
fn top_module(rel: &str) -> Option<&str> {
    let rest = rel.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    Some(first.strip_suffix(".rs").unwrap_or(first))
}

/// The names `code` reaches through `crate::` (a path, or each path of a `crate::{…}` group).
fn crate_uses(code: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find("crate::") {
        let at = from + k;
        from = at + 7;
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == '$') {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = &code[at + 7..];
        out.extend(first_names(rest).into_iter().map(|ident| (ident, line)));
    }
    out
}

/// `src/lib.rs`'s re-exports of its own modules (`pub use shell_mcp as shell;`,
/// `pub use gate::approvals;`): the name a use reaches, and the module that holds it.
fn lib_aliases(lib: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in lib.lines() {
        let Some(path) = line.trim().strip_prefix("pub use ").and_then(|l| l.strip_suffix(';'))
        else {
            continue;
        };
        let (path, name) = match path.split_once(" as ") {
            Some((p, n)) => (p.trim(), n.trim()),
            None => (path, path.rsplit("::").next().unwrap_or(path)),
        };
        let first = path.split("::").next().unwrap_or(path);
        out.push((name.to_string(), first.to_string()));
    }
    out
}

/// Every use of one top-level module by another: (from, to, where).
fn module_uses() -> Vec<(String, String, String)> {
    let lib = read("src/lib.rs");
    let aliases = lib_aliases(&code_only(&lib));
    let modules: Vec<String> =
        rust_files().iter().filter_map(|f| top_module(f).map(str::to_string)).collect();
    let mut out = Vec::new();
    for f in rust_files().iter().filter(|f| f.starts_with("src/") && !is_test_file(f)) {
        let Some(from) = top_module(f) else { continue };
        let text = code_only(&read(f));
        for (name, line) in crate_uses(without_tests(&text)) {
            let to = aliases.iter().find(|(a, _)| *a == name).map_or(name, |(_, m)| m.clone());
            // A re-export of another crate (`pub use hands_sandbox::probe`) is no module here.
            if to != from && modules.contains(&to) {
                out.push((from.to_string(), to, format!("{f}:{line}")));
            }
        }
    }
    out
}

fn layer_of(layers: &[&[&str]], m: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&m))
}

/// A cycle in `edges`, as the modules along it, if there is one.
fn find_cycle(edges: &[(String, String)]) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        edges: &[(String, String)],
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.iter().any(|d| d == m) {
            return None;
        }
        path.push(m.to_string());
        for (_, to) in edges.iter().filter(|(f, _)| f == m) {
            if let Some(c) = visit(to, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.push(m.to_string());
        None
    }
    let mut done = Vec::new();
    for (from, _) in edges {
        if let Some(c) = visit(from, edges, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

/// The findings of the layering rules over `uses`: modules in no layer, upward uses not in
/// `upward`, entries of `upward` nothing needs, and a cycle among the rest.
fn layering(
    layers: &[&[&str]],
    upward: &[(&str, &str, &str)],
    uses: &[(String, String, String)],
) -> Vec<String> {
    let mut findings = Vec::new();
    let mut edges: Vec<(String, String)> = Vec::new();
    let mut used = Vec::new();
    for (from, to, at) in uses {
        let (Some(lf), Some(lt)) = (layer_of(layers, from), layer_of(layers, to)) else {
            let m = if layer_of(layers, from).is_none() { from } else { to };
            let f = format!("src/{m}: a module in no layer; add it to LAYERS in tests/tidy.rs");
            if !findings.contains(&f) {
                findings.push(f);
            }
            continue;
        };
        if lt < lf {
            match upward.iter().find(|(f, t, _)| f == from && t == to) {
                Some(entry) => used.push(entry),
                None => findings.push(format!(
                    "{at}: `{from}` uses `{to}`, a layer above it (ARCHITECTURE.md); move what it \
                     needs down, or hand it in from above"
                )),
            }
            continue;
        }
        if !edges.contains(&(from.clone(), to.clone())) {
            edges.push((from.clone(), to.clone()));
        }
    }
    findings.extend(upward.iter().filter(|e| !used.contains(e)).map(|(f, t, _)| {
        format!("UPWARD `{f}` -> `{t}`: no use goes up there any more; delete it")
    }));
    if let Some(cycle) = find_cycle(&edges) {
        findings.push(format!(
            "the modules' uses go round in a cycle: {}; one of them must not use the next",
            cycle.join(" -> ")
        ));
    }
    findings
}

#[test]
fn the_daemon_s_modules_use_only_their_own_layer_and_those_below() {
    let uses = module_uses();
    assert!(uses.len() > 30, "found only {} uses between modules: is the scan right?", uses.len());
    let mut findings = layering(LAYERS, UPWARD, &uses);
    let modules: Vec<String> = rust_files()
        .iter()
        .filter(|f| f.starts_with("src/"))
        .filter_map(|f| top_module(f).map(str::to_string))
        .collect();
    findings.extend(
        modules
            .iter()
            .filter(|m| layer_of(LAYERS, m).is_none())
            .map(|m| format!("src/{m}: a module in no layer; add it to LAYERS in tests/tidy.rs")),
    );
    findings.sort();
    findings.dedup();
    report("the daemon's layers", findings);
}

#[test]
fn the_layering_check_sees_upward_uses_and_cycles() {
    let code = code_only(
        "use crate::{gate::{Verdict, decide}, lock};\nfn f() { crate::audit::x(); }\n\
         // crate::dashboard in a comment\nmacro_rules! m { () => { $crate::x } }\n",
    );
    let names: Vec<String> = crate_uses(&code).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["gate", "lock", "audit"]);
    let layers: &[&[&str]] = &[&["a"], &["b", "c"], &["d"]];
    let uses = |pairs: &[(&str, &str)]| -> Vec<(String, String, String)> {
        pairs.iter().map(|(f, t)| (f.to_string(), t.to_string(), "x".to_string())).collect()
    };
    assert!(layering(layers, &[], &uses(&[("a", "b"), ("b", "c"), ("c", "d")])).is_empty());
    let up = layering(layers, &[], &uses(&[("d", "a")]));
    assert!(up.len() == 1 && up[0].contains("a layer above"), "{up:?}");
    let cycle = layering(layers, &[], &uses(&[("b", "c"), ("c", "b")]));
    assert!(cycle.len() == 1 && cycle[0].contains("cycle"), "{cycle:?}");
    assert!(layering(layers, &[("d", "a", "why")], &uses(&[("d", "a")])).is_empty());
    let stale = layering(layers, &[("d", "a", "why")], &[]);
    assert!(stale.len() == 1 && stale[0].contains("delete it"), "{stale:?}");
    assert!(!layering(layers, &[], &uses(&[("e", "a")])).is_empty());
}

#[test]
fn module_crates_depend_only_on_the_layers_below_and_never_on_the_daemon() {
    let mut findings = Vec::new();
    let mut crates = 0;
    for e in std::fs::read_dir(root().join("modules")).unwrap().flatten() {
        let manifest = e.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        crates += 1;
        let name = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("name = \"")?.strip_suffix('"'))
            .unwrap_or("?")
            .to_string();
        let Some(own) = layer_of(CRATE_LAYERS, &name) else {
            findings.push(format!("{name}: a crate in no layer; add it to CRATE_LAYERS"));
            continue;
        };
        // `[dependencies]` and `[dev-dependencies]` alike: a test must not reach up either.
        for dep in text.lines().filter_map(|l| l.split(['=', '.', ' ']).next()) {
            if dep == "hands" {
                findings.push(format!("{name} depends on the daemon (`hands`)"));
            } else if dep.starts_with("hands-")
                && layer_of(CRATE_LAYERS, dep).is_none_or(|l| l <= own)
            {
                findings.push(format!(
                    "{name} depends on {dep}, which is not in a layer below it (CRATE_LAYERS)"
                ));
            }
        }
    }
    assert!(crates >= 5, "found only {crates} module crates: is the root right?");
    report("module crates' dependencies", findings);
}

/// ARCHITECTURE.md stays a bird's-eye view (issue 35: at most 14 KB) and its code map stays
/// whole: every file and folder directly under `src/` is named there, so a new one cannot land
/// without its line.
#[test]
fn the_architecture_map_is_short_and_names_every_part_of_src() {
    let map = read("ARCHITECTURE.md");
    assert!(map.len() <= 14 * 1024, "ARCHITECTURE.md is {} bytes, over 14 KB: say less", map.len());
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root().join("src")).expect("src/ is readable") {
        let entry = entry.expect("src/ entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        let shown = if entry.path().is_dir() { format!("`{name}/") } else { format!("`{name}") };
        if !map.contains(&shown) {
            missing.push(format!("src/{name}: not in ARCHITECTURE.md's code map (as {shown}…)"));
        }
    }
    report("parts of src/ the architecture map does not name", missing);
}

/// The kinds of test `cargo test` may leave out on a laptop (issue 35): each `#[ignore]` says
/// which it is, so the `ignored` line names what the machine lacks.
const IGNORE_KINDS: &[&str] = &["needs ", "stress", "a cost probe"];

/// A test that `cargo test` leaves out must say why, and CI must still run it: `.ci/run`'s test
/// command, the README's and `scripts/test-as-user` pass `--include-ignored`.
#[test]
fn every_ignored_test_says_why_and_ci_runs_it() {
    let mut findings = Vec::new();
    for f in rust_files() {
        let src = read(&f);
        for (n, line) in src.lines().enumerate() {
            let t = line.trim_start();
            if !t.starts_with("#[ignore") {
                continue;
            }
            let reason = t.strip_prefix("#[ignore = \"").unwrap_or("");
            if !IGNORE_KINDS.iter().any(|k| reason.starts_with(k)) {
                findings.push(format!(
                    "{f}:{}: `#[ignore]` without a reason of a known kind ({IGNORE_KINDS:?}): \
                     write `#[ignore = \"needs sshd; run with --include-ignored\"]`",
                    n + 1
                ));
            }
        }
    }
    let ci = read(".ci/run");
    if !ci
        .lines()
        .any(|l| l.starts_with("cargo test --workspace") && l.contains("--include-ignored"))
    {
        findings.push(".ci/run: `cargo test --workspace` without `-- --include-ignored`".into());
    }
    let readme = read("README.md");
    if !readme.contains("cargo test --workspace -- --include-ignored && scripts/conformance") {
        findings.push("README.md: the test command lost `-- --include-ignored`".into());
    }
    if !read("scripts/test-as-user").contains("--include-ignored") {
        findings.push("scripts/test-as-user: does not pass `--include-ignored`".into());
    }
    report("ignored tests", findings);
}

/// The return types of the `pub` functions (and `pub type` aliases) of `code`, any visibility
/// `pub(…)` included: `(line, type)`, the type as written between `->` and the body (or `;`,
/// or `where`). `code` is [`code_only`]'s: strings and comments are blank.
fn public_return_types(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut from = 0;
    while let Some(k) = code[from..].find("pub") {
        let at = from + k;
        from = at + 3;
        if at > 0 && is_ident(code[..at].chars().next_back().unwrap_or(' ')) {
            continue;
        }
        let mut rest = code[at + 3..].trim_start();
        if rest.starts_with('(') {
            let Some(close) = rest.find(')') else { continue };
            rest = rest[close + 1..].trim_start();
        }
        for q in ["const ", "async ", "unsafe ", "extern \"\" "] {
            rest = rest.strip_prefix(q).map_or(rest, str::trim_start);
        }
        let line = code[..at].matches('\n').count() + 1;
        if let Some(alias) = rest.strip_prefix("type ") {
            if let Some(eq) = alias.find('=') {
                let end = alias[eq..].find(';').map_or(alias.len(), |e| eq + e);
                out.push((line, alias[eq + 1..end].trim().to_string()));
            }
            continue;
        }
        let Some(sig) = rest.strip_prefix("fn ") else { continue };
        let start = b.len() - sig.len();
        // Past the generics and the parameters (which may hold `-> …` of closure types).
        let mut i = start;
        let mut depth = 0i32;
        while i < b.len() {
            match b[i] {
                b'-' if b.get(i + 1) == Some(&b'>') => i += 1,
                b'<' | b'(' | b'[' => depth += 1,
                b'>' | b']' => depth -= 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b'{' | b';' if depth == 0 => break,
                _ => {}
            }
            i += 1;
        }
        let after = code[(i + 1).min(b.len())..].trim_start();
        let Some(ret) = after.strip_prefix("->") else { continue };
        let rs = b.len() - ret.len();
        let (mut j, mut depth) = (rs, 0i32);
        while j < b.len() {
            match b[j] {
                b'-' if b.get(j + 1) == Some(&b'>') => j += 1,
                b'<' | b'(' | b'[' => depth += 1,
                b'>' | b')' | b']' => depth -= 1,
                b'{' | b';' if depth <= 0 => break,
                b'w' if depth <= 0 && code[j..].starts_with("where") => break,
                _ => {}
            }
            j += 1;
        }
        out.push((line, code[rs..j].split_whitespace().collect::<Vec<_>>().join(" ")));
    }
    out
}

/// Whether a type holds a `Result<_, String>` (or `Arc<str>`, `Box<str>`) anywhere
/// (`Option<Result<T, String>>`, a `Vec` of pairs with one): the error as text.
fn has_string_error(ty: &str) -> bool {
    let mut from = 0;
    while let Some(k) = ty[from..].find("Result<") {
        let open = from + k + "Result<".len();
        from = open;
        if ty[..open - "Result<".len()].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        // The top-level arguments of this `Result<…>`.
        let (mut depth, mut args, mut arg) = (0i32, Vec::new(), String::new());
        for c in ty[open..].chars() {
            match c {
                '<' | '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '>' if depth == 0 => break,
                '>' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(std::mem::take(&mut arg));
                    continue;
                }
                _ => {}
            }
            arg.push(c);
        }
        args.push(arg);
        let text = ["String", "std::string::String", "Arc<str>", "Box<str>"];
        if args.len() == 2 && text.contains(&args[1].trim()) {
            return true;
        }
    }
    false
}

/// Issue 35 point 2: what fails crosses as a type, never as text. No `pub` function (any
/// `pub(…)` too) of the daemon or a module crate returns a `Result<_, String>` (nor `Arc<str>`,
/// `Box<str>`), nor a type that holds one: each area has a `thiserror` enum whose variants say what failed, and a caller
/// that decides something matches the variant. The text is made where it is shown. Private
/// helpers that never leave their file may still return text.
#[test]
fn no_public_function_returns_its_error_as_text() {
    let mut findings = Vec::new();
    for f in rust_files().iter().filter(|f| shipped(f)) {
        let text = code_only(&read(f));
        for (line, ty) in public_return_types(without_tests(&text)) {
            if has_string_error(&ty) {
                findings.push(format!(
                    "{f}:{line}: a public function returns `{ty}`: give its area a thiserror \
                     enum whose variants say what failed (keep the text in `#[error(…)]`)"
                ));
            }
        }
    }
    report("errors returned as text", findings);
}

#[test]
fn the_string_error_check_reads_signatures_as_rustc_does() {
    let code = "pub fn a(x: u8) -> Result<(), String> {}\n\
                pub(crate) async fn b<T: Into<String>>(f: impl Fn(u8) -> Result<u8, String>) \
                -> std::io::Result<String> where T: Clone {}\n\
                pub fn c() -> Vec<(PathBuf, Result<Reply, String>)> {}\n\
                pub fn d() -> Option<Result<Vec<u8>, E>> {}\n\
                pub type K = Result<Arc<u8>, String>;\n\
                pub(super) fn e(&self) -> Result<HashMap<String, u8>, Error>;\n\
                pub fn f() -> Result<Arc<Found>, Arc<str>> {}\n\
                fn private() -> Result<(), String> {}\n";
    let found: Vec<(usize, bool)> =
        public_return_types(code).iter().map(|(l, t)| (*l, has_string_error(t))).collect();
    let want = [(1, true), (2, false), (3, true), (4, false), (5, true), (6, false), (7, true)];
    assert_eq!(found, want);
}
