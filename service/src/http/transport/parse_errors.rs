//! JSON bodies for the answers hyper writes itself: a request it cannot
//! parse (400) or whose head is too large (431) is answered by hyper's own
//! HTTP/1 state machine, before any service runs, as a bare head with
//! `content-length: 0`, and the connection is closed. This I/O wrapper
//! recognises exactly that head on the way out and writes instead the same
//! status with the service's error shape, `{"error": {"code", "message"}}`,
//! so that every error a client reads has one shape. The service's own
//! answers always carry a body, so none of them is ever matched.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The heads hyper writes on a parse failure, and what is written instead.
const REWRITES: [(&[u8], &str, &str); 2] = [
    (
        b"HTTP/1.1 400 Bad Request\r\n",
        "malformed_request",
        "the request line or headers are not valid HTTP/1.1",
    ),
    (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
        "headers_too_large",
        "the request head is over 408 KiB (417 792 bytes) or has more than 100 headers",
    ),
];

/// The JSON answer replacing `head` when it is one of hyper's own
/// parse-error heads (`content-length: 0`), else `None`.
pub fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    let (status, code, message) = REWRITES.iter().find(|(s, _, _)| head.starts_with(s))?;
    let text = std::str::from_utf8(head).ok()?;
    if !text.ends_with("\r\n\r\n") || !text.contains("\r\ncontent-length: 0\r\n") {
        return None;
    }
    let body = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    let date = text
        .split("\r\n")
        .find(|l| l.starts_with("date: "))
        .map_or(String::new(), |l| format!("{l}\r\n"));
    let mut out = Vec::with_capacity(status.len() + 128 + body.len());
    out.extend_from_slice(status);
    out.extend_from_slice(
        format!(
            "connection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{date}\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    Some(out)
}

/// `inner`, with hyper's bare parse-error heads written as JSON answers.
#[derive(Debug)]
pub struct JsonParseErrors<T> {
    inner: T,
    /// A replacement being written: its bytes, how many are out, and the
    /// length of hyper's write it stands for.
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<T> JsonParseErrors<T> {
    /// Wrap `inner`.
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            pending: None,
        }
    }
}

impl<T: AsyncWrite + Unpin> JsonParseErrors<T> {
    /// Writes the pending replacement; `Ok(n)` (hyper's write length) once
    /// it is all out.
    fn drive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((bytes, done, stands_for)) = &mut self.pending {
            if *done == bytes.len() {
                let n = *stands_for;
                self.pending = None;
                return Poll::Ready(Ok(n));
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *done += n,
                other => return other,
            }
        }
        Poll::Ready(Ok(0))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonParseErrors<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_none() {
            match rewrite(buf) {
                Some(bytes) => self.pending = Some((bytes, 0, buf.len())),
                None => return Pin::new(&mut self.inner).poll_write(cx, buf),
            }
        }
        self.drive(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_none() {
            let first = bufs.iter().find(|b| !b.is_empty());
            let total: usize = bufs.iter().map(|b| b.len()).sum();
            match first.filter(|b| b.len() == total).and_then(|b| rewrite(b)) {
                Some(bytes) => self.pending = Some((bytes, 0, total)),
                None => return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs),
            }
        }
        self.drive(cx)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bare_error_heads_are_rewritten() {
        let hyper_431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Wed, 02 Dec 2026 05:04:21 GMT\r\n\r\n";
        let out = String::from_utf8(rewrite(hyper_431).unwrap()).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(head.contains("content-type: application/json") && head.contains("date: Wed"));
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "headers_too_large");
        // The service's own 400 has a body: left alone.
        let own = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 80\r\n\r\n";
        assert!(rewrite(own).is_none());
        assert!(rewrite(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_none());
    }
}
