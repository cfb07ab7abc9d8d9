//! What reaches a person from the proxy, and what a person's terminal reads back (the seventh
//! attack pass): an IPv4 address in any spelling a resolver reads (`0x7f000001`, `127.1`) is
//! an IP literal, refused as one and never put to a person as a name; a command cannot park
//! questions without bound, nor the daemon hold them without bound; a question's command is
//! cut so `hands approvals list` always reads it; and a daemon whose answer cannot be read is
//! a failure there, never "nothing is waiting".

use super::super::common::*;
use super::{PORT, SERVER_IP, TestNet, Who, approvals, config, denied_hosts, pending};
use serde_json::{Value, json};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// Sends raw requests through the command's HTTP proxy: `GET=host:port` (a plain request for
/// `/file.txt`) or `CONNECT=host:port`; prints each target and the proxy's answer on a line.
const RAW: &str = r#"import os, socket, base64, sys
cred, hp = os.environ["HTTP_PROXY"][len("http://"):].split("@"); host, port = hp.split(":")
auth = "Proxy-Authorization: Basic " + base64.b64encode(cred.encode()).decode()
for arg in sys.argv[1:]:
    method, target = arg.split("=")
    if method == "GET":
        head = f"GET http://{target}/file.txt HTTP/1.1\r\nHost: {target}\r\nConnection: close"
    else:
        head = f"CONNECT {target} HTTP/1.1\r\nHost: {target}"
    s = socket.create_connection((host, int(port))); s.settimeout(20)
    s.sendall((head + "\r\n" + auth + "\r\n\r\n").encode())
    out = b""
    while True:
        try: d = s.recv(65536)
        except socket.timeout: break
        if not d: break
        out += d
        # An open tunnel stays open; a refusal ends with its body.
        if out.startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in out: break
    print(target, "->", out.decode(errors="replace").replace("\r\n", " | ")[:400], flush=True)
"#;

/// The line of `out`'s stdout about `target`.
fn line<'a>(out: &'a Value, target: &str) -> &'a str {
    let text = out["stdout"].as_str().unwrap_or_default();
    text.lines().find(|l| l.starts_with(&format!("{target} ->"))).unwrap_or_else(|| panic!("{out}"))
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn an_ipv4_address_spelled_in_hex_is_an_ip_literal_even_under_a_star() {
    let fx = Fixture::new();
    let Some(net) = TestNet::new(&fx) else { return };
    // Every name on port 8080; other ports ask a person, who never answers in this test.
    let cfg = config(&fx, "{ allow = [\"*:8080\"], unknown = \"ask\" }", 3);
    fx.write("raw.py", RAW);
    let c = net.daemon_as(&fx, &cfg, Who::Root).await;
    // 203.0.113.2, the test host, in hex; 127.0.0.1 in hex and in two parts.
    let hex_server = "0xcb007102";
    let command = format!(
        "python3 raw.py GET=allowed.test:{PORT} GET={hex_server}:{PORT} GET={SERVER_IP}:{PORT} \
         CONNECT=0x7f000001:9 CONNECT=127.1:{PORT}"
    );
    let out = c.ok("bash", json!({ "command": command, "timeout_secs": 30 })).await;
    // Positive control: a name passes `*` and reaches the test host.
    let allowed = line(&out, &format!("allowed.test:{PORT}"));
    assert!(allowed.contains(" 200 ") && allowed.contains("from the test host"), "{allowed}");
    // The test host's address, in decimal and in hex, is refused alike: an IP literal no
    // entry names, which `*` (names only) does not admit.
    for target in [format!("{hex_server}:{PORT}"), format!("{SERVER_IP}:{PORT}")] {
        let answer = line(&out, &target);
        assert!(answer.contains(" 403 ") && answer.contains("IP address"), "{answer}");
    }
    assert!(line(&out, &format!("{hex_server}:{PORT}")).contains("the IPv4 address 203.0.113.2"));
    // An address no rule covers is refused at once as one, never put to a person as a name.
    for target in ["0x7f000001:9".to_string(), format!("127.1:{PORT}")] {
        let answer = line(&out, &target);
        assert!(
            answer.contains(" 403 ")
                && answer.contains("the IPv4 address 127.0.0.1")
                && answer.contains("IP address is reached only when an allow entry names it"),
            "{answer}"
        );
    }
    let mut denied = denied_hosts(&out);
    denied.sort();
    assert_eq!(
        denied,
        ["0x7f000001:9", "0xcb007102:8080", "127.1:8080", "203.0.113.2:8080"],
        "{out}"
    );
    assert_eq!(net.served(), 1, "only the allowed name reached the test host");
    assert_eq!(net.canary_hits(), 0);
    c.stop().await;
    let asked = fx.audit_records().into_iter().filter(|r| r["decided_by"] == "person-via-terminal");
    assert_eq!(asked.count(), 0, "a person was asked");
    fx.assert_canary();
}

