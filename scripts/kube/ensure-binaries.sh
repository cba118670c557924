#!/usr/bin/env bash
# Make sure the binaries of a real Kubernetes v1.20.2 control plane exist:
#   kube-apiserver, kube-controller-manager  built from Debian bookworm's source
#                                            package `kubernetes` (upstream v1.20.2)
#   etcd                                      Debian's etcd-server
#   openssl                                   for the harness' certificates
#
# Idempotent and fast when everything is there (no apt calls at all).
# On a fresh Debian bookworm machine (as root, or with passwordless sudo) it
# adds a deb-src entry, installs the build tools, fetches the source, replaces
# the vendored github.com/modern-go/reflect2 v1.0.1 (crashes under Go >= 1.18)
# with Debian's 1.0.2, builds with `make WHAT=...` in GOPATH mode the way
# Debian's packaging does, and caches the two binaries in
#   ${CAS_CACHE_DIR:-~/.cache/cluster-admin-service}/kube-v1.20.2/bin/
# Safe to run concurrently (flock).
#
# Environment:
#   KUBE_APISERVER_BIN, KUBE_CONTROLLER_MANAGER_BIN, ETCD_BIN
#                     use these existing binaries instead (nothing is built)
#   CAS_CACHE_DIR     cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/cluster-admin-service)
#   CAS_BUILD_JOBS    Go build parallelism (default: 2, at most the number of CPUs)
#   CAS_KEEP_BUILD=1  keep the temporary build tree (for debugging)
set -euo pipefail

KUBE_VERSION=v1.20.2
SRC_PKG=kubernetes
SRC_PKG_UPSTREAM=1.20.2   # the tree inside must be this upstream version
CACHE_ROOT="${CAS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-admin-service}"
KUBE_DIR="$CACHE_ROOT/kube-$KUBE_VERSION"
BIN_DIR="$KUBE_DIR/bin"
REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2
SRC_LIST=/etc/apt/sources.list.d/cluster-admin-service-src.sources

START=$(date +%s)
log() { printf '[ensure-binaries +%ss] %s\n' "$(($(date +%s) - START))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

APISERVER="${KUBE_APISERVER_BIN:-$BIN_DIR/kube-apiserver}"
CONTROLLER_MANAGER="${KUBE_CONTROLLER_MANAGER_BIN:-$BIN_DIR/kube-controller-manager}"
etcd_path() {
  if [[ -n "${ETCD_BIN:-}" ]]; then echo "$ETCD_BIN"; return; fi
  command -v etcd 2>/dev/null || echo /usr/bin/etcd
}

# Binaries named explicitly by the user must exist; we never build over them.
for v in KUBE_APISERVER_BIN KUBE_CONTROLLER_MANAGER_BIN ETCD_BIN; do
  if [[ -n "${!v:-}" && ! -x "${!v}" ]]; then die "$v=${!v} is not an executable file"; fi
done

kube_ready() { [[ -x "$APISERVER" && -x "$CONTROLLER_MANAGER" ]]; }
etcd_ready() { [[ -x "$(etcd_path)" ]]; }
openssl_ready() { command -v openssl >/dev/null 2>&1; }
all_ready() { kube_ready && etcd_ready && openssl_ready; }

report() {
  log "kube-apiserver:          $APISERVER"
  log "kube-controller-manager: $CONTROLLER_MANAGER"
  log "etcd:                    $(etcd_path)"
}

if all_ready; then report; exit 0; fi

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.ensure-binaries.lock"
if ! flock -n 9; then
  log "another ensure-binaries.sh is running; waiting for it to finish ..."
  flock 9
fi
if all_ready; then report; exit 0; fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "not root and no sudo: cannot install Debian packages"
  SUDO=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

have_bookworm_deb_src() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    # one-line format: "deb-src URI bookworm main"; deb822: "Types: ... deb-src" + "Suites: bookworm"
    if grep -qE '^[[:space:]]*deb-src[[:space:]].*[[:space:]]bookworm[[:space:]]' "$f"; then return 0; fi
    if awk 'BEGIN{RS=""; IGNORECASE=1}
            /(^|\n)Types:[^\n]*deb-src/ && /(^|\n)Suites:[^\n]*bookworm([ \t\n]|$)/ && !/(^|\n)Enabled:[ \t]*no/ {found=1}
            END{exit !found}' "$f"; then return 0; fi
  done
  return 1
}

# ---- Debian packages -------------------------------------------------------
need_build=0
kube_ready || need_build=1

pkgs=()
etcd_ready || pkgs+=(etcd-server)
openssl_ready || pkgs+=(openssl)
if [[ $need_build -eq 1 ]]; then
  for p in golang-go rsync make dpkg-dev golang-github-modern-go-reflect2-dev ca-certificates; do
    pkg_installed "$p" || pkgs+=("$p")
  done
fi

apt_updated=0
if [[ $need_build -eq 1 ]] && ! have_bookworm_deb_src; then
  log "adding deb-src entry for Debian bookworm main: $SRC_LIST"
  "${SUDO[@]}" tee "$SRC_LIST" >/dev/null <<'EOF'
# Added by cluster-admin-service scripts/kube/ensure-binaries.sh:
# source packages, to build kube-apiserver v1.20.2 from Debian's `kubernetes`.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  log "apt-get update ..."
  "${SUDO[@]}" apt-get update -qq
  apt_updated=1
fi

