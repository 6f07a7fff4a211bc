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
# redis-cli, curl, python3. Uses target/release/service and agent as they
# are when they are newer than every source file, and builds them otherwise.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/lib/probes.sh
. scripts/lib/probes.sh

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
            tail -n 20 "$WORKDIR"/*.log >&2 2>/dev/null
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
service_ready() { [[ "$(curl -s -o /dev/null -w '%{http_code}' "$SERVICE_URL/healthz" || true)" == 200 ]]; }

# POST /v1/score for w1..w3 under policy `none` (ranks and explains, picks
# nothing, so repeated calls add no in-flight deductions). Prints the body;
# fails unless the answer is 200 (503 until some worker has reported).
score() {
    local out code
    out="$(curl -s -m 5 -w '\n%{http_code}' -X POST "$SERVICE_URL/v1/score" \
        -H 'content-type: application/json' \
        -d '{"key":"user:1:profile","candidates":["w1","w2","w3"],"policy":"none","explain":true}')" || return 1
    code="${out##*$'\n'}"
    printf '%s\n' "${out%$'\n'*}"
    [[ "$code" == 200 ]]
}

# check_score MODE < body: `known` = every worker reported and is eligible;
# `degraded` = w1 ranks first, w2 is `compacting`, w3 shows the timed-out
# probes of its pause (`errors`; a plain RTT spike from a busy machine is not
# enough), and both rank below w1.
check_score() {
    python3 -c '
import json, sys
mode, r = sys.argv[1], json.load(sys.stdin)
by = {s["worker_id"]: s for s in r.get("scores", [])}
codes = lambda w: {a["code"] for a in by.get(w, {}).get("adjustments", [])}
if mode == "known":
    ok = all(by.get(w, {}).get("eligible") for w in ("w1", "w2", "w3"))
else:
    rank = r.get("ranking", [])
    ok = (rank[:1] == ["w1"] and {"w2", "w3"} <= set(rank[1:])
          and "compacting" in codes("w2") and "errors" in codes("w3"))
sys.exit(0 if ok else 1)
' "$1"
}

# score_until SECONDS MODE: poll the score call every 0.2 s until
# check_score MODE holds; leaves the last answer in $LAST_SCORE.
LAST_SCORE=""
score_until() {
    local deadline=$((SECONDS + $1)) mode=$2
    while :; do
        if LAST_SCORE="$(score)" && check_score "$mode" <<<"$LAST_SCORE"; then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            log "timed out after ${1}s waiting for the '$mode' state; last answer: $LAST_SCORE"
            return 1
        fi
        sleep 0.2
    done
}

for port in "${REDIS_PORTS[@]}" "${SERVICE_ADDR##*:}"; do
    if port_in_use "$port"; then
        log "port $port is already in use (another demo still running?); not touching it"
        exit 1
    fi
done

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/scorer-demo.XXXXXX")"

if binaries_fresh . target/release/service target/release/agent; then
    log "using target/release/service and agent (newer than every source file)"
else
    log "building (release)"
    cargo build --release -p service -p agent
fi

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

# Plain (uncoloured) logs in the log files.
export NO_COLOR=1
# The demo's decision log goes to its scratch directory (removed at the
# end), never into the checkout's data/ next to a real service's log.
SCORER_SCORING__WARMUP_MS=0 SCORER_SERVER__LISTEN="$SERVICE_ADDR" \
    SCORER_LOG__DIR="$WORKDIR/decisions" \
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

# A few cache hits and one miss per worker (hit rate ~95%, no deduction).
for port in "${REDIS_PORTS[@]}"; do
    { for ((i = 1; i <= 20; i++)); do echo "GET user:$i:profile"; done
      echo "GET user:0:missing"; } | redis-cli -p "$port" >/dev/null
done

# Every worker reports healthy before anything is degraded.
score_until 15 known
log "all three workers reported"

# w2: a BGSAVE that takes ~6 s (2 ms per key) -> compacting.
redis-cli -p "${REDIS_PORTS[1]}" CONFIG SET rdb-key-save-delay 2000 >/dev/null
redis-cli -p "${REDIS_PORTS[1]}" BGSAVE >/dev/null
# w3: every client paused for 3 s -> PINGs and INFO time out.
redis-cli -p "${REDIS_PORTS[2]}" CLIENT PAUSE 3000 >/dev/null
log "w2 is BGSAVE-ing, w3 is paused (3 s); waiting for the agent to report it"
score_until 10 degraded
log "POST /v1/score answered:"

python3 -c '
import json, sys
r = json.load(sys.stdin)
f = lambda x: "-" if x is None else ("%g" % round(x, 3) if isinstance(x, float) else str(x))
print("ranking: %s   (policy %s, pick %s, decision %s)" % (
    " > ".join(r["ranking"]), r.get("policy"), r.get("pick", "none"), r.get("decision_id")))
for s in r["scores"]:
    print()
    print("%s  final %s  rule %s  eligible %s  state %s  weight %s" % (
        s["worker_id"], f(s["final_score"]), f(s["rule_score"]),
        "yes" if s["eligible"] else "no (%s)" % s.get("reason"),
        s.get("penalty_state", "-"), f(s.get("weight"))))
    if not s["adjustments"]:
        print("    no adjustments")
    for a in s["adjustments"]:
        how = "%+g" % round(a["impact"], 3)
        if a.get("kind") == "multiply":
            how += " (x%s)" % f(a.get("factor"))
        print("    %-14s %-12s %s" % (a["code"], how, a["reason"]))
' <<<"$LAST_SCORE"

# Restore w2 for anyone reusing it (it is stopped on exit anyway).
redis-cli -p "${REDIS_PORTS[1]}" CONFIG SET rdb-key-save-delay 0 >/dev/null || true
log "done"
