//! What an allowlisted program can do with its own options (`sandbox-profiles/own-options.txt`):
//! the options known to run other programs or write files of the caller's choosing, which
//! `hands doctor` names for each entry of `commands.allow` (SPEC §4.4: an allowlisted binary is
//! trusted with everything it can do).

/// The known options of `bin`: (option, what it does).
pub fn of(bin: &str) -> Vec<(&'static str, &'static str)> {
    include_str!("../../../sandbox-profiles/own-options.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let (p, o, what) = (parts.next()?, parts.next()?, parts.next()?);
            (p == bin).then_some((o, what))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_routes_of_issue_37_are_named() {
        let names = |bin| super::of(bin).into_iter().map(|(o, _)| o).collect::<Vec<_>>();
        assert!(names("rg").contains(&"--pre"));
        assert!(names("sed").contains(&"e") && names("sed").contains(&"w"));
        for o in ["--to-command", "--checkpoint-action=exec", "-I"] {
            assert!(names("tar").contains(&o), "{o}");
        }
        for o in ["-c", "--output", "-O", "--upload-pack"] {
            assert!(names("git").contains(&o), "{o}");
        }
        assert!(names("zip").contains(&"-TT") && names("zip").contains(&"--unzip-command"));
        assert!(names("sort").contains(&"--compress-program"));
        assert!(names("find").contains(&"-exec") && names("find").contains(&"-fprint"));
        assert!(names("kubectl").contains(&"--kubeconfig"));
        assert!(names("awk").contains(&"system()"));
        assert!(names("split").contains(&"--filter"));
        assert!(names("nothing-like-it").is_empty());
    }
}
