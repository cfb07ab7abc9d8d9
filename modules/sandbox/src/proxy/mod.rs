//! The network by domain (SPEC §5.4): an HTTP proxy (CONNECT and plain requests) and a SOCKS5
//! proxy that the daemon serves on listeners inside a module's private network namespace.
//! Commands keep that namespace — no route leaves it — and reach the world only through here,
//! where every connection is judged by the module's [`Rules`], a host no rule covers is put to
//! a person through the [`Gate`], the resolved address is checked again and connected to
//! exactly (no second lookup), and every decision and every closed connection is recorded.
//!
//! Which command asked travels in the proxy credentials: a command's `HTTP_PROXY` is
//! `http://hands:TOKEN@127.0.0.1:PORT` (and SOCKS5 user `hands`, password `TOKEN`), the token
//! being the one its [`Ticket`] was issued. A connection without a known token is still judged
//! by the rules, and is shown as coming from an unidentified command of the module.

mod body;
mod http_proxy;
pub mod net_rules;
mod relay;
pub mod sni;
mod socks;
mod tunnel;

pub use net_rules::{AddressRefusal, Entry, HostError, RuleError, Rules, Target, Unknown, Verdict};

use hands_roots::lock;
use net_rules::DENY_ENTRY;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

/// The bounds of the proxy.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once per command (unidentified commands share one count). A
    /// connection waiting for a person holds its slot while it waits.
    pub per_command: usize,
    /// Questions one command may have waiting for a person at once (unidentified commands
    /// share one count); a connection past it is refused without asking.
    pub questions_per_command: usize,
    /// A connection with no byte either way for this long is closed.
    pub idle: Duration,
    /// The most bytes of an HTTP request head (request line and headers).
    pub head_bytes: usize,
    /// The time a client has to send its request (HTTP head, SOCKS handshake).
    pub handshake: Duration,
    /// The time a lookup and a connect to the upstream host may take.
    pub connect: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            per_command: 64,
            questions_per_command: 4,
            idle: Duration::from_secs(300),
            head_bytes: 16 * 1024,
            handshake: Duration::from_secs(10),
            connect: Duration::from_secs(15),
        }
    }
}

/// A command the proxy knows, as the person will see it when asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Asker {
    /// The command line (or the tmux session) that asked, as the daemon recorded it.
    pub command: String,
    /// The MCP client whose call started it.
    pub client: String,
}

/// A question for the trust gate: may a command reach this host and port, which no rule
/// covers?
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub host: String,
    pub port: u16,
    /// The command, when its connection carried a known token.
    pub asker: Option<Asker>,
    /// That token: the daemon finds by it the tool call that started the command, whose client
    /// it may ask while the call is still in flight.
    pub token: Option<String>,
}

/// The gate's answer: only an explicit allow opens the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `by` says who: a standing permission, a person through a channel.
    Allow { by: String },
    /// Anything else: a person's no, a timeout, no channel to ask through.
    Refuse { why: String },
}

/// The boxed future of [`Gate::ask`].
pub type Asking = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// The daemon's side: asking a person, and the audit log.
pub trait Gate: Send + Sync + 'static {
    /// Asks about a host no rule covers (only when `unknown = "ask"`). The proxy bounds the
    /// wait by nothing of its own: the gate's approval timeout is the bound.
    fn ask(&self, question: Question) -> Asking;
    /// Records a decision, and later the close of an allowed connection.
    fn record(&self, record: Record);
}

/// One audit record of the proxy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Record {
    /// `allowed`, `refused` or `closed`.
    pub event: &'static str,
    pub host: String,
    pub port: u16,
    /// The address connected to (allowed, closed), when resolution got that far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
    /// The rule or the person that decided.
    pub by: String,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asker: Option<Asker>,
    /// `http`, `connect` or `socks5`.
    pub protocol: &'static str,
    /// On close: bytes from the command to the host, and back.
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: u64,
}

/// A connection the proxy refused, as a command's result lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Denial {
    pub host: String,
    pub port: u16,
    pub why: String,
    /// Whether a `deny` entry refused it (which wins over `allow`: the remedy differs).
    #[serde(skip)]
    pub by_deny_entry: bool,
}