if [[ ${#pkgs[@]} -gt 0 ]]; then
  if [[ $apt_updated -eq 0 ]]; then
    log "apt-get update ..."
    "${SUDO[@]}" apt-get update -qq
    apt_updated=1
  fi
  log "installing Debian packages: ${pkgs[*]}"
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >"$CACHE_ROOT/apt-install.log" 2>&1 \
    || { tail -20 "$CACHE_ROOT/apt-install.log" >&2; die "apt-get install failed"; }
fi

etcd_ready || die "etcd not found after installing etcd-server (set ETCD_BIN)"
openssl_ready || die "openssl not found after installing it"

if [[ $need_build -eq 0 ]]; then report; exit 0; fi

# ---- build kube-apiserver + kube-controller-manager ------------------------
[[ -f "$REFLECT2_SRC/reflect2.go" ]] || die "$REFLECT2_SRC missing (golang-github-modern-go-reflect2-dev)"
GO=/usr/lib/go/bin/go
[[ -x "$GO" ]] || GO=$(command -v go) || die "go not found (golang-go)"

ncpu=$(nproc 2>/dev/null || echo 2)
JOBS="${CAS_BUILD_JOBS:-$(( ncpu < 2 ? ncpu : 2 ))}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cas-kube-build.XXXXXX")
cleanup() {
  if [[ "${CAS_KEEP_BUILD:-0}" == 1 ]]; then log "keeping build tree $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
chmod 755 "$WORK"   # apt's _apt user writes the download here when possible

log "fetching Debian source package '$SRC_PKG' (about 34 MB) into $WORK ..."
(cd "$WORK" && apt-get source --download-only -qq "$SRC_PKG" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
dsc=$(ls "$WORK"/${SRC_PKG}_*.dsc 2>/dev/null | head -1)
[[ -n "$dsc" ]] || die "apt-get source did not fetch $SRC_PKG (is there a deb-src entry for bookworm main?)"
log "source: $(basename "$dsc")"

log "unpacking (dpkg-source -x, applies Debian's patches) ..."
(cd "$WORK" && dpkg-source -q -x "$dsc" src >"$WORK/dpkg-source.log" 2>&1) \
  || { cat "$WORK/dpkg-source.log" >&2; die "dpkg-source -x failed"; }
TREE="$WORK/src"
grep -q "tag: v$SRC_PKG_UPSTREAM'" "$TREE/hack/lib/version.sh" \
  || die "the source tree is not upstream v$SRC_PKG_UPSTREAM (hack/lib/version.sh)"

log "replacing vendored github.com/modern-go/reflect2 v1.0.1 with Debian's $(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev) ..."
vdir="$TREE/vendor/github.com/modern-go/reflect2"
[[ -d "$vdir" ]] || die "$vdir missing"
find "$vdir" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) -delete
find "$REFLECT2_SRC" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' \
  -exec cp {} "$vdir/" \;

log "building kube-apiserver and kube-controller-manager with $($GO version | awk '{print $3}'), parallelism $JOBS (about 6 minutes on 2 cores) ..."
mkdir -p "$TREE/.go/src/k8s.io"
ln -sfn ../../.. "$TREE/.go/src/k8s.io/kubernetes"
build_log="$WORK/build.log"
(
  cd "$TREE"
  export PATH="$(dirname "$GO"):$PATH" GOPATH="$TREE/.go" CGO_ENABLED=0 GO111MODULE=off
  # GOMAXPROCS bounds both `go build -p` and the compiler's own concurrency.
  # (hack/lib/golang.sh puts GOCACHE under _output/go, so it goes with the tree.)
  export GOMAXPROCS="$JOBS" HOME="$WORK/home" GOFLAGS=
  mkdir -p "$HOME"
  nice -n 5 make WHAT="cmd/kube-apiserver cmd/kube-controller-manager"
) >"$build_log" 2>&1 &
build_pid=$!
# progress: a line every 30 s with the newest make output and the build's size so far
while kill -0 "$build_pid" 2>/dev/null; do
  for _ in $(seq 30); do kill -0 "$build_pid" 2>/dev/null || break; sleep 1; done
  kill -0 "$build_pid" 2>/dev/null || break
  # (an empty log so far is no error: grep's status would end the script under pipefail)
  last=$({ grep -v '^\s*$' "$build_log" || true; } | tail -1 | cut -c1-120)
  log "  still building ... (_output $(du -sm "$TREE/_output" 2>/dev/null | cut -f1) MB) ${last:+| $last}"
done
if ! wait "$build_pid"; then
  tail -40 "$build_log" >&2
  die "build failed (full log in $build_log; rerun with CAS_KEEP_BUILD=1 to keep it)"
fi

out="$TREE/_output/bin"
for b in kube-apiserver kube-controller-manager; do
  [[ -x "$out/$b" ]] || die "build produced no $out/$b"
done
v=$("$out/kube-apiserver" --version 2>&1 || true)
[[ "$v" == *"$KUBE_VERSION"* ]] || die "built kube-apiserver reports '$v', expected $KUBE_VERSION"

mkdir -p "$BIN_DIR"
for b in kube-apiserver kube-controller-manager; do
  cp "$out/$b" "$BIN_DIR/.$b.tmp"
  mv -f "$BIN_DIR/.$b.tmp" "$BIN_DIR/$b"   # atomic: a concurrent reader sees old or new, never half
done
cat >"$KUBE_DIR/BUILD-INFO" <<EOF
source: $(basename "$dsc")
reflect2: vendored v1.0.1 replaced by Debian golang-github-modern-go-reflect2-dev $(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev)
go: $($GO version)
built: $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - START)) s
EOF
log "built $v in $(($(date +%s) - START)) s"
report
