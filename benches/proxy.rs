//! The cost of the network proxy (SPEC §5.4, `hands_sandbox::proxy`): a 50 MiB HTTP GET through
//! it against the same GET straight to the same server (and through a plain TCP relay, the floor
//! of any proxy copying the bytes), and the first byte of a `CONNECT` tunnel against a direct
//! connect, interleaved request by request on loopback.
//!
//! Run: `cargo bench --bench proxy` (`HANDS_BENCH_PROXY_MB=10` for another size). The proxy is the crate's own, with rules that name
//! `127.0.0.1` (loopback passes only when named) and a gate that is never asked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// Benchmarks spawn the binary and ripgrep, and make their trees by path.
#![allow(clippy::disallowed_methods)]

use hands_sandbox::proxy::{Answer, Asking, Gate, Limits, Proxy, Question, Record, Rules, Unknown};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The body of the GET in MiB: issue 34's row is 50 MB; `HANDS_BENCH_PROXY_MB` changes it.
fn body_len() -> usize {
    std::env::var("HANDS_BENCH_PROXY_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(50) << 20
}
const GETS: usize = 30;
const CONNECTS: usize = 300;

struct Quiet;
impl Gate for Quiet {
    fn ask(&self, _: Question) -> Asking {
        Box::pin(async { Answer::Refuse { why: "not asked in the benchmark".into() } })
    }
    fn record(&self, _: Record) {}
}

/// Sends one byte to every connection at once (the tunnel's first byte).
async fn greeter() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let _ = s.write_all(b"!").await;
                let mut b = [0u8; 1];
                let _ = s.read(&mut b).await;
            });
        }
    });
    port
}

/// Answers any request with `len` bytes.
async fn server(len: usize) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        let body = Arc::new(vec![b'x'; len]);
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                if !matches!(s.read(&mut buf).await, Ok(n) if n > 0) {
                    return;
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(&body).await;
            });
        }
    });
    port
}

/// A plain TCP relay to `to` (tokio's `copy_bidirectional`, no parsing, no rules): the floor of
/// any proxy that copies the bytes through user space.
async fn relay(to: String) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let to = to.clone();
            tokio::spawn(async move {
                let mut up = TcpStream::connect(&to).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut s, &mut up).await;
            });
        }
    });
    addr
}

async fn get(addr: &str, request: &str) -> usize {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut total = 0;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        total += n;
    }
    total
}

/// Runs `start` on a thread of its own with a one-thread runtime, as a process of its own would
/// (the daemon serves its proxy on one thread over stdio; the host is another machine), and
/// gives back what it returned; what it spawned goes on serving there.
fn apart<T, F>(name: &str, start: impl FnOnce() -> F + Send + 'static) -> T
where
    T: Send + 'static,
    F: std::future::Future<Output = T>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                tx.send(start().await).unwrap();
                std::future::pending::<()>().await;
            });
        })
        .unwrap();
    rx.recv().unwrap()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p90(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() * 9 / 10]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let len = body_len();
    // The client here, the host, the proxy and the plain relay each on a thread of their own.
    let port = apart("host", move || server(len));
    let paddr = apart("proxy", || async {
        let rules = Rules::new(&["127.0.0.1".to_string()], &[], Unknown::Deny).unwrap();
        let proxy = Proxy::new(rules, Arc::new(Quiet), Limits::default());
        let pl = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let paddr = pl.local_addr().unwrap().to_string();
        tokio::spawn(proxy.serve_http(pl, "bench".into()));
        paddr
    });
    let direct = format!("127.0.0.1:{port}");
    let to = direct.clone();
    let plain = apart("relay", move || relay(to));
    let (mut d, mut p, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..GETS {
        let t = Instant::now();
        let n = get(&direct, "GET /f HTTP/1.1\r\nHost: x\r\n\r\n").await;
        d.push(t.elapsed());
        assert!(n > len);
        let t = Instant::now();
        let n = get(&paddr, &format!("GET http://127.0.0.1:{port}/f HTTP/1.1\r\n\r\n")).await;
        p.push(t.elapsed());
        assert!(n > len);
        let t = Instant::now();
        let n = get(&plain, "GET /f HTTP/1.1\r\nHost: x\r\n\r\n").await;
        r.push(t.elapsed());
        assert!(n > len);
    }
    let (dm, pm, d9, p9) = (median(d.clone()), median(p.clone()), p90(d), p90(p));
    println!(
        "{} MiB GET, {GETS} each, interleaved: direct {} (p90 {}) · through the proxy {} \
         (p90 {}) · ratio {:.2}× (issue 34: ≤ 1.5×)",
        len >> 20,
        ms(dm),
        ms(d9),
        ms(pm),
        ms(p9),
        pm.as_secs_f64() / dm.as_secs_f64()
    );
    let rm = median(r);
    println!(
        "  the same GET through a plain TCP relay (copy_bidirectional): {} · ratio {:.2}× direct",
        ms(rm),
        rm.as_secs_f64() / dm.as_secs_f64()
    );

    let greet = apart("greeter", greeter);
    let direct = format!("127.0.0.1:{greet}");
    let (mut d, mut p) = (Vec::new(), Vec::new());
    for _ in 0..CONNECTS {
        let t = Instant::now();
        let mut s = TcpStream::connect(&direct).await.unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).await.unwrap();
        d.push(t.elapsed());
        let t = Instant::now();
        let mut s = TcpStream::connect(&paddr).await.unwrap();
        s.set_nodelay(true).unwrap();
        s.write_all(format!("CONNECT 127.0.0.1:{greet} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut head = [0u8; 39];
        s.read_exact(&mut head).await.unwrap();
        s.read_exact(&mut b).await.unwrap();
        p.push(t.elapsed());
    }
    let (dm, pm, d9, p9) = (median(d.clone()), median(p.clone()), p90(d), p90(p));
    println!(
        "CONNECT first byte: direct {} (p90 {}) · through the \
         proxy {} (p90 {}) · added {}",
        ms(dm),
        ms(d9),
        ms(pm),
        ms(p9),
        ms(pm.saturating_sub(dm))
    );
}
