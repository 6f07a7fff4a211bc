#!/usr/bin/env bash
# Fuzzes a running service from its own OpenAPI document with schemathesis:
# starts the service binary on a free loopback port with a throwaway config
# that gives every role a token (so every route requires one, as off
# loopback), reports three workers with the agent's token, then runs a
# bounded number of generated requests per operation with the admin token.
# ignored_auth checks that each route refuses a request without a token or
# with a wrong one. Fails on any 5xx that the operation does
# not document as an answer (see schemathesis.toml), on an undocumented
# status, and on an answer whose content type, headers or body violate the
# document. Installs schemathesis from PyPI when missing.
#
# Usage: scripts/schemathesis.sh [path/to/service-binary]
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${1:-${CARGO_TARGET_DIR:-target}/debug/service}"
[ -x "$bin" ] || cargo build -p service --bin service
[ -x "$bin" ] || { echo "error: no service binary at $bin (built into \${CARGO_TARGET_DIR:-target}/debug)" >&2; exit 1; }
if ! python3 -c 'import schemathesis' >/dev/null 2>&1; then
  echo "installing: schemathesis (PyPI)"
  python3 -m pip install --quiet --disable-pip-version-check schemathesis \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages schemathesis
fi
# Through the interpreter rather than the `schemathesis` console script,
# which a fresh pip install may not have put on PATH (pyenv shims, ~/.local/bin).
schemathesis() {
  python3 -c 'import sys; from schemathesis.cli import schemathesis as cli; sys.argv[0] = "schemathesis"; sys.exit(cli())' "$@"
}

tmp="$(mktemp -d)"
token() { python3 -c 'import secrets; print(secrets.token_hex(24))'; }
agent_token="$(token)"; router_token="$(token)"; reader_token="$(token)"; admin_token="$(token)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:${port}"
cat > "$tmp/config.toml" <<TOML
[server]
listen = "127.0.0.1:${port}"

[telemetry]
# The seeded workers stay alive for the whole run.
dead_after_ms = 3600000
forget_after_ms = 3600000

[log]
dir = "${tmp}/decisions"

[auth.agent]
seed = "${agent_token}"

[auth.router]
fuzz = "${router_token}"

[auth.reader]
fuzz = "${reader_token}"

[auth.admin]
fuzz = "${admin_token}"
TOML

"$bin" --config "$tmp/config.toml" >"$tmp/service.log" 2>&1 &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

SCORER_TOKEN="$agent_token" python3 scripts/seed_workers.py "$base" 1 3

status=0
schemathesis --config-file scripts/schemathesis.toml run "$base/openapi.json" \
  --header "Authorization: Bearer ${admin_token}" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,negative_data_rejection,ignored_auth \
  --seed 1 --no-color || status=$?

# The service must have survived the run.
if ! kill -0 "$pid" 2>/dev/null; then
  echo "the service exited during the run; its log:" >&2
  cat "$tmp/service.log" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "schemathesis found problems (exit $status); service log tail:" >&2
  tail -n 50 "$tmp/service.log" >&2
fi
exit "$status"
