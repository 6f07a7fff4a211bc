//! Posting snapshot batches to the scoring service.

use std::time::Duration;

use scorer_core::telemetry::TelemetryBatch;
use serde::Deserialize;

/// Longest response body kept in a [`ReportError::Rejected`], bytes.
const MAX_ERROR_BODY_BYTES: usize = 512;

/// A batch that was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The request could not be sent or the response not read (connection
    /// refused, timeout, ...).
    #[error("POST failed: {0}")]
    Http(#[from] reqwest::Error),
    /// The service answered with a non-success status (e.g. 422 with a JSON
    /// error body, truncated to 512 bytes).
    #[error("service rejected the batch: HTTP {status}: {body}")]
    Rejected {
        /// The HTTP status code.
        status: u16,
        /// The start of the response body.
        body: String,
    },
}

#[derive(Deserialize)]
struct Accepted {
    accepted: usize,
}

/// An HTTP client bound to the service's telemetry endpoint.
#[derive(Debug, Clone)]
pub struct Reporter {
    client: reqwest::Client,
    url: reqwest::Url,
}

impl Reporter {
    /// A reporter posting to `url` (the full `/v1/telemetry` URL) with
    /// `credentials`; each request, including connecting, is bounded by
    /// `request_timeout`.
    pub fn new(
        url: reqwest::Url,
        request_timeout: Duration,
        credentials: &scorer_client::Credentials,
    ) -> Result<Self, ReportError> {
        let client = credentials
            .apply(reqwest::Client::builder())
            .timeout(request_timeout)
            .connect_timeout(request_timeout)
            .build()?;
        Ok(Self { client, url })
    }

    /// The endpoint snapshots are posted to.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Posts one batch. Returns the service's `accepted` count (`None` when a
    /// success response has no readable count).
    pub async fn post(&self, batch: &TelemetryBatch) -> Result<Option<usize>, ReportError> {
        let resp = self
            .client
            .post(self.url.clone())
            .json(batch)
            .send()
            .await?;
        let status = resp.status();
        if !status.is_success() {
            let mut body = resp.text().await.unwrap_or_default();
            if body.len() > MAX_ERROR_BODY_BYTES {
                let mut cut = MAX_ERROR_BODY_BYTES;
                while !body.is_char_boundary(cut) {
                    cut -= 1;
                }
                body.truncate(cut);
            }
            return Err(ReportError::Rejected {
                status: status.as_u16(),
                body,
            });
        }
        Ok(resp.json::<Accepted>().await.ok().map(|a| a.accepted))
    }
}
