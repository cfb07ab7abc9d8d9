//! Unit tests of the launcher's spec: it reads back whole, an unknown key is refused, and the
//! key of a sandbox made ready leaves out the call and nothing else.

use super::spec::*;
use crate::resolve::Identity;
use std::path::PathBuf;

fn confinement() -> Confinement {
    Confinement {
        roots: vec![Root { path: "/w".into(), writable: true }],
        protected: vec!["/w/.git/hooks".into()],
        protected_rules: vec![".git".into()],
        masked: vec!["/w/.env".into()],
        system: vec!["/usr".into()],
        home: "/h".into(),
    }
}

#[test]
fn a_built_spec_reads_back_whole_and_an_unknown_key_is_refused() {
    let spec = Spec::builder(confinement())
        .mask(["/w/a/.env".into()])
        .protect(["/w/.git/hooks".into(), "/w/b/.git/config".into()])
        .parent(7)
        .build(vec!["true".into()], "/w".into());
    let back: Spec = serde_json::from_slice(&spec.to_json().unwrap()).unwrap();
    assert_eq!(back.masked, vec![PathBuf::from("/w/.env"), "/w/a/.env".into()]);
    assert_eq!(back.protected.len(), 2, "a protected path is listed once");
    assert_eq!(back.parent, Some(7));
    // A renamed key is an error in the launcher, never masks silently dropped.
    let mut v: serde_json::Value = serde_json::from_slice(&spec.to_json().unwrap()).unwrap();
    let masks = v.as_object_mut().unwrap().remove("masked").unwrap();
    v["masks"] = masks;
    let err = serde_json::from_value::<Spec>(v.clone()).unwrap_err().to_string();
    assert!(err.contains("unknown field `masks`"), "{err}");
    v.as_object_mut().unwrap().remove("masks");
    let err = serde_json::from_value::<Spec>(v).unwrap_err().to_string();
    assert!(err.contains("missing field `masked`"), "{err}");
}

/// A sandbox made ready ahead runs a call only when the call names the same sandbox: the
/// call's own fields do not change the key, anything the sandbox is built from does.
#[test]
fn the_sandbox_key_leaves_out_the_call_and_nothing_else() {
    let call = |argv: &str, cwd: &str| {
        let ids = Some(Ids { uid: 1000, gid: 1000 });
        let mut s =
            Spec::builder(confinement()).run_as(ids).parent(7).build(vec![argv.into()], cwd.into());
        s.set_env("TOKEN", argv);
        s
    };
    let (a, b) = (call("true", "/w"), call("false", "/w/sub"));
    let mut c = b.clone();
    c.expect_program(1, 2);
    let key = a.sandbox_key().unwrap();
    assert_eq!(key, b.sandbox_key().unwrap());
    assert_eq!(key, c.sandbox_key().unwrap());
    let (ready, ready_key) = a.ready_for_next().unwrap();
    assert_eq!(ready_key, key);
    assert!(ready.ready && ready.argv.is_empty() && ready.env.is_empty());
    ready.validate().unwrap();
    assert_eq!(ready.sandbox_key().unwrap(), key, "the ready spec is the same sandbox");
    // Anything the sandbox is built from is another sandbox.
    let mut masked = a.clone();
    masked.add_masks(["/w/b/.env".into()]);
    let mut seen = a.clone();
    seen.seen.insert("/w/.env".into(), Identity { dev: 1, ino: 2 });
    let mut limits = a.clone();
    limits.limits.memory_mb = 1;
    let mut widened = a.clone();
    widened.roots.push(Root { path: "/x".into(), writable: true });
    for other in [masked, seen, limits, widened] {
        assert_ne!(other.sandbox_key().unwrap(), key);
    }
    // None waits for a tmux server's call, or where there is no init.
    let mut watched = a.clone();
    watched.watch = Some("/s/marker".into());
    assert!(watched.ready_for_next().is_none());
    let mut flat = a.clone();
    flat.without_namespaces = true;
    assert!(flat.ready_for_next().is_none());
}
