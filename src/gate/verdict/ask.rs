//! `ask`: a standing permission, else a person — through the client when it declared form
//! elicitation (a 2026-07-28 input-required round trip, or a 2025-era elicitation), else on the
//! dashboard (a URL-only client is pointed at the entry) or at a terminal. Anything but an
//! explicit allow refuses. *Session* permissions are held here: by the connection, or for a
//! 2026-07-28 client (which has no session) by the daemon, for that client until it restarts.

use super::{ASK_REMEDY, Refusal, Verdict};
use crate::audit::DecidedBy;
use crate::gate::approvals::{Action, Asked, Channel, Choice, Reach};
use crate::gate::{Asker, Call, Retry, lock};
use rmcp::RoleServer;
use rmcp::service::RequestContext;

/// The most of a call's arguments (as JSON) a person is asked about: about a thousand lines,
/// more than anyone reads in a question. Found by the eighth attack pass: 3.5 MiB `bash`
/// commands, parked and dropped, made every dashboard render 29 MB an action (323 MB, 13 s and
/// 1.8 GB of the daemon's memory at 15) and `hands approvals list` fail for every client.
pub const MAX_SHOWN: usize = 64 * 1024;

/// A refusal for a call too long to put before a person: nobody could read what they allow.
fn too_long_to_show(call: &Call<'_>) -> Option<Verdict> {
    let len = call.arguments.to_string().len();
    if len <= MAX_SHOWN {
        return None;
    }
    let remedy = "put the long part in a file (the `write` tool) and name the file in a short \
                  call, or a person allows the class without asking (trust in daemon.toml)";
    let message = format!(
        "`{}`'s arguments are {len} bytes, over the {MAX_SHOWN} a person is shown when asked: \
         nobody can read that in a question, so it is not asked; {remedy}",
        call.tool
    );
    let denial = crate::errors::Denial::new(call.tool, "gate", "too long to ask about", remedy);
    Some(Verdict::Deny { by: DecidedBy::Policy, why: Refusal { denial, message } })
}

