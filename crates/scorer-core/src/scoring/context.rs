//! The request context a router sends with a score request.

use serde::{Deserialize, Serialize};

/// Kind of KV operation; writes weigh disk pressure more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum RequestType {
    /// Point read.
    #[serde(rename = "GET")]
    Get,
    /// Write.
    #[serde(rename = "PUT")]
    Put,
    /// Delete (a write).
    #[serde(rename = "DELETE")]
    Delete,
    /// Multi-key read.
    #[serde(rename = "MGET")]
    Mget,
}

impl RequestType {
    /// Parse the wire name (`GET`, `PUT`, `DELETE`, `MGET`), case-sensitive.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "GET" => Some(Self::Get),
            "PUT" => Some(Self::Put),
            "DELETE" => Some(Self::Delete),
            "MGET" => Some(Self::Mget),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Put => "PUT",
            Self::Delete => "DELETE",
            Self::Mget => "MGET",
        }
    }

    /// PUT and DELETE write to disk.
    pub fn is_write(self) -> bool {
        matches!(self, Self::Put | Self::Delete)
    }
}

/// Optional facts about the request; every field may be absent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestContext {
    /// Operation kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_type: Option<RequestType>,
    /// The client's region, compared with each worker's `region`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_region: Option<String>,
    /// The client's deadline for this request, ms, at most 86 400 000 (one day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uint64", maximum = 86_400_000)]
    pub timeout_ms: Option<u64>,
    /// Keys in the request (1 for point operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uint32")]
    pub batch_size: Option<u32>,
}
