#!/usr/bin/env bash
# Puts Debian's kubectl (kubernetes-client, the same v1.20.2 as the test control planes) into the
# harness cache, without installing the package (another kubectl may own /usr/bin/kubectl).
# Prints the binary's path. KUBECTL_BIN points at one a user already has.
set -euo pipefail
if [ -n "${KUBECTL_BIN:-}" ] && [ -x "$KUBECTL_BIN" ]; then echo "$KUBECTL_BIN"; exit 0; fi
dir="${CAS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-admin-service}/kube-v1.20.2/bin"
bin="$dir/kubectl"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
(cd "$work" && apt-get download kubernetes-client >/dev/null 2>&1) || { as_root apt-get update -qq >/dev/null; (cd "$work" && apt-get download kubernetes-client >/dev/null); }
dpkg-deb -x "$work"/kubernetes-client_*.deb "$work/x"
install -m 0755 "$work/x/usr/bin/kubectl" "$bin"
echo "$bin"
