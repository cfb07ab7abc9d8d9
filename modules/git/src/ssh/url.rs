//! SSH remote URLs (`ssh://`, `git+ssh://`, scp-like `user@host:path`), parsed into the host
//! libssh2 will reach and checked for what `ssh` would read as an option.

use std::fmt;

/// The host part of an SSH remote URL, as libssh2 will reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SshUrl {
    /// The user named in the URL, if any.
    pub(crate) user: Option<String>,
    /// The host name or address (an IPv6 address without its brackets).
    pub(crate) host: String,
    /// The TCP port (22 unless the URL names another).
    pub(crate) port: u16,
}

impl SshUrl {
    /// The name `known_hosts` lists the host under: `host` on port 22, `[host]:port`
    /// otherwise, lower-cased as OpenSSH does.
    pub(crate) fn known_hosts_name(&self) -> String {
        let host = self.host.to_ascii_lowercase();
        if self.port == 22 { host } else { format!("[{host}]:{}", self.port) }
    }
}

impl fmt::Display for SshUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host =
            if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        if self.port == 22 { write!(f, "{host}") } else { write!(f, "{host}:{}", self.port) }
    }
}

/// Whether `url` starts with one of the SSH schemes libgit2 knows.
pub(crate) fn has_ssh_scheme(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["ssh://", "git+ssh://", "ssh+git://"].iter().any(|s| lower.starts_with(s))
}

/// Parses `ssh://[user@]host[:port]/path` (and the `git+ssh://`, `ssh+git://` spellings).
pub(crate) fn parse_ssh_url(url: &str) -> Result<SshUrl, &'static str> {
    let rest = url.split_once("://").map(|(_, r)| r).ok_or("not an ssh:// URL")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => return Err("the URL names no repository path (ssh://host/path)"),
    };
    check_path(path.trim_start_matches('/'))?;
    let (user, hostport) = split_user(authority)?;
    let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
        let (host, after) = inner.split_once(']').ok_or("an IPv6 host lacks its `]`")?;
        check_ipv6(host)?;
        let port = match after {
            "" => 22,
            p => parse_port(p.strip_prefix(':').ok_or("unexpected text after `]`")?)?,
        };
        (host, port)
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, parse_port(p)?),
            None => (hostport, 22),
        }
    };
    if !host.contains(':') {
        check_host(host)?;
    }
    Ok(SshUrl { user, host: host.to_string(), port })
}

/// Parses the scp-like form `[user@]host:path` (port 22; `ssh://` is needed for another port).
pub(crate) fn parse_scp(url: &str) -> Result<SshUrl, &'static str> {
    let (authority, path) = url.split_once(':').ok_or("not an scp-like URL")?;
    if authority.contains(['[', ']']) {
        return Err("use the ssh://[host]:port/path form for IPv6 hosts and ports");
    }
    check_path(path)?;
    let (user, host) = split_user(authority)?;
    check_host(host)?;
    Ok(SshUrl { user, host: host.to_string(), port: 22 })
}

fn split_user(authority: &str) -> Result<(Option<String>, &str), &'static str> {
    let Some((user, host)) = authority.split_once('@') else { return Ok((None, authority)) };
    if host.contains('@') {
        return Err("the URL has more than one `@`");
    }
    if user.contains(':') {
        return Err("the URL carries a password; hands authenticates only with the ssh-agent");
    }
    if user.is_empty()
        || user.starts_with('-')
        || user.chars().any(|c| c.is_control() || c.is_whitespace() || matches!(c, '%' | '/'))
    {
        return Err("the user name in the URL is empty or has characters hands does not accept");
    }
    Ok((Some(user.to_string()), host))
}

fn check_host(host: &str) -> Result<(), &'static str> {
    if host.is_empty()
        || host.starts_with(['-', '.'])
        || !host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Err("the host name is empty or has characters hands does not accept");
    }
    Ok(())
}

fn check_ipv6(host: &str) -> Result<(), &'static str> {
    if host.is_empty() || !host.chars().all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.')) {
        return Err("the bracketed host is not an IPv6 address");
    }
    Ok(())
}

fn parse_port(p: &str) -> Result<u16, &'static str> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err("the port is not a number from 1 to 65535"),
    }
}

fn check_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("the URL names no repository path");
    }
    if path.starts_with('-') {
        return Err("the repository path starts with `-`");
    }
    if path.chars().any(char::is_control) {
        return Err("the repository path has control characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(user: Option<&str>, host: &str, port: u16) -> SshUrl {
        SshUrl { user: user.map(str::to_string), host: host.to_string(), port }
    }

    #[test]
    fn ssh_urls_parse() {
        assert_eq!(
            parse_ssh_url("ssh://git@h.example/o/r.git"),
            Ok(url(Some("git"), "h.example", 22))
        );
        assert_eq!(parse_ssh_url("ssh://h:2222/r"), Ok(url(None, "h", 2222)));
        assert_eq!(parse_ssh_url("git+ssh://u@[::1]:2222/r"), Ok(url(Some("u"), "::1", 2222)));
        assert_eq!(parse_ssh_url("ssh+git://[::1]/r"), Ok(url(None, "::1", 22)));
        assert_eq!(parse_scp("git@github.com:o/r.git"), Ok(url(Some("git"), "github.com", 22)));
        assert_eq!(parse_scp("host:r.git"), Ok(url(None, "host", 22)));
        for bad in [
            "ssh://h",
            "ssh://u:pw@h/r",
            "ssh://a@b@h/r",
            "ssh://h:0/r",
            "ssh://h:x/r",
            "ssh://-oProxyCommand=x/r",
            "ssh://h/-r",
            "ssh://h%2f/r",
            "ssh://[zz]/r",
            "ssh://@h/r",
        ] {
            assert!(parse_ssh_url(bad).is_err(), "{bad}");
        }
        for bad in ["[::1]:r", "-h:r", "u@:r", "h:", "h:-r"] {
            assert!(parse_scp(bad).is_err(), "{bad}");
        }
        assert_eq!(url(None, "H.example", 22).known_hosts_name(), "h.example");
        assert_eq!(url(None, "h", 2222).known_hosts_name(), "[h]:2222");
        assert_eq!(url(None, "::1", 2222).to_string(), "[::1]:2222");
    }
}
