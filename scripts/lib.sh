# shellcheck shell=bash
# Shared helpers for scripts/*. Source it; it does not run anything.
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The repository root, whatever the caller's working directory.
# shellcheck disable=SC2034  # used by the scripts sourcing this file
VEND_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Parallel jobs for builds and ctest. The default 2 suits the shared CI box.
# shellcheck disable=SC2034
VEND_JOBS="${VEND_JOBS:-2}"

log() { printf '%s: %s\n' "$(basename "$0")" "$*"; }
die() {
  printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2
  exit 1
}

# Maps a --cross name to its GNU triple and Debian architecture.
#   triple_of aarch64 -> aarch64-linux-gnu      deb_arch_of aarch64 -> arm64
triple_of() {
  case "$1" in
    aarch64) echo aarch64-linux-gnu ;;
    armhf) echo arm-linux-gnueabihf ;;
    *) die "unknown ARM target '$1' (expected aarch64 or armhf)" ;;
  esac
}
deb_arch_of() {
  case "$1" in
    aarch64) echo arm64 ;;
    armhf) echo armhf ;;
    *) die "unknown ARM target '$1' (expected aarch64 or armhf)" ;;
  esac
}

# need_cmd PROGRAM PACKAGE: dies naming the Debian package that provides
# PROGRAM when it is not on PATH (scripts/setup-deps installs every one).
#   need_cmd ss iproute2
need_cmd() {
  command -v "$1" >/dev/null 2>&1 ||
    die "\`$1\` not found: install Debian package $2 (scripts/setup-deps)"
}

# A loopback TCP port no socket uses now (listening or connected), below the
# kernel's ephemeral range, so no outgoing connection can take it between
# this check and the server's bind (a port in that range did: a test's
# postgres failed with "Address already in use").
free_port() {
  local low port
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  ((low > 12000)) || low=32768
  while :; do
    port=$((10000 + RANDOM % (low - 10000)))
    ss -Htan "sport = :$port" | grep -q . || { echo "$port"; return; }
  done
}
