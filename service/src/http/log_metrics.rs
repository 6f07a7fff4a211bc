//! The decision log in `/metrics`: rows, files and bytes written, records
//! dropped by their source (the service's own or routers'), write errors,
//! and whether writes are failing now.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use scorer_log::LogStats;

use super::prometheus::counter;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

/// Adds the log's metrics, from `l`, to a scrape's registry.
pub(super) fn register(r: &mut Registry, l: &LogStats) {
    counter(
        r,
        "scorer_log_rows_written",
        "Decision-log rows in closed files (one per decision or outcome)",
        l.written_rows,
    );
    let dropped: Family<SourceLabels, Counter> = Family::default();
    for (source, n) in [("service", l.dropped_service), ("router", l.dropped_router)] {
        dropped.get_or_create(&SourceLabels { source }).inc_by(n);
    }
    r.register(
        "scorer_log_records_dropped",
        "Decision-log records dropped (their source's queue budget full, or writes failing), by source: the service's own or routers'",
        dropped,
    );
    counter(r, "scorer_log_files", "Decision-log files closed", l.files);
    counter(
        r,
        "scorer_log_bytes",
        "Decision-log bytes in closed files",
        l.bytes,
    );
    counter(
        r,
        "scorer_log_write_errors",
        "Decision-log write errors",
        l.write_errors,
    );
    let failing: Gauge = Gauge::default();
    failing.set(i64::from(l.writes_failing > 0));
    r.register(
        "scorer_log_writes_failing",
        "1 while decision-log writes fail (disk full, I/O error): what could not be written is held and retried every second; the queue fills, then records are dropped, counted",
        failing,
    );
}
