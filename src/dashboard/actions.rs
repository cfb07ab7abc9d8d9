//! The dashboard's actions: a POSTed form (CSRF and Origin already checked by the door)
//! becomes one [`Request`] for [`Daemon::act`](crate::server::Daemon::act), done by this
//! daemon and recorded as `person-via-dashboard`; the reply becomes a redirect or an HTTP
//! error. Like `hands stop` and `hands approvals`, the brake, its release, an answer this
//! daemon does not hold and a revoke-all reach the other daemons of the state dir too.

use super::Door;
use crate::control::client::request_all_async;
use crate::control::protocol::{Choice, Failure, Reply, Request, Standing, Via};
use http::StatusCode;

/// What went wrong, as the status and the message page's text.
pub(crate) type ActError = (StatusCode, String);

fn need<'a>(pairs: &'a [(String, String)], name: &str) -> Result<&'a str, ActError> {
    super::field(pairs, name)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| (StatusCode::BAD_REQUEST, format!("the form has no `{name}`")))
}

/// The request a POST to `path` with `pairs` asks for.
fn request(path: &str, pairs: &[(String, String)]) -> Result<Request, ActError> {
    let via = Via::Dashboard;
    Ok(match path {
        "/approve" => {
            let id = need(pairs, "id")?.to_string();
            let name = need(pairs, "choice")?;
            let choice = serde_json::from_value::<Choice>(name.into()).map_err(|_| {
                (
                    StatusCode::BAD_REQUEST,
                    format!("`{name}` is not a choice (once, session, always, reject)"),
                )
            })?;
            Request::Answer { id, choice, via }
        }
        "/brake" => Request::Stop { via, except: None },
        "/release" => Request::Release { via, except: None },
        "/stop-command" => {
            let id = need(pairs, "id")?;
            let id = id
                .parse()
                .map_err(|_| (StatusCode::BAD_REQUEST, format!("`{id}` is not a command id")))?;
            Request::StopCommand { id, via }
        }
        "/stop-session" => Request::StopSession { session: need(pairs, "session")?.into(), via },
        "/revoke" => Request::Revoke { standing: Standing::Id(need(pairs, "id")?.into()), via },
        "/revoke-all" => Request::Revoke { standing: Standing::All, via },
        _ => return Err((StatusCode::NOT_FOUND, format!("the dashboard has no action {path}"))),
    })
}

/// A failed reply as the dashboard shows it.
fn refused(error: String, kind: Failure) -> ActError {
    match kind {
        Failure::Invalid => (StatusCode::BAD_REQUEST, error),
        Failure::Absent => (StatusCode::NOT_FOUND, error),
        Failure::Internal => (StatusCode::INTERNAL_SERVER_ERROR, error),
        // The page offers Revoke only for listed permissions: a missing one went already.
        Failure::UnknownPermission => (
            StatusCode::CONFLICT,
            "no standing permission has this id (already revoked?)".to_string(),
        ),
        Failure::Refused | Failure::Conflict => (StatusCode::CONFLICT, error),
    }
}

/// Carries out one POSTed action (CSRF and Origin already checked).
pub(crate) async fn act(
    door: &Door,
    path: &str,
    pairs: &[(String, String)],
) -> Result<(), ActError> {
    let req = request(path, pairs)?;
    let daemon = &door.daemon;
    let dir = crate::server::absolute(&daemon.config.state_dir);
    let own = std::process::id();
    let here = daemon.act(req.clone()).await;
    match (&req, here) {
        // Not this daemon's: whichever daemon of the state dir holds it answers.
        (Request::Answer { .. }, Reply::Failed { error, kind }) => {
            let answers = request_all_async(dir, req).await;
            let held = answers.iter().any(|(_, a)| a.as_ref().is_ok_and(Reply::ok));
            if held { Ok(()) } else { Err(refused(error, kind)) }
        }
        (_, Reply::Failed { error, kind }) => Err(refused(error, kind)),
        // The brake stops every daemon of the state dir, as `hands stop` does; the release
        // lifts it everywhere. One that cannot be reached is logged: the brake here holds.
        (Request::Stop { .. } | Request::Release { .. }, _) => {
            let others = match req {
                Request::Stop { .. } => Request::Stop { via: Via::Dashboard, except: Some(own) },
                _ => Request::Release { via: Via::Dashboard, except: Some(own) },
            };
            for (path, answer) in request_all_async(dir, others).await {
                if let Err(e) = answer {
                    tracing::warn!("dashboard: a brake did not reach {}: {e}", path.display());
                }
            }
            Ok(())
        }
        // As `hands approvals revoke --all`: every live daemon's session permissions too.
        (Request::Revoke { standing: Standing::All, .. }, _) => {
            request_all_async(dir, Request::RevokeSessions).await;
            Ok(())
        }
        _ => Ok(()),
    }
}