/// Opens `n` CONNECTs at once to hosts no rule covers, waits a second, prints as JSON how many
/// were refused for which bound, then holds the rest open for `hold` seconds.
const FLOOD: &str = r#"import os, socket, base64, sys, time, json
cred, hp = os.environ["HTTP_PROXY"][len("http://"):].split("@"); host, port = hp.split(":")
auth = "Proxy-Authorization: Basic " + base64.b64encode(cred.encode()).decode()
n, hold, tag = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
socks = []
for i in range(n):
    s = socket.create_connection((host, int(port)))
    t = f"q{i}.{tag}.flood.test:443"
    s.sendall(f"CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n{auth}\r\n\r\n".encode())
    socks.append(s)
time.sleep(1.5)
refused = {}
for s in socks:
    s.setblocking(False)
    try: d = s.recv(4096).decode(errors="replace")
    except BlockingIOError: continue
    key = ("command" if "4 questions waiting" in d
           else "client" if "actions waiting for one already" in d
           else "daemon" if "actions are already waiting" in d else d[:300])
    refused[key] = refused.get(key, 0) + 1
print(json.dumps(refused), flush=True)
time.sleep(hold)
"#;

/// The actions `hands approvals list` shows waiting.
async fn waiting(fx: &Fixture, cfg: &std::path::Path) -> usize {
    let out = approvals(fx, cfg, Who::Root, &["list"]).await;
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("waiting a-")).count()
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn a_command_and_the_daemon_park_a_bounded_number_of_questions() {
    let fx = Fixture::new();
    let Some(net) = TestNet::new(&fx) else { return };
    let cfg = config(&fx, "{ allow = [\"allowed.test\"], unknown = \"ask\" }", 30);
    fx.write("flood.py", FLOOD);
    let c = Arc::new(net.daemon_as(&fx, &cfg, Who::Root).await);
    // Nine commands of six connections each: four of each are asked about (the command's
    // bound), until 16 wait (one client's share of the daemon's 32, decision 0090); the rest
    // are refused at once, saying why. (The daemon's own bound, with several clients, is
    // `gate::approvals::parked`'s unit test.)
    let calls: Vec<_> = (0..9)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move {
                let command = format!("python3 flood.py 6 4 c{i}");
                c.ok("bash", json!({ "command": command, "timeout_secs": 30 })).await
            })
        })
        .collect();
    let mut parked = 0;
    for _ in 0..100 {
        parked = waiting(&fx, &cfg).await;
        if parked >= 16 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut refused: std::collections::HashMap<String, u64> = Default::default();
    for call in calls {
        let out = call.await.unwrap();
        let counts: Value = serde_json::from_str(out["stdout"].as_str().unwrap().trim())
            .unwrap_or_else(|_| panic!("{out}"));
        for (why, n) in counts.as_object().unwrap() {
            *refused.entry(why.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    assert_eq!(parked, 16, "the person was asked {parked} questions at once");
    assert_eq!(waiting(&fx, &cfg).await, 16, "more were parked later");
    assert_eq!(refused.values().sum::<u64>(), 9 * 6 - 16, "{refused:?}");
    assert!(refused.keys().all(|k| k == "command" || k == "client"), "{refused:?}");
    assert!(refused["client"] >= 4 && refused["command"] >= 1, "{refused:?}");
    assert_eq!(net.canary_hits(), 0);
    fx.assert_canary();
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn a_question_about_a_70_kb_command_is_listed_cut_and_answered() {
    let fx = Fixture::new();
    let Some(net) = TestNet::new(&fx) else { return };
    let cfg = config(&fx, "{ allow = [], unknown = \"ask\" }", 20);
    let c = Arc::new(net.daemon_as(&fx, &cfg, Who::Root).await);
    let command =
        format!("curl -sS -m 20 http://asked.test:{PORT}/file.txt ; : {}", "A".repeat(70_000));
    let running = {
        let c = c.clone();
        tokio::spawn(async move {
            c.ok("bash", json!({ "command": command, "timeout_secs": 30 })).await
        })
    };
    let (id, shown) = pending(&fx, &cfg, Who::Root).await.expect("the question was listed");
    assert!(shown.contains(&format!("asked.test:{PORT}")) && shown.contains("curl"), "{shown}");
    assert!(shown.contains("bytes more)"), "{shown}");
    assert!(shown.len() < 8_000, "the listing is {} bytes", shown.len());
    // What was listed can be answered: the person allows it, and the command reaches the host.
    let out = approvals(&fx, &cfg, Who::Root, &["approve", &id]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(running.await.unwrap()["stdout"], "from the test host\n");
    assert_eq!(net.canary_hits(), 0);
}

/// A stand-in daemon on the state dir's control socket: to each request it answers `what`
/// (`long`: 17 MiB without a line's end; `junk`: a line that is not a reply).
async fn fake_daemon(fx: &Fixture, what: &str) -> tokio::process::Child {
    let script = "import socket, sys, os\n\
                  s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)\n\
                  print('ready', flush=True)\n\
                  while True:\n\
                  \x20   c, _ = s.accept(); c.makefile().readline()\n\
                  \x20   c.sendall(b'x' * (17 << 20) if sys.argv[2] == 'long' else b'junk\\n')\n\
                  \x20   c.close()\n";
    std::fs::create_dir_all(&fx.state).unwrap();
    let sock = fx.state.join("control.sock");
    let _ = std::fs::remove_file(&sock);
    let mut child = tokio::process::Command::new("python3")
        .args(["-c", script])
        .arg(&sock)
        .arg(what)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut ready = [0u8; 5];
    tokio::io::AsyncReadExt::read_exact(child.stdout.as_mut().unwrap(), &mut ready).await.unwrap();
    child
}

#[tokio::test]
async fn a_daemon_whose_answer_cannot_be_read_fails_the_listing() {
    let fx = Fixture::new();
    let cfg = fx.fs_config();
    for (what, says) in
        [("long", "longer than 16777216 bytes"), ("junk", "not one this hands reads")]
    {
        let mut daemon = fake_daemon(&fx, what).await;
        let out = approvals(&fx, &cfg, Who::Root, &["list"]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{what}: {text}");
        assert!(text.contains("control.sock") && text.contains(says), "{what}: {text}");
        assert!(text.contains("could not be asked"), "{what}: {text}");
        assert!(!text.contains("no action is waiting"), "{what}: {text}");
        assert!(text.len() < 4_000, "{what}: the answer was echoed: {} bytes", text.len());
        daemon.kill().await.unwrap();
        daemon.wait().await.unwrap();
    }
    // Positive control: with no daemon there, nothing is waiting, and that is no failure.
    let _ = std::fs::remove_file(fx.state.join("control.sock"));
    let out = approvals(&fx, &cfg, Who::Root, &["list"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("no action is waiting for a person"), "{text}");
}
