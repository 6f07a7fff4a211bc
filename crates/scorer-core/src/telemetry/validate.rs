//! Field-by-field validation of telemetry snapshots (issue #2, "Validation").
//!
//! [`check_snapshot`] is pure: it looks at one snapshot alone. Rules that
//! need state (stale timestamps, clock skew, duplicates within a batch) are
//! applied by the registry, which reports them with the same [`FieldError`].

use serde::Serialize;

use super::Snapshot;
use crate::fmt::exact;

/// Longest accepted `worker_id`, bytes.
pub const MAX_WORKER_ID_BYTES: usize = 128;
/// Longest accepted `region`, bytes.
pub const MAX_REGION_BYTES: usize = 64;
/// Smallest accepted relative `capacity` (keeps selection weights above zero).
pub const MIN_CAPACITY: f64 = 1e-3;
/// Largest accepted relative `capacity`.
pub const MAX_CAPACITY: f64 = 1e6;
/// CPU values in `(1, CPU_CLAMP_LIMIT]` are clamped to 1 (multi-core accounting
/// quirks); above it they are rejected.
pub const CPU_CLAMP_LIMIT: f64 = 4.0;
/// Largest latency a snapshot may report (`rtt_ms_avg`, `rtt_ms_p99`,
/// `disk_io_await_ms`), ms: one day. Anything above is a unit or counter bug
/// on the sender, and would turn ratios in explanations into `inf`.
pub const MAX_LATENCY_MS: f64 = 86_400_000.0;
/// Earliest accepted `timestamp_ms`: 10^12 ms, 2001-09-09T01:46:40Z. Any
/// Unix time in seconds (or a monotonic or uptime clock) is far below it,
/// and no live reporter sends a time that old.
pub const MIN_TIMESTAMP_MS: u64 = 1_000_000_000_000;
/// Largest `used_memory_bytes` and `maxmemory_bytes`, bytes: 1 PiB (2^50),
/// far above any one server's memory and exact in a JSON double.
pub const MAX_MEMORY_BYTES: u64 = 1 << 50;
/// Largest `evicted_keys_per_s`: 10^9 keys/s, beyond any one server; more
/// is a counter or unit bug on the sender.
pub const MAX_EVICTED_KEYS_PER_S: f64 = 1e9;

/// One rejected field, as returned in the 422 body's `details`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// Index of the snapshot in the batch.
    pub index: usize,
    /// The snapshot's worker id (possibly the invalid one, truncated to 128 bytes).
    pub worker_id: String,
    /// Field name, e.g. `cpu_usage`.
    pub field: &'static str,
    /// Plain-sentence reason with the offending value.
    pub reason: String,
    /// Stable machine code, e.g. `out_of_range`, `stale_timestamp`.
    pub code: &'static str,
}

/// A non-fatal note about an accepted snapshot (e.g. a clamped value).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Warning {
    /// Index of the snapshot in the batch.
    pub index: usize,
    /// Field name.
    pub field: &'static str,
    /// What was done, with the value.
    pub reason: String,
}

/// Outcome of checking one snapshot: the errors found and the accepted cpu value.
#[derive(Debug, Default)]
pub struct Checked {
    /// Every rule the snapshot breaks (empty when valid).
    pub errors: Vec<FieldError>,
    /// Set when `cpu_usage` was clamped into `[0, 1]`.
    pub cpu_clamped: bool,
}

/// Invisible formatting characters (Unicode category Cf and kin) refused in
/// worker ids: they make two ids that print alike differ (`"w1"` and
/// `"\u{feff}w1"`), or reorder how an id prints (bidi overrides).
pub fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// What is wrong with the characters of a worker id, if anything: control
/// characters, invisible formatting characters, or whitespace at either
/// end. One rule for telemetry, score candidates and feedback; lengths are
/// checked by the callers (1..=[`MAX_WORKER_ID_BYTES`] bytes).
pub fn worker_id_chars_problem(id: &str) -> Option<&'static str> {
    if id.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else if id.chars().any(is_invisible_format) {
        Some("must not contain invisible formatting characters (zero-width, bidi, BOM)")
    } else if id.starts_with(char::is_whitespace) || id.ends_with(char::is_whitespace) {
        Some("must not start or end with whitespace")
    } else {
        None
    }
}

