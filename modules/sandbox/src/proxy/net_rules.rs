//! The network rules of SPEC §5.4: which host and port a command may reach through the proxy.
//!
//! An entry is a host name (`pkg.example.org`), a wildcard (`*.example.org`: subdomains only, never the
//! bare name), an IP address or a CIDR range, each optionally with `:port` (`[v6]:port` for an
//! IPv6 address). `deny` wins over `allow`; a host no rule covers is `Unknown`, which the caller
//! turns into a question for a person or a refusal. After resolution, every address is checked
//! again ([`Rules::address`]): loopback, link-local, private, shared, multicast and the host's
//! own interface addresses are refused unless an allow entry names that address or a range
//! holding it, so a name that resolves to `127.0.0.1` does not reach the host.

use ipnet::IpNet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// How a refusal by a `deny` entry begins: the proxy's remedy for it differs (deny wins).
pub const DENY_ENTRY: &str = "deny entry";

/// A malformed rule entry: the caller places it at file, section and key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network entry `{entry}`: {why}\nhint: {hint}")]
pub struct RuleError {
    pub entry: String,
    pub why: String,
    pub hint: String,
}

/// A host, as an entry or a command named it, that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Not letters, digits, `-` and `_` in labels of 1 to 63 between dots, or over 253 in all
    /// (the text as given, cut).
    #[error("`{0}` is not a host name")]
    NotAName(String),
    /// Numbers between dots, as an IPv4 address is spelled (`127.1`, `0x7f.1`, `017700000001`),
    /// that no resolver reads as one (five parts, a part too large, `08`): neither a name nor
    /// an address.
    #[error("`{0}` is neither a host name nor an IP address")]
    Numeric(String),
    /// An IPv4 address spelled another way than four decimal parts (`0x7f000001`, `127.1`,
    /// `0177.0.0.1`): resolvers read it as the address, so an entry must write the address.
    #[error("`{spelled}` is the IPv4 address {ip} spelled another way; write it as {ip}")]
    Spelled { spelled: String, ip: Ipv4Addr },
}

/// Why a resolved address is refused ([`Rules::address`]); the proxy refuses the connection
/// with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressRefusal {
    /// A deny entry covers the address.
    #[error("{ip} is refused by deny entry `{entry}`")]
    Denied { ip: IpAddr, entry: String },
    /// A special address (loopback, private, the host's own, …: `kind` says which) that no
    /// allow entry names.
    #[error(
        "it resolves to {ip}, {kind}, which is reached only when an allow entry names that \
         address or its range"
    )]
    Special { ip: IpAddr, kind: &'static str },
}

/// The host part of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    /// `*`: every host name (never an IP literal, and every resolved address is still
    /// checked, so `*` does not reach loopback, the LAN or the cloud metadata address).
    Any,
    /// A host name, lowercase, without a trailing dot.
    Name(String),
    /// `*.suffix`: any name ending in `.suffix`, not `suffix` itself.
    Below(String),
    /// One address, or a range of them.
    Net(IpNet),
}

/// One parsed rule entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    host: Host,
    port: Option<u16>,
    text: String,
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

const HINT: &str = "write a host name (`pkg.example.org`), a wildcard for its subdomains \
                    (`*.example.org`), an IP address or a CIDR range (`10.1.0.0/16`), each \
                    optionally with `:port` (`[::1]:8080` for IPv6)";

impl FromStr for Entry {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<Entry, RuleError> {
        let fail = |why: &str| RuleError {
            entry: cut(text),
            why: why.to_string(),
            hint: HINT.to_string(),
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(fail("it is empty"));
        }
        if trimmed.contains("://") {
            return Err(fail("it is a URL; an entry names the host only"));
        }
        let (host, port) = split_port(trimmed).map_err(|why| fail(&why))?;
        let host = parse_host(host).map_err(|why| fail(&why))?;
        Ok(Entry { host, port, text: trimmed.to_string() })
    }
}

/// Splits `host:port`, `[v6]:port`, a bare IPv6 address and `net/len`.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) =
            rest.split_once(']').ok_or_else(|| "an opening `[` without its `]`".to_string())?;
        return match after {
            "" => Ok((inside, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((inside, Some(parse_port(port)?))),
                None => Err(format!("`{}` after `]`", cut(after))),
            },
        };
    }
    // More than one colon without brackets: an IPv6 address (or range) without a port.
    if text.matches(':').count() > 1 {
        return Ok((text, None));
    }
    match text.rsplit_once(':') {
        Some((host, port)) => Ok((host, Some(parse_port(port)?))),
        None => Ok((text, None)),
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("`{}` is not a port (1–65535)", cut(text))),
        Ok(port) => Ok(port),
    }
}

