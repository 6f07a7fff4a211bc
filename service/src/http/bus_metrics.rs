//! The bus in `/metrics`: whether the replica is connected, and the
//! messages it published, dropped, applied and refused, by kind.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use scorer_bus::Refusal;
use scorer_bus::counters::KINDS;

use crate::bus::BusLink;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    kind: &'static str,
    reason: &'static str,
}

/// Registers `link`'s metrics in `r`.
pub(super) fn register(r: &mut Registry, link: &BusLink) {
    let c = link.bus().counters();
    let connected: Gauge = Gauge::default();
    connected.set(i64::from(link.bus().connected()));
    r.register(
        "scorer_bus_connected",
        "1 while the replica is connected to the bus",
        connected,
    );
    let published: Family<KindLabels, Counter> = Family::default();
    let dropped: Family<KindLabels, Counter> = Family::default();
    let applied: Family<KindLabels, Counter> = Family::default();
    let refused: Family<RefusalLabels, Counter> = Family::default();
    for kind in KINDS {
        let l = KindLabels { kind };
        published.get_or_create(&l).inc_by(c.published_count(kind));
        dropped.get_or_create(&l).inc_by(c.dropped_count(kind));
        applied.get_or_create(&l).inc_by(c.applied_count(kind));
        for why in Refusal::ALL {
            refused
                .get_or_create(&RefusalLabels {
                    kind,
                    reason: why.as_str(),
                })
                .inc_by(c.refused_count(kind, why));
        }
    }
    r.register(
        "scorer_bus_published",
        "Messages this replica published on the bus, by kind",
        published,
    );
    r.register(
        "scorer_bus_dropped",
        "Messages dropped before they were published (outbox full, connection refused), by kind",
        dropped,
    );
    r.register(
        "scorer_bus_applied",
        "Messages from peers applied, by kind",
        applied,
    );
    r.register(
        "scorer_bus_refused",
        "Messages from the bus refused and never applied, by kind and reason",
        refused,
    );
}
