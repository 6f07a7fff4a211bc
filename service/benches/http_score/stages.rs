//! The per-stage latency histograms the service exports in `/metrics`,
//! read back by `http_score` to split a score call's in-service time.

use std::collections::BTreeMap;

/// One stage's histogram: sum (s), count and cumulative bucket counts.
#[derive(Default, Clone)]
pub(super) struct Stage {
    sum: f64,
    count: f64,
    buckets: Vec<(f64, f64)>,
}

/// Every `scorer_score_stage_seconds` series by stage, and the whole
/// in-service time of accepted score calls as stage `total`
/// (`http_request_duration_seconds{route="/v1/score",status="200"}`).
pub(super) fn stages(metrics: &str) -> BTreeMap<String, Stage> {
    let mut out: BTreeMap<String, Stage> = BTreeMap::new();
    let label = |labels: &str, name: &str| {
        labels
            .split(',')
            .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
            .map(|s| s.trim_end_matches('"').to_owned())
    };
    for line in metrics.lines() {
        let (series, rest) = if let Some(r) = line.strip_prefix("scorer_score_stage_seconds_") {
            (None, r)
        } else if let Some(r) = line.strip_prefix("http_request_duration_seconds_") {
            (Some("total"), r)
        } else {
            continue;
        };
        let Some((kind, rest)) = rest.split_once('{') else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        if series.is_some()
            && !(labels.contains("route=\"/v1/score\"") && labels.contains("status=\"200\""))
        {
            continue;
        }
        let Some(stage) = series.map(str::to_owned).or_else(|| label(labels, "stage")) else {
            continue;
        };
        let v: f64 = value.trim().parse().unwrap_or(0.0);
        let e = out.entry(stage).or_default();
        match kind {
            "sum" => e.sum += v,
            "count" => e.count += v,
            "bucket" => {
                let le = label(labels, "le")
                    .map_or(f64::INFINITY, |l| l.parse().unwrap_or(f64::INFINITY));
                e.buckets.push((le, v));
            }
            _ => {}
        }
    }
    out
}

/// Mean and p99 (a bucket's upper bound) of `after − before`, µs.
pub(super) fn stage_delta(before: Option<&Stage>, after: &Stage) -> Option<(f64, f64)> {
    let b = before.cloned().unwrap_or_default();
    let calls = after.count - b.count;
    if calls <= 0.0 {
        return None;
    }
    let mean = (after.sum - b.sum) / calls * 1e6;
    let p99 = after
        .buckets
        .iter()
        .find(|(le, n)| {
            let n0 = b.buckets.iter().find(|(l, _)| l == le).map_or(0.0, |x| x.1);
            n - n0 >= 0.99 * calls
        })
        .map_or(f64::INFINITY, |(le, _)| le * 1e6);
    Some((mean, p99))
}
