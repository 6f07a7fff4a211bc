#!/usr/bin/env bash
# Runs every test of the workspace, then schemathesis against the running
# service. Installs what the tests need when it is missing (fresh Debian +
# Rust toolchain): redis-server for the end-to-end tests with real workers,
# chromium for the status page, cmake/libclang for LightGBM, pyarrow and
# schemathesis from PyPI. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
# Headless Chromium renders the status page in service/tests/status_page.rs.
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi
# The packaged redis-server starts a system instance on 6379; the tests start
# their own on free ports and never touch it.

# lightgbm3 builds LightGBM from source: cmake >= 3.28 (Debian's is older,
# so from PyPI) and libclang for bindgen.
cmake_ok() {
  command -v cmake >/dev/null 2>&1 || return 1
  local v; v=$(cmake --version | head -n1 | awk '{print $3}')
  [ "$(printf '%s\n3.28\n' "$v" | sort -V | head -n1)" = "3.28" ]
}
if ! cmake_ok; then
  echo "installing: cmake>=3.28 (PyPI)"
  python3 -m pip install --quiet --disable-pip-version-check 'cmake>=3.28' \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages 'cmake>=3.28'
  hash -r
fi
if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; then
  echo "installing: libclang-dev"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libclang-dev
fi

# pyarrow reads the decision log in the interop test, as data scientists would.
if ! python3 -c 'import pyarrow' >/dev/null 2>&1; then
  echo "installing: pyarrow (PyPI)"
  python3 -m pip install --quiet --disable-pip-version-check pyarrow \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages pyarrow
fi

# A fresh debug build of the workspace takes ~6 GB (measured 5.7 GB): say so
# up front rather than fail half-way with "No space left on device".
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ -n "$free_kb" ] && [ "$free_kb" -lt $((7 * 1024 * 1024)) ]; then
  echo "warning: $((free_kb / 1024)) MB free here; the test build needs ~6 GB" >&2
fi

# CI builds once: incremental artifacts would only take disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
cargo test --workspace --all-targets

# schemathesis against the running service, from its own OpenAPI document
# (issue #8); installs schemathesis from PyPI when missing.
scripts/schemathesis.sh target/debug/service
