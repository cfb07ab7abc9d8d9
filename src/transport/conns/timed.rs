//! A request's body under a deadline (decision 0057): it must be complete within
//! [`BODY_TIMEOUT`] plus a second per [`BODY_RATE`] bytes received, or its connection answers
//! `408` ([`late`]) and closes. Every listener's handler reads its bodies through [`Timed`].

use super::{BODY_RATE, BODY_TIMEOUT, Boxed, closing};
use bytes::Bytes;
use http::{Response, StatusCode};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

/// Why a request's body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body came slower than [`BODY_TIMEOUT`] and [`BODY_RATE`] allow; the connection
    /// answers 408 and closes, whatever the handler makes of this.
    #[error("the request body did not arrive in time")]
    Late,
    /// The connection failed or the client closed it mid-body.
    #[error("reading the request body: {0}")]
    Read(#[from] hyper::Error),
}

/// A request's body, cut when it comes too slowly: it must be complete within
/// [`BODY_TIMEOUT`] plus a second per [`BODY_RATE`] bytes received since the head.
pub struct Timed {
    inner: Incoming,
    /// Its connection's mark: set when the body is late, so the answer is a 408.
    late: Arc<AtomicBool>,
    start: tokio::time::Instant,
    received: u64,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Timed {
    pub(super) fn new(inner: Incoming, late: Arc<AtomicBool>) -> Timed {
        Timed { inner, late, start: tokio::time::Instant::now(), received: 0, timer: None }
    }

    fn deadline(&self) -> tokio::time::Instant {
        self.start + allowed(self.received)
    }
}

/// How long a body may take once `received` bytes of it have come.
fn allowed(received: u64) -> Duration {
    BODY_TIMEOUT + Duration::from_millis(received.saturating_mul(1000) / BODY_RATE)
}

impl Body for Timed {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.late.load(Ordering::SeqCst) {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, |d| d.len());
                this.received = this.received.saturating_add(n as u64);
                let deadline = this.deadline();
                if let Some(timer) = &mut this.timer {
                    timer.as_mut().reset(deadline);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(BodyError::Read(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let deadline = this.deadline();
                let timer =
                    this.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.late.store(true, Ordering::SeqCst);
                        Poll::Ready(Some(Err(BodyError::Late)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The answer to a request whose body came too slowly.
pub(super) fn late() -> Response<Boxed> {
    closing(
        StatusCode::REQUEST_TIMEOUT,
        &format!(
            "hands: the request body did not arrive in time ({} s, and a second more for every \
             {} KiB); send the body with the head, at once",
            BODY_TIMEOUT.as_secs(),
            BODY_RATE / 1024
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_gets_ten_seconds_and_a_second_per_64_kib() {
        assert_eq!(allowed(0), Duration::from_secs(10));
        assert_eq!(allowed(64 * 1024), Duration::from_secs(11));
        assert_eq!(allowed(4 * 1024 * 1024), Duration::from_secs(74));
        assert_eq!(allowed(u64::MAX), BODY_TIMEOUT + Duration::from_millis(u64::MAX / BODY_RATE));
    }
}
