//! The server name a TLS ClientHello asks for (its SNI extension, RFC 6066), read from the
//! first bytes a command sends into a tunnel, so the proxy can refuse a tunnel whose TLS names
//! another server than the one it admitted (SPEC §5.4).
//!
//! A small parser of its own, bounded and total: it reads at most [`MAX_HELLO`] bytes of
//! handshake (a ClientHello may span several records; a post-quantum key share makes it 1–2
//! KiB), never indexes past what it holds, and answers [`Hello::Need`] while the message is
//! incomplete. Fuzzed by the random loop `tests::random_and_mutated_hellos_never_panic` and
//! by libFuzzer (`fuzz/fuzz_targets/tls_hello.rs`).

/// The most bytes of a ClientHello handshake message read before the tunnel is refused.
pub const MAX_HELLO: usize = 64 * 1024;

/// What the ClientHello says, as far as the proxy cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The `host_name` of the server_name extension, when there is one.
    pub server_name: Option<String>,
    /// An encrypted_client_hello extension is present (ECH, or its GREASE): the name above is
    /// then the outer, public one.
    pub ech: bool,
}

/// The outcome of reading the bytes so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// The ClientHello is complete.
    Done(ClientHello),
    /// More bytes are needed.
    Need,
    /// Not a ClientHello (the reason, for the refusal).
    Bad(&'static str),
}

const HANDSHAKE: u8 = 0x16;
const CLIENT_HELLO: u8 = 1;
const SERVER_NAME: u16 = 0;
const HOST_NAME: u8 = 0;
const ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;
/// A TLS record's plaintext is at most 2^14 bytes.
const MAX_RECORD: usize = 1 << 14;