fn parse_host(text: &str) -> Result<Host, String> {
    if text == "*" {
        return Ok(Host::Any);
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Host::Net(IpNet::from(canonical(ip))));
    }
    if text.contains('/') {
        let net: IpNet =
            text.parse().map_err(|_| format!("`{}` is not a CIDR range", cut(text)))?;
        return Ok(Host::Net(net.trunc()));
    }
    if let Some(suffix) = text.strip_prefix("*.") {
        return Ok(Host::Below(name(suffix).map_err(|e| e.to_string())?));
    }
    Ok(Host::Name(name(text).map_err(|e| e.to_string())?))
}

/// A host name as DNS allows it (letters, digits, `-`, `_`, dots between labels), lowercased.
pub fn name(text: &str) -> Result<String, HostError> {
    let lower = text.trim_end_matches('.').to_ascii_lowercase();
    let ok_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if lower.is_empty() || lower.len() > 253 || !lower.split('.').all(ok_label) {
        return Err(HostError::NotAName(cut(text)));
    }
    // Numbers between dots are an IPv4 address to a resolver (`0x7f000001` is 127.0.0.1), or
    // nothing at all: never a name to compare with the rules.
    match ipv4_spelling(&lower) {
        Some(Some(ip)) => Err(HostError::Spelled { spelled: cut(text), ip }),
        Some(None) => Err(HostError::Numeric(cut(text))),
        None => Ok(lower),
    }
}

/// How a resolver reads `text` when it is numbers between dots, as `inet_aton` does (and
/// getaddrinfo, curl, Python with it): one to four parts, each decimal, octal (a leading `0`)
/// or hexadecimal (`0x`), the last filling the bytes left (`127.1` is 127.0.0.1, `0x7f000001`
/// too). `None`: not numbers between dots, so a name; `Some(None)`: numbers no resolver takes
/// as an address (five parts, a part too large, `08`), so neither.
pub fn ipv4_spelling(text: &str) -> Option<Option<Ipv4Addr>> {
    let text = text.strip_suffix('.').unwrap_or(text);
    let parts: Vec<&str> = text.split('.').collect();
    let numeric = |p: &str| {
        let hex = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X"));
        match hex {
            Some(digits) => digits.bytes().all(|b| b.is_ascii_hexdigit()),
            None => !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()),
        }
    };
    if !parts.iter().all(|p| numeric(p)) {
        return None;
    }
    let value = |p: &str| -> Option<u64> {
        if let Some(digits) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            // `0x` alone is 0 to inet_aton.
            let digits = digits.trim_start_matches('0');
            return if digits.is_empty() { Some(0) } else { u64::from_str_radix(digits, 16).ok() };
        }
        match p.strip_prefix('0') {
            Some(octal) if !octal.is_empty() => u64::from_str_radix(octal, 8).ok(),
            _ => p.parse().ok(),
        }
    };
    let values: Option<Vec<u64>> = parts.iter().map(|p| value(p)).collect();
    let Some(values) = values else { return Some(None) };
    let (last, head) = match values.split_last() {
        Some(split) if values.len() <= 4 => split,
        _ => return Some(None),
    };
    let last_bits = 8 * (4 - head.len() as u32);
    if head.iter().any(|v| *v > 0xff) || *last >= 1u64 << last_bits {
        return Some(None);
    }
    let mut address: u64 = 0;
    for (i, v) in head.iter().enumerate() {
        address |= v << (24 - 8 * i as u32);
    }
    Some(Some(Ipv4Addr::from((address | last) as u32)))
}

/// An IPv4-mapped or IPv4-compatible IPv6 address as the IPv4 address it reaches.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

fn cut(text: &str) -> String {
    const MAX: usize = 200;
    if text.chars().count() <= MAX {
        text.to_string()
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}… ({} characters)", text.chars().count())
    }
}

/// What to do with a host no rule covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unknown {
    /// Ask a person through the trust gate's channels.
    #[default]
    Ask,
    /// Refuse at once.
    Deny,
}

/// Where a connection wants to go, as the command named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Name(String),
    Ip(IpAddr),
}

