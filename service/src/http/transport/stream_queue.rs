//! A long-lived stream's outgoing bytes, bounded by a byte budget (as
//! Envoy's `per_connection_buffer_limit_bytes`, and as an xDS server cuts
//! a client that does not keep up).
//!
//! The producer queues whole events; the HTTP body takes them as hyper
//! asks. Unsent bytes are those queued plus those the body handed to the
//! connection that its socket has not taken yet ([`WrittenBytes`]). An
//! event that would take the unsent bytes past the budget while some are
//! still unsent is refused ([`Pushed::OverBudget`]); the producer then
//! [`StreamQueue::cut`]s the stream: what is queued is dropped and one
//! last comment says why. So a stream never holds more than its budget
//! (plus one event, when it was empty) whatever its client does.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;

/// Bytes a connection's socket has taken, from the moment it opened
/// (shared with [`super::idle::Tracked`]).
#[derive(Debug, Clone, Default)]
pub struct WrittenBytes(pub Arc<AtomicU64>);

impl WrittenBytes {
    /// Bytes written so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Closes the connection a request came on, from its handler: for a
/// stream cut off whose client does not take even its last bytes.
#[derive(Debug, Clone, Default)]
pub struct ConnectionCloser(pub Arc<Notify>);

impl ConnectionCloser {
    /// Asks the connection to close now.
    pub fn close(&self) {
        self.0.notify_one();
    }

    /// Resolves once [`Self::close`] was called.
    pub async fn closed(&self) {
        self.0.notified().await;
    }
}

/// What became of an event offered to [`StreamQueue::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Queued.
    Queued,
    /// Not queued: it would leave this many bytes unsent, past the budget.
    OverBudget {
        /// Unsent bytes with the event.
        unsent_bytes: u64,
    },
    /// Not queued: the client is gone, or the stream has ended.
    Closed,
}

#[derive(Debug, Default)]
struct Inner {
    chunks: VecDeque<Bytes>,
    queued_bytes: u64,
    yielded_bytes: u64,
    ended: bool,
    reader_gone: bool,
}

/// One stream's queue.
#[derive(Debug)]
pub struct StreamQueue {
    inner: Mutex<Inner>,
    ready: Notify,
    gone: Notify,
    budget_bytes: u64,
    written: Option<(WrittenBytes, u64)>,
    queued_gauge: Gauge,
}