/// Asks for the call (see the module's documentation). `call.confirm` (a confirm-listed argv):
/// no standing permission is consulted, and any allow counts as *once* — the answer grants no
/// session or always permission, so the next confirm-listed run asks again.
pub(super) async fn ask_person(
    asker: &Asker<'_>,
    call: &Call<'_>,
    retry: Retry,
    ctx: &RequestContext<RoleServer>,
) -> Verdict {
    let approvals = asker.approvals;
    let confirm = call.confirm;
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
    let action = Action {
        client: asker.client.to_string(),
        module: call.module.name().to_string(),
        tool: call.tool.to_string(),
        class: call.class.to_string(),
        arguments: call.arguments.clone(),
        confirm,
        // A 2026-07-28 client has no session: *for this session* means this client until the
        // daemon restarts, and the person is offered it in those words (SPEC §6).
        until_restart: modern,
    };
    // A one-run expansion (`needs`, SPEC §6): never *always*; a *session* yes covers this
    // exact widening only (its own key), and no standing permission of the plain tool covers it.
    let widening = call.widens();
    let session_tool = match call.arguments.get("needs").filter(|_| widening) {
        Some(n) => format!("{} needs {n}", action.tool),
        None => action.tool.clone(),
    };
    let key = (action.module.clone(), session_tool, approvals.epoch());
    // A 2026-07-28 client's *session* permissions live on the daemon, by client, for as long as
    // it runs: what the person was offered (a stateless HTTP call builds a fresh handler each
    // time, and no connection of that era is a session).
    let until_restart = action.until_restart;
    let stateless_key = (asker.client.to_string(), key.0.clone(), key.1.clone(), key.2);
    let in_session = if until_restart {
        lock(asker.stateless_sessions).contains(&stateless_key)
    } else {
        lock(asker.session).contains(&key)
    };
    if !confirm && (in_session || (!widening && approvals.always_allows(&action))) {
        return Verdict::Allow { by: DecidedBy::StandingPermission };
    }
    if let Some(refused) = too_long_to_show(call) {
        return refused;
    }
    // The channel follows what the client declared (SPEC §6), read per request: a 2026-07-28
    // client's `_meta` capabilities, a 2025-era client's `initialize`. Nothing is sent for a
    // capability it did not declare.
    // A runner's agent under `approvals = "local"` (SPEC §13): parked, whatever it declared.
    let reach = if asker.asks_client {
        Reach::of(ctx.client_capabilities().as_ref())
    } else {
        Reach::Nobody
    };
    // A call that no longer waits (cancelled, its client gone) takes its question back: the
    // parked action leaves the list as the asking is dropped (the eighth attack pass: dropped
    // calls stayed parked, and a person approved what nobody waited for).
    let asking = async {
        let mut asked = match (&retry.state, modern, reach) {
            (Some(state), true, _) => approvals.redeem(&action, state, retry.responses.as_ref()),
            (None, true, Reach::Form) => match approvals.input_required(&action) {
                Ok(r) => Asked::InputRequired(r),
                Err(e) => Asked::Refused(e.to_string(), None),
            },
            // The action is parked and the client asked to open its dashboard entry; the retry
            // waits for the person there. Without a dashboard the call itself waits.
            (None, true, Reach::Url) => match approvals.input_required_url(&action) {
                Some(Ok(r)) => Asked::InputRequired(r),
                Some(Err(e)) => Asked::Refused(e.to_string(), None),
                None => park_telling(approvals, &action, ctx).await,
            },
            (_, false, Reach::Form) => approvals.elicit(&action, &ctx.peer).await,
            // A 2025-era client that can only open a URL is sent the action's entry on the
            // dashboard, where the person decides; the answer to the URL request decides nothing.
            (_, false, Reach::Url) => {
                let peer = ctx.peer.clone();
                let timeout =
                    std::time::Duration::from_secs(asker.config.trust.approval_timeout_secs.max(1));
                approvals
                    .park_then(&action, |id| {
                        let Some(url) = approvals.dashboard_entry(id) else { return };
                        let params = crate::gate::approvals::url_params(&action, url, id);
                        tokio::spawn(async move {
                            let _ =
                                peer.create_elicitation_with_timeout(params, Some(timeout)).await;
                        });
                    })
                    .await
            }
            // Nobody to ask through the client, in either era: a person at `hands approvals` or on
            // the dashboard.
            (_, _, Reach::Nobody) => park_telling(approvals, &action, ctx).await,
        };
        if let Asked::Parked(id) = &asked {
            asked = approvals.await_parked(id).await;
        }
        asked
    };
    let asked = tokio::select! {
        asked = asking => asked,
        () = asker.waits.cancelled() => Asked::Refused(
            "the call was cancelled, or its client went, while it waited for a person; the \
             question was taken back"
                .to_string(),
            None,
        ),
    };
    let by = |c: Channel| match c {
        Channel::Client => DecidedBy::PersonViaClient,
        Channel::Terminal => DecidedBy::PersonViaTerminal,
        Channel::Dashboard => DecidedBy::PersonViaDashboard,
    };
    match asked {
        Asked::Parked(id) => Verdict::Deny {
            by: DecidedBy::Policy,
            why: Refusal {
                denial: crate::errors::Denial::new(call.tool, "gate", "not answered", ASK_REMEDY),
                message: format!("approval {id} was not answered"),
            },
        },
        Asked::InputRequired(r) => Verdict::Ask(r),
        Asked::Allowed(choice, channel) => {
            let choice = match choice {
                _ if confirm => Choice::Once,
                // Offered nowhere for an expansion; an `always` answered anyway counts once.
                Choice::Always if widening => Choice::Once,
                c => c,
            };
            match choice {
                Choice::Once => {}
                Choice::Session if until_restart => {
                    lock(asker.stateless_sessions).insert(stateless_key);
                }
                Choice::Session => {
                    lock(asker.session).insert(key);
                }
                Choice::Always => {
                    if let Err(e) = approvals.grant_always(&action) {
                        tracing::error!("cannot record an always permission: {e:#}");
                    }
                }
            }
            Verdict::Allow { by: by(channel) }
        }
        Asked::Refused(why, channel) => {
            let layer = if confirm { "gate (commands.confirm)" } else { "gate" };
            let denial = crate::errors::Denial::new(call.tool, layer, &why, ASK_REMEDY);
            let message = if confirm {
                format!(
                    "`{}` was not approved: {why}. commands.confirm lists this program: each run \
                     needs a person's yes, whatever trust says",
                    call.tool
                )
            } else {
                format!(
                    "`{}` was not approved: {why}. trust.{} = \"ask\" for {}: it runs only when \
                     a person allows it",
                    call.tool,
                    call.class,
                    call.module.name()
                )
            };
            // Nobody answered: the gate's own rule refused (it fails closed).
            Verdict::Deny {
                by: channel.map_or(DecidedBy::Policy, by),
                why: Refusal { message, denial },
            }
        }
    }
}

/// How often a parked call tells its client it still waits.
const PARKED_PROGRESS: std::time::Duration = std::time::Duration::from_secs(2);

/// Parks the action for a person at a terminal or the dashboard; while it waits, a client that
/// sent a progress token gets a progress notification every [`PARKED_PROGRESS`] naming the
/// action's id and how a person answers it — a client that cannot ask still shows something,
/// where before it showed nothing and only the daemon's stderr said why the call hung.
async fn park_telling(
    approvals: &crate::gate::approvals::Approvals,
    action: &Action,
    ctx: &RequestContext<RoleServer>,
) -> Asked {
    let Some(token) = ctx.meta.get_progress_token() else {
        return approvals.park(action).await;
    };
    let done = tokio_util::sync::CancellationToken::new();
    let _stop = done.clone().drop_guard();
    let peer = ctx.peer.clone();
    let timeout = approvals.timeout().as_secs();
    approvals
        .park_then(action, |id| {
            let how = approvals.how_to_answer(id);
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                loop {
                    let waited = started.elapsed().as_secs();
                    let message = format!("waiting for a person ({waited} of {timeout} s): {how}",);
                    let note =
                        rmcp::model::ProgressNotificationParam::new(token.clone(), waited as f64)
                            .with_total(timeout as f64)
                            .with_message(message);
                    // A client that cannot take a notification still gets its answer.
                    let _ = peer.notify_progress(note).await;
                    tokio::select! {
                        () = done.cancelled() => return,
                        () = tokio::time::sleep(PARKED_PROGRESS) => {}
                    }
                }
            });
        })
        .await
}
