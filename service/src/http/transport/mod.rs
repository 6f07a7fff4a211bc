//! Transport and limits: the listener and its connection limits, body
//! reading and its timeouts, the JSON content-type rule, load shedding and
//! the request timeout, admission of long-lived streams, where a score
//! call computes, and JSON bodies for the errors hyper answers itself.

pub mod body;
pub mod body_first;
pub mod dispatch;
pub mod idle;
pub mod limits;
pub mod parse_errors;
pub mod serve;
pub mod stream_queue;
pub mod streams;
pub mod strict;
pub mod tls;
