//! Idle detection for one connection: an I/O wrapper that records when a
//! byte was last read or written (and how many were written), and a future
//! that resolves once none has moved for a given time.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::stream_queue::WrittenBytes;

/// `inner` with its last read or write recorded (ms since `opened`).
#[derive(Debug)]
pub struct Tracked<T> {
    inner: T,
    opened: Instant,
    last_ms: Arc<AtomicU64>,
    written: WrittenBytes,
}

/// The idle side of a [`Tracked`] stream.
#[derive(Debug, Clone)]
pub struct IdleWatch {
    opened: Instant,
    last_ms: Arc<AtomicU64>,
    written: WrittenBytes,
}

/// Wrap `inner`; the returned watch observes its traffic.
pub fn track<T>(inner: T) -> (Tracked<T>, IdleWatch) {
    let opened = Instant::now();
    let last_ms = Arc::new(AtomicU64::new(0));
    let written = WrittenBytes::default();
    let watch = IdleWatch {
        opened,
        last_ms: last_ms.clone(),
        written: written.clone(),
    };
    (
        Tracked {
            inner,
            opened,
            last_ms,
            written,
        },
        watch,
    )
}

impl<T> Tracked<T> {
    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }
}

impl IdleWatch {
    /// The count of bytes the stream has written.
    pub fn written(&self) -> WrittenBytes {
        self.written.clone()
    }

    /// Resolves once no byte has been read or written for `timeout`.
    pub async fn idle_for(self, timeout: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = self.opened + last + timeout;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let out = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.touch();
        }
        out
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let out = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = out
            && n > 0
        {
            self.touch();
            self.written.0.fetch_add(n as u64, Ordering::Relaxed);
        }
        out
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let out = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = out
            && n > 0
        {
            self.touch();
            self.written.0.fetch_add(n as u64, Ordering::Relaxed);
        }
        out
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