impl Target {
    /// Parses what a client sent as the host: an IP literal or a host name. An IPv4 address
    /// in any spelling a resolver reads as one (`0x7f000001`, `127.1`, `0177.0.0.1`) is the
    /// address, judged as an IP literal: never a name a `*` entry or a person could admit.
    pub fn parse(host: &str) -> Result<Target, HostError> {
        let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        match bare.parse::<IpAddr>() {
            Ok(ip) => Ok(Target::Ip(canonical(ip))),
            Err(_) => match name(bare) {
                Err(HostError::Spelled { ip, .. }) => Ok(Target::Ip(IpAddr::V4(ip))),
                other => other.map(Target::Name),
            },
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(n) => f.write_str(n),
            Target::Ip(IpAddr::V6(v6)) => write!(f, "[{v6}]"),
            Target::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// The rules' answer for a host and port, before resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// An allow entry covers it (the entry's text).
    Allow(String),
    /// A deny entry covers it, or it is an IP literal no entry names.
    Deny(String),
    /// No rule covers it.
    Unknown,
}

/// The validated rules of one module.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    allow: Vec<Entry>,
    deny: Vec<Entry>,
    unknown: Unknown,
}

impl Rules {
    /// Parses the entries; the first malformed one is the error.
    pub fn new(allow: &[String], deny: &[String], unknown: Unknown) -> Result<Rules, RuleError> {
        let parse = |list: &[String]| list.iter().map(|e| e.parse()).collect::<Result<Vec<_>, _>>();
        Ok(Rules { allow: parse(allow)?, deny: parse(deny)?, unknown })
    }

    pub fn unknown(&self) -> Unknown {
        self.unknown
    }

    pub fn allow(&self) -> &[Entry] {
        &self.allow
    }

    pub fn deny(&self) -> &[Entry] {
        &self.deny
    }

    /// Whether an allow entry is `*` (any port or one): every host name passes the name
    /// check, so only deny entries and the address check still refuse (doctor warns).
    pub fn admits_every_host(&self) -> bool {
        self.allow.iter().any(|e| e.host == Host::Any)
    }

    /// Whether an allow entry names a loopback address or range (then commands can reach the
    /// host's loopback services through the proxy).
    pub fn names_loopback(&self) -> bool {
        self.allow.iter().any(|e| match &e.host {
            Host::Net(net) => {
                net.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST))
                    || net.contains(&IpAddr::V6(Ipv6Addr::LOCALHOST))
                    || net.network().is_loopback()
            }
            _ => false,
        })
    }

    /// Deny before allow; an IP literal only when an entry names it. A `deny` entry's verdict
    /// names it after [`DENY_ENTRY`].
    pub fn decide(&self, target: &Target, port: u16) -> Verdict {
        if let Some(e) = self.deny.iter().find(|e| e.covers(target, port)) {
            return Verdict::Deny(format!("{DENY_ENTRY} `{e}`"));
        }
        if let Some(e) = self.allow.iter().find(|e| e.covers(target, port)) {
            return Verdict::Allow(format!("allow entry `{e}`"));
        }
        match target {
            Target::Ip(_) => Verdict::Deny(
                "an IP address is reached only when an allow entry names it".to_string(),
            ),
            Target::Name(_) => Verdict::Unknown,
        }
    }

    /// Checks a resolved address: special addresses (loopback, link-local, private, the host's
    /// own, …) pass only when an allow entry names the address or a range holding it, and no
    /// deny entry does.
    pub fn address(&self, ip: IpAddr, port: u16, own: &[IpAddr]) -> Result<(), AddressRefusal> {
        let ip = canonical(ip);
        let target = Target::Ip(ip);
        if let Some(e) = self.deny.iter().find(|e| e.covers(&target, port)) {
            return Err(AddressRefusal::Denied { ip, entry: e.to_string() });
        }
        let kind = match special(ip) {
            Some(kind) => kind,
            None if own.iter().any(|o| canonical(*o) == ip) => "an address of this host",
            None => return Ok(()),
        };
        if self.allow.iter().any(|e| e.covers(&target, port)) {
            return Ok(());
        }
        Err(AddressRefusal::Special { ip, kind })
    }
}

impl Entry {
    pub(crate) fn covers(&self, target: &Target, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, target) {
            (Host::Any, Target::Name(_)) => true,
            (Host::Name(n), Target::Name(t)) => n == t,
            (Host::Below(s), Target::Name(t)) => {
                t.len() > s.len() + 1
                    && t.ends_with(s.as_str())
                    && t[..t.len() - s.len()].ends_with('.')
            }
            (Host::Net(net), Target::Ip(ip)) => net.contains(ip),
            _ => false,
        }
    }
}

