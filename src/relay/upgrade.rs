//! `GET /runner`: a runner's WebSocket upgrade. Its name (`Hands-Runner`), token (`Authorization:
//! Bearer`, whose sha256 is compared in constant time with the configured one) and subprotocol
//! (`hands-runner.v1`) are checked before the upgrade: a wrong one is 401 and never disturbs
//! the runner's live link. An accepted one replaces that link.

use super::{Relay, refuse};
use crate::link::drive::{drive, ws_config};
use crate::link::{INSTANCE_HEADER, SUBPROTOCOL};
use crate::transport::conns::{Holder, Timed};
use crate::transport::http_setup::{mac, tag_of};
use crate::transport::mcp_door::Body;
use hmac::Mac;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

fn has_token(headers: &http::HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str().is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

pub(super) fn runner(relay: &Arc<Relay>, mut req: Request<Timed>) -> Response<Body> {
    let h = req.headers();
    let is_upgrade = req.method() == http::Method::GET
        && has_token(h, header::UPGRADE, "websocket")
        && has_token(h, header::CONNECTION, "upgrade")
        && h.get(header::SEC_WEBSOCKET_VERSION).is_some_and(|v| v == "13");
    let Some(key) = h.get(header::SEC_WEBSOCKET_KEY).filter(|_| is_upgrade) else {
        return refuse(StatusCode::BAD_REQUEST, "runners connect here with a WebSocket upgrade");
    };
    if !has_token(h, header::SEC_WEBSOCKET_PROTOCOL, SUBPROTOCOL) {
        return refuse(StatusCode::BAD_REQUEST, &format!("the subprotocol must be {SUBPROTOCOL}"));
    }
    let name = h.get("hands-runner").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let presented = crate::transport::mcp_door::bearer(h).unwrap_or_default();
    // The presented token's digest, tagged, against the configured digest's tag: equal-length
    // values compared in constant time, whatever the name.
    let mut m = mac();
    m.update(&Sha256::digest(presented.as_bytes()));
    let runner = relay.runner_named(name);
    let expected = tag_of(&runner.map_or([0xff; 32], |r| r.token_sha256));
    let Some(runner) =
        runner.filter(|_| m.verify_slice(&expected).is_ok() && !presented.is_empty())
    else {
        tracing::warn!(
            "relay: refused a runner connection as `{}`: unknown name or wrong token",
            hands_roots::shown(name)
        );
        let mut r = refuse(
            StatusCode::UNAUTHORIZED,
            "unknown runner name or wrong token: the runner's [runner] name and token_file must \
             match a [[relay.runners]] entry of relay.toml (its name, and the sha256 of the \
             token as token_sha256)",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"hands-runner\""),
        );
        return r;
    };
    let accept = derive_accept_key(key.as_bytes());
    let instance =
        h.get(INSTANCE_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let runner = runner.clone();
    // The runner's token: not closed to make room until the upgrade takes the connection over.
    if let Err(r) = crate::transport::conns::vouch(&mut req, Holder::Runner(&runner.name)) {
        return *r;
    }
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(req).await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!("relay: the runner's upgrade failed: {e}");
                return;
            }
        };
        let ws = WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Server,
            Some(ws_config()),
        )
        .await;
        let (id, stop) = runner.connected(&instance);
        tracing::info!("relay: runner `{}` connected", runner.name);
        let ended = drive(ws, &runner.outbox, |t| runner.on_frame(t), &stop).await;
        tracing::info!("relay: runner `{}`'s link {ended}", runner.name);
        runner.disconnected(id);
    });
    let mut r = Response::new(Empty::<bytes::Bytes>::new().map_err(|never| match never {}).boxed());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let hs = r.headers_mut();
    hs.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    hs.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    hs.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(SUBPROTOCOL));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        hs.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    if let Ok(v) = HeaderValue::from_str(&relay.instance) {
        hs.insert(INSTANCE_HEADER, v);
    }
    r
}