impl StreamQueue {
    /// A queue of at most `budget_bytes` unsent bytes, over a connection
    /// whose socket's progress is `written` (absent without a socket: then
    /// only the queue counts); `queued_gauge` sums every stream's queue.
    pub fn new(budget_bytes: u64, written: Option<WrittenBytes>, queued_gauge: Gauge) -> Self {
        Self {
            inner: Mutex::default(),
            ready: Notify::new(),
            gone: Notify::new(),
            budget_bytes,
            written: written.map(|w| {
                let base = w.get();
                (w, base)
            }),
            queued_gauge,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn unsent(&self, inner: &Inner) -> u64 {
        let in_flight = self.written.as_ref().map_or(0, |(w, base)| {
            let taken = w.get().saturating_sub(*base);
            inner.yielded_bytes.saturating_sub(taken)
        });
        inner.queued_bytes + in_flight
    }

    /// Queues one event's `chunks`, unless that would go past the budget
    /// while bytes are still unsent.
    pub fn push(&self, chunks: Vec<Bytes>) -> Pushed {
        let mut inner = self.lock();
        if inner.reader_gone || inner.ended {
            return Pushed::Closed;
        }
        let len: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        let unsent = self.unsent(&inner);
        if unsent > 0 && unsent + len > self.budget_bytes {
            return Pushed::OverBudget {
                unsent_bytes: unsent + len,
            };
        }
        inner.chunks.extend(chunks);
        inner.queued_bytes += len;
        drop(inner);
        self.queued_gauge
            .inc_by(i64::try_from(len).unwrap_or(i64::MAX));
        self.ready.notify_one();
        Pushed::Queued
    }

    /// Ends the stream once what is queued is sent.
    pub fn end(&self) {
        self.lock().ended = true;
        self.ready.notify_one();
    }

    /// Drops what is queued and ends the stream after `last` (counted in
    /// no budget).
    pub fn cut(&self, last: Bytes) {
        let mut inner = self.lock();
        let dropped = std::mem::take(&mut inner.queued_bytes);
        inner.chunks.clear();
        inner.chunks.push_back(last);
        inner.ended = true;
        drop(inner);
        self.queued_gauge
            .dec_by(i64::try_from(dropped).unwrap_or(i64::MAX));
        self.ready.notify_one();
    }

    /// Drops what is queued and ends the stream at once.
    pub fn abort(&self) {
        let mut inner = self.lock();
        let dropped = std::mem::take(&mut inner.queued_bytes);
        inner.chunks.clear();
        inner.ended = true;
        drop(inner);
        self.queued_gauge
            .dec_by(i64::try_from(dropped).unwrap_or(i64::MAX));
        self.ready.notify_one();
    }

    /// Whether the client is gone (its body dropped).
    pub fn reader_gone(&self) -> bool {
        self.lock().reader_gone
    }

    /// Resolves once the client is gone (its body dropped: the answer
    /// ended, or the connection closed).
    pub async fn reader_dropped(&self) {
        if !self.reader_gone() {
            self.gone.notified().await;
        }
    }

    /// Bytes queued now.
    pub fn queued_bytes(&self) -> u64 {
        self.lock().queued_bytes
    }

    async fn next(&self) -> Option<Bytes> {
        loop {
            {
                let mut inner = self.lock();
                if let Some(c) = inner.chunks.pop_front() {
                    let len = c.len() as u64;
                    // The last comment of a cut stream was never counted.
                    let counted = len.min(inner.queued_bytes);
                    inner.queued_bytes -= counted;
                    inner.yielded_bytes += len;
                    drop(inner);
                    self.queued_gauge
                        .dec_by(i64::try_from(counted).unwrap_or(i64::MAX));
                    return Some(c);
                }
                if inner.ended {
                    return None;
                }
            }
            // A notification sent while nobody waits is kept for the next
            // wait, so none is lost between the check and here.
            self.ready.notified().await;
        }
    }

    fn drop_reader(&self) {
        let mut inner = self.lock();
        inner.reader_gone = true;
        let dropped = std::mem::take(&mut inner.queued_bytes);
        inner.chunks.clear();
        drop(inner);
        self.queued_gauge
            .dec_by(i64::try_from(dropped).unwrap_or(i64::MAX));
        self.gone.notify_one();
    }
}

/// The reading end; dropping it (the client went away) frees the queue.
struct Reader(Arc<StreamQueue>);

impl Drop for Reader {
    fn drop(&mut self) {
        self.0.drop_reader();
    }
}

/// The HTTP body that sends `queue`'s chunks, one frame each.
pub fn body(queue: Arc<StreamQueue>) -> Body {
    Body::from_stream(futures_util::stream::unfold(
        Reader(queue),
        |r| async move {
            let chunk = r.0.next().await?;
            Some((Ok::<_, Infallible>(chunk), r))
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn event(n: usize) -> Vec<Bytes> {
        vec![Bytes::from(vec![b'x'; n])]
    }

    #[tokio::test]
    async fn a_queue_past_its_budget_refuses_and_a_cut_frees_it() {
        let gauge = Gauge::default();
        let q = Arc::new(StreamQueue::new(100, None, gauge.clone()));
        // One event larger than the budget passes when nothing is unsent.
        assert_eq!(q.push(event(150)), Pushed::Queued);
        assert_eq!(q.push(event(10)), Pushed::OverBudget { unsent_bytes: 160 });
        assert_eq!(gauge.get(), 150);
        q.cut(Bytes::from_static(b": cut\n\n"));
        assert_eq!((q.queued_bytes(), gauge.get()), (0, 0));
        assert_eq!(q.push(event(1)), Pushed::Closed);
        let all = body(q).collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b": cut\n\n");
    }

    #[tokio::test]
    async fn bytes_the_socket_has_not_taken_count_as_unsent() {
        let written = WrittenBytes::default();
        written.0.store(500, Ordering::Relaxed);
        let q = Arc::new(StreamQueue::new(
            100,
            Some(written.clone()),
            Gauge::default(),
        ));
        assert_eq!(q.push(event(60)), Pushed::Queued);
        let mut b = body(q.clone());
        assert_eq!(
            b.frame().await.unwrap().unwrap().into_data().unwrap().len(),
            60
        );
        // Handed to the connection, not yet written: still unsent.
        assert_eq!(q.push(event(60)), Pushed::OverBudget { unsent_bytes: 120 });
        written.0.store(560, Ordering::Relaxed);
        assert_eq!(q.push(event(60)), Pushed::Queued);
        drop(b);
        assert!(q.reader_gone());
        assert_eq!(q.push(event(1)), Pushed::Closed);
    }
}
