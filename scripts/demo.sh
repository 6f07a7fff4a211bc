#!/usr/bin/env bash
# End-to-end demo: three real redis-server workers, the scoring service and
# the telemetry agent on loopback. w2 is made to BGSAVE slowly (compacting),
# w3 is put under CLIENT PAUSE (slow and erroring); then one /v1/score call
# shows how each worker is scored.
#
# Stops everything it started (by pid) on exit, and only that. Refuses to
# run if one of its ports is already taken, so it is safe to run twice.
#
# Ports: redis 16379-16381, service 18080. Needs: cargo, redis-server,
# redis-cli, curl, python3.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

REDIS_PORTS=(16379 16380 16381)
SERVICE_ADDR=127.0.0.1:18080
SERVICE_URL="http://${SERVICE_ADDR}"
PIDS=()
WORKDIR=""

log() { printf '[demo] %s\n' "$*" >&2; }

cleanup() {
    local status=$?
    set +e
    # Reverse start order: agent, service, then the redis servers.
    local i pid
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        pid=${PIDS[i]}
        kill -TERM "$pid" 2>/dev/null
    done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "pid $pid ignored SIGTERM; killing it"
            kill -KILL "$pid" 2>/dev/null
        fi
        wait "$pid" 2>/dev/null
    done
    if [[ -n "$WORKDIR" ]]; then
        if [[ $status -ne 0 ]]; then
            log "failed (exit $status); logs in $WORKDIR"
            tail -n 20 "$WORKDIR"/*.log 2>/dev/null >&2
        else
            rm -rf "$WORKDIR"
        fi
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.1 s.
wait_until() {
    local secs=$1 what=$2
    shift 2
    local deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            log "timed out after ${secs}s waiting for $what"
            return 1
        fi
        sleep 0.1
    done
}

redis_ready() { [[ "$(redis-cli -p "$1" PING 2>/dev/null)" == PONG ]]; }
service_ready() { [[ "$(curl -s -o /dev/null -w '%{http_code}' "$SERVICE_URL/" || true)" != 000 ]]; }

for port in "${REDIS_PORTS[@]}" "${SERVICE_ADDR##*:}"; do
    if port_in_use "$port"; then
        log "port $port is already in use (another demo still running?); not touching it"
        exit 1
    fi
done

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/scorer-demo.XXXXXX")"

log "building (release)"
cargo build --release -p service -p agent

for port in "${REDIS_PORTS[@]}"; do
    mkdir -p "$WORKDIR/redis-$port"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize no --dir "$WORKDIR/redis-$port" \
        >"$WORKDIR/redis-$port.log" 2>&1 &
    PIDS+=($!)
    log "redis-server :$port pid $!"
done
for port in "${REDIS_PORTS[@]}"; do
    wait_until 10 "redis-server :$port" redis_ready "$port"
done

SCORER_SCORING__WARMUP_MS=0 SCORER_SERVER__LISTEN="$SERVICE_ADDR" \
    target/release/service >"$WORKDIR/service.log" 2>&1 &
PIDS+=($!)
log "service $SERVICE_URL pid $!"
wait_until 20 "service on $SERVICE_ADDR" service_ready

target/release/agent --service "$SERVICE_URL" \
    --worker "w1=127.0.0.1:${REDIS_PORTS[0]}" \
    --worker "w2=127.0.0.1:${REDIS_PORTS[1]}" \
    --worker "w3=127.0.0.1:${REDIS_PORTS[2]}" \
    >"$WORKDIR/agent.log" 2>&1 &
PIDS+=($!)
log "agent pid $!"

# 3000 keys per worker, as one RESP pipeline each.
resp_sets() {
    local i key val
    for ((i = 1; i <= 3000; i++)); do
        key="user:$i:profile" val="value-$i"
        printf '*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n' "${#key}" "$key" "${#val}" "$val"
    done
}
for port in "${REDIS_PORTS[@]}"; do
    resp_sets | redis-cli -p "$port" --pipe >/dev/null
done
log "filled 3000 keys per worker"

# Let the agent report every worker healthy once, with a few cache hits/misses.
for _ in $(seq 20); do
    for port in "${REDIS_PORTS[@]}"; do
        redis-cli -p "$port" GET user:1:profile >/dev/null
        redis-cli -p "$port" GET user:0:missing >/dev/null
    done
done
sleep 1.5

# w2: a BGSAVE that takes ~6 s (2 ms per key) -> compacting.
redis-cli -p "${REDIS_PORTS[1]}" CONFIG SET rdb-key-save-delay 2000 >/dev/null
redis-cli -p "${REDIS_PORTS[1]}" BGSAVE
# w3: every client paused for 3 s -> PINGs and INFO time out.
redis-cli -p "${REDIS_PORTS[2]}" CLIENT PAUSE 3000
log "w2 is BGSAVE-ing, w3 is paused; waiting 2 s for the agent to report"
sleep 2

log "POST /v1/score"
body="$(curl -s -w '\n%{http_code}' -X POST "$SERVICE_URL/v1/score" \
    -H 'content-type: application/json' \
    -d '{"key":"user:1:profile","candidates":["w1","w2","w3"],"explain":false}')"
code="${body##*$'\n'}"
body="${body%$'\n'*}"
if [[ "$code" != 200 ]]; then
    log "score call answered HTTP $code: $body"
    exit 1
fi

printf '%s' "$body" | python3 -c '
import json, sys
r = json.load(sys.stdin)
g = lambda d, k: str(d.get(k, "-"))
print("decision", g(r, "decision_id"), "ranking:", " > ".join(r.get("ranking", [])))
for s in r.get("scores", []):
    print("\n%s: eligible=%s rule_score=%s final_score=%s" % tuple(g(s, k) for k in ("worker_id", "eligible", "rule_score", "final_score")))
    for a in s.get("adjustments", []):
        print("  %-24s %-10s impact=%-8s source=%-10s %s" % tuple(g(a, k) for k in ("code", "kind", "impact", "source_value", "reason")))
'

# Restore w2 for anyone reusing it (it is stopped on exit anyway).
redis-cli -p "${REDIS_PORTS[1]}" CONFIG SET rdb-key-save-delay 0 >/dev/null || true
log "done"
