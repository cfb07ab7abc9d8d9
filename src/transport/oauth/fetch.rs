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

/// Fetches JSON documents, trusting the roots it was built with.
pub struct Fetcher {
    tls: tokio_rustls::TlsConnector,
}

impl Fetcher {
    pub fn new(tls: rustls::ClientConfig) -> Fetcher {
        Fetcher { tls: tokio_rustls::TlsConnector::from(Arc::new(tls)) }
    }

    /// The JSON at `url`; an error that names the URL and what went wrong.
    pub async fn json(&self, url: &str) -> Result<serde_json::Value, String> {
        match tokio::time::timeout(TIMEOUT, self.get(url)).await {
            Ok(r) => r.map_err(|e| format!("GET {url}: {e}")),
            Err(_) => Err(format!("GET {url}: no answer within {} s", TIMEOUT.as_secs())),
        }
    }

    async fn get(&self, url: &str) -> Result<serde_json::Value, String> {
        if let Some(why) = url_problem(url) {
            return Err(why.to_string());
        }
        let uri: http::Uri = url.parse().map_err(|_| "not a URL".to_string())?;
        let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        let https = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = uri.authority().map(|a| a.as_str().to_string()).unwrap_or_default();
        let req = Request::get(path)
            .header(header::HOST, authority)
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, concat!("hands/", env!("CARGO_PKG_VERSION")))
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        if https {
            let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
            let tls = self.tls.connect(name, tcp).await.map_err(|e| {
                format!(
                    "TLS with {host}:{port} failed: {e} (the issuer's certificate must chain to \
                     the system's roots or to the OAuth table's ca_file)"
                )
            })?;
            exchange(TokioIo::new(tls), req).await
        } else {
            exchange(TokioIo::new(tcp), req).await
        }
    }
}

async fn exchange<I>(io: I, req: Request<Empty<Bytes>>) -> Result<serde_json::Value, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(io).await.map_err(|e| e.to_string())?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let answer = async {
        let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        if status.is_redirection() {
            let to = resp.headers().get(header::LOCATION).and_then(|v| v.to_str().ok());
            return Err(format!(
                "answered a redirect (HTTP {}) to {}; none is followed — set the issuer to \
                 its real address",
                status.as_u16(),
                hands_roots::shown(to.unwrap_or("nowhere"))
            ));
        }
        if status != StatusCode::OK {
            return Err(format!("answered HTTP {}", status.as_u16()));
        }
        let body = Limited::new(resp.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e} (at most {MAX_DOCUMENT} bytes)"))?
            .to_bytes();
        serde_json::from_slice(&body).map_err(|e| format!("the answer is not JSON: {e}"))
    };
    let out = answer.await;
    driver.abort();
    out
}
