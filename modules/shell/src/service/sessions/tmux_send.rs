//! `tmux_send`: text typed into a session's pane, after the secret files that appeared since
//! it started are masked in its sandbox (`remask`), and what the pane printed after it waited
//! for.

use super::wait;
use crate::service::Shell;
use crate::tmux::{self, SendOutput};
use crate::{Caller, ShellError};
use std::time::{Duration, Instant};

impl Shell {
    /// `tmux_send`.
    pub async fn tmux_send(
        &self,
        p: tmux::SendParams,
        caller: Caller,
    ) -> Result<SendOutput, ShellError> {
        let timeout = tmux::wait_secs(p.timeout_secs)?;
        let until = match &p.wait {
            Some(c) => Some(c.check("wait", timeout)?),
            None => None,
        };
        self.refuse_when_unsafe()?;
        let chars = p.text.chars().count();
        if chars > tmux::MAX_SEND_CHARS {
            return Err(ShellError::Failed(format!(
                "text is {chars} characters; tmux_send types at most {} per call — send it in \
                 parts",
                tmux::MAX_SEND_CHARS
            )));
        }
        let mut m = self.live_session(&p.session, Some(&caller.client))?;
        // A secret file created since the session started is hidden from it before anything is
        // typed that could read it.
        self.remask(&mut m).await?;
        if until.is_some() && !m.log {
            return Err(ShellError::Failed(format!(
                "tmux session {:?} was started by an older hands, which kept no output log, so \
                 `wait` cannot be used; send without it and tmux_read, or start it again",
                m.called()
            )));
        }
        // `hands stop` may have come during the walk: nothing is typed under the brake.
        self.refuse_when_braked()?;
        let enter = p.enter.unwrap_or(true);
        let sent_at = self.cursor(&m);
        // `waited_ms` counts from the typing.
        let begun = Instant::now();
        let argv = tmux::send_argv(&self.tmux.socket(&m.name), &m.name, &p.text, enter);
        self.tmux_client(&m.name, argv, &m.cwd).await?;
        let mut out = SendOutput {
            session: p.session.clone(),
            sent_chars: chars,
            enter,
            containment: self.containment(),
            text: String::new(),
            truncated: false,
            ready: None,
            timed_out: false,
            ended: false,
            exit_status: None,
            waited_ms: 0,
            sent_at,
            cursor: sent_at,
            denied: Vec::new(),
        };
        if let Some(u) = &until {
            let w = self
                .wait_for(&m, u, sent_at, Some(&p.text), Duration::from_secs(timeout), &caller)
                .await?;
            out.ready = Some(w.outcome == wait::Outcome::Held);
            out.timed_out = w.outcome == wait::Outcome::TimedOut;
            out.ended = w.ended;
            out.exit_status = w.exit_status;
            out.waited_ms = begun.elapsed().as_millis() as u64;
            out.text = w.text;
            out.truncated = w.truncated;
            out.cursor = w.cursor;
        }
        out.denied = self.session_denied(&m.name);
        Ok(out)
    }
}
