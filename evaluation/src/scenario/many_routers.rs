//! The `many-routers` family: independent routers (sidecars, client
//! libraries) deciding at once over the same workers, each knowing its own
//! picks exactly and the others' only as the service relays them. Where
//! the routers' picks herd onto the same apparent minimum, the pool's tail
//! grows with the number of routers (Mitzenmacher, "How Useful Is Old
//! Information?", IEEE TPDS 2000).
//!
//! A baseline runs one independent instance per router; the service arms
//! share one service that sees every router's load; `service-embedded`
//! runs one balancer per router, fed by the view stream.

use super::{Fault, Scenario};

/// Routers of the `many-routers` preset.
pub const MANY_ROUTERS: usize = 8;

/// The presets of the family, in report order.
pub const MANY_ROUTERS_SCENARIOS: [&str; 5] = [
    "many-routers",
    "many-routers-32",
    "many-routers-128",
    "many-routers-heterogeneous",
    "many-routers-fault",
];

const COMMON: &str = "each request comes from one router at random. A baseline runs one instance per router (each sees only its own in-flight requests and outcomes); the service arms share one service that sees every router's; each embedded balancer learns the others' load from the view stream.";

/// The preset `name` of the family on `n` workers for `d` ms, `at` scaling
/// a fault time laid out on a 120 s run; `None` for another name.
pub(super) fn many_routers(
    name: &str,
    n: usize,
    d: f64,
    at: impl Fn(f64) -> f64,
) -> Option<Scenario> {
    let preset = |routers: usize, load: f64, what: &str| {
        let mut s = Scenario::base(name, &format!("{what}; {COMMON}"), n, d);
        s.routers = routers;
        s.load = load;
        s
    };
    Some(match name {
        "many-routers" => preset(
            MANY_ROUTERS,
            0.7,
            "8 independent routers send to the same identical workers at 70% load",
        ),
        "many-routers-32" => preset(
            32,
            0.7,
            "32 independent routers send to the same identical workers at 70% load",
        ),
        "many-routers-128" => preset(
            128,
            0.8,
            "128 independent routers send to the same identical workers at 80% load",
        ),
        "many-routers-heterogeneous" => {
            let mut s = preset(
                MANY_ROUTERS,
                0.7,
                "8 independent routers; worker speeds spread 4x (0.5 to 2.0), 70% of total capacity",
            );
            for (i, w) in s.workers.iter_mut().enumerate() {
                w.speed = 0.5 * 4f64.powf(i as f64 / (n - 1) as f64);
            }
            s
        }
        "many-routers-fault" => {
            let mut s = preset(
                MANY_ROUTERS,
                0.7,
                "8 independent routers at 70% load; worker 0 is 5x slower for 60 s and worker 1 is down (connections refused) for 30 s",
            );
            s.faults.push(Fault::Slow {
                worker: 0,
                from_ms: at(30_000.0),
                to_ms: at(90_000.0),
                factor: 5.0,
            });
            s.faults.push(Fault::Crash {
                worker: 1,
                from_ms: at(40_000.0),
                to_ms: at(70_000.0),
            });
            s
        }
        _ => return None,
    })
}