#[derive(Default)]
struct Known {
    asker: Asker,
    open: usize,
    /// Its connections waiting for a person's answer.
    asking: usize,
    denied: Vec<Denial>,
    /// Hosts a person approved for this one command (its `needs.network`, SPEC §6): allowed
    /// like `allow` entries, for this ticket only; `deny` still wins.
    granted: Vec<Entry>,
}

#[derive(Default)]
struct Table {
    by_token: HashMap<String, Known>,
    unidentified_open: usize,
    unidentified_asking: usize,
}

/// The proxy of one module.
pub struct Proxy {
    rules: Rules,
    gate: Arc<dyn Gate>,
    limits: Limits,
    table: Mutex<Table>,
}

/// A command registered with the proxy: its credentials, and the connections it was refused.
/// Dropping it forgets the command.
pub struct Ticket {
    proxy: Arc<Proxy>,
    token: String,
}

impl Ticket {
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The proxy variables of a command whose namespace has the HTTP proxy on `http_port` and
    /// the SOCKS5 proxy on `socks_port` of its loopback.
    pub fn env(&self, http_port: u16, socks_port: u16) -> Vec<(String, String)> {
        let http = format!("http://hands:{}@127.0.0.1:{http_port}", self.token);
        let socks = format!("socks5h://hands:{}@127.0.0.1:{socks_port}", self.token);
        let mut env = Vec::new();
        for (k, v) in [("HTTP_PROXY", &http), ("HTTPS_PROXY", &http), ("ALL_PROXY", &socks)] {
            env.push((k.to_string(), v.clone()));
            env.push((k.to_ascii_lowercase(), v.clone()));
        }
        let no = "localhost,127.0.0.1,::1".to_string();
        env.push(("NO_PROXY".to_string(), no.clone()));
        env.push(("no_proxy".to_string(), no));
        env
    }

    /// Widens this one command's rules by `entries`, which a person approved as its `needs`:
    /// they allow as `allow` entries would, for this ticket only, and `deny` still wins.
    pub fn grant(&self, entries: Vec<Entry>) {
        if let Some(k) = lock(&self.proxy.table).by_token.get_mut(&self.token) {
            k.granted = entries;
        }
    }

    /// The connections refused so far, oldest first (one entry per host and port).
    pub fn denied(&self) -> Vec<Denial> {
        let table = lock(&self.proxy.table);
        table.by_token.get(&self.token).map(|k| k.denied.clone()).unwrap_or_default()
    }

    /// The refusals since the last take, taken: a tmux session's results each list the
    /// connections refused since the one before, and the session goes on recording new ones.
    pub fn take_denied(&self) -> Vec<Denial> {
        let mut table = lock(&self.proxy.table);
        table
            .by_token
            .get_mut(&self.token)
            .map(|k| std::mem::take(&mut k.denied))
            .unwrap_or_default()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        lock(&self.proxy.table).by_token.remove(&self.token);
    }
}

/// How many refusals one command keeps for its result.
const DENIALS_KEPT: usize = 32;

impl Proxy {
    pub fn new(rules: Rules, gate: Arc<dyn Gate>, limits: Limits) -> Arc<Proxy> {
        Arc::new(Proxy { rules, gate, limits, table: Mutex::new(Table::default()) })
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Registers a command; its token is 128 random bits from the kernel.
    pub fn ticket(self: &Arc<Proxy>, asker: Asker) -> std::io::Result<Ticket> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
        let token = hex::encode(bytes);
        lock(&self.table).by_token.insert(token.clone(), Known { asker, ..Known::default() });
        Ok(Ticket { proxy: Arc::clone(self), token })
    }

    /// Serves the HTTP proxy on `listener`, in the network namespace of `client`'s commands,
    /// until the task is dropped.
    pub async fn serve_http(self: Arc<Proxy>, listener: TcpListener, client: Arc<str>) {
        self.serve(listener, Protocol::Http, client).await;
    }

    /// Serves the SOCKS5 proxy on `listener`, as [`Proxy::serve_http`].
    pub async fn serve_socks(self: Arc<Proxy>, listener: TcpListener, client: Arc<str>) {
        self.serve(listener, Protocol::Socks, client).await;
    }

