//! The dashboard's HTML, server-rendered, every shown string through [`esc`]: the login
//! page, the whole page and its live part (pending approvals, what runs, standing
//! permissions, the audit trail (`trail.rs`), containment). The buttons POST to `actions.rs`.

mod trail;

use crate::control::protocol::{Reply, Request};
use crate::server::Daemon;
use hands_roots::lock;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::Mutex;

/// How many lines of a command's or session's output are shown.
const OUTPUT_LINES: usize = 8;

/// What is slow to compute and changes rarely.
#[derive(Default)]
pub(crate) struct Cache {
    /// The doctor's warnings (computed once: the config does not change while serving).
    warnings: Mutex<Option<Vec<String>>>,
    /// The audit log's length and mtime at its last check, when it ran, and what it said.
    chain: Mutex<Option<(u64, std::time::SystemTime, std::time::Instant, trail::ChainState)>>,
}

/// HTML-escapes text for an element's content or a quoted attribute.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Computes the doctor's warnings once, off the request path (it runs `tmux -V` and `git
/// --version`, each in a sandbox).
pub(crate) async fn warm(daemon: Arc<Daemon>, cache: &Cache, doctor: fn(&Daemon) -> String) {
    let text = tokio::task::spawn_blocking(move || doctor(&daemon))
        .await
        .unwrap_or_else(|e| format!("warning: the doctor could not run ({e})"));
    let warnings =
        text.lines().filter_map(|l| l.strip_prefix("warning: ")).map(str::to_string).collect();
    *lock(&cache.warnings) = Some(warnings);
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn when(secs: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    let s = crate::audit::rfc3339(t);
    // `2026-11-29T22:11:45.000Z` → `2026-11-29 22:11:45Z`
    s.get(..19).map(|p| format!("{}Z", p.replace('T', " "))).unwrap_or(s)
}

fn elapsed(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        s => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

fn hidden(name: &str, value: &str) -> String {
    format!("<input type=\"hidden\" name=\"{}\" value=\"{}\">", esc(name), esc(value))
}

/// A one-button form that POSTs to `action` with the CSRF token and `fields`.
fn button(action: &str, csrf: &str, fields: &[(&str, &str)], label: &str, class: &str) -> String {
    // Relative: the page lives under its session's prefix (`/s/PREFIX/`, see `mod.rs`).
    let action = action.trim_start_matches('/');
    let mut s = format!("<form method=\"post\" action=\"{}\" class=\"inline\">", esc(action));
    s.push_str(&hidden("csrf", csrf));
    for (k, v) in fields {
        s.push_str(&hidden(k, v));
    }
    let _ = write!(
        s,
        "<button type=\"submit\" class=\"{}\">{}</button></form>",
        esc(class),
        esc(label)
    );
    s
}

fn shell(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"/dashboard.css\">\
         <script src=\"/dashboard.js\" defer></script></head><body>{body}</body></html>\n",
        esc(title)
    )
}

/// The login page.
pub(crate) fn login(nonce: &str, error: Option<&str>) -> String {
    let error = error.map(|e| format!("<p class=\"error\">{}</p>", esc(e))).unwrap_or_default();
    shell(
        "hands — log in",
        &format!(
            "<main class=\"login\"><h1>hands</h1><p>The person's dashboard. Log in with the \
             dashboard token (<code>[server.dashboard]</code>'s <code>token_env</code> or \
             <code>token_file</code>).</p>{error}<form method=\"post\" action=\"/login\">{}\
             <label>Token <input type=\"password\" name=\"token\" id=\"token\" \
             autocomplete=\"current-password\" autofocus required></label> \
             <button type=\"submit\" id=\"login\">Log in</button></form></main>",
            hidden("csrf", nonce)
        ),
    )
}

/// A page that says what went wrong with an action, and links back.
pub(crate) fn message(text: &str) -> String {
    shell(
        "hands — dashboard",
        &format!(
            "<main><p class=\"error\" id=\"message\">{}</p><p><a href=\"./\">Back to the \
             dashboard</a></p></main>",
            esc(text)
        ),
    )
}

/// The whole page: the header, then the live part (which the script refreshes).
pub(crate) async fn full(daemon: &Daemon, cache: &Cache, csrf: &str, query: &str) -> String {
    let live = live(daemon, cache, csrf, query).await;
    let header = format!(
        "<header><h1>hands</h1><span class=\"muted\">dashboard of daemon {} · {}</span>{}</header>",
        std::process::id(),
        esc(&daemon.config.source),
        button("/logout", csrf, &[], "Log out", "quiet")
    );
    shell("hands — dashboard", &format!("{header}<main id=\"live\">{live}</main>"))
}

/// The sections that change: what the script fetches from `/live` every two seconds.
pub(crate) async fn live(daemon: &Daemon, cache: &Cache, csrf: &str, query: &str) -> String {
    let mut s = String::new();
    s.push_str(&pending(daemon, csrf).await);
    s.push_str(&running(daemon, csrf).await);
    s.push_str(&permissions(daemon, csrf));
    s.push_str(&trail::audit(daemon, cache, query).await);
    s.push_str(&containment(daemon, cache));
    s
}

/// The parked actions of every daemon of the state dir: this one's, and those the others
/// report over their control sockets (as `hands approvals list` sees them).
async fn all_pending(daemon: &Daemon) -> Vec<crate::gate::approvals::Pending> {
    let mut all = daemon.approvals.pending();
    let dir = crate::server::absolute(&daemon.config.state_dir);
    let own = std::process::id();
    let others = crate::control::client::request_all_async(dir, Request::Approvals).await;
    for (_, answer) in others {
        let Ok(Reply::Pending { pid, pending }) = answer else { continue };
        if pid != own {
            all.extend(pending.into_iter().map(crate::gate::approvals::Pending::from));
        }
    }
    all
}

async fn pending(daemon: &Daemon, csrf: &str) -> String {
    let mut all = all_pending(daemon).await;
    // Oldest first (every action waits the same time, so the earliest expiry was parked
    // first): a newly parked action lands below the ones a person may be reading, never above.
    all.sort_by(|a, b| (a.expires, &a.id).cmp(&(b.expires, &b.id)));
    let mut s = format!(
        "<section id=\"pending\"><h2>Pending approvals <span class=\"count\">{}</span></h2>",
        all.len()
    );
    if all.is_empty() {
        s.push_str("<p class=\"muted\">No action is waiting for a person.</p>");
    }
    let now = now_secs();
    for p in all {
        let a = &p.action;
        let _ = write!(
            s,
            "<article class=\"pending\" id=\"{id}\"><h3><code class=\"tool\">{}</code> \
             <span class=\"muted\">({} class) of {}</span></h3><dl>",
            esc(&crate::shown::shown(&a.tool).text),
            esc(&crate::shown::shown(&a.class).text),
            esc(&crate::shown::shown(&a.module).text),
            id = esc(&p.id)
        );
        // Agent-supplied text: control, escape and bidirectional characters shown escaped
        // (`src/shown.rs`), then HTML-escaped; an action that needed it says so.
        let mut escaped = false;
        let mut row = |k: &str, v: crate::shown::Shown| {
            escaped |= v.escaped;
            let _ = write!(
                s,
                "<dt>{}</dt><dd><code class=\"{}\">{}</code></dd>",
                esc(k),
                esc(&k.replace(' ', "-")),
                esc(&v.text)
            );
        };
        let shown = crate::shown::shown;
        row("client", shown(&a.client));
        // A widening (`needs`) is shown plainly, one row a grant (each path with the identity
        // the run gets), so no item's boundaries are lost.
        let widening = a.widens();
        if let Some(needs) = a.arguments.get("needs").filter(|_| widening) {
            for (k, v) in crate::gate::approvals::widening_rows(needs) {
                row(&format!("needs.{k}"), shown(&v));
            }
        }
        for (key, v) in a.argument_rows() {
            row(key, v);
        }
        if escaped {
            let _ = write!(
                s,
                "<dt>note</dt><dd class=\"warn escaped\">{}</dd>",
                esc(crate::shown::NOTE)
            );
        }
        let left = p.expires.saturating_sub(now);
        let _ = write!(
            s,
            "<dt>time left</dt><dd><span class=\"left\" data-expires=\"{}\">{}</span></dd></dl>",
            p.expires,
            esc(&elapsed(left))
        );
        if a.confirm {
            s.push_str(
                "<p class=\"warn\">once only: a yes allows this one run only (a confirm-listed \
                 program, or a connection whose command is unknown).</p>",
            );
        }
        let _ = write!(
            s,
            "<form method=\"post\" action=\"approve\" class=\"choices\">{}{}",
            hidden("csrf", csrf),
            hidden("id", &p.id)
        );
        // A 2026-07-28 client has no session: the choice says what it means (SPEC §6).
        let session = a.session_choice();
        if widening && !a.confirm {
            let _ = write!(
                s,
                "<p class=\"warn\">a one-run widening (<code>needs</code>): a yes allows it \
                 once or {}, never always.</p>",
                if a.until_restart {
                    "for this client until the daemon restarts"
                } else {
                    "for this session"
                }
            );
        }
        // What the gate would not honour is not offered: a confirm-listed program is allowed
        // once only, a widening once or for the session (SPEC §6).
        let choices: &[(&str, &str, &str)] = if a.confirm {
            &[("once", "Allow once", "allow"), ("reject", "Reject", "reject")]
        } else if widening {
            &[
                ("once", "Allow once", "allow"),
                ("session", session, "allow"),
                ("reject", "Reject", "reject"),
            ]
        } else {
            &[
                ("once", "Allow once", "allow"),
                ("session", session, "allow"),
                ("always", "Always for this client", "allow"),
                ("reject", "Reject", "reject"),
            ]
        };
        for (value, label, class) in choices {
            let _ = write!(
                s,
                "<button type=\"submit\" name=\"choice\" value=\"{value}\" class=\"{class}\">{label}</button>"
            );
        }
        s.push_str("</form></article>");
    }
    s.push_str("</section>");
    s
}

/// The last `n` lines of a text.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

async fn running(daemon: &Daemon, csrf: &str) -> String {
    let mut s = String::from("<section id=\"running\"><h2>Running now</h2>");
    if daemon.is_stopped() {
        let _ = write!(
            s,
            "<p class=\"brake on\" id=\"brake\">Stopped: <code>hands stop</code> is in effect; \
             commands and sessions are refused. {}</p>",
            button("/release", csrf, &[], "Release the brake", "allow")
        );
    } else {
        let _ = write!(
            s,
            "<p class=\"brake\" id=\"brake\">{} <span class=\"muted\">ends every command and \
             session of every daemon of this state dir and refuses new ones until released \
             (<code>hands stop</code>)</span></p>",
            button("/brake", csrf, &[], "Stop everything", "reject")
        );
    }
    let Some(sh) = daemon.shell() else {
        s.push_str("<p class=\"muted\">tools-shell does not run here.</p></section>");
        return s;
    };
    let now = now_secs();
    s.push_str(
        "<table><thead><tr><th>kind</th><th>client</th><th>command</th><th>started</th>\
         <th>elapsed</th><th>last output</th><th></th></tr></thead><tbody>",
    );
    let mut rows = 0;
    for c in sh.running() {
        rows += 1;
        let id = c.id.to_string();
        let _ = write!(
            s,
            "<tr class=\"command\" id=\"c-{id}\"><td>command</td><td>{}</td><td><code class=\"cmd\">{}</code></td>\
             <td>{}</td><td>{}</td><td><pre>{}</pre></td><td>{}</td></tr>",
            esc(&c.client),
            esc(&crate::shown::shown(&c.command).text),
            esc(&when(c.started)),
            esc(&elapsed(now.saturating_sub(c.started))),
            esc(&last_lines(&c.output, OUTPUT_LINES)),
            button("/stop-command", csrf, &[("id", &id)], "Stop", "reject")
        );
    }
    // The person sees every session, whoever started it.
    let sessions = sh.tmux_list(hands_shell::tmux::ListParams {}, None).await.map(|l| l.sessions);
    for t in sessions.unwrap_or_default() {
        rows += 1;
        let running = t.facts.state == hands_shell::tmux::State::Running;
        let out = sh
            .tmux_read(
                hands_shell::tmux::ReadParams {
                    session: t.name.clone(),
                    lines: Some(OUTPUT_LINES as u32),
                    since: None,
                },
                None,
            )
            .await
            .map(|r| r.text)
            .unwrap_or_default();
        let _ = write!(
            s,
            "<tr class=\"tmux\" id=\"t-{name}\"><td>tmux <code>{name}</code>{}</td><td>{}</td>\
             <td><code class=\"cmd\">{}</code></td><td>{}</td><td>{}</td><td><pre>{}</pre></td>\
             <td>{}</td></tr>",
            if running { "" } else { " (ended)" },
            esc(&sh.tmux_client_of(&t.name).unwrap_or_else(|| "—".into())),
            esc(&crate::shown::shown(&t.facts.command).text),
            esc(&when(t.facts.started)),
            esc(&elapsed(now.saturating_sub(t.facts.started))),
            esc(&last_lines(&out, OUTPUT_LINES)),
            button("/stop-session", csrf, &[("session", &t.name)], "Stop", "reject"),
            name = esc(&t.name)
        );
    }
    if rows == 0 {
        s.push_str("<tr><td colspan=\"7\" class=\"muted\">Nothing runs.</td></tr>");
    }
    s.push_str("</tbody></table></section>");
    s
}

fn permissions(daemon: &Daemon, csrf: &str) -> String {
    let path = crate::server::absolute(&daemon.config.state_dir).join("approvals.json");
    let mut s = String::from("<section id=\"permissions\"><h2>Standing permissions</h2>");
    match crate::gate::approvals::read_always(&path) {
        Ok(all) if all.is_empty() => {
            s.push_str("<p class=\"muted\">No <em>always</em> permission is recorded.</p>");
        }
        Ok(all) => {
            s.push_str(
                "<table><thead><tr><th>id</th><th>client</th><th>module</th><th>tool</th>\
                 <th>hands version</th><th>granted</th><th></th></tr></thead><tbody>",
            );
            for p in &all {
                let _ = write!(
                    s,
                    "<tr class=\"permission\" id=\"{id}\"><td><code>{id}</code></td><td>{}</td><td>{}</td>\
                     <td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&p.client),
                    esc(&p.module),
                    esc(&p.tool),
                    esc(&p.version),
                    esc(&when(p.granted)),
                    button("/revoke", csrf, &[("id", &p.id)], "Revoke", "reject"),
                    id = esc(&p.id)
                );
            }
            s.push_str("</tbody></table>");
        }
        Err(e) => {
            let _ = write!(s, "<p class=\"error\">{}</p>", esc(&format!("{e:#}")));
        }
    }
    let _ = write!(
        s,
        "<p>{} <span class=\"muted\">every <em>always</em> permission, and every client's \
         <em>session</em> permissions</span></p></section>",
        button("/revoke-all", csrf, &[], "Revoke all", "reject")
    );
    s
}

fn containment(daemon: &Daemon, cache: &Cache) -> String {
    let mut s = String::from("<section id=\"containment\"><h2>Containment</h2>");
    match daemon.self_test_now() {
        Some(None) => s.push_str("<p class=\"muted\">The sandbox self-test is running…</p>"),
        Some(Some(p)) => {
            let _ = write!(
                s,
                "<p>Sandbox self-test: <strong>{}</strong> (<code>sandbox.mode = \"{}\"</code>)</p>\
                 <table><thead><tr><th>guarantee</th><th>mechanism</th><th>holds</th></tr></thead><tbody>",
                esc(&p.tier()),
                match daemon.config.sandbox_mode {
                    crate::config::SandboxMode::Enforce => "enforce",
                    crate::config::SandboxMode::BestEffort => "best-effort",
                }
            );
            for c in &p.checks {
                let (class, state) = match c.holds {
                    Some(true) => ("ok", "holds"),
                    Some(false) => ("broken", "MISSING"),
                    None => ("muted", "not tested"),
                };
                let _ = write!(
                    s,
                    "<tr><td>{}</td><td>{}</td><td class=\"{class}\">{state}</td></tr>",
                    esc(c.name),
                    esc(&c.note)
                );
            }
            s.push_str("</tbody></table>");
        }
        None => s.push_str("<p class=\"muted\">No module runs commands: nothing to contain.</p>"),
    }
    match lock(&cache.warnings).as_ref() {
        None => s.push_str("<p class=\"muted\">The doctor's warnings are being computed…</p>"),
        Some(w) if w.is_empty() => s.push_str("<p class=\"ok\">Doctor: no warnings.</p>"),
        Some(w) => {
            s.push_str("<ul class=\"warnings\">");
            for x in w {
                let _ = write!(s, "<li>{}</li>", esc(x));
            }
            s.push_str("</ul>");
        }
    }
    s.push_str("</section>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            esc("<img src=x onerror=alert(1)> & \"q\" 'a'"),
            "&lt;img src=x onerror=alert(1)&gt; &amp; &quot;q&quot; &#39;a&#39;"
        );
        // An attribute value cannot be closed early.
        assert_eq!(
            hidden("id", "a\"><script>"),
            "<input type=\"hidden\" name=\"id\" value=\"a&quot;&gt;&lt;script&gt;\">"
        );
    }

    #[test]
    fn times_and_tails_read_plainly() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(elapsed(59), "59 s");
        assert_eq!(elapsed(61), "1 min 1 s");
        assert_eq!(when(0), "1970-01-01 00:00:00Z");
    }
}
