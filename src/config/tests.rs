//! Unit tests of the config's placement of problems; the binary's view is `tests/suite/config.rs`.

use super::*;
use std::path::{Path, PathBuf};

fn err(src: &str) -> String {
    match parse(src, "daemon.toml") {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn unknown_key_in_builtin_names_the_id_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!(
        "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{{ path = \"{}\" }}]\ncolour = 1\n",
        dir.path().display()
    );
    let e = err(&src);
    assert!(e.contains("daemon.toml:5"), "{e}");
    assert!(e.contains("tools-fs"), "{e}");
    assert!(e.contains("colour"), "{e}");
    assert!(e.contains("hint:"), "{e}");
}

#[test]
fn shell_commands_and_tools_are_checked_strictly() {
    let dir = tempfile::tempdir().unwrap();
    let module = |config: &str| {
        format!(
            "[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{}\" }}]\nconfig = {{ {config} }}\n",
            dir.path().display()
        )
    };
    let e = err(&module("commands = { allow = [\"/bin/sh\"] }"));
    assert!(e.contains("config.commands.allow[0]") && e.contains("never by path"), "{e}");
    let e = err(&module("commands = { deny = [\"* x\"] }"));
    assert!(e.contains("config.commands.deny[0]"), "{e}");
    let e = err(&module("tools = [{ bin = \"kubectl\", args = [\"--context=x\"] }]"));
    assert!(e.contains("config.tools[0]") && e.contains("os-kubectl---context=x"), "{e}");
    let e = err(&module("commands = { allow = [\"rg\"], colour = 1 }"));
    assert!(e.contains("colour"), "{e}");
    let e = err(&module("tools = [{ bin = \"rg\", arg = [\"x\"] }]"));
    assert!(e.contains("arg"), "{e}");
    let ok = module(
        "bash = false, run_output_chars = 100, commands = { allow = [\"kubectl get\", \"*\"] }, \
         tools = [{ bin = \"kubectl\", args = [\"get\"], description = \"Read.\" }]",
    );
    assert!(parse(&ok, "daemon.toml").is_ok());
}

#[test]
fn tilde_expands_only_at_the_start() {
    let h = Path::new("/home/x");
    assert_eq!(expand_tilde("~/a", Some(h)), PathBuf::from("/home/x/a"));
    assert_eq!(expand_tilde("~", Some(h)), PathBuf::from("/home/x"));
    assert_eq!(expand_tilde("/a/~/b", Some(h)), PathBuf::from("/a/~/b"));
    assert_eq!(expand_tilde("~user/a", Some(h)), PathBuf::from("~user/a"));
}

#[test]
fn shell_numbers_out_of_range_are_errors_naming_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let module = |config: &str| {
        format!(
            "[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{}\" }}]\nconfig = {{ {config} }}\n",
            dir.path().display()
        )
    };
    for (setting, key, range) in [
        ("max_concurrent = 0", "config.max_concurrent", "between 1 and 1024; got 0"),
        ("max_concurrent = 1025", "config.max_concurrent", "between 1 and 1024; got 1025"),
        ("output_chars = 99", "config.output_chars", "between 100 and 1000000; got 99"),
        ("output_chars = 1000001", "config.output_chars", "between 100 and 1000000"),
        ("run_output_chars = 0", "config.run_output_chars", "between 1 and 1000000; got 0"),
        ("run_output_chars = 2000000", "config.run_output_chars", "between 1 and 1000000"),
        ("limits = { processes = 4194305 }", "config.limits.processes", "between 0 and 4194304"),
        ("limits = { open_files = 0 }", "config.limits.open_files", "between 1 and 1048576"),
        ("limits = { file_size_mb = 0 }", "config.limits.file_size_mb", "between 1 and 16777216"),
        ("limits = { memory_mb = 0 }", "config.limits.memory_mb", "between 1 and 16777216"),
        ("limits = { walk_entries = 0 }", "config.limits.walk_entries", "between 1 and 100000000"),
    ] {
        let e = err(&module(setting));
        assert!(e.contains("daemon.toml:5"), "{setting}: {e}");
        assert!(e.contains("[[builtins]] id \"tools-shell\""), "{setting}: {e}");
        assert!(e.contains(&format!("{key}: must be {range}")), "{setting}: {e}");
        assert!(e.contains("hint: the default is"), "{setting}: {e}");
    }
    // The bounds themselves are allowed.
    let ok = module("max_concurrent = 1024, output_chars = 100, run_output_chars = 1");
    assert!(parse(&ok, "daemon.toml").is_ok());
    let ok = module("max_concurrent = 1, output_chars = 1000000, run_output_chars = 1000000");
    assert!(parse(&ok, "daemon.toml").is_ok());
    let ok = module(
        "limits = { processes = 4194304, open_files = 1, file_size_mb = 16777216, \
         memory_mb = 1, walk_entries = 100000000 }",
    );
    assert!(parse(&ok, "daemon.toml").is_ok());
}

#[test]
fn git_push_problems_are_config_errors_with_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let module = |config: &str| {
        format!(
            "[[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{}\" }}]\nconfig = {{ {config} }}\n",
            dir.path().display()
        )
    };
    let e = err(&module("push = { remote = \"-x\" }"));
    assert!(e.contains("daemon.toml:5: [[builtins]] id \"tools-git\": config.push.remote"), "{e}");
    assert!(e.contains("not a valid remote name"), "{e}");
    let e = err(&module("push = { branches = [] }"));
    assert!(e.contains("config.push.branches: push.branches is empty"), "{e}");
    let e = err(&module("push = { urls = [\"https://h/r.git\"] }"));
    assert!(e.contains("config.push.urls[0]"), "{e}");
    let e = err(&module("push = { remot = \"origin\" }"));
    assert!(e.contains("config: unknown field `remot`"), "{e}");
    let e = err(&module("author_email = \"a@b\""));
    assert!(e.contains("config.author_name: author_name and author_email go together"), "{e}");
    let ok = module(
        "author_name = \"A\", author_email = \"a@b\", trust = { external = \"allow\" }, \
         push = { remote = \"origin\", branches = [\"task/*\"], urls = [\"~/b.git\"] }",
    );
    let Ok(cfg) = parse(&ok, "daemon.toml") else { panic!("valid git config refused") };
    let ModuleSettings::Git(g) = &cfg.modules[0].settings else { panic!("not git") };
    assert_eq!(g.author, Some(("A".to_string(), "a@b".to_string())));
    assert_eq!(cfg.modules[0].trust.external, TrustAction::Allow);
}

#[test]
fn module_trust_is_the_daemons_key_in_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let fs = |config: &str| {
        format!(
            "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
             filesystem = [{{ path = \"{}\" }}]\nconfig = {{ {config} }}\n",
            dir.path().display()
        )
    };
    let e = err(&fs("trust = { write = \"maybe\" }"));
    assert!(e.contains("config.trust") && e.contains("maybe"), "{e}");
    let e = err(&fs("trust = { wirte = \"deny\" }"));
    assert!(e.contains("config.trust") && e.contains("wirte"), "{e}");
    let e = err(&fs("limit = 3"));
    assert!(e.contains("config: unknown field `limit`") && e.contains("`trust`"), "{e}");
    let Ok(cfg) = parse(&fs("trust = { write = \"deny\" }"), "daemon.toml") else {
        panic!("valid fs config refused")
    };
    assert_eq!(cfg.modules[0].trust.write, TrustAction::Deny);
}
