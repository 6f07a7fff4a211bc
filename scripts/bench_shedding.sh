#!/usr/bin/env bash
# Load-shedding bench (issue #8): offered twice what it can serve, does
# /v1/score keep a bounded p99 for the requests it accepts, and flat memory?
# Compared with the same service without a useful limit.
#
# 1. builds the release service; each run starts it on a free loopback port,
#    pinned to core 0 (the load generator gets core 1), with 16 workers and
#    `server.max_concurrent_scores = LIMIT`;
# 2. measures capacity C with LIMIT (default 32): `oha` closed loop, LIMIT
#    connections, SECS s (default 10);
# 3. offers 2·C req/s open loop (`oha -q`, 4·LIMIT connections, latency
#    corrected for coordinated omission) for 2·SECS s, twice, sampling the
#    service's RSS every 0.5 s;
# 4. repeats 3 with `max_concurrent_scores = 1000000` (no shedding);
# 5. prints for each: answered / accepted / shed, the client-side latency of
#    accepted requests (oha's per-request records), the in-service latency of
#    accepted requests (`http_request_duration_seconds{status="200"}` from
#    /metrics: an upper bucket bound, buckets ×2 apart), and RSS.
#
# Installs oha (cargo install, into target/tools) when missing. Loopback
# only; each service is stopped by pid. docs/performance.md quotes it.
#
# Usage: scripts/bench_shedding.sh   (env: LIMIT=32 SECS=10; SERVICE_BIN=path
# to measure another service binary instead of building this tree's; RATE=req/s
# to offer instead of twice the measured capacity)
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
bin="${SERVICE_BIN:-target/release/service}"
[ -n "${SERVICE_BIN:-}" ] || cargo build --release -p service --bin service

pin_service=(); pin_load=()
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
  pin_service=(taskset -c 0); pin_load=(taskset -c 1)
fi
tmp="$(mktemp -d)"
pid=""
cleanup() {
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$tmp"
}
trap cleanup EXIT

body='{"key":"user:42:profile","candidates":["w0","w1","w2","w3","w4","w5","w6","w7","w8","w9","w10","w11","w12","w13","w14","w15"],"context":{"request_type":"GET"}}'
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
run_oha() { # db, extra args...
  local db="$1"; shift
  "${pin_load[@]}" "$oha_bin" --no-tui --output-format json --db-url "$db" -m POST \
    -H 'content-type: application/json' -d "$body" "$@" "$base/v1/score" >/dev/null
}

start_service() { # limit, name
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  base="http://127.0.0.1:${port}"
  mkdir -p "$tmp/$2"
  cat > "$tmp/$2/config.toml" <<TOML
[server]
listen = "127.0.0.1:${port}"
max_concurrent_scores = $1

[telemetry]
dead_after_ms = 3600000
forget_after_ms = 3600000

[log]
dir = "${tmp}/$2/decisions"
TOML
  "${pin_service[@]}" "$bin" --config "$tmp/$2/config.toml" >"$tmp/$2/service.log" 2>&1 &
  pid=$!
  python3 scripts/seed_workers.py "$base" 0 16
}

stop_service() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}

overload() { # name, rate: two rounds; RSS and metrics per round
  local name="$1" rate="$2"
  echo "$(rss_kib)" >"$tmp/$name/rss0"
  for round in 1 2; do
    curl -s "$base/metrics" >"$tmp/$name/metrics$round.before"
    echo 0 >"$tmp/$name/peak$round"
    ( while kill -0 "$pid" 2>/dev/null; do
        r="$(rss_kib)"; p="$(cat "$tmp/$name/peak$round")"
        [ "$r" -gt "$p" ] && echo "$r" >"$tmp/$name/peak$round"
        sleep 0.5
      done ) &
    local sampler=$!
    run_oha "$tmp/$name/round$round.db" -c "$((LIMIT * 4))" -q "$rate" --latency-correction -z "$((SECS * 2))s"
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    curl -s "$base/metrics" >"$tmp/$name/metrics$round.after"
    echo "$(rss_kib)" >"$tmp/$name/rss$round"
  done
}

start_service "$LIMIT" shed
echo "capacity: closed loop, ${LIMIT} connections, ${SECS} s, max_concurrent_scores = ${LIMIT}"
run_oha "$tmp/shed/capacity.db" -c "$LIMIT" -z "${SECS}s"
cap="$(python3 - "$tmp/shed/capacity.db" "$SECS" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("select count(*) from oha where status = 200").fetchone()[0]
print(int(n / float(sys.argv[2])))
PY
)"
rate="${RATE:-$((cap * 2))}"
echo "capacity ${cap} req/s; offering ${rate} req/s, $((LIMIT * 4)) connections, 2 × $((SECS * 2)) s"
overload shed "$rate"
stop_service
echo "the same without shedding (max_concurrent_scores = 1000000)"
start_service 1000000 noshed
overload noshed "$rate"
stop_service

python3 - "$tmp" "$cap" "$rate" "$LIMIT" <<'PY'
import re, sqlite3, sys
tmp, cap, rate, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def records(path):
    rows = sqlite3.connect(path).execute("select status, duration from oha").fetchall()
    return sorted(d for s, d in rows if s == 200), sorted(d for s, d in rows if s == 503), len(rows)

def pct(xs, p):
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000 if xs else float("nan")

BUCKET = re.compile(r'^http_request_duration_seconds_bucket\{(.*)\} (\d+)')
def buckets(path):
    out = {}
    for line in open(path):
        m = BUCKET.match(line)
        if m and 'route="/v1/score"' in m.group(1) and 'status="200"' in m.group(1):
            le = re.search(r'le="([^"]+)"', m.group(1)).group(1)
            out[float("inf") if le == "+Inf" else float(le)] = int(m.group(2))
    return out

def in_service_p99(name, rnd):
    a, b = buckets(f"{tmp}/{name}/metrics{rnd}.before"), buckets(f"{tmp}/{name}/metrics{rnd}.after")
    d = sorted((le, b.get(le, 0) - a.get(le, 0)) for le in b)
    total = d[-1][1] if d else 0
    for le, n in d:
        if total and n >= 0.99 * total:
            return le * 1000
    return float("nan")

def kib(path):
    return int(open(path).read()) / 1024

cap_ok, _, _ = records(f"{tmp}/shed/capacity.db")
print(f"capacity {cap} req/s (max_concurrent_scores = {limit}): accepted p50 {pct(cap_ok, .5):.2f} ms, p99 {pct(cap_ok, .99):.2f} ms")
print(f"offered {rate} req/s ({rate / cap:.2f}x capacity), open loop, two rounds each")
for name, label in (("shed", f"limit {limit}"), ("noshed", "no limit")):
    for rnd in (1, 2):
        ok, shed, n = records(f"{tmp}/{name}/round{rnd}.db")
        print(f"{label:>9} round {rnd}: {n} answered, {len(ok)} accepted, {len(shed)} shed ({100 * len(shed) / max(n, 1):.0f}%); "
              f"accepted client p50 {pct(ok, .5):.1f} ms, p99 {pct(ok, .99):.1f} ms; "
              f"in-service p99 <= {in_service_p99(name, rnd):.2f} ms; "
              f"RSS peak {kib(f'{tmp}/{name}/peak{rnd}'):.0f} MiB, after {kib(f'{tmp}/{name}/rss{rnd}'):.0f} MiB")
    print(f"{label:>9} RSS before overload {kib(f'{tmp}/{name}/rss0'):.0f} MiB")
PY
