//! Input hardening for ref, branch and revision arguments, applied before the repository is
//! touched: no option-like names, no range or reflog syntax, nothing `git check-ref-format`
//! would refuse.

use crate::GitError;

/// Longest name accepted; real ref names are far shorter.
const MAX_NAME: usize = 255;

/// Checks a ref-like argument (`branch`, `base`, `start`, `rev`, `name`): refuses what could
/// read as an option, a range, reflog or revision syntax, or an invalid ref name.
pub(crate) fn check_name(arg: &'static str, value: &str) -> Result<(), GitError> {
    let bad = |why: &'static str| GitError::BadName { arg, value: value.to_string(), why };
    if value.is_empty() {
        return Err(bad("it is empty"));
    }
    if value.len() > MAX_NAME {
        return Err(bad("it is longer than 255 bytes"));
    }
    if value.contains('\0') {
        return Err(bad("it contains a NUL byte"));
    }
    if value.chars().any(char::is_control) {
        return Err(bad("it contains a control character"));
    }
    if value.starts_with('-') {
        return Err(bad("it starts with `-` and would read as an option"));
    }
    if value.contains("..") {
        return Err(bad("it contains `..` (range syntax is not accepted)"));
    }
    if value.contains("@{") {
        return Err(bad("it contains `@{` (reflog syntax is not accepted)"));
    }
    if value.contains(' ') {
        return Err(bad("it contains a space"));
    }
    for (c, why) in [
        ('~', "it contains `~` (revision syntax is not accepted)"),
        ('^', "it contains `^` (revision syntax is not accepted)"),
        (':', "it contains `:`"),
        ('?', "it contains `?`"),
        ('*', "it contains `*`"),
        ('[', "it contains `[`"),
        ('\\', "it contains `\\`"),
    ] {
        if value.contains(c) {
            return Err(bad(why));
        }
    }
    if value.ends_with(".lock") {
        return Err(bad("it ends with `.lock`"));
    }
    if value.ends_with('/') {
        return Err(bad("it ends with `/`"));
    }
    if !git2::Reference::is_valid_name(&format!("refs/heads/{value}")) {
        return Err(bad("it is not a valid git ref name (git check-ref-format)"));
    }
    Ok(())
}

/// Checks a revision: `HEAD`, a full commit id, or a name that passes [`check_name`].
pub(crate) fn check_rev(arg: &'static str, value: &str) -> Result<(), GitError> {
    if value == "HEAD" || (value.len() == 40 && value.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Ok(());
    }
    check_name(arg, value)
}

/// Checks a local branch name (for making, switching, pushing) and returns it without a
/// leading `refs/heads/`.
pub(crate) fn check_branch<'a>(arg: &'static str, value: &'a str) -> Result<&'a str, GitError> {
    let name = value.strip_prefix("refs/heads/").unwrap_or(value);
    check_name(arg, name)?;
    if name == "HEAD" {
        return Err(GitError::BadName {
            arg,
            value: value.to_string(),
            why: "`HEAD` is not a branch name",
        });
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass() {
        for ok in ["main", "task/x", "feature/a-b_c.1", "v1.2.3", "origin/main", "abc1234"] {
            assert!(check_name("branch", ok).is_ok(), "{ok}");
        }
        assert!(check_rev("rev", "HEAD").is_ok());
        assert!(check_rev("rev", &"a".repeat(40)).is_ok());
    }

    #[test]
    fn injection_and_ref_syntax_refused() {
        for bad in [
            "-f",
            "--output=x",
            "a..b",
            "refs/heads/../x",
            "HEAD@{1}",
            "a\0b",
            "a\nb",
            "a b",
            "HEAD~1",
            "HEAD^",
            "a:b",
            "a?",
            "a*",
            "a[",
            "a\\b",
            "x.lock",
            "x/",
            "/x",
            "a//b",
            ".hidden",
            "",
        ] {
            let e = check_rev("rev", bad).err();
            assert!(e.is_some(), "{bad:?} passed");
            let msg = e.map(|e| e.to_string()).unwrap_or_default();
            assert!(msg.contains("argument `rev`"), "{msg}");
        }
        assert!(check_name("name", &"x".repeat(300)).is_err());
    }

    #[test]
    fn branch_strips_prefix_and_refuses_head() {
        assert_eq!(check_branch("branch", "refs/heads/task/x").ok(), Some("task/x"));
        assert!(check_branch("branch", "HEAD").is_err());
    }
}
