#!/usr/bin/env bash
# Load-shedding bench (issue #8): does /v1/score keep a bounded p99 for the
# requests it accepts, and flat memory, when offered twice what it can serve?
#
# 1. builds the release service and starts it on a free loopback port with
#    `server.max_concurrent_scores = $LIMIT` (default 32) and 16 workers;
# 2. measures capacity C: `oha` closed loop, $LIMIT connections, $SECS s;
# 3. offers 2·C req/s open loop (`oha -q`, 4·$LIMIT connections,
#    latency corrected for coordinated omission) for 2·$SECS s, twice,
#    sampling the service's RSS every 0.5 s;
# 4. prints, from oha's per-request records (SQLite), the p50/p99/max of the
#    accepted (200) requests in both phases, the shed (503) share and
#    latency, and RSS before / peak / after.
#
# Installs oha (cargo install, into target/tools) when missing. Loopback
# only; the service is stopped by pid at the end. Figures in the README's
# Performance section come from this script.
#
# Usage: scripts/bench_shedding.sh   (env: LIMIT=32 SECS=10)
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT="${LIMIT:-32}"
SECS="${SECS:-10}"

oha_bin="$(command -v oha || true)"
if [ -z "$oha_bin" ]; then
  oha_bin="target/tools/bin/oha"
  if [ ! -x "$oha_bin" ]; then
    echo "installing: oha (cargo install, into target/tools)"
    cargo install oha --locked --root target/tools
  fi
fi
cargo build --release -p service --bin service

tmp="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:${port}"
cat > "$tmp/config.toml" <<TOML
[server]
listen = "127.0.0.1:${port}"
max_concurrent_scores = ${LIMIT}

[telemetry]
dead_after_ms = 3600000
forget_after_ms = 3600000

[log]
dir = "${tmp}/decisions"
TOML

# The service gets core 0 and the load generator core 1 (when the machine has
# two or more), so that the generator does not steal the service's CPU.
pin_service=(); pin_load=()
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
  pin_service=(taskset -c 0); pin_load=(taskset -c 1)
fi
"${pin_service[@]}" target/release/service --config "$tmp/config.toml" >"$tmp/service.log" 2>&1 &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

python3 - "$base" <<'PY'
import json, sys, time, urllib.request
base = sys.argv[1]
deadline = time.time() + 60
while True:
    try:
        urllib.request.urlopen(base + "/healthz", timeout=1).read()
        break
    except Exception:
        if time.time() > deadline:
            sys.exit("service did not start within 60 s")
        time.sleep(0.2)
now = int(time.time() * 1000)
snaps = [{"worker_id": f"w{i}", "timestamp_ms": now, "cpu_usage": 0.1 + 0.05 * i, "queue_depth": i,
          "rtt_ms_avg": 2.0, "rtt_ms_p99": 5.0 + i, "error_rate": 0.0} for i in range(16)]
req = urllib.request.Request(base + "/v1/telemetry", data=json.dumps({"snapshots": snaps}).encode(),
                             headers={"content-type": "application/json"})
urllib.request.urlopen(req, timeout=5).read()
PY

body='{"key":"user:42:profile","candidates":["w0","w1","w2","w3","w4","w5","w6","w7","w8","w9","w10","w11","w12","w13","w14","w15"],"context":{"request_type":"GET"}}'
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }

run_oha() { # db, extra args...
  local db="$1"; shift
  "${pin_load[@]}" "$oha_bin" --no-tui --output-format json --db-url "$db" -m POST \
    -H 'content-type: application/json' -d "$body" "$@" "$base/v1/score" >/dev/null
}

rss_before="$(rss_kib)"
echo "phase 1: capacity, closed loop, ${LIMIT} connections, ${SECS} s"
run_oha "$tmp/capacity.db" -c "$LIMIT" -z "${SECS}s"
cap="$(python3 - "$tmp/capacity.db" "$SECS" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("select count(*) from oha where status = 200").fetchone()[0]
print(int(n / float(sys.argv[2])))
PY
)"
rate=$((cap * 2))
echo "capacity ${cap} req/s; phase 2: ${rate} req/s open loop, $((LIMIT * 4)) connections, $((SECS * 2)) s"

peak_file="$tmp/peak"
echo 0 >"$peak_file"
( while kill -0 "$pid" 2>/dev/null; do
    r="$(rss_kib)"; p="$(cat "$peak_file")"
    [ "$r" -gt "$p" ] && echo "$r" >"$peak_file"
    sleep 0.5
  done ) &
sampler=$!
run_oha "$tmp/overload.db" -c "$((LIMIT * 4))" -q "$rate" --latency-correction -z "$((SECS * 2))s"
rss_mid="$(rss_kib)"
peak_first="$(cat "$peak_file")"
echo "phase 3: the same overload again (does memory keep growing?)"
run_oha "$tmp/overload2.db" -c "$((LIMIT * 4))" -q "$rate" --latency-correction -z "$((SECS * 2))s"
kill "$sampler" 2>/dev/null || true
rss_after="$(rss_kib)"

python3 - "$tmp/capacity.db" "$tmp/overload.db" "$rss_before" "$peak_first" "$rss_mid" "$(cat "$peak_file")" "$rss_after" "$LIMIT" "$tmp/overload2.db" <<'PY'
import sqlite3, sys
def q(path):
    db = sqlite3.connect(path)
    rows = db.execute("select status, duration from oha").fetchall()
    ok = sorted(d for s, d in rows if s == 200)
    shed = sorted(d for s, d in rows if s == 503)
    other = [s for s, d in rows if s not in (200, 503)]
    return ok, shed, other
def pct(xs, p):
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000 if xs else float("nan")
cap_ok, _, cap_other = q(sys.argv[1])
ok, shed, other = q(sys.argv[2])
before, peak1, mid, peak2, after = (int(x) / 1024 for x in sys.argv[3:8])
print(f"limit max_concurrent_scores = {sys.argv[8]}")
print(f"capacity run: {len(cap_ok)} accepted, p50 {pct(cap_ok, .5):.2f} ms, p99 {pct(cap_ok, .99):.2f} ms, other statuses {len(cap_other)}")
total = len(ok) + len(shed) + len(other)
print(f"2x run: {total} requests, {len(ok)} accepted, {len(shed)} shed ({100 * len(shed) / max(total, 1):.1f}%), other {len(other)}")
print(f"  accepted: p50 {pct(ok, .5):.2f} ms, p99 {pct(ok, .99):.2f} ms, max {pct(ok, 1):.2f} ms")
print(f"  shed 503: p50 {pct(shed, .5):.2f} ms, p99 {pct(shed, .99):.2f} ms")
print(f"  accepted p99, 2x / capacity run: {pct(ok, .99) / pct(cap_ok, .99):.2f}")
ok2, shed2, other2 = q(sys.argv[9])
t2 = len(ok2) + len(shed2) + len(other2)
print(f"2x again: {t2} requests, {len(ok2)} accepted, {len(shed2)} shed; accepted p50 {pct(ok2, .5):.2f} ms, p99 {pct(ok2, .99):.2f} ms")
print(f"RSS MiB: before {before:.1f}; first 2x run peak {peak1:.1f}, after {mid:.1f}; second 2x run peak {peak2:.1f}, after {after:.1f}")
PY
