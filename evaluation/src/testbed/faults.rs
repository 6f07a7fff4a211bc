//! Faults injected into a real redis-server worker, each bounded in time:
//!
//! - `pause`: `CLIENT PAUSE <ms> ALL` — the server stops answering clients
//!   for `ms`, then resumes by itself;
//! - `debug-sleep`: `DEBUG SLEEP <s>` — the server's only thread sleeps
//!   (needs `--enable-debug-command`, which the testbed sets to `local`);
//! - `bgsave`: `BGSAVE` on a worker filled beforehand with `DEBUG POPULATE`
//!   (1 M keys), so the fork and copy-on-write are visible and the
//!   `rdb_bgsave_in_progress` (compacting) flag is reported;
//! - `kill-restart`: SIGKILL of the worker's pid, restarted on the same port
//!   after the fault length;
//! - `drain`: not a fault but the operator's drain of worker 0 for the
//!   fault's length ([`super::drain`]);
//! - `scorer-down`: not a worker's fault but the scoring service's: it
//!   stops at once (listener and connections dropped) and comes back empty
//!   on the same port after the fault length (run by `policy_run`).

use std::time::Duration;

use super::procs::RedisProc;

/// Testbed fault kinds.
pub const FAULTS: [&str; 6] = [
    "pause",
    "debug-sleep",
    "bgsave",
    "kill-restart",
    super::drain::DRAIN,
    SCORER_DOWN,
];

/// The fault of the scoring service rather than a worker.
pub const SCORER_DOWN: &str = "scorer-down";

/// One phrase on what fault `kind` does, for the report.
pub fn describe(kind: &str) -> &'static str {
    match kind {
        "pause" => "CLIENT PAUSE: the server stops answering, then resumes by itself",
        "debug-sleep" => "DEBUG SLEEP: the server's only thread sleeps",
        "bgsave" => "BGSAVE of 1 M keys: fork and copy-on-write",
        "kill-restart" => {
            "SIGKILL of the redis-server, restarted empty on the same port after the fault length: connections refused meanwhile"
        }
        super::drain::DRAIN => {
            "the operator drains worker 0 for the fault length (a drain override on the service with that TTL; a baseline's endpoint leaves its set); the worker is untouched"
        }
        SCORER_DOWN => {
            "the scoring service stops at once (listener and connections dropped) and restarts empty on the same port after the fault length; the workers are untouched"
        }
        _ => "unknown fault",
    }
}

/// A connection whose commands may take up to 60 s (DEBUG POPULATE, DEBUG SLEEP).
async fn conn(port: u16) -> Result<redis::aio::MultiplexedConnection, String> {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(|e| e.to_string())?;
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(60)));
    client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .map_err(|e| e.to_string())
}

/// Prepare worker `p` for fault `kind` before the load starts (bgsave: fill it).
///
/// # Errors
/// Redis errors.
pub async fn prepare(kind: &str, p: &RedisProc) -> Result<(), String> {
    if kind == "bgsave" {
        let mut c = conn(p.port).await?;
        redis::cmd("DEBUG")
            .arg("POPULATE")
            .arg(1_000_000)
            .arg("fill")
            .arg(64)
            .query_async::<()>(&mut c)
            .await
            .map_err(|e| format!("DEBUG POPULATE: {e}"))?;
    }
    Ok(())
}

/// Inject fault `kind` lasting `len` into `p`; returns when the fault has
/// been started (pause, bgsave, debug-sleep) or, for kill-restart, when the
/// worker is back.
///
/// # Errors
/// Unknown kind or redis errors.
pub async fn inject(kind: &str, p: &mut RedisProc, len: Duration) -> Result<(), String> {
    match kind {
        "pause" => {
            let mut c = conn(p.port).await?;
            let ms = u64::try_from(len.as_millis()).unwrap_or(u64::MAX);
            redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(ms)
                .arg("ALL")
                .query_async::<()>(&mut c)
                .await
                .map_err(|e| format!("CLIENT PAUSE: {e}"))
        }
        "debug-sleep" => {
            let mut c = conn(p.port).await?;
            let secs = len.as_secs_f64();
            // The reply comes after the sleep: do not wait for it here.
            tokio::spawn(async move {
                let _ = redis::cmd("DEBUG")
                    .arg("SLEEP")
                    .arg(secs)
                    .query_async::<()>(&mut c)
                    .await;
            });
            Ok(())
        }
        "bgsave" => {
            let mut c = conn(p.port).await?;
            redis::cmd("BGSAVE")
                .query_async::<String>(&mut c)
                .await
                .map(|_| ())
                .map_err(|e| format!("BGSAVE: {e}"))
        }
        "kill-restart" => {
            p.kill();
            tokio::time::sleep(len).await;
            p.restart().await
        }
        other => Err(format!(
            "unknown testbed scenario `{other}`: expected one of {}",
            FAULTS.join(", ")
        )),
    }
}
