//! Who waits for a command or a tmux wait: the client it runs for, what cancels it, and where
//! its progress goes. Nothing here knows MCP: the daemon translates a request's context into a
//! [`Caller`] (its cancellation tokens, a [`Progress`] sink, the client's name).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use tokio_util::sync::CancellationToken;

/// Where progress of a long command or wait goes, once a second.
pub trait Progress: Send + Sync {
    /// `secs` seconds have passed; `message` says what happened so far, for a person.
    fn notify(&self, secs: f64, message: String) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// While a command runs with the network proxy, what lets the daemon put the command's network
/// questions to this caller's client, given the command's proxy token; the guard it returns
/// ends that when the call ends. `None`: this caller cannot be asked.
pub type Asks = Box<dyn Fn(&str) -> Option<Box<dyn Send>> + Send + Sync>;

/// Who waits for a command: the client it runs for, what cancels it, where progress goes.
pub struct Caller {
    /// The client's name as the dashboard shows it (`terminal` for a person's `hands exec`).
    pub client: String,
    /// Any of these cancelled ends the wait: the request's own token, its connection's,
    /// its HTTP call's (the daemon decides which there are).
    cancel: Vec<CancellationToken>,
    progress: Option<Box<dyn Progress>>,
    asks: Option<Asks>,
}

impl Caller {
    /// A caller named `client`, cancelled by `cancel`; no progress.
    pub fn new(client: impl Into<String>, cancel: CancellationToken) -> Caller {
        Caller { client: client.into(), cancel: vec![cancel], progress: None, asks: None }
    }

    /// A person's `hands exec`: cancelled when the terminal goes away; no progress.
    pub fn terminal(cancel: CancellationToken) -> Caller {
        Caller::new("terminal", cancel)
    }

    /// Also cancelled by `token`.
    pub fn cancelled_by(mut self, token: CancellationToken) -> Caller {
        self.cancel.push(token);
        self
    }

    /// Progress goes to `sink`.
    pub fn with_progress(mut self, sink: Box<dyn Progress>) -> Caller {
        self.progress = Some(sink);
        self
    }

    /// The client may be asked about a command's connections while the call waits.
    pub fn with_asks(mut self, asks: Asks) -> Caller {
        self.asks = Some(asks);
        self
    }

    /// Makes the command holding proxy `token` ask this caller's client, while the guard lives.
    pub(crate) fn asks_for(&self, token: &str) -> Option<Box<dyn Send>> {
        self.asks.as_ref().and_then(|a| a(token))
    }

    /// Resolves once the command's caller no longer waits for it.
    pub async fn cancelled(&self) {
        let mut waits: Vec<_> = self.cancel.iter().map(|t| Box::pin(t.cancelled())).collect();
        std::future::poll_fn(|cx| {
            if waits.iter_mut().any(|w| w.as_mut().poll(cx).is_ready()) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Tells the caller how far it has come, when it asked to know.
    pub(crate) async fn progress(&self, secs: f64, message: impl FnOnce() -> String) {
        if let Some(p) = &self.progress {
            p.notify(secs, message()).await;
        }
    }

    /// Whether the caller asked for progress.
    pub(crate) fn wants_progress(&self) -> bool {
        self.progress.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn any_of_its_tokens_cancels_a_caller() {
        let (a, b) = (CancellationToken::new(), CancellationToken::new());
        let c = Caller::new("ci-bot", a.clone()).cancelled_by(b.clone());
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), c.cancelled());
        assert!(waiting.await.is_err(), "nothing was cancelled yet");
        b.cancel();
        let waited = tokio::time::timeout(std::time::Duration::from_secs(5), c.cancelled());
        assert!(waited.await.is_ok(), "the second token cancels it");
        assert!(!a.is_cancelled());
    }
}
