//! A desktop notification when an action is parked for a person (issue 36 point 5): a client
//! that cannot ask shows nothing, and the daemon's stderr is usually a log file nobody reads,
//! so where the person has a desktop session the freedesktop notification service (the
//! `org.freedesktop.Notifications` D-Bus interface every Linux desktop serves) shows what waits
//! and how to answer it. Informational only: the notification offers no buttons, since any
//! process of the person's session could send the answer a button would — the answer stays at
//! `hands approvals` and the dashboard.

use std::collections::HashMap;
use std::time::Duration;

/// How long a notification is shown (the server may choose otherwise).
const SHOWN_MS: i32 = 30_000;

/// A whole notification attempt is abandoned after this: a bus that does not answer must not
/// hold anything.
const BOUND: Duration = Duration::from_secs(3);

/// Whether the daemon's environment names a session bus: `DBUS_SESSION_BUS_ADDRESS`, or the
/// `bus` socket in `XDG_RUNTIME_DIR` (systemd's user bus).
fn session_bus() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
        || std::env::var_os("XDG_RUNTIME_DIR")
            .map(std::path::PathBuf::from)
            .is_some_and(|d| d.join("bus").exists())
}

/// Shows "approval needed" for parked action `id` (its description `action`, and `how` a
/// person answers), in the background and bounded in time; nothing happens without a session
/// bus, a notification service, or a tokio runtime.
pub fn tell(id: &str, action: &str, how: &str) {
    if !session_bus() {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
    let summary = format!("hands: approval needed ({id})");
    let body = format!("{}\n{}", escape(action), escape(how));
    rt.spawn(async move {
        match tokio::time::timeout(BOUND, send(&summary, &body)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!("no desktop notification: {e}"),
            Err(_) => tracing::debug!("no desktop notification: the session bus did not answer"),
        }
    });
}

async fn send(summary: &str, body: &str) -> zbus::Result<()> {
    let conn = zbus::Connection::session().await?;
    let actions: Vec<&str> = Vec::new();
    let hints: HashMap<&str, zbus::zvariant::Value<'_>> = HashMap::new();
    conn.call_method(
        Some("org.freedesktop.Notifications"),
        "/org/freedesktop/Notifications",
        Some("org.freedesktop.Notifications"),
        "Notify",
        &("hands", 0u32, "dialog-question", summary, body, actions, hints, SHOWN_MS),
    )
    .await?;
    Ok(())
}

/// The notification body may be read as markup (the `body-markup` capability): `&`, `<` and
/// `>` are escaped so an agent's text cannot format or link anything. The text itself has
/// already gone through `shown` (control and invisible characters escaped).
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    #[test]
    fn markup_is_escaped() {
        assert_eq!(super::escape("<a href=x>&</a>"), "&lt;a href=x&gt;&amp;&lt;/a&gt;");
    }
}