    async fn serve(self: Arc<Proxy>, listener: TcpListener, protocol: Protocol, on: Arc<str>) {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let proxy = Arc::clone(&self);
                    let on = Arc::clone(&on);
                    tokio::spawn(async move {
                        match protocol {
                            Protocol::Http => http_proxy::serve(proxy, stream, &on).await,
                            Protocol::Socks => socks::serve(proxy, stream, &on).await,
                        }
                    });
                }
                Err(e) => {
                    // EMFILE and friends: wait a little rather than spin.
                    tracing::warn!("network proxy: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Decides and opens one connection for a command: the rules, a person when no rule
    /// covers the host, the resolved address, the per-command bound. Every refusal is recorded
    /// and kept for the command's result.
    async fn open(
        self: &Arc<Proxy>,
        token: Option<&str>,
        host: &str,
        port: u16,
        protocol: &'static str,
        on: &str,
    ) -> Result<Opened, Refused> {
        // A ticket is good only on the listeners of its own client's namespace (decision 0106):
        // another client's token, read from a file its command left, is no token here.
        let asker = token.and_then(|t| {
            let table = lock(&self.table);
            table.by_token.get(t).filter(|k| k.asker.client == on).map(|k| k.asker.clone())
        });
        let token = token.filter(|_| asker.is_some()).map(str::to_string);
        let refuse = |by: &str, why: String, address: Option<SocketAddr>| {
            self.refused(token.as_deref(), host, port, protocol, by, &why, address, &asker);
            Refused { why, kind: RefusedKind::Rule }
        };
        let target = match Target::parse(host) {
            Ok(t) => t,
            Err(why) => return Err(refuse("proxy", why.to_string(), None)),
        };
        let shown = target.to_string();
        let granted = token.as_deref().and_then(|t| {
            let table = lock(&self.table);
            let known = table.by_token.get(t)?;
            known.granted.iter().find(|e| e.covers(&target, port)).map(|e| e.to_string())
        });
        // `None`: no rule covers it, and a person is asked (once the slot is taken).
        let decided = match self.rules.decide(&target, port) {
            Verdict::Allow(rule) => Some(rule),
            Verdict::Deny(rule) => {
                // An address spelled otherwise than in four decimal parts says which it is.
                let named = match &target {
                    Target::Ip(ip) if spelled_otherwise(host) => {
                        format!("{} (the IPv4 address {ip})", cut(host))
                    }
                    _ => shown.clone(),
                };
                // "by deny entry `x`", or the rule for IP addresses as a sentence of its own.
                let why = if rule.starts_with(DENY_ENTRY) {
                    format!("{named}:{port} is refused by {rule}")
                } else {
                    format!("{named}:{port} is refused: {rule}")
                };
                return Err(refuse(&rule, why, None));
            }
            Verdict::Unknown if granted.is_some() => Some(format!(
                "needs entry `{}` (a person approved it for this run)",
                granted.unwrap_or_default()
            )),
            Verdict::Unknown if self.rules.unknown() == Unknown::Deny => {
                return Err(refuse(
                    "unknown = \"deny\"",
                    format!("{shown}:{port} is not in the module's network.allow list"),
                    None,
                ));
            }
            Verdict::Unknown => None,
        };
        // The slot is taken before a person is asked: a command past its bound puts no more
        // questions to anyone.
        let Some(slot) = self.take(token.as_deref(), Count::Open) else {
            return Err(refuse(
                "proxy",
                format!(
                    "{shown}:{port}: the command already has {} connections open or waiting \
                     (the proxy's bound); let some finish before opening more",
                    self.limits.per_command
                ),
                None,
            ));
        };
        let by = match decided {
            Some(by) => by,
            None => {
                let Some(_waiting) = self.take(token.as_deref(), Count::Asking) else {
                    return Err(refuse(
                        "proxy",
                        format!(
                            "{shown}:{port} was not put to a person: the command already has {} \
                             questions waiting for one (the proxy's bound); wait for those \
                             answers and connect again, or ask for the hosts in the call's \
                             `needs.network`",
                            self.limits.questions_per_command
                        ),
                        None,
                    ));
                };
                let question = Question {
                    host: shown.clone(),
                    port,
                    asker: asker.clone(),
                    token: token.clone(),
                };
                match self.gate.ask(question).await {
                    Answer::Allow { by } => by,
                    Answer::Refuse { why } => {
                        return Err(refuse("person", format!("{shown}:{port}: {why}"), None));
                    }
                }
            }
        };
        let addresses = match &target {
            Target::Ip(ip) => vec![SocketAddr::new(*ip, port)],
            Target::Name(name) => {
                let lookup = tokio::net::lookup_host((name.as_str(), port));
                match tokio::time::timeout(self.limits.connect, lookup).await {
                    Ok(Ok(found)) => found.collect(),
                    Ok(Err(e)) => {
                        return Err(Refused {
                            why: format!("{shown} cannot be resolved: {e}"),
                            kind: RefusedKind::Unreachable,
                        });
                    }
                    Err(_) => {
                        return Err(Refused {
                            why: format!("resolving {shown} took too long"),
                            kind: RefusedKind::Unreachable,
                        });
                    }
                }
            }
        };
        let own = crate::sys::own_addresses();
        let mut checked = Vec::new();
        let mut first_refusal = None;
        for address in addresses {
            match self.rules.address(address.ip(), port, &own) {
                Ok(()) => checked.push(SocketAddr::new(net_rules::canonical(address.ip()), port)),
                Err(why) => {
                    first_refusal.get_or_insert((why.to_string(), address));
                }
            }
        }
        if checked.is_empty() {
            let (why, address) = first_refusal.unwrap_or_else(|| {
                (format!("{shown} has no address"), SocketAddr::new([0, 0, 0, 0].into(), port))
            });
            return Err(refuse("address check", format!("{shown}:{port}: {why}"), Some(address)));
        }
        let mut last = String::new();
        for address in checked {
            match tokio::time::timeout(self.limits.connect, TcpStream::connect(address)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    self.gate.record(Record {
                        event: "allowed",
                        host: shown.clone(),
                        port,
                        address: Some(address),
                        by: by.clone(),
                        why: None,
                        asker: asker.clone(),
                        protocol,
                        bytes_up: 0,
                        bytes_down: 0,
                        duration_ms: 0,
                    });
                    return Ok(Opened {
                        stream,
                        address,
                        host: shown,
                        port,
                        by,
                        asker,
                        protocol,
                        started: Instant::now(),
                        _slot: slot,
                    });
                }
                Ok(Err(e)) => last = format!("{address}: {e}"),
                Err(_) => last = format!("{address}: the connection took too long"),
            }
        }
        Err(Refused {
            why: format!("cannot connect to {shown}:{port} ({last})"),
            kind: RefusedKind::Unreachable,
        })
    }

    #[allow(clippy::too_many_arguments)] // one record's fields, each needed once
    fn refused(
        &self,
        token: Option<&str>,
        host: &str,
        port: u16,
        protocol: &'static str,
        by: &str,
        why: &str,
        address: Option<SocketAddr>,
        asker: &Option<Asker>,
    ) {
        tracing::info!("network proxy refused {host}:{port}: {why}");
        if let Some(t) = token
            && let Some(known) = lock(&self.table).by_token.get_mut(t)
            && known.denied.len() < DENIALS_KEPT
            && !known.denied.iter().any(|d| d.host == tunnel::normal(host) && d.port == port)
        {
            let by_deny_entry = by.starts_with(DENY_ENTRY);
            // Listed by the name the rules compare (`BAD.test.` is `bad.test`): one entry for
            // a host however the command spelled it.
            known.denied.push(Denial {
                host: tunnel::normal(host),
                port,
                why: why.to_string(),
                by_deny_entry,
            });
        }
        self.gate.record(Record {
            event: "refused",
            host: host.to_string(),
            port,
            address,
            by: by.to_string(),
            why: Some(why.to_string()),
            asker: asker.clone(),
            protocol,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
        });
    }

    /// Records a plain request refused before any connection (its `Host` named another host).
    fn refused_request(
        &self,
        token: Option<&str>,
        host: &str,
        port: u16,
        protocol: &'static str,
        why: &str,
    ) {
        let asker = token.and_then(|t| lock(&self.table).by_token.get(t).map(|k| k.asker.clone()));
        let token = token.filter(|_| asker.is_some());
        self.refused(token, host, port, protocol, "proxy (Host check)", why, None, &asker);
    }

    /// Records a tunnel refused after it opened: its first bytes named another server.
    fn refuse_opened(&self, opened: &Opened, why: &str) {
        self.refused(
            opened._slot.token.as_deref(),
            &opened.host,
            opened.port,
            opened.protocol,
            "proxy (server name check)",
            why,
            Some(opened.address),
            &opened.asker,
        );
    }

    /// Takes one of the command's `count` (given back when the slot drops), unless it has
    /// reached its bound.
    fn take(self: &Arc<Proxy>, token: Option<&str>, count: Count) -> Option<Slot> {
        let limit = match count {
            Count::Open => self.limits.per_command,
            Count::Asking => self.limits.questions_per_command,
        };
        let mut table = lock(&self.table);
        let held = table.counter(token, count);
        if *held >= limit {
            return None;
        }
        *held += 1;
        Some(Slot { proxy: Arc::clone(self), token: token.map(str::to_string), count })
    }

    fn close(&self, opened: &Opened, up: u64, down: u64) {
        self.gate.record(Record {
            event: "closed",
            host: opened.host.clone(),
            port: opened.port,
            address: Some(opened.address),
            by: opened.by.clone(),
            why: None,
            asker: opened.asker.clone(),
            protocol: opened.protocol,
            bytes_up: up,
            bytes_down: down,
            duration_ms: opened.started.elapsed().as_millis() as u64,
        });
    }
}

#[derive(Debug, Clone, Copy)]
enum Protocol {
    Http,
    Socks,
}

/// What a [`Slot`] counts against a command's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    /// A connection, open or being decided.
    Open,
    /// A question waiting for a person.
    Asking,
}