/// Reads the ClientHello from the start of a tunnel's bytes: handshake records, their
/// fragments joined, then the message.
pub fn client_hello(bytes: &[u8]) -> Hello {
    let mut message = Vec::new();
    let mut at = 0;
    loop {
        let Some(header) = bytes.get(at..at + 5) else { return Hello::Need };
        if header[0] != HANDSHAKE {
            return Hello::Bad("the tunnel does not start with a TLS handshake");
        }
        if header[1] != 3 {
            return Hello::Bad("not a TLS record version");
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || len > MAX_RECORD {
            return Hello::Bad("a TLS record of an impossible length");
        }
        let Some(fragment) = bytes.get(at + 5..at + 5 + len) else { return Hello::Need };
        message.extend_from_slice(fragment);
        at += 5 + len;
        if message.len() >= 4 {
            if message[0] != CLIENT_HELLO {
                return Hello::Bad("the first TLS handshake message is not a ClientHello");
            }
            let body = usize::from(message[1]) << 16
                | usize::from(message[2]) << 8
                | usize::from(message[3]);
            if body > MAX_HELLO {
                return Hello::Bad("a ClientHello larger than the proxy reads");
            }
            if message.len() >= 4 + body {
                return match parse_body(&message[4..4 + body]) {
                    Some(hello) => Hello::Done(hello),
                    None => Hello::Bad("a malformed ClientHello"),
                };
            }
        }
        if message.len() > MAX_HELLO + 4 {
            return Hello::Bad("a ClientHello larger than the proxy reads");
        }
    }
}

/// A cursor over a byte slice; every read is checked.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.bytes.get(..n)?, self.bytes.get(n..)?);
        self.bytes = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a one- or two-byte length before it.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// The ClientHello's body: version, random, session id, cipher suites, compression methods,
/// then the extensions (absent in a TLS 1.0-era hello: no name then).
fn parse_body(body: &[u8]) -> Option<ClientHello> {
    let mut r = Reader { bytes: body };
    r.take(2 + 32)?;
    r.vec8()?;
    r.vec16()?;
    r.vec8()?;
    let mut hello = ClientHello { server_name: None, ech: false };
    if r.bytes.is_empty() {
        return Some(hello);
    }
    let mut ext = Reader { bytes: r.vec16()? };
    if !r.bytes.is_empty() {
        return None;
    }
    let mut seen_name = false;
    while !ext.bytes.is_empty() {
        let kind = ext.u16()?;
        let data = ext.vec16()?;
        match kind {
            SERVER_NAME => {
                // One extension of a type (RFC 8446 §4.2): a second could name another server.
                if seen_name {
                    return None;
                }
                seen_name = true;
                hello.server_name = host_name(data)?;
            }
            ENCRYPTED_CLIENT_HELLO => hello.ech = true,
            _ => {}
        }
    }
    Some(hello)
}

/// The one `host_name` of a server_name extension (RFC 6066: at most one of each type), as
/// ASCII; `None` inside for an empty list.
fn host_name(data: &[u8]) -> Option<Option<String>> {
    let mut r = Reader { bytes: data };
    let mut list = Reader { bytes: r.vec16()? };
    if !r.bytes.is_empty() {
        return None;
    }
    let mut name = None;
    while !list.bytes.is_empty() {
        let kind = list.u8()?;
        let value = list.vec16()?;
        if kind == HOST_NAME {
            if name.is_some() || value.is_empty() {
                return None;
            }
            let text = std::str::from_utf8(value).ok()?;
            if !text.bytes().all(|b| b.is_ascii_graphic()) {
                return None;
            }
            name = Some(text.to_string());
        }
    }
    Some(name)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ClientHello with these extensions (type, data), in records of at most `record` bytes.
    pub(crate) fn hello(extensions: &[(u16, Vec<u8>)], record: usize) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.push(0);
        body.extend([0, 2, 0x13, 0x01]);
        body.extend([1, 0]);
        let mut ext = Vec::new();
        for (kind, data) in extensions {
            ext.extend(kind.to_be_bytes());
            ext.extend((data.len() as u16).to_be_bytes());
            ext.extend(data);
        }
        body.extend((ext.len() as u16).to_be_bytes());
        body.extend(ext);
        let mut message = vec![CLIENT_HELLO];
        message.extend(&(body.len() as u32).to_be_bytes()[1..]);
        message.extend(body);
        let mut out = Vec::new();
        for chunk in message.chunks(record) {
            out.extend([HANDSHAKE, 3, 1]);
            out.extend((chunk.len() as u16).to_be_bytes());
            out.extend(chunk);
        }
        out
    }

    pub(crate) fn sni(name: &str) -> (u16, Vec<u8>) {
        let mut entry = vec![HOST_NAME];
        entry.extend((name.len() as u16).to_be_bytes());
        entry.extend(name.as_bytes());
        let mut data = (entry.len() as u16).to_be_bytes().to_vec();
        data.extend(entry);
        (SERVER_NAME, data)
    }

    fn done(name: Option<&str>, ech: bool) -> Hello {
        Hello::Done(ClientHello { server_name: name.map(str::to_string), ech })
    }

    #[test]
    fn the_server_name_is_read_whole_or_in_fragments() {
        let grease = (0x0a0a, vec![]);
        let big = (0x11ec, vec![9u8; 1216]); // a post-quantum key share's size
        let bytes = hello(&[grease.clone(), sni("example.org"), big.clone()], MAX_RECORD);
        assert_eq!(client_hello(&bytes), done(Some("example.org"), false));
        let bytes = hello(&[grease, big, sni("example.org")], 100);
        assert_eq!(client_hello(&bytes), done(Some("example.org"), false));
        // Every prefix asks for more; none is mistaken for a complete hello.
        for n in 0..bytes.len() {
            assert_eq!(client_hello(&bytes[..n]), Hello::Need, "{n}");
        }
        // Bytes after the hello (a client that sends early data) change nothing.
        let mut more = bytes.clone();
        more.extend(b"\x17\x03\x03\x00\x01x");
        assert_eq!(client_hello(&more), done(Some("example.org"), false));
    }

    #[test]
    fn no_name_an_ech_extension_and_an_old_hello_without_extensions() {
        assert_eq!(client_hello(&hello(&[], 512)), done(None, false));
        let ech = (ENCRYPTED_CLIENT_HELLO, vec![0, 1, 2]);
        assert_eq!(
            client_hello(&hello(&[sni("public.example"), ech], 512)),
            done(Some("public.example"), true)
        );
        let mut old = hello(&[], 512);
        // Drop the empty extensions block: a hello that ends after its compression methods.
        old.truncate(old.len() - 2);
        old[4] -= 2;
        old[8] -= 2;
        assert_eq!(client_hello(&old), done(None, false));
    }

    /// The parser as a fuzz target on stable Rust: random bytes, and valid hellos mutated
    /// (bytes flipped, cut, repeated), for `HANDS_FUZZ_SECS` seconds (1 by default); it must
    /// never panic, and a name it returns is always clean ASCII.
    #[test]
    fn random_and_mutated_hellos_never_panic() {
        let secs: u64 =
            std::env::var("HANDS_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
        let mut x: u64 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 | 1)
            .unwrap_or(1);
        let seed = x;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let valid = [
            hello(&[sni("example.org")], 1 << 14),
            hello(
                &[(0x11ec, vec![1; 1200]), sni("a.example"), (ENCRYPTED_CLIENT_HELLO, vec![0; 9])],
                90,
            ),
            hello(&[], 7),
        ];
        let start = std::time::Instant::now();
        let mut runs = 0u64;
        while start.elapsed().as_secs() < secs {
            let mut data = if next() % 4 == 0 {
                (0..next() % 600).map(|_| next() as u8).collect::<Vec<u8>>()
            } else {
                valid[(next() % 3) as usize].clone()
            };
            for _ in 0..next() % 8 {
                if data.is_empty() {
                    break;
                }
                let at = (next() as usize) % data.len();
                match next() % 3 {
                    0 => data[at] = next() as u8,
                    1 => data.truncate(at),
                    _ => {
                        let piece = data[at..].to_vec();
                        data.extend(piece);
                    }
                }
            }
            if let Hello::Done(h) = client_hello(&data) {
                let clean = h
                    .server_name
                    .as_deref()
                    .is_none_or(|n| n.bytes().all(|b| b.is_ascii_graphic()));
                assert!(clean, "seed {seed}: {data:?}");
            }
            runs += 1;
        }
        assert!(runs > 100, "seed {seed}: {runs} runs");
    }

    #[test]
    fn what_is_not_one_clean_name_is_refused() {
        assert!(matches!(client_hello(b"GET / HTTP/1.1\r\n"), Hello::Bad(_)));
        assert!(matches!(client_hello(b"\x16\x02\x00\x00\x01x"), Hello::Bad(_)));
        let two = hello(&[sni("example.org"), sni("other.example")], 512);
        assert!(matches!(client_hello(&two), Hello::Bad(_)));
        let mut data = sni("example.org").1;
        data.extend([HOST_NAME, 0, 5]);
        data.extend(b"other");
        let len = (data.len() - 2) as u16;
        data[..2].copy_from_slice(&len.to_be_bytes());
        assert!(matches!(client_hello(&hello(&[(SERVER_NAME, data)], 512)), Hello::Bad(_)));
        let odd = hello(&[sni("exa mple.org")], 512);
        assert!(matches!(client_hello(&odd), Hello::Bad(_)));
        // A length that runs past its container.
        let mut cut = hello(&[sni("example.org")], 512);
        let last = cut.len() - 1;
        cut.truncate(last);
        cut[4] -= 1;
        cut[8] -= 1;
        assert!(matches!(client_hello(&cut), Hello::Bad(_)));
    }
}