/// What kind of special address `ip` is, if it is one.
fn special(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_link_local() {
        Some("a link-local address (the cloud metadata service lives there)")
    } else if ip.is_private() {
        Some("a private-range address")
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        Some("a shared (carrier-grade NAT) address")
    } else if ip.is_unspecified() || o[0] == 0 {
        Some("an unspecified address")
    } else if ip.is_multicast() || ip.is_broadcast() || o[0] >= 240 {
        Some("a multicast, broadcast or reserved address")
    } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
        Some("an IETF protocol address")
    } else if o[0] == 198 && (o[1] & 0xfe) == 18 {
        Some("a benchmarking address")
    } else {
        None
    }
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Some("a link-local address")
    } else if (s[0] & 0xfe00) == 0xfc00 {
        Some("a unique-local (private) address")
    } else if (s[0] & 0xff00) == 0xff00 {
        Some("a multicast address")
    } else if s[0] == 0x64 && s[1] == 0xff9b {
        // NAT64 embeds an IPv4 address: judge the address it reaches.
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        special_v4(v4).map(|_| "a NAT64 form of a special IPv4 address")
    } else if s[0] == 0x2002 {
        // 6to4 embeds an IPv4 address too.
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        special_v4(v4).map(|_| "a 6to4 form of a special IPv4 address")
    } else if s[..6] == [0, 0, 0, 0, 0, 0] {
        // IPv4-compatible (deprecated) forms.
        Some("an IPv4-compatible address")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        let s = |l: &[&str]| l.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Rules::new(&s(allow), &s(deny), Unknown::Ask).unwrap()
    }

    fn t(host: &str) -> Target {
        Target::parse(host).unwrap()
    }

    #[test]
    fn entries_parse_or_name_the_problem() {
        for ok in [
            "pkg.example.org",
            "*.pkg.example.org",
            "git.example.net:443",
            "10.0.0.0/8",
            "127.0.0.1",
            "[::1]:8080",
            "::1",
            "fd00::/8",
            "Static.Example.ORG.",
            "*",
            "*:443",
        ] {
            assert!(ok.parse::<Entry>().is_ok(), "{ok}");
        }
        for bad in [
            "",
            "pkg.example.org:0",
            "pkg.example.org:http",
            "a..b",
            "-a.com",
            "*.",
            "10.0.0.0/40",
            "[::1",
            "[::1]x",
            "http://pkg.example.org",
            "pkg.example.org/path",
            "127.1",
            "a b",
        ] {
            let e = bad.parse::<Entry>().unwrap_err();
            assert!(e.to_string().contains("hint:"), "{bad}: {e}");
        }
        let long = "a".repeat(5000);
        let e = long.parse::<Entry>().unwrap_err().to_string();
        assert!(e.len() < 1000, "the error quotes a 5000-character entry whole");
    }

    #[test]
    fn deny_wins_and_wildcards_cover_subdomains_only() {
        let r = rules(
            &["*.example.com", "pkg.example.org", "git.example.net:443"],
            &["bad.example.com"],
        );
        assert_eq!(
            r.decide(&t("a.example.com"), 443),
            Verdict::Allow("allow entry `*.example.com`".into())
        );
        assert_eq!(
            r.decide(&t("x.y.example.com"), 80),
            Verdict::Allow("allow entry `*.example.com`".into())
        );
        assert_eq!(r.decide(&t("example.com"), 443), Verdict::Unknown);
        assert_eq!(r.decide(&t("notexample.com"), 443), Verdict::Unknown);
        assert!(matches!(r.decide(&t("bad.example.com"), 443), Verdict::Deny(_)));
        assert!(matches!(r.decide(&t("PKG.EXAMPLE.ORG."), 443), Verdict::Allow(_)));
        assert!(matches!(r.decide(&t("git.example.net"), 443), Verdict::Allow(_)));
        assert_eq!(r.decide(&t("git.example.net"), 22), Verdict::Unknown);
    }

    #[test]
    fn a_star_admits_every_name_but_no_literal_and_no_special_address() {
        let r = rules(&["*:443"], &["bad.example.com"]);
        assert!(r.admits_every_host());
        assert!(matches!(r.decide(&t("any.example.net"), 443), Verdict::Allow(_)));
        assert_eq!(r.decide(&t("any.example.net"), 80), Verdict::Unknown);
        assert!(matches!(r.decide(&t("bad.example.com"), 443), Verdict::Deny(_)));
        assert!(matches!(r.decide(&t("10.1.2.3"), 443), Verdict::Deny(_)));
        assert!(r.address("127.0.0.1".parse().unwrap(), 443, &[]).is_err());
        assert!(r.address("169.254.169.254".parse().unwrap(), 443, &[]).is_err());
        assert!(r.address("93.184.216.34".parse().unwrap(), 443, &[]).is_ok());
        assert!(!rules(&["pkg.example.org"], &[]).admits_every_host());
    }

    #[test]
    fn ip_literals_need_an_entry() {
        let r = rules(&["pkg.example.org", "10.1.0.0/16"], &[]);
        assert!(matches!(r.decide(&t("93.184.216.34"), 80), Verdict::Deny(_)));
        assert!(matches!(r.decide(&t("10.1.2.3"), 80), Verdict::Allow(_)));
        assert!(matches!(r.decide(&t("[::ffff:10.1.2.3]"), 80), Verdict::Allow(_)));
    }

    #[test]
    fn every_spelling_a_resolver_reads_as_an_ipv4_address_is_an_ip_literal() {
        let r = rules(&["*", "allowed.test"], &[]);
        for (spelled, ip) in [
            ("0x7f000001", "127.0.0.1"),
            ("0X7F000001", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("017700000001", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("127.0.1", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("0x7f.0.0.1", "127.0.0.1"),
            ("0x7f.1", "127.0.0.1"),
            ("127.000.000.001", "127.0.0.1"),
            ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
            ("0xa9fea9fe", "169.254.169.254"),
            ("169.254.43518", "169.254.169.254"),
            ("0x", "0.0.0.0"),
            ("0", "0.0.0.0"),
            ("0x7f000001.", "127.0.0.1"),
            ("10.0x10203", "10.1.2.3"),
        ] {
            let want: IpAddr = ip.parse().unwrap();
            assert_eq!(Target::parse(spelled), Ok(Target::Ip(want)), "{spelled}");
            // Refused as an IP literal, even under `*`, which admits names only.
            assert!(matches!(r.decide(&t(spelled), 443), Verdict::Deny(_)), "{spelled}");
            let e = spelled.parse::<Entry>().unwrap_err().to_string();
            assert!(e.contains(&format!("write it as {ip}")), "{spelled}: {e}");
        }
        // Numbers no resolver reads as an address are neither a name nor an address.
        for neither in ["1.2.3.4.5", "256.1.1.1", "08", "0x100000000", "1.0x1000000", "99999999999"]
        {
            assert!(
                matches!(Target::parse(neither), Err(HostError::Numeric(_))),
                "{neither}: {:?}",
                Target::parse(neither)
            );
        }
        // Names that merely hold numbers or hex digits stay names.
        for name in ["0xdead.example", "1e100.net", "0x7f000001x", "deadbeef", "a.0x7f", "123abc"] {
            assert!(matches!(Target::parse(name), Ok(Target::Name(_))), "{name}");
        }
        // An entry naming the address admits every spelling of it.
        let named = rules(&["127.0.0.1"], &[]);
        assert!(matches!(named.decide(&t("0x7f000001"), 443), Verdict::Allow(_)));
    }

    #[test]
    fn special_addresses_are_refused_unless_named() {
        let r = rules(&["pkg.example.org", "192.168.5.0/24", "[::1]:9000"], &["203.0.113.9"]);
        let own = ["203.0.113.7".parse().unwrap()];
        for bad in [
            "127.0.0.1",
            "127.8.9.1",
            "169.254.169.254",
            "10.0.0.1",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fe80::1",
            "fd12::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "::127.0.0.1",
            "203.0.113.7",
            "203.0.113.9",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            let ip: IpAddr = bad.parse().unwrap();
            assert!(r.address(ip, 443, &own).is_err(), "{bad} was let through");
        }
        for good in ["93.184.216.34", "192.168.5.20", "2606:4700::1111"] {
            assert!(r.address(good.parse().unwrap(), 443, &own).is_ok(), "{good}");
        }
        assert!(r.address("::1".parse().unwrap(), 9000, &own).is_ok());
        assert!(r.address("::1".parse().unwrap(), 9001, &own).is_err());
    }
}
