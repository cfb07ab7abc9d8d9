//! The SOCKS5 side of the proxy (RFC 1928, with RFC 1929 user/password for the command's
//! token): CONNECT only, to an IPv4, IPv6 or host-name target (`socks5h://` sends names, so the
//! proxy resolves and checks them). A refusal by the rules is reply 2, "connection not allowed
//! by ruleset"; a malformed handshake ends the connection with reply 1 where a reply fits. The
//! tunnel's first bytes are judged as a CONNECT tunnel's (`tunnel.rs`).

use super::{Proxy, RefusedKind};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const VERSION: u8 = 5;
const NO_AUTH: u8 = 0;
const USER_PASS: u8 = 2;
const NO_METHOD: u8 = 0xff;

const GENERAL_FAILURE: u8 = 1;
const NOT_ALLOWED: u8 = 2;
const HOST_UNREACHABLE: u8 = 4;
const COMMAND_NOT_SUPPORTED: u8 = 7;
const ADDRESS_NOT_SUPPORTED: u8 = 8;

/// Serves one connection of a command of client `on`.
pub async fn serve(proxy: Arc<Proxy>, mut client: TcpStream, on: &str) {
    let asked = tokio::time::timeout(proxy.limits.handshake, handshake(&mut client)).await;
    let (token, host, port) = match asked {
        Ok(Ok(asked)) => asked,
        Ok(Err(Some(code))) => return reply(&mut client, code).await,
        Ok(Err(None)) | Err(_) => return,
    };
    let mut opened = match proxy.open(token.as_deref(), &host, port, "socks5", on).await {
        Ok(opened) => opened,
        Err(refused) => {
            let code = match refused.kind {
                RefusedKind::Rule => NOT_ALLOWED,
                RefusedKind::Unreachable => HOST_UNREACHABLE,
            };
            return reply(&mut client, code).await;
        }
    };
    if reply_ok(&mut client).await.is_err() {
        return;
    }
    // The tunnel's first bytes are checked as a CONNECT's are (`tunnel.rs`).
    super::http_proxy::through_tunnel(&proxy, &mut opened, &mut client, &[]).await;
}

/// The greeting, the credentials and the request. `Err(Some(code))`: answer with that reply;
/// `Err(None)`: just close (nothing a reply could be sent for).
async fn handshake(c: &mut TcpStream) -> Result<(Option<String>, String, u16), Option<u8>> {
    let mut two = [0u8; 2];
    c.read_exact(&mut two).await.map_err(|_| None)?;
    if two[0] != VERSION {
        return Err(None);
    }
    let mut methods = vec![0u8; two[1] as usize];
    c.read_exact(&mut methods).await.map_err(|_| None)?;
    let method = if methods.contains(&USER_PASS) {
        USER_PASS
    } else if methods.contains(&NO_AUTH) {
        NO_AUTH
    } else {
        let _ = c.write_all(&[VERSION, NO_METHOD]).await;
        return Err(None);
    };
    c.write_all(&[VERSION, method]).await.map_err(|_| None)?;
    let mut token = None;
    if method == USER_PASS {
        let mut ver = [0u8; 2];
        c.read_exact(&mut ver).await.map_err(|_| None)?;
        let mut user = vec![0u8; ver[1] as usize];
        c.read_exact(&mut user).await.map_err(|_| None)?;
        let mut plen = [0u8; 1];
        c.read_exact(&mut plen).await.map_err(|_| None)?;
        let mut pass = vec![0u8; plen[0] as usize];
        c.read_exact(&mut pass).await.map_err(|_| None)?;
        // Any credentials are accepted: they name the command, they do not admit it.
        c.write_all(&[1, 0]).await.map_err(|_| None)?;
        token = String::from_utf8(pass).ok().filter(|t| !t.is_empty());
    }
    let mut req = [0u8; 4];
    c.read_exact(&mut req).await.map_err(|_| None)?;
    if req[0] != VERSION {
        return Err(Some(GENERAL_FAILURE));
    }
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            c.read_exact(&mut a).await.map_err(|_| None)?;
            Ipv4Addr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            c.read_exact(&mut a).await.map_err(|_| None)?;
            format!("[{}]", Ipv6Addr::from(a))
        }
        3 => {
            let mut len = [0u8; 1];
            c.read_exact(&mut len).await.map_err(|_| None)?;
            let mut name = vec![0u8; len[0] as usize];
            c.read_exact(&mut name).await.map_err(|_| None)?;
            String::from_utf8(name).map_err(|_| Some(GENERAL_FAILURE))?
        }
        _ => return Err(Some(ADDRESS_NOT_SUPPORTED)),
    };
    let mut port = [0u8; 2];
    c.read_exact(&mut port).await.map_err(|_| None)?;
    if req[1] != 1 {
        return Err(Some(COMMAND_NOT_SUPPORTED));
    }
    Ok((token, host, u16::from_be_bytes(port)))
}

async fn reply(c: &mut TcpStream, code: u8) {
    let _ = c.write_all(&[VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0]).await;
    let _ = c.shutdown().await;
}

async fn reply_ok(c: &mut TcpStream) -> std::io::Result<()> {
    c.write_all(&[VERSION, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await
}
