//! What the proxy checked is what is reached (SPEC §5.4), against test hosts that answer by
//! name: in the server namespace, beside the file server, a virtual-hosting HTTP server that
//! answers with the `Host` it was sent, and a TLS server that answers with the server name
//! (SNI) its ClientHello asked for. Both log every name they were asked for, so the test sees
//! that a refused name never reached them. `allowed.test` and `other.test` share one address:
//! only `allowed.test` is allowed.

use super::super::common::*;
use super::{SERVER_IP, TestNet, Who, assert_ran_as, bash, config, denied_hosts};
use serde_json::Value;
use std::process::{Command, Stdio};

const VHOST_PORT: u16 = 8081;
const TLS_PORT: u16 = 8443;

/// The name servers, started in the test host's namespace; their log is `names.log`.
fn start_name_servers(fx: &Fixture, net: &mut TestNet) -> std::path::PathBuf {
    let dir = fx.dir.path();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let ok = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj"])
        .args(["/CN=allowed.test", "-addext", "subjectAltName=DNS:allowed.test,DNS:other.test"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(ok.status.success(), "openssl: {}", String::from_utf8_lossy(&ok.stderr));
    let log = dir.join("names.log");
    std::fs::write(&log, "").unwrap();
    let script = format!(
        "import http.server, socketserver, ssl, threading\n\
         LOG = {log:?}\n\
         def note(line):\n\
         \x20   with open(LOG, 'a') as f: f.write(line + '\\n')\n\
         class Vhost(http.server.BaseHTTPRequestHandler):\n\
         \x20   def do_GET(self):\n\
         \x20       host = self.headers.get('Host', '')\n\
         \x20       note('http ' + host + ' ' + self.path)\n\
         \x20       body = ('vhost ' + host + '\\n').encode()\n\
         \x20       self.send_response(200); self.send_header('Content-Length', str(len(body)))\n\
         \x20       self.end_headers(); self.wfile.write(body)\n\
         \x20   def log_message(self, *a): pass\n\
         class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):\n\
         \x20   daemon_threads = True\n\
         vhost = Server(('{SERVER_IP}', {VHOST_PORT}), Vhost)\n\
         threading.Thread(target=vhost.serve_forever, daemon=True).start()\n\
         ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
         ctx.load_cert_chain({cert:?}, {key:?})\n\
         def sni(sock, name, _ctx):\n\
         \x20   note('tls ' + str(name))\n\
         \x20   sock.asked = name\n\
         ctx.sni_callback = sni\n\
         class Tls(http.server.BaseHTTPRequestHandler):\n\
         \x20   def do_GET(self):\n\
         \x20       body = ('tls ' + str(getattr(self.request, 'asked', None)) + '\\n').encode()\n\
         \x20       self.send_response(200); self.send_header('Content-Length', str(len(body)))\n\
         \x20       self.end_headers(); self.wfile.write(body)\n\
         \x20   def log_message(self, *a): pass\n\
         tls = Server(('{SERVER_IP}', {TLS_PORT}), Tls)\n\
         tls.socket = ctx.wrap_socket(tls.socket, server_side=True)\n\
         tls.serve_forever()\n",
        cert = cert.to_str().unwrap(),
        key = key.to_str().unwrap(),
        log = log.to_str().unwrap(),
    );
    let child = Command::new("nsenter")
        .args([&format!("--net=/run/netns/{}", net.server), "--", "python3", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    net.children.push(child);
    for port in [VHOST_PORT, TLS_PORT] {
        let probe = format!(
            "import socket,time\nfor i in range(200):\n  try:\n    socket.create_connection(('{SERVER_IP}', {port}), 1).close(); break\n  except OSError: time.sleep(0.05)\n"
        );
        let ns = format!("--net=/run/netns/{}", net.server);
        let ok = Command::new("nsenter").args([&ns, "--", "python3", "-c", &probe]).status();
        assert!(ok.unwrap().success());
    }
    log
}

fn names(log: &std::path::Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// A TLS handshake through the HTTP proxy's CONNECT to `target`, naming `sni`: what the
/// command's side saw (a Python script, since no common client sends one name and connects to
/// another through a proxy).
fn tls_through_connect(target: &str, sni: &str) -> String {
    format!(
        "python3 - <<'EOF'\n\
         import base64, os, socket, ssl, urllib.parse\n\
         p = urllib.parse.urlparse(os.environ['HTTPS_PROXY'])\n\
         s = socket.create_connection((p.hostname, p.port), 10)\n\
         auth = base64.b64encode((p.username + ':' + p.password).encode()).decode()\n\
         s.sendall(('CONNECT {target} HTTP/1.1\\r\\nProxy-Authorization: Basic ' + auth + '\\r\\n\\r\\n').encode())\n\
         head = b''\n\
         while b'\\r\\n\\r\\n' not in head: head += s.recv(1)\n\
         print(head.split(b'\\r\\n')[0].decode())\n\
         ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE\n\
         try:\n\
         \x20   t = ctx.wrap_socket(s, server_hostname='{sni}' or None)\n\
         \x20   t.sendall(b'GET / HTTP/1.1\\r\\nHost: {sni}\\r\\nConnection: close\\r\\n\\r\\n')\n\
         \x20   print(t.makefile('rb').read().decode().split('\\r\\n\\r\\n')[-1].strip())\n\
         except (ssl.SSLError, OSError) as e:\n\
         \x20   print('refused:', e)\n\
         EOF"
    )
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn a_host_header_or_server_name_other_than_the_one_admitted_is_refused() {
    reached(Who::Root).await;
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn as_an_ordinary_user_a_host_header_or_server_name_other_than_admitted_is_refused() {
    reached(Who::User).await;
}

async fn reached(who: Who) {
    let fx = Fixture::new();
    let Some(mut net) = TestNet::new(&fx) else { return };
    let log = start_name_servers(&fx, &mut net);
    let cfg = config(&fx, "{ allow = [\"allowed.test\"], unknown = \"deny\" }", 5);
    let c = net.daemon_as(&fx, &cfg, who).await;
    let stdout = |v: &Value| v["stdout"].as_str().unwrap_or_default().to_string();
    let vhost = format!("http://allowed.test:{VHOST_PORT}/");

    // Positive controls: the admitted name, as plain HTTP, through a CONNECT tunnel, over
    // SOCKS5, and as TLS through CONNECT and SOCKS5.
    for how in ["", "--proxytunnel", "--proxy \"$ALL_PROXY\""] {
        let out = bash(&c, &format!("curl -sS {how} {vhost}")).await;
        assert_eq!(stdout(&out), format!("vhost allowed.test:{VHOST_PORT}\n"), "{how}: {out}");
        assert!(denied_hosts(&out).is_empty(), "{out}");
    }
    let https = format!("https://allowed.test:{TLS_PORT}/");
    for how in ["", "--proxy \"$ALL_PROXY\""] {
        let out = bash(&c, &format!("curl -sSk {how} {https}")).await;
        assert_eq!(stdout(&out), "tls allowed.test\n", "{how}: {out}");
    }
    let out =
        bash(&c, &tls_through_connect(&format!("allowed.test:{TLS_PORT}"), "allowed.test")).await;
    assert_eq!(stdout(&out), "HTTP/1.1 200 Connection established\ntls allowed.test\n", "{out}");
    let before = names(&log);
    assert!(!before.contains("other.test"), "{before}");

    // Another Host on the admitted connection: as a plain request, in a CONNECT tunnel, over
    // SOCKS5 — refused, saying why, and the virtual host never asked for it.
    for how in ["", "--proxytunnel", "--proxy \"$ALL_PROXY\""] {
        let out = bash(&c, &format!("curl -sS {how} -H 'Host: other.test' {vhost}")).await;
        let said = stdout(&out);
        assert!(said.contains("Host header names other.test, not allowed.test"), "{how}: {out}");
        assert_eq!(denied_hosts(&out), vec![format!("allowed.test:{VHOST_PORT}")], "{out}");
    }
    // A second request smuggled after the first one's body never reaches the host.
    let smuggle = format!(
        "printf 'GET http://allowed.test:{VHOST_PORT}/first HTTP/1.1\\r\\nHost: allowed.test\\r\\n\
         Content-Length: 0\\r\\n\\r\\nGET /second HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n' \
         | python3 -c 'import os,socket,sys,urllib.parse; p=urllib.parse.urlparse(os.environ[\"HTTP_PROXY\"]); \
         s=socket.create_connection((p.hostname,p.port)); s.sendall(sys.stdin.buffer.read()); \
         sys.stdout.write(s.makefile(\"rb\").read().decode())'"
    );
    let out = bash(&c, &smuggle).await;
    assert!(stdout(&out).contains("vhost allowed.test"), "{out}");
    // HTTP/2 without TLS in a tunnel names its host inside compressed frames: refused, saying
    // why, before its preface reaches the host.
    let h2 = "--http2-prior-knowledge --proxytunnel -H 'Host: other.test'";
    let out = bash(&c, &format!("curl -sS {h2} {vhost}; echo \"rc=$?\"")).await;
    assert!(!stdout(&out).contains("vhost") && !stdout(&out).contains("rc=0"), "{out}");
    let why = out["denied"][0]["why"].as_str().unwrap_or_default().to_string();
    assert!(why.contains("HTTP/2 without TLS") && why.contains("use https"), "{out}");
    // TLS naming another server through CONNECT, and no server name at all: refused before
    // the ClientHello reaches the host.
    for sni in ["other.test", ""] {
        let target = format!("allowed.test:{TLS_PORT}");
        let out = bash(&c, &tls_through_connect(&target, sni)).await;
        let said = stdout(&out);
        assert!(said.contains("refused:") && said.contains("ACCESS_DENIED"), "{sni:?}: {out}");
        let denied = &out["denied"][0]["why"];
        let why = if sni.is_empty() { "names no server" } else { "names other.test (SNI)" };
        assert!(denied.as_str().unwrap_or_default().contains(why), "{sni:?}: {out}");
    }
    let after = names(&log);
    assert!(!after.contains("other.test"), "a refused name reached the test host: {after}");
    assert!(!after.contains("/second"), "a smuggled request reached the test host: {after}");
    assert!(!after.contains("PRI"), "an HTTP/2 preface reached the test host: {after}");
    assert_eq!(after.matches("tls None").count(), 0, "{after}");
    assert!(after.contains("http allowed.test") && after.contains("tls allowed.test"), "{after}");

    c.stop().await;
    let records = fx.audit_records();
    let refused = |text: &str| {
        records.iter().any(|r| {
            r["tool"] == "network"
                && r["decision"] == "deny"
                && r["outcome"].as_str().unwrap_or_default().contains(text)
        })
    };
    assert!(refused("Host header names other.test"), "{records:?}");
    assert!(refused("names other.test (SNI)"), "{records:?}");
    assert_ran_as(&fx, who);
    fx.assert_canary();
}