impl Table {
    /// The counter of the command holding `token` (the unidentified commands' shared one).
    fn counter(&mut self, token: Option<&str>, count: Count) -> &mut usize {
        match (token.and_then(|t| self.by_token.get_mut(t)), count) {
            (Some(known), Count::Open) => &mut known.open,
            (Some(known), Count::Asking) => &mut known.asking,
            (None, Count::Open) => &mut self.unidentified_open,
            (None, Count::Asking) => &mut self.unidentified_asking,
        }
    }
}

/// One unit of a command's bound (a connection, a question), given back on drop.
struct Slot {
    proxy: Arc<Proxy>,
    token: Option<String>,
    count: Count,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut table = lock(&self.proxy.table);
        let held = table.counter(self.token.as_deref(), self.count);
        *held = held.saturating_sub(1);
    }
}

/// An allowed, connected upstream.
struct Opened {
    stream: TcpStream,
    address: SocketAddr,
    host: String,
    port: u16,
    by: String,
    asker: Option<Asker>,
    protocol: &'static str,
    started: Instant,
    _slot: Slot,
}

/// Why a connection did not open.
#[derive(Debug)]
struct Refused {
    why: String,
    kind: RefusedKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RefusedKind {
    /// The rules, a person or a bound said no.
    Rule,
    /// Allowed, but the host could not be resolved or reached.
    Unreachable,
}

/// Where a request head ends (past its empty line), when it has.
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = find(bytes, b"\r\n\r\n").map(|i| i + 4);
    let lf = find(bytes, b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `text` for a message, cut to 200 bytes (the size said).
fn cut(text: &str) -> String {
    if text.len() <= 200 {
        text.to_string()
    } else {
        let mut end = 200;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}… ({} bytes)", &text[..end], text.len())
    }
}

/// Whether `host`, judged as an IP address, was spelled otherwise than as one (`0x7f000001`).
fn spelled_otherwise(host: &str) -> bool {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    bare.parse::<std::net::IpAddr>().is_err()
}

/// The token in `user:password` credentials (the password; the user is always `hands`).
fn token_of(credentials: &str) -> Option<&str> {
    credentials.split_once(':').map(|(_, token)| token).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests;
