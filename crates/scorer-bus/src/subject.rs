//! Subjects, streams and buckets of the bus, and how an id becomes one
//! token of a subject.
//!
//! A NATS subject is dot-separated tokens, and `*`, `>` and whitespace are
//! special; worker ids may hold any of them. A token is the id with every
//! byte outside `A-Z a-z 0-9 _ -` written as `%XX` (two uppercase hex
//! digits), so `w.1` is `w%2E1`: a client in any language builds it in a
//! line, and the decoding is exact.

/// Subjects a worker's telemetry is published on: `scorer.telemetry.<worker>`.
pub const TELEMETRY_PREFIX: &str = "scorer.telemetry";
/// The JetStream stream that keeps every worker's latest report (one
/// message per subject, as a key-value bucket does).
pub const TELEMETRY_STREAM: &str = "SCORER_TELEMETRY";
/// Subjects a router's outstanding gauges are published on:
/// `scorer.load.<router>`.
pub const LOAD_PREFIX: &str = "scorer.load";
/// Subjects a replica's own outstanding picks (those of the decisions it
/// made for its HTTP callers) are published on: `scorer.replica_load.<replica>`.
pub const REPLICA_LOAD_PREFIX: &str = "scorer.replica_load";
/// The key-value bucket of the shared state: the operators' overrides.
pub const STATE_BUCKET: &str = "scorer_state";
/// The key of the overrides in [`STATE_BUCKET`].
pub const OVERRIDES_KEY: &str = "overrides";
/// Subjects the decision and outcome records are published on:
/// `scorer.records.decisions.<replica>` and `scorer.records.outcomes.<replica>`.
pub const RECORDS_PREFIX: &str = "scorer.records";
/// The JetStream stream of the decision and outcome records (work-queue
/// retention: a record batch leaves it once a log writer acknowledged it).
pub const RECORDS_STREAM: &str = "SCORER_DECISIONS";
/// The durable pull consumer every log writer shares.
pub const LOG_WRITERS_CONSUMER: &str = "scorer-log-writers";
/// Header carrying the log schema version of a record batch
/// (`scorer_log::LOG_SCHEMA_VERSION`).
pub const LOG_SCHEMA_HEADER: &str = "Scorer-Log-Schema";
/// Header naming the replica (or agent, or router) that published a
/// message; a replica skips what it published itself.
pub const ORIGIN_HEADER: &str = "Scorer-Origin";

/// `id` as one subject token.
pub fn token(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The id a token stands for, or `None` when it is not one [`token`] writes.
pub fn id_of(token: &str) -> Option<String> {
    let b = token.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                if hex.bytes().any(|c| c.is_ascii_lowercase()) {
                    return None;
                }
                let v = u8::from_str_radix(hex, 16).ok()?;
                if v.is_ascii_alphanumeric() || v == b'_' || v == b'-' {
                    return None;
                }
                out.push(v);
                i += 3;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' => {
                out.push(c);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// The telemetry subject of `worker_id`.
pub fn telemetry(worker_id: &str) -> String {
    format!("{TELEMETRY_PREFIX}.{}", token(worker_id))
}

/// The load subject of `router_id`.
pub fn load(router_id: &str) -> String {
    format!("{LOAD_PREFIX}.{}", token(router_id))
}

/// The subject of replica `replica_id`'s own load.
pub fn replica_load(replica_id: &str) -> String {
    format!("{REPLICA_LOAD_PREFIX}.{}", token(replica_id))
}

/// The subject a replica publishes its records of `kind` on.
pub fn records(kind: scorer_log::LogKind, replica: &str) -> String {
    format!("{RECORDS_PREFIX}.{}.{}", kind.prefix(), token(replica))
}

/// The kind of records a subject under [`RECORDS_PREFIX`] carries, when it
/// is exactly `scorer.records.<decisions|outcomes>.<token>`.
pub fn records_kind(subject: &str) -> Option<scorer_log::LogKind> {
    let rest = subject.strip_prefix(RECORDS_PREFIX)?.strip_prefix('.')?;
    let (kind, publisher) = rest.split_once('.')?;
    id_of(publisher)?;
    match kind {
        "decisions" => Some(scorer_log::LogKind::Decisions),
        "outcomes" => Some(scorer_log::LogKind::Outcomes),
        _ => None,
    }
}

/// The id in the last token of `subject` under `prefix`, when the subject
/// is exactly `<prefix>.<token>`.
pub fn id_under(prefix: &str, subject: &str) -> Option<String> {
    let rest = subject.strip_prefix(prefix)?.strip_prefix('.')?;
    id_of(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_with_subject_characters_round_trip_through_one_token() {
        for id in ["w1", "w.1", "a b", "w*>", "%41", "ключ", "edge_1-x"] {
            let t = token(id);
            assert!(
                !t.contains(['.', '*', '>', ' ']),
                "{id:?} gave the token {t:?}"
            );
            assert_eq!(id_of(&t).as_deref(), Some(id));
        }
        assert_eq!(token("w.1"), "w%2E1");
        assert_eq!(telemetry("w.1"), "scorer.telemetry.w%2E1");
    }

    #[test]
    fn a_token_not_written_by_token_is_refused() {
        // Lowercase hex, an escaped plain byte, a truncated escape, a dot.
        for t in ["w%2e1", "%41", "w%2", "a.b", "w%FF"] {
            assert_eq!(id_of(t), None, "{t:?}");
        }
        assert_eq!(
            id_under(LOAD_PREFIX, "scorer.load.r1").as_deref(),
            Some("r1")
        );
        assert_eq!(id_under(LOAD_PREFIX, "scorer.load.r1.x"), None);
        assert_eq!(id_under(LOAD_PREFIX, "scorer.loadr1"), None);
    }
}
