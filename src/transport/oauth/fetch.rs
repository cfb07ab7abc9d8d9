//! One GET of a JSON document from the issuer — its metadata, its JWKS — over hyper's HTTP/1
//! client connection on a TCP stream, TLS (rustls: the system's roots and `ca_file`) for
//! `https`. `http` only to a loopback host. Bounded: a timeout, a size cap, no redirect followed
//! (the issuer's documents are where its metadata says, nowhere a redirect leads).

use crate::config::oauth::url_problem;
use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::Duration;

/// Connecting, the TLS handshake and the whole exchange each get this long.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The largest document read (a JWKS of many keys is a few KiB).
const MAX_DOCUMENT: usize = 1024 * 1024;

/// Why one GET of the issuer's documents gave no JSON ([`Fetcher::json`]): the URL, and what
/// went wrong there.
#[derive(Debug, thiserror::Error)]
#[error("GET {url}: {why}")]
pub struct FetchError {
    pub url: String,
    pub why: GetError,
}

/// What went wrong in one GET.
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    /// The whole exchange took longer than its bound.
    #[error("no answer within {} s", TIMEOUT.as_secs())]
    Timeout,
    /// The URL is not one the issuer's documents may be fetched from (`config::oauth`'s check).
    #[error("{0}")]
    Url(&'static str),
    #[error("not a URL")]
    NotAUrl,
    #[error("cannot connect to {host}:{port}: {source}")]
    Connect { host: String, port: u16, source: std::io::Error },
    /// The request could not be built from the URL's parts.
    #[error("{0}")]
    Request(http::Error),
    /// The host is not a name TLS can check a certificate against.
    #[error("{0}")]
    ServerName(rustls::pki_types::InvalidDnsNameError),
    #[error(
        "TLS with {host}:{port} failed: {source} (the issuer's certificate must chain to the \
         system's roots or to the OAuth table's ca_file)"
    )]
    Tls { host: String, port: u16, source: std::io::Error },
    /// HTTP/1 failed: the handshake, or sending the request and reading the answer's head.
    #[error("{0}")]
    Http(hyper::Error),
    /// A redirect (`status`) to `to`: none is followed.
    #[error(
        "answered a redirect (HTTP {status}) to {}; none is followed — set the issuer to its \
         real address",
        hands_roots::shown(to)
    )]
    Redirect { status: u16, to: String },
    /// Any status but 200 and the redirects.
    #[error("answered HTTP {0}")]
    Status(u16),
    /// The body could not be read, or is over [`MAX_DOCUMENT`] bytes.
    #[error("reading the answer: {0} (at most {MAX_DOCUMENT} bytes)")]
    Body(Box<dyn std::error::Error + Send + Sync>),
    #[error("the answer is not JSON: {0}")]
    NotJson(serde_json::Error),
}

/// Fetches JSON documents, trusting the roots it was built with.
pub struct Fetcher {
    tls: tokio_rustls::TlsConnector,
}

impl Fetcher {
    pub fn new(tls: rustls::ClientConfig) -> Fetcher {
        Fetcher { tls: tokio_rustls::TlsConnector::from(Arc::new(tls)) }
    }

    /// The JSON at `url`; an error that names the URL and what went wrong.
    pub async fn json(&self, url: &str) -> Result<serde_json::Value, FetchError> {
        let why = match tokio::time::timeout(TIMEOUT, self.get(url)).await {
            Ok(Ok(doc)) => return Ok(doc),
            Ok(Err(why)) => why,
            Err(_) => GetError::Timeout,
        };
        Err(FetchError { url: url.to_string(), why })
    }

    async fn get(&self, url: &str) -> Result<serde_json::Value, GetError> {
        if let Some(why) = url_problem(url) {
            return Err(GetError::Url(why));
        }
        let uri: http::Uri = url.parse().map_err(|_| GetError::NotAUrl)?;
        let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        let https = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|source| GetError::Connect { host: host.to_string(), port, source })?;
        let _ = tcp.set_nodelay(true);
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = uri.authority().map(|a| a.as_str().to_string()).unwrap_or_default();
        let req = Request::get(path)
            .header(header::HOST, authority)
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, concat!("hands/", env!("CARGO_PKG_VERSION")))
            .body(Empty::<Bytes>::new())
            .map_err(GetError::Request)?;
        if https {
            let name = ServerName::try_from(host.to_string()).map_err(GetError::ServerName)?;
            let tls = self.tls.connect(name, tcp).await.map_err(|source| GetError::Tls {
                host: host.to_string(),
                port,
                source,
            })?;
            exchange(TokioIo::new(tls), req).await
        } else {
            exchange(TokioIo::new(tcp), req).await
        }
    }
}

async fn exchange<I>(io: I, req: Request<Empty<Bytes>>) -> Result<serde_json::Value, GetError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(io).await.map_err(GetError::Http)?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let answer = async {
        let resp = send.send_request(req).await.map_err(GetError::Http)?;
        let status = resp.status();
        if status.is_redirection() {
            let to = resp.headers().get(header::LOCATION).and_then(|v| v.to_str().ok());
            return Err(GetError::Redirect {
                status: status.as_u16(),
                to: to.unwrap_or("nowhere").to_string(),
            });
        }
        if status != StatusCode::OK {
            return Err(GetError::Status(status.as_u16()));
        }
        let body = Limited::new(resp.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(GetError::Body)?
            .to_bytes();
        serde_json::from_slice(&body).map_err(GetError::NotJson)
    };
    let out = answer.await;
    driver.abort();
    out
}
