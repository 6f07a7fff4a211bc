#!/usr/bin/env bash
# Probes for what the build and the tests need, shared by scripts/test.sh and
# scripts/demo.sh. Each answers by exit status only (0 = present) and
# installs nothing; each looks for exactly what its consumer loads, so that a
# near-miss (libclang-cpp for libclang, an old cmake) reads as missing.

# libclang_present [DIR...]: 0 when a DIR holds a shared library that
# bindgen's loader (clang-sys) accepts: libclang.so, libclang-*.so,
# libclang.so.* or libclang-*.so.*, but not libclang-cpp*, which is the C++
# API library that clang-sys skips. Without DIRs: $LIBCLANG_PATH, the
# directory `llvm-config --libdir` names, and the directories clang-sys
# searches on Linux.
libclang_present() {
  local dirs=("$@")
  if [ ${#dirs[@]} -eq 0 ]; then
    [ -n "${LIBCLANG_PATH:-}" ] && dirs+=("$LIBCLANG_PATH")
    if command -v llvm-config >/dev/null 2>&1; then
      dirs+=("$(llvm-config --libdir 2>/dev/null)")
    fi
    dirs+=(/usr/lib/llvm-*/lib /usr/local/llvm*/lib /usr/lib/*-linux-gnu /usr/lib64 /usr/lib /usr/local/lib)
  fi
  local d f base
  for d in "${dirs[@]}"; do
    [ -d "$d" ] || continue
    for f in "$d"/libclang.so "$d"/libclang-*.so "$d"/libclang.so.* "$d"/libclang-*.so.*; do
      [ -e "$f" ] || continue
      base=${f##*/}
      case "$base" in libclang-cpp*) continue ;; esac
      return 0
    done
  done
  return 1
}

# cmake_at_least MIN: 0 when `cmake` on PATH reports version >= MIN.
cmake_at_least() {
  command -v cmake >/dev/null 2>&1 || return 1
  local v
  v=$(cmake --version 2>/dev/null | head -n1 | awk '{print $3}')
  [ -n "$v" ] || return 1
  [ "$(printf '%s\n%s\n' "$v" "$1" | sort -V | head -n1)" = "$1" ]
}

# chromium_present: 0 when a Chromium that runs is on PATH (Debian ships
# /usr/bin/chromium; some images have a chromium-browser stub that only
# points at a snap, so the binary must answer --version).
chromium_present() {
  local b
  for b in chromium chromium-browser; do
    command -v "$b" >/dev/null 2>&1 || continue
    "$b" --version >/dev/null 2>&1 && return 0
  done
  return 1
}

# python_module_present MODULE: 0 when python3 imports MODULE.
python_module_present() {
  command -v python3 >/dev/null 2>&1 && python3 -c "import $1" >/dev/null 2>&1
}

# binaries_fresh ROOT BIN...: 0 when every BIN exists and is executable and
# no Rust source or Cargo manifest/lock under ROOT (target/ and .git/ aside)
# is newer than the oldest BIN: a build would change nothing.
binaries_fresh() {
  local root=$1 b oldest
  shift
  [ $# -gt 0 ] || return 1
  for b in "$@"; do
    [ -f "$b" ] && [ -x "$b" ] || return 1
  done
  oldest=$(ls -t -- "$@" | tail -n1)
  [ -z "$(find "$root" \( -path "$root/target" -o -path "$root/.git" \) -prune -o \
    -type f \( -name '*.rs' -o -name 'Cargo.toml' -o -name 'Cargo.lock' \) \
    -newer "$oldest" -print -quit)" ]
}