/// Whether `id` is a valid worker id: 1..=[`MAX_WORKER_ID_BYTES`] bytes and
/// no [`worker_id_chars_problem`]. What score candidates and feedback check;
/// telemetry reports each rule with its own message.
pub fn is_valid_worker_id(id: &str) -> bool {
    if id.is_empty() || id.len() > MAX_WORKER_ID_BYTES {
        return false;
    }
    if id.is_ascii() {
        // The ASCII control characters are 0x00..=0x1F and 0x7F, every
        // ASCII whitespace but the space is one of them, and no invisible
        // formatting character is ASCII.
        let b = id.as_bytes();
        return b.iter().all(|&c| c >= b' ' && c != 0x7F)
            && b.first() != Some(&b' ')
            && b.last() != Some(&b' ');
    }
    worker_id_chars_problem(id).is_none()
}

/// Truncate an id for echoing in an error without splitting a UTF-8 char.
pub(crate) fn display_id(id: &str) -> String {
    let mut end = id.len().min(MAX_WORKER_ID_BYTES);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    id[..end].to_owned()
}

/// Check one snapshot's fields against the contract; `index` is its batch position.
///
/// Returns every violation (not only the first) so a reporter can fix them in one go.
pub fn check_snapshot(index: usize, s: &Snapshot) -> Checked {
    let mut out = Checked::default();
    let id = display_id(&s.worker_id);
    let mut err = |field: &'static str, code: &'static str, reason: String| {
        out.errors.push(FieldError {
            index,
            worker_id: id.clone(),
            field,
            reason,
            code,
        });
    };

    if s.worker_id.is_empty() {
        err(
            "worker_id",
            "invalid_id",
            "worker_id must not be empty".into(),
        );
    } else if s.worker_id.len() > MAX_WORKER_ID_BYTES {
        err(
            "worker_id",
            "invalid_id",
            format!(
                "worker_id is {} bytes, at most {MAX_WORKER_ID_BYTES} are allowed",
                s.worker_id.len()
            ),
        );
    } else if let Some(problem) = worker_id_chars_problem(&s.worker_id) {
        err("worker_id", "invalid_id", format!("worker_id {problem}"));
    }

    if s.timestamp_ms < MIN_TIMESTAMP_MS {
        err(
            "timestamp_ms",
            "implausible_timestamp",
            format!(
                "timestamp_ms {} is before 2001-09-09 ({MIN_TIMESTAMP_MS} ms); send Unix time in milliseconds, not seconds",
                s.timestamp_ms
            ),
        );
    }

    if !s.cpu_usage.is_finite() || s.cpu_usage < 0.0 || s.cpu_usage > CPU_CLAMP_LIMIT {
        err(
            "cpu_usage",
            "out_of_range",
            format!(
                "cpu_usage {} is outside 0..=1 (values up to {CPU_CLAMP_LIMIT} are clamped)",
                exact(s.cpu_usage)
            ),
        );
    }
    let mut latency = |field: &'static str, v: f64| {
        if !(0.0..=MAX_LATENCY_MS).contains(&v) {
            err(
                field,
                "out_of_range",
                format!(
                    "{field} {} must be within 0..={MAX_LATENCY_MS} ms",
                    exact(v)
                ),
            );
        }
    };
    latency("rtt_ms_avg", s.rtt_ms_avg);
    latency("rtt_ms_p99", s.rtt_ms_p99);
    if let Some(v) = s.disk_io_await_ms {
        latency("disk_io_await_ms", v);
    }
    let mut fraction = |field: &'static str, v: f64| {
        if !(0.0..=1.0).contains(&v) {
            err(
                field,
                "out_of_range",
                format!("{field} {} is outside the fraction range 0..=1", exact(v)),
            );
        }
    };
    fraction("error_rate", s.error_rate);
    for (field, v) in [
        ("mem_available_ratio", s.mem_available_ratio),
        ("net_loss_rate", s.net_loss_rate),
        ("cache_hit_rate", s.cache_hit_rate),
        ("disk_free_ratio", s.disk_free_ratio),
    ] {
        if let Some(v) = v {
            fraction(field, v);
        }
    }
    if let Some(v) = s.used_memory_bytes
        && v > MAX_MEMORY_BYTES
    {
        err(
            "used_memory_bytes",
            "out_of_range",
            format!("used_memory_bytes {v} must be at most {MAX_MEMORY_BYTES} (1 PiB)"),
        );
    }
    match s.maxmemory_bytes {
        Some(0) => err(
            "maxmemory_bytes",
            "out_of_range",
            "maxmemory_bytes 0 is not a limit: omit the field when the worker has no memory limit"
                .into(),
        ),
        Some(v) if v > MAX_MEMORY_BYTES => err(
            "maxmemory_bytes",
            "out_of_range",
            format!("maxmemory_bytes {v} must be within 1..={MAX_MEMORY_BYTES} (1 PiB)"),
        ),
        _ => {}
    }
    if let Some(v) = s.evicted_keys_per_s
        && !(0.0..=MAX_EVICTED_KEYS_PER_S).contains(&v)
    {
        err(
            "evicted_keys_per_s",
            "out_of_range",
            format!(
                "evicted_keys_per_s {} must be within 0..={MAX_EVICTED_KEYS_PER_S} keys/s",
                exact(v)
            ),
        );
    }
    if let Some(region) = &s.region
        && (region.len() > MAX_REGION_BYTES || region.chars().any(char::is_control))
    {
        err(
            "region",
            "invalid_region",
            format!("region must be at most {MAX_REGION_BYTES} bytes without control characters"),
        );
    }
    if let Some(c) = s.capacity
        && !(MIN_CAPACITY..=MAX_CAPACITY).contains(&c)
    {
        err(
            "capacity",
            "out_of_range",
            format!(
                "capacity {} must be within {MIN_CAPACITY}..={MAX_CAPACITY}",
                exact(c)
            ),
        );
    }
    if let Some(Err(e)) = s.cache_digest.as_ref().map(super::CacheDigest::decode) {
        err("cache_digest", e.code(), e.to_string());
    }
    out.cpu_clamped = s.cpu_usage > 1.0 && s.cpu_usage <= CPU_CLAMP_LIMIT;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Snapshot {
        let mut s = Snapshot::new("w1", 1_750_000_000_000);
        s.cpu_usage = 0.5;
        s.rtt_ms_avg = 2.0;
        s.rtt_ms_p99 = 9.0;
        s
    }

    fn fields(s: &Snapshot) -> Vec<&'static str> {
        check_snapshot(0, s)
            .errors
            .iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn the_ascii_check_of_a_candidate_id_agrees_with_the_character_rules() {
        let bytes: Vec<u8> = (0..=0x7F).collect();
        let mut ids: Vec<String> = Vec::new();
        for &a in &bytes {
            ids.push(char::from(a).to_string());
            for &b in &bytes {
                ids.push([char::from(a), char::from(b)].iter().collect());
                ids.push([char::from(a), 'x', char::from(b)].iter().collect());
            }
        }
        for id in &ids {
            let rules = worker_id_chars_problem(id).is_none();
            assert_eq!(is_valid_worker_id(id), rules, "{:?}", id.as_bytes());
        }
        assert!(!is_valid_worker_id(" w") && !is_valid_worker_id("w\u{200B}"));
    }

    #[test]
    fn valid_snapshot_has_no_errors() {
        assert!(fields(&ok()).is_empty());
    }

    #[test]
    fn cpu_between_one_and_four_is_clamped_above_four_rejected() {
        let mut s = ok();
        s.cpu_usage = 3.5;
        let c = check_snapshot(0, &s);
        assert!(c.errors.is_empty() && c.cpu_clamped);
        s.cpu_usage = 4.01;
        assert_eq!(fields(&s), ["cpu_usage"]);
        s.cpu_usage = -0.01;
        assert_eq!(fields(&s), ["cpu_usage"]);
    }

    #[test]
    fn negative_and_non_finite_numbers_are_rejected() {
        let mut s = ok();
        s.rtt_ms_avg = -1.0;
        s.error_rate = f64::NAN;
        s.disk_io_await_ms = Some(f64::INFINITY);
        s.cache_hit_rate = Some(1.5);
        s.capacity = Some(5e-324);
        let f = fields(&s);
        for want in [
            "rtt_ms_avg",
            "error_rate",
            "disk_io_await_ms",
            "cache_hit_rate",
            "capacity",
        ] {
            assert!(f.contains(&want), "{want} missing from {f:?}");
        }
    }

    #[test]
    fn latencies_beyond_a_day_are_rejected() {
        let mut s = ok();
        s.rtt_ms_avg = MAX_LATENCY_MS;
        s.rtt_ms_p99 = MAX_LATENCY_MS;
        s.disk_io_await_ms = Some(MAX_LATENCY_MS);
        assert!(
            check_snapshot(0, &s).errors.is_empty(),
            "one day is allowed"
        );
        s.rtt_ms_p99 = 1.7e308;
        s.disk_io_await_ms = Some(MAX_LATENCY_MS * 1.000_001);
        assert_eq!(fields(&s), ["rtt_ms_p99", "disk_io_await_ms"]);
        let c = check_snapshot(0, &s);
        assert!(
            c.errors[0].reason == "rtt_ms_p99 1.7e308 must be within 0..=86400000 ms",
            "{:?}",
            c.errors[0]
        );
    }

    #[test]
    fn cache_memory_and_evictions_are_bounded() {
        let mut s = ok();
        s.used_memory_bytes = Some(5_000_000);
        s.maxmemory_bytes = Some(4_194_304);
        s.evicted_keys_per_s = Some(0.0);
        assert!(
            fields(&s).is_empty(),
            "used above the limit is what Redis reports before it evicts"
        );
        s.used_memory_bytes = Some(MAX_MEMORY_BYTES);
        s.maxmemory_bytes = Some(MAX_MEMORY_BYTES);
        s.evicted_keys_per_s = Some(MAX_EVICTED_KEYS_PER_S);
        assert!(fields(&s).is_empty());
        s.used_memory_bytes = Some(MAX_MEMORY_BYTES + 1);
        s.maxmemory_bytes = Some(u64::MAX);
        s.evicted_keys_per_s = Some(f64::INFINITY);
        assert_eq!(
            fields(&s),
            ["used_memory_bytes", "maxmemory_bytes", "evicted_keys_per_s"]
        );
        for bad in [-0.5, f64::NAN, 1.5e9] {
            s.evicted_keys_per_s = Some(bad);
            let errs = check_snapshot(0, &s).errors;
            let e = errs.iter().find(|e| e.field == "evicted_keys_per_s");
            assert_eq!(e.map(|e| e.code), Some("out_of_range"), "{bad}");
        }
    }

    #[test]
    fn a_zero_memory_limit_is_refused_by_name() {
        let mut s = ok();
        s.maxmemory_bytes = Some(0);
        let errs = check_snapshot(0, &s).errors;
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            (errs[0].field, errs[0].code),
            ("maxmemory_bytes", "out_of_range")
        );
        assert!(errs[0].reason.contains("omit"), "{}", errs[0].reason);
        s.maxmemory_bytes = None;
        assert!(fields(&s).is_empty());
    }

    #[test]
    fn worker_id_length_and_control_characters() {
        let mut s = ok();
        s.worker_id = String::new();
        assert_eq!(fields(&s), ["worker_id"]);
        s.worker_id = "x".repeat(129);
        assert_eq!(fields(&s), ["worker_id"]);
        s.worker_id = "x".repeat(128);
        assert!(fields(&s).is_empty());
        s.worker_id = "a\u{7}b".into();
        assert_eq!(fields(&s), ["worker_id"]);
    }

    #[test]
    fn worker_ids_that_print_alike_or_hide_characters_are_refused() {
        let mut s = ok();
        for bad in [
            "\u{feff}w1",
            "w\u{200b}1",
            "a\u{202e}b",
            "w1\u{2066}",
            "\u{ad}w1",
            "   ",
            " w1",
            "w1\t",
            "w1\u{a0}",
        ] {
            s.worker_id = bad.into();
            let c = check_snapshot(0, &s);
            assert_eq!(c.errors.len(), 1, "{bad:?}");
            assert_eq!(c.errors[0].field, "worker_id");
            assert_eq!(c.errors[0].code, "invalid_id");
        }
        for good in ["w1", "worker 1", "节点-1", "é", "redis-7.2:6379"] {
            s.worker_id = good.into();
            assert!(fields(&s).is_empty(), "{good:?}");
        }
    }

    #[test]
    fn timestamps_in_seconds_are_refused_suggesting_milliseconds() {
        let mut s = ok();
        s.timestamp_ms = 1_796_147_107;
        let errs = check_snapshot(0, &s).errors;
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            (errs[0].field, errs[0].code),
            ("timestamp_ms", "implausible_timestamp")
        );
        assert!(
            errs[0].reason.contains("milliseconds"),
            "{}",
            errs[0].reason
        );
        s.timestamp_ms = MIN_TIMESTAMP_MS;
        assert!(check_snapshot(0, &s).errors.is_empty());
    }

    #[test]
    fn display_id_truncates_on_char_boundary() {
        let id = "é".repeat(100); // 200 bytes
        let d = display_id(&id);
        assert!(d.len() <= MAX_WORKER_ID_BYTES && d.chars().all(|c| c == 'é'));
    }
}
