//! Unix sockets in the roots (decision 0107, SPEC §5.2: no host unix sockets). Found by
//! session 41's attack pass: a daemon whose writable root held the person's default state dir
//! connected to another daemon's tmux socket there and had that session run a command, which
//! wrote a project outside the first daemon's roots without its gate asking anyone. A socket
//! file in a root is reachable by its path from any namespace; a command now finds masked
//! every socket whose socket its own client's namespace does not hold.

use super::super::common::{Client, Era, Fixture};
use serde_json::json;
use std::os::unix::net::UnixListener;

/// A python one-liner that connects to the unix socket `path` and says whether it could.
fn connect(path: &str) -> String {
    format!(
        "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); \
         print(\"connected\")' {path} 2>/dev/null || echo refused"
    )
}

/// A server on the unix socket `name` in the working folder, kept by a tmux session.
const SERVE: &str = "python3 -c 'import socket,sys; l=socket.socket(socket.AF_UNIX); \
                     l.bind(sys.argv[1]); l.listen(8); print(\"listening\", flush=True)\n\
                     while True: l.accept()[0].close()' ";

#[tokio::test]
async fn a_host_socket_in_a_root_is_masked_and_the_clients_own_are_not() {
    let fx = Fixture::new();
    // A stand-in for another daemon's tmux server, an editor's or an engine's socket.
    let host = UnixListener::bind(fx.root.join("host.sock")).unwrap();
    host.set_nonblocking(true).unwrap();
    // Open to anyone, so that only the mask stands between it and `run_as` under root.
    let open = |name: &str| {
        use std::os::unix::fs::PermissionsExt;
        let all = std::fs::Permissions::from_mode(0o777);
        std::fs::set_permissions(fx.root.join(name), all).unwrap();
    };
    open("host.sock");
    let c = Client::start_era(&fx, &super::shell_config(&fx), Era::Legacy).await;
    let r = c.ok("bash", json!({ "command": connect("host.sock") })).await;
    assert_eq!(r["stdout"], "refused\n", "a host socket in the root was reached: {r}");
    assert!(host.accept().is_err(), "nothing reached the host socket");
    // Positive control: a socket the client's own session serves in the root is reachable
    // from its `bash`, and from its sessions.
    let serve = format!("{SERVE}own.sock");
    c.ok("tmux_start", json!({ "command": serve, "name": "srv" })).await;
    let up =
        super::read_until(&c, "srv", |r| r["text"].as_str().unwrap_or("").contains("listening"))
            .await;
    assert!(up["text"].as_str().unwrap().contains("listening"), "{up}");
    let r = c.ok("bash", json!({ "command": connect("own.sock") })).await;
    assert_eq!(r["stdout"], "connected\n", "positive control: {r}");
    // A host socket that appears after a session started is masked before the next send; the
    // session still reaches its client's own.
    c.ok("tmux_start", json!({ "command": "bash --norc", "name": "sh" })).await;
    let late = UnixListener::bind(fx.root.join("late.sock")).unwrap();
    late.set_nonblocking(true).unwrap();
    open("late.sock");
    // The walk of the roots is reused for two seconds (a socket younger than that is not
    // masked yet, as a secret file is not: decision 0107's "What is left").
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let typed =
        format!("({}) > late.txt; ({}) > own.txt", connect("late.sock"), connect("own.sock"));
    c.ok("tmux_send", json!({ "session": "sh", "text": typed })).await;
    let read = |f: &str| std::fs::read_to_string(fx.root.join(f)).unwrap_or_default();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while read("own.txt").is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let pane = c.ok("tmux_read", json!({ "session": "sh" })).await;
    assert_eq!(read("own.txt"), "connected\n", "positive control in the session: {pane}");
    assert_eq!(read("late.txt"), "refused\n", "a late host socket was reached by the session");
    assert!(late.accept().is_err(), "nothing reached the late host socket");
    c.ok("tmux_kill", json!({ "session": "sh" })).await;
    c.ok("tmux_kill", json!({ "session": "srv" })).await;
    fx.assert_canary();
}

/// Found by the attack pass on 0107: the home's carried caches are shared by every client of
/// the roots and not walked, so beta's `bash` reached a socket alpha's session served in
/// `~/.npm/_cacache` and ran code in alpha's process. No socket is made in a carried cache
/// now (none can be renamed or linked in: each is a mount of its own). Positive control: the
/// same bind in the home's own folders and in /tmp works, and the cache itself is writable.
#[tokio::test]
async fn no_unix_socket_is_made_in_a_shared_cache() {
    let fx = Fixture::new();
    let c = Client::start_era(&fx, &super::shell_config(&fx), Era::Legacy).await;
    // By a name relative to the folder: a long home (an ordinary user's TMPDIR) would pass
    // the 108 bytes a socket's path may have.
    let bind = |dir: &str| {
        format!(
            "mkdir -p {dir} && cd {dir} && python3 -c 'import socket; socket.socket(socket.AF_UNIX)\
             .bind(\"x.sock\"); print(\"bound\")' 2>&1 | tail -1"
        )
    };
    for cache in ["~/.npm/_cacache", "~/.cache/sub", "~/.cargo/registry"] {
        let r = c.ok("bash", json!({ "command": bind(cache) })).await;
        let out = r["stdout"].as_str().unwrap();
        assert!(out.contains("Permission denied"), "a socket was made in {cache}: {r}");
    }
    for own in ["~/own", "/tmp/own"] {
        let r = c.ok("bash", json!({ "command": bind(own) })).await;
        assert_eq!(r["stdout"], "bound\n", "positive control in {own}: {r}");
    }
    let r =
        c.ok("bash", json!({ "command": "echo x > ~/.npm/_cacache/f && cat ~/.npm/_cacache/f" }));
    assert_eq!(r.await["stdout"], "x\n");
    fx.assert_canary();
}
