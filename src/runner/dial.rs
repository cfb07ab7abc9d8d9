//! One attempt to reach the relay: TCP, TLS (the system's roots and `ca_file`), the WebSocket
//! upgrade with the runner's name, token and subprotocol. An answer that is not `101` — a
//! refusal, a redirect — ends the attempt: no redirect is followed, so nothing the relay says
//! changes where the runner connects.

use crate::link::{INSTANCE_HEADER, SUBPROTOCOL, drive::ws_config};
use http::{HeaderValue, header};
use rustls::pki_types::ServerName;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Connecting (TCP and TLS) and the upgrade each get this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Why an attempt failed, as the runner's stderr and `hands doctor` say it. No variant carries
/// the token.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
    #[error(
        "TLS with {0} failed: {1}\nhint: the relay's certificate must chain to the system's roots or to [runner].ca_file"
    )]
    Tls(String, String),
    #[error(
        "the relay refused this runner (HTTP {0}): a wrong token, or a name it does not know\nhint: the relay's [[relay.runners]] entry for this name holds the sha256 of this runner's token"
    )]
    Refused(u16),
    #[error(
        "the relay answered a redirect (HTTP {0}) to {1}; a runner follows none\nhint: set [runner].url to the relay's real address"
    )]
    Redirect(u16, String),
    #[error("the relay answered HTTP {0} to the upgrade")]
    Status(u16),
    #[error("the WebSocket upgrade failed: {0}")]
    Upgrade(String),
    #[error("{0} did not answer within {1} s")]
    Timeout(String, u64),
}

/// Where and how to connect, settled at startup.
pub struct Dialer {
    pub(super) uri: http::Uri,
    pub(super) name: String,
    /// The credential, only ever put in the `Authorization` header.
    pub(super) token: Secret,
    /// `None` for `ws://` (loopback only).
    pub(super) tls: Option<tokio_rustls::TlsConnector>,
    /// This process's instance, sent in [`INSTANCE_HEADER`].
    pub(super) instance: String,
}

/// A credential that does not print.
pub struct Secret(pub(super) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// A TLS client config trusting the system's roots and the PEM certificates of `ca_file`.
pub fn tls_config(ca_file: Option<&Path>) -> anyhow::Result<rustls::ClientConfig> {
    crate::transport::tls::client_config(ca_file, "[runner] ca_file")
}

/// A connected, upgraded link and the relay's instance id.
// One value per connection, moved once into the driver: its size costs nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Linked {
    Plain(WebSocketStream<tokio::net::TcpStream>, String),
    Tls(WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>, String),
}

impl Dialer {
    fn host(&self) -> String {
        let h = self.uri.host().unwrap_or_default();
        h.trim_start_matches('[').trim_end_matches(']').to_string()
    }

    fn port(&self) -> u16 {
        self.uri.port_u16().unwrap_or(if self.tls.is_some() { 443 } else { 80 })
    }

    pub(super) async fn dial(&self) -> Result<Linked, DialError> {
        let (host, port) = (self.host(), self.port());
        let at = format!("{host}:{port}");
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await
        .map_err(|_| DialError::Timeout(at.clone(), CONNECT_TIMEOUT.as_secs()))?
        .map_err(|e| DialError::Connect(at.clone(), e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => {
                let (ws, instance) = self.upgrade(tcp).await?;
                Ok(Linked::Plain(ws, instance))
            }
            Some(tls) => {
                let name = ServerName::try_from(host.clone())
                    .map_err(|e| DialError::Tls(at.clone(), e.to_string()))?;
                let stream = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(name, tcp))
                    .await
                    .map_err(|_| DialError::Timeout(at.clone(), CONNECT_TIMEOUT.as_secs()))?
                    .map_err(|e| DialError::Tls(at.clone(), e.to_string()))?;
                let (ws, instance) = self.upgrade(stream).await?;
                Ok(Linked::Tls(ws, instance))
            }
        }
    }

    async fn upgrade<S>(&self, stream: S) -> Result<(WebSocketStream<S>, String), DialError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut req = self
            .uri
            .clone()
            .into_client_request()
            .map_err(|e| DialError::Upgrade(e.to_string()))?;
        let h = req.headers_mut();
        let bearer = HeaderValue::from_str(&format!("Bearer {}", self.token.0))
            .map_err(|_| DialError::Upgrade("the token cannot travel in a header".into()))?;
        h.insert(header::AUTHORIZATION, bearer);
        let name = HeaderValue::from_str(&self.name)
            .map_err(|_| DialError::Upgrade("the name cannot travel in a header".into()))?;
        h.insert("hands-runner", name);
        h.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(SUBPROTOCOL));
        if let Ok(v) = HeaderValue::from_str(&self.instance) {
            h.insert(INSTANCE_HEADER, v);
        }
        let shake = tokio_tungstenite::client_async_with_config(req, stream, Some(ws_config()));
        let (ws, answer) = tokio::time::timeout(CONNECT_TIMEOUT, shake)
            .await
            .map_err(|_| DialError::Timeout("the upgrade".into(), CONNECT_TIMEOUT.as_secs()))?
            .map_err(refusal)?;
        let instance = answer
            .headers()
            .get(INSTANCE_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        Ok((ws, instance))
    }
}

fn refusal(e: tokio_tungstenite::tungstenite::Error) -> DialError {
    use tokio_tungstenite::tungstenite::Error;
    match e {
        Error::Http(answer) => {
            let status = answer.status().as_u16();
            if answer.status().is_redirection() {
                let to = answer
                    .headers()
                    .get(header::LOCATION)
                    .map(|l| {
                        hands_roots::shown(&*String::from_utf8_lossy(l.as_bytes())).to_string()
                    })
                    .unwrap_or_else(|| "nowhere".into());
                DialError::Redirect(status, to)
            } else if status == 401 || status == 403 {
                DialError::Refused(status)
            } else {
                DialError::Status(status)
            }
        }
        other => DialError::Upgrade(other.to_string()),
    }
}
